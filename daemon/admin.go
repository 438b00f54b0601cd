package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/admission"
	"github.com/poolagent/poolagent/planner"
	"github.com/poolagent/poolagent/state"
	"github.com/poolagent/poolagent/sysview"
)

// Operator operations: the first and only request of a connection,
// answered by one AdminReply. The views are open to every local user;
// OpSQL needs an administrator (root, the admin group, or an admin
// grant), identified like a query's caller by the socket's peer
// credentials.
const (
	// OpSQL carries DDL in Request.SQL; Request.Source names it in error
	// positions ("-e" or the file's name).
	OpSQL = "sql"
	// OpPools, OpClassifiers and OpQueries read the system views.
	OpPools       = "pools"
	OpClassifiers = "classifiers"
	OpQueries     = "queries"
)

// Error codes of operator replies and of queries cut short by a stop.
const (
	// CodeInvalidDDL: the DDL was refused; Error lists every problem as
	// source:line:col: message.
	CodeInvalidDDL = "invalid_ddl"
	// CodeStopping: the daemon is shutting down; a queued query left the
	// queue without running.
	CodeStopping = "stopping"
)

// ErrStopping is what queued clients are told when the daemon stops.
var ErrStopping = errors.New("poolagent is stopping: the query left the queue without running; run it again once the daemon is back")

// AdminReply answers an operator operation.
type AdminReply struct {
	Type  string `json:"type"` // ReplyDone or ReplyError
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
	// Change is the persisted run-time change (OpSQL).
	Change *state.Change `json:"change,omitempty"`
	// Warnings are what was accepted but deserves attention (OpSQL).
	Warnings    []string             `json:"warnings,omitempty"`
	Pools       []sysview.Pool       `json:"pools,omitempty"`
	Classifiers []sysview.Classifier `json:"classifiers,omitempty"`
	Queries     []sysview.Query      `json:"queries,omitempty"`
}

// isAdminOp reports whether op is an operator operation.
func isAdminOp(op string) bool {
	switch op {
	case OpSQL, OpPools, OpClassifiers, OpQueries:
		return true
	}
	return false
}

// serveAdmin answers one operator operation on se.
func (s *Server) serveAdmin(se *session, cred *unix.Ucred, req Request) {
	reply := AdminReply{Type: ReplyDone}
	switch req.Op {
	case OpPools:
		reply.Pools = sysview.Pools(s.Model(), s.Pools(), s.Desired())
	case OpClassifiers:
		reply.Classifiers = sysview.Classifiers(s.Model())
	case OpQueries:
		reply.Queries = s.queryRows()
	case OpSQL:
		reply = s.serveSQL(cred, req)
	}
	se.enc.Encode(reply)
}

func (s *Server) serveSQL(cred *unix.Ucred, req Request) AdminReply {
	refuse := func(code string, err error) AdminReply {
		return AdminReply{Type: ReplyError, Code: code, Error: err.Error()}
	}
	id, err := s.users.Identity(cred)
	if err != nil {
		return refuse(CodeInternal, err)
	}
	if !s.Access().IsAdmin(id) {
		s.cfg.Log.Info("run-time change refused", "uid", id.UID, "user", id.User, "reason", "not an administrator")
		return refuse(CodeAccessDenied, fmt.Errorf("%w: %s may not change pools or classifiers (administrators: root, the admin group, and grantees of ALL or the schema rights on the pools)",
			admission.ErrAccessDenied, id))
	}
	c, warns, err := s.ExecSQL(id, req.Source, req.SQL)
	reply := AdminReply{Type: ReplyDone}
	for _, w := range warns {
		reply.Warnings = append(reply.Warnings, w.String())
	}
	if c.Seq != 0 {
		reply.Change = &c
	}
	var list planner.ErrorList
	switch {
	case errors.As(err, &list):
		reply.Type, reply.Code, reply.Error = ReplyError, CodeInvalidDDL, err.Error()
	case err != nil:
		reply.Type, reply.Code, reply.Error = ReplyError, CodeInternal, err.Error()
	}
	return reply
}

// Admin sends one operator request to the daemon at socket (DefaultSocket
// when empty) and returns its reply; a ReplyError comes back with a
// *RefusedError carrying the daemon's code and text.
func Admin(socket string, req Request) (AdminReply, error) {
	conn, err := dial(socket)
	if err != nil {
		return AdminReply{}, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute))
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return AdminReply{}, fmt.Errorf("send to the poolagent daemon: %w", err)
	}
	var r AdminReply
	if err := json.NewDecoder(conn).Decode(&r); err != nil {
		return AdminReply{}, fmt.Errorf("read the poolagent daemon's answer: %w", err)
	}
	if r.Type == ReplyError {
		return r, &RefusedError{Code: r.Code, Message: r.Error}
	}
	return r, nil
}
