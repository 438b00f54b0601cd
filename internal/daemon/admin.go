package daemon

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/pooltree"
	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/internal/sysview"
	"github.com/poolagent/poolagent/planner"
)

// isAdminOp reports whether op is an operator operation.
func isAdminOp(op string) bool {
	switch op {
	case protocol.OpSQL, protocol.OpPools, protocol.OpClassifiers, protocol.OpQueries, protocol.OpHistory, protocol.OpReleaseNode, protocol.OpKill:
		return true
	}
	return false
}

// serveAdmin answers one operator operation on se.
func (s *Server) serveAdmin(se *session, cred *unix.Ucred, req protocol.Request) {
	reply := protocol.AdminReply{Type: protocol.ReplyDone}
	if req.Op != protocol.OpSQL && req.Op != protocol.OpReleaseNode && req.Op != protocol.OpKill {
		// A view's reply may be large; one nobody reads holds it until
		// the write deadline, so only so many are written at once.
		done, err := s.peers.view(cred.Uid)
		if err != nil {
			se.send(adminError(protocol.CodeLimit, err))
			return
		}
		defer done()
	}
	switch req.Op {
	case protocol.OpPools:
		reply.Pools = s.views.pools(req.Local)
	case protocol.OpClassifiers:
		reply.Classifiers = sysview.Classifiers(s.changes.current().Model)
	case protocol.OpQueries:
		reply.Queries = s.views.queries(req.Local)
	case protocol.OpHistory:
		if s.history == nil {
			reply = protocol.AdminReply{Type: protocol.ReplyError, Code: protocol.CodeBadRequest,
				Error: "this daemon keeps no history of the pools (it was started with --history-window 0)"}
			break
		}
		var release func()
		reply, release = s.history.Reply(cred.Uid, req)
		defer release()
	case protocol.OpSQL:
		reply = s.serveSQL(cred, req)
	case protocol.OpReleaseNode:
		reply = s.serveReleaseNode(cred, req)
	case protocol.OpKill:
		reply = s.serveKill(cred, req)
	}
	se.send(reply)
}

// administrator names the caller of an administrative operation and
// returns its identity when it is an administrator; otherwise it logs the
// refusal (message and attrs, with the caller) and returns the reply that
// says the caller may not do what it asked (mayNot) and who may.
func (s *Server) administrator(cred *unix.Ucred, mayNot, message string, attrs ...any) (admission.Identity, *protocol.AdminReply) {
	id, err := s.users.Identity(cred)
	if err != nil {
		r := adminError(protocol.CodeInternal, err)
		return id, &r
	}
	if !s.reg.rules().IsAdmin(id) {
		s.cfg.Log.Info(message, append(append([]any{"uid", id.UID, "user", id.User}, attrs...), "reason", "not an administrator")...)
		r := adminError(protocol.CodeAccessDenied, fmt.Errorf("%w: %s may not %s (administrators: root, the admin group, and grantees of ALL or the schema rights on the pools)",
			admission.ErrAccessDenied, id, mayNot))
		return id, &r
	}
	return id, nil
}

// adminError is the reply of an administrative operation that failed.
func adminError(code string, err error) protocol.AdminReply {
	return protocol.AdminReply{Type: protocol.ReplyError, Code: code, Error: err.Error()}
}

// serveReleaseNode releases a vanished fleet node's strict slots, for an
// administrator; it is logged with who asked.
func (s *Server) serveReleaseNode(cred *unix.Ucred, req protocol.Request) protocol.AdminReply {
	id, refused := s.administrator(cred, "release a node's slots", "release of a node's slots refused", "node", req.Node)
	if refused != nil {
		return *refused
	}
	if s.cfg.Cluster == nil {
		return adminError(protocol.CodeInternal, errors.New("this daemon is not in fleet mode (--etcd): it has no other node's slots to release"))
	}
	n, err := s.cfg.Cluster.ReleaseNode(req.Node)
	if err != nil {
		return adminError(protocol.CodeInternal, fmt.Errorf("release node %s: %w", req.Node, err))
	}
	s.cfg.Log.Warn("strict slots of a node released by an administrator", "uid", id.UID, "user", id.User, "node", req.Node, "slots", n)
	return protocol.AdminReply{Type: protocol.ReplyDone, Released: n}
}

// serveKill kills the running query req.Query for an administrator: every
// process in its cgroup at once ([cgroupfs.Tree.KillQuery]). The query
// then ends as any other whose processes are gone: its slot is freed
// and its client gets its statistics.
func (s *Server) serveKill(cred *unix.Ucred, req protocol.Request) protocol.AdminReply {
	id, refused := s.administrator(cred, "kill a query", "kill of a query refused", "query", req.Query)
	if refused != nil {
		return *refused
	}
	var queued bool
	for _, r := range s.views.queryRows() {
		if r.QueryId != req.Query || r.Node != "" {
			continue
		}
		if r.State != protocol.StateRunning {
			queued = true
			continue
		}
		if err := pooltree.NewQuery(s.cg, pooltree.QueryKey{Pool: r.ResourcePoolId, Name: r.QueryId}).Kill(); err != nil {
			return adminError(protocol.CodeInternal, fmt.Errorf("kill query %s in pool %s: %w", r.QueryId, r.ResourcePoolId, err))
		}
		s.cfg.Log.Warn("query killed by an administrator", "uid", id.UID, "user", id.User, "pool", r.ResourcePoolId, "query", r.QueryId)
		return protocol.AdminReply{Type: protocol.ReplyDone, Killed: r.ResourcePoolId}
	}
	if queued {
		return adminError(protocol.CodeInternal, fmt.Errorf("query %q is queued, not running: it has no process to kill", req.Query))
	}
	return adminError(protocol.CodeInternal, fmt.Errorf("no running query %q on this node; poolagent queries lists them (QueryId)", req.Query))
}

func (s *Server) serveSQL(cred *unix.Ucred, req protocol.Request) protocol.AdminReply {
	id, refused := s.administrator(cred, "change pools or classifiers", "run-time change refused")
	if refused != nil {
		return *refused
	}
	c, warns, err := s.changes.execSQL(id, req.Source, req.SQL)
	reply := protocol.AdminReply{Type: protocol.ReplyDone}
	for _, w := range warns {
		reply.Warnings = append(reply.Warnings, w.String())
	}
	if c.Seq != 0 {
		reply.Change = &protocol.Change{Seq: c.Seq, Time: c.Time, UID: c.UID, User: c.User, DDL: c.DDL, SavedIn: s.changes.src.savedIn()}
	}
	var list planner.ErrorList
	switch {
	case errors.As(err, &list):
		reply.Type, reply.Code, reply.Error = protocol.ReplyError, protocol.CodeInvalidDDL, err.Error()
	case err != nil:
		reply.Type, reply.Code, reply.Error = protocol.ReplyError, protocol.CodeInternal, err.Error()
	}
	return reply
}
