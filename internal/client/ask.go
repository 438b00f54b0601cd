package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/poolagent/poolagent/internal/protocol"
)

// ErrNoAnswer: the request was sent whole, but the connection ended
// before the daemon answered (it stopped or died): what the request asked
// may have been done.
var ErrNoAnswer = errors.New("no answer from the poolagent daemon")

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
		return protocol.AdminReply{}, fmt.Errorf("%w: the request was sent, then reading the answer failed: %w", ErrNoAnswer, err)
	}
	if r.Type == protocol.ReplyError {
		return r, &RefusedError{Code: r.Code, Message: r.Error}
	}
	return r, nil
}
