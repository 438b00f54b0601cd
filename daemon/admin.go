package daemon

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/admission"
	"github.com/poolagent/poolagent/client"
	"github.com/poolagent/poolagent/client/admin"
	"github.com/poolagent/poolagent/planner"
	"github.com/poolagent/poolagent/sysview"
)

// isAdminOp reports whether op is an operator operation.
func isAdminOp(op string) bool {
	switch op {
	case client.OpSQL, client.OpPools, client.OpClassifiers, client.OpQueries:
		return true
	}
	return false
}

// serveAdmin answers one operator operation on se.
func (s *Server) serveAdmin(se *session, cred *unix.Ucred, req client.Request) {
	reply := admin.Reply{Type: client.ReplyDone}
	switch req.Op {
	case client.OpPools:
		reply.Pools = sysview.Pools(s.Model(), s.Pools(), s.Desired())
	case client.OpClassifiers:
		reply.Classifiers = sysview.Classifiers(s.Model())
	case client.OpQueries:
		reply.Queries = s.queryRows()
	case client.OpSQL:
		reply = s.serveSQL(cred, req)
	}
	se.enc.Encode(reply)
}

func (s *Server) serveSQL(cred *unix.Ucred, req client.Request) admin.Reply {
	refuse := func(code string, err error) admin.Reply {
		return admin.Reply{Type: client.ReplyError, Code: code, Error: err.Error()}
	}
	id, err := s.users.Identity(cred)
	if err != nil {
		return refuse(client.CodeInternal, err)
	}
	if !s.Access().IsAdmin(id) {
		s.cfg.Log.Info("run-time change refused", "uid", id.UID, "user", id.User, "reason", "not an administrator")
		return refuse(client.CodeAccessDenied, fmt.Errorf("%w: %s may not change pools or classifiers (administrators: root, the admin group, and grantees of ALL or the schema rights on the pools)",
			admission.ErrAccessDenied, id))
	}
	c, warns, err := s.ExecSQL(id, req.Source, req.SQL)
	reply := admin.Reply{Type: client.ReplyDone}
	for _, w := range warns {
		reply.Warnings = append(reply.Warnings, w.String())
	}
	if c.Seq != 0 {
		reply.Change = &c
	}
	var list planner.ErrorList
	switch {
	case errors.As(err, &list):
		reply.Type, reply.Code, reply.Error = client.ReplyError, client.CodeInvalidDDL, err.Error()
	case err != nil:
		reply.Type, reply.Code, reply.Error = client.ReplyError, client.CodeInternal, err.Error()
	}
	return reply
}
