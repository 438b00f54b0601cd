package client

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/poolagent/poolagent/protocol"
)

// Ask sends one operator request (protocol.OpSQL or a system view) to the
// daemon at socket (protocol.DefaultSocket when empty) and returns its
// reply; a protocol.ReplyError comes back with a *RefusedError carrying
// the daemon's code and text.
func Ask(socket string, req protocol.Request) (protocol.AdminReply, error) {
	conn, err := Dial(socket)
	if err != nil {
		return protocol.AdminReply{}, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute))
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return protocol.AdminReply{}, fmt.Errorf("send to the poolagent daemon: %w", err)
	}
	var r protocol.AdminReply
	if err := json.NewDecoder(conn).Decode(&r); err != nil {
		return protocol.AdminReply{}, fmt.Errorf("read the poolagent daemon's answer: %w", err)
	}
	if r.Type == protocol.ReplyError {
		return r, &RefusedError{Code: r.Code, Message: r.Error}
	}
	return r, nil
}
