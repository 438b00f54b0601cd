// Package admin is the client side of the daemon's operator operations
// (client.OpSQL and the system views). It is apart from package client
// because its replies carry the daemon's own types (state.Change and the
// sysview rows), which the slim `poolagent-run` binary must not link.
package admin

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/poolagent/poolagent/client"
	"github.com/poolagent/poolagent/state"
	"github.com/poolagent/poolagent/sysview"
)

// Reply answers an operator operation.
type Reply struct {
	Type  string `json:"type"` // client.ReplyDone or client.ReplyError
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
	// Change is the persisted run-time change (client.OpSQL).
	Change *state.Change `json:"change,omitempty"`
	// Warnings are what was accepted but deserves attention (client.OpSQL).
	Warnings    []string             `json:"warnings,omitempty"`
	Pools       []sysview.Pool       `json:"pools,omitempty"`
	Classifiers []sysview.Classifier `json:"classifiers,omitempty"`
	Queries     []sysview.Query      `json:"queries,omitempty"`
}

// Ask sends one operator request to the daemon at socket
// (client.DefaultSocket when empty) and returns its reply; a
// client.ReplyError comes back with a *client.RefusedError carrying the
// daemon's code and text.
func Ask(socket string, req client.Request) (Reply, error) {
	conn, err := client.Dial(socket)
	if err != nil {
		return Reply{}, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute))
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return Reply{}, fmt.Errorf("send to the poolagent daemon: %w", err)
	}
	var r Reply
	if err := json.NewDecoder(conn).Decode(&r); err != nil {
		return Reply{}, fmt.Errorf("read the poolagent daemon's answer: %w", err)
	}
	if r.Type == client.ReplyError {
		return r, &client.RefusedError{Code: r.Code, Message: r.Error}
	}
	return r, nil
}
