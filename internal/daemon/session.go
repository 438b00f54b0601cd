package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/peer"
	"github.com/poolagent/poolagent/internal/pidfd"
	"github.com/poolagent/poolagent/internal/pooltree"
	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/internal/tell"
	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// session is one client connection: one query.
type session struct {
	s    *Server
	conn *net.UnixConn
	enc  *json.Encoder
	// msgs carries the client's requests after the first; it is closed
	// when the client hangs up.
	msgs chan protocol.Request
	done chan struct{}
	// bound: the query ends with the client (protocol.Request.Bound).
	bound bool
}

// send writes r within Limits.Write. A reply the client does not read in
// time closes the connection: the session then sees the client gone. The
// deadline is cleared once the reply is written: left, it would wake the
// daemon when it passed, for each connection, long after its last reply
// (a running query's connection stays open for as long as it runs).
func (se *session) send(r any) error {
	se.conn.SetWriteDeadline(time.Now().Add(se.s.limits.Write))
	err := se.enc.Encode(r)
	if err != nil {
		se.conn.Close()
		return err
	}
	se.conn.SetWriteDeadline(time.Time{})
	return nil
}

func (se *session) fail(code string, err error) {
	se.send(protocol.Reply{Type: protocol.ReplyError, Code: code, Error: err.Error()})
}

func (s *Server) serveConn(ctx context.Context, conn *net.UnixConn) {
	defer conn.Close()
	se := &session{s: s, conn: conn, enc: json.NewEncoder(conn), msgs: make(chan protocol.Request, 4), done: make(chan struct{})}
	defer close(se.done)
	cred, err := peer.Cred(conn)
	if err != nil {
		se.fail(protocol.CodeInternal, err)
		return
	}
	forget, err := s.peers.connect(cred.Uid, conn)
	if err != nil {
		se.fail(protocol.CodeLimit, err)
		return
	}
	defer forget()
	in := newMsgReader(conn, s.limits)
	defer in.fds.close()
	var req protocol.Request
	err = in.first(&req)
	s.peers.firstRead(conn)
	if err != nil {
		se.fail(readErrorCode(err), err)
		return
	}
	if isAdminOp(req.Op) {
		s.serveAdmin(se, cred, req)
		return
	}
	if req.Op != protocol.OpRun && req.Op != protocol.OpExec && req.Op != protocol.OpPlace {
		se.fail(protocol.CodeBadRequest, fmt.Errorf("first request %q: want %q, %q or %q", req.Op, protocol.OpRun, protocol.OpExec, protocol.OpPlace))
		return
	}
	if req.Op == protocol.OpPlace && cred.Uid != 0 {
		se.fail(protocol.CodeAccessDenied, fmt.Errorf("%w: uid %d asked to place a query's processes itself (%q), which only root may: "+
			"the query cgroup is root's, so no other user's runtime could create a cgroup in it (a rootless container engine cannot use poolagent-oci)",
			admission.ErrAccessDenied, cred.Uid, protocol.OpPlace))
		return
	}
	// Only an OpRun query's start names a process by a descriptor.
	in.fds.accept.Store(req.Op == protocol.OpRun)
	go se.read(in)
	id, err := s.users.Identity(cred)
	if err != nil {
		se.fail(protocol.CodeInternal, err)
		return
	}
	place, err := s.reg.rules().Classify(id, req.Pool, req.App)
	if err != nil {
		s.decided(req.Pool, 0, "refused", 0, err)
		se.fail(errorCode(err), err)
		return
	}
	client, err := peer.OfConn(conn, cred, s.cfg.ProcRoot)
	if err != nil {
		se.fail(protocol.CodeInternal, err)
		return
	}
	defer client.Close()
	q := s.newQuery(id, int(cred.Pid), place)
	defer q.Release()
	se.run(ctx, q, client, in.fds, req)
}

// read forwards the client's requests until it hangs up or a message
// breaks a limit.
func (se *session) read(in *msgReader) {
	defer close(se.msgs)
	for {
		var r protocol.Request
		if err := in.next(&r, se.done); err != nil {
			return
		}
		select {
		case se.msgs <- r:
		case <-se.done:
			return
		}
	}
}

func errorCode(err error) string {
	for _, c := range []struct {
		err  error
		code string
	}{
		{admission.ErrQueueFull, protocol.CodeQueueFull},
		{admission.ErrPoolDisabled, protocol.CodePoolDisabled},
		{admission.ErrDelayDeadline, protocol.CodeDelayDeadline},
		{admission.ErrPoolDropped, protocol.CodePoolDropped},
		{admission.ErrUnknownPool, protocol.CodeUnknownPool},
		{admission.ErrAccessDenied, protocol.CodeAccessDenied},
		{admission.ErrRejected, protocol.CodeRejected},
		{peer.ErrNotYourChild, protocol.CodeBadRequest},
		{peer.ErrCannotHold, protocol.CodeBadRequest},
		{ErrConfined, protocol.CodeConfined},
	} {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return protocol.CodeInternal
}

// release ends q, which was given no cgroup, and then tells the client
// why (code, err): the slot goes back before a reply the client may be
// slow to read.
func (se *session) release(q *query, code string, err error) {
	q.Release()
	se.fail(code, err)
}

// errPoolDropped: the query's pool was dropped after it was admitted,
// before its process was placed.
var errPoolDropped = errors.New("dropped before the query started")

// dropped is the error for a query whose pool was dropped before it
// started.
func dropped(pool string) error {
	return fmt.Errorf("resource pool %s was %w", pool, errPoolDropped)
}

// run takes a classified query through admission, start and end: req is
// its OpRun or OpExec request.
func (se *session) run(ctx context.Context, q *query, client peer.Process, fds *fdReader, req protocol.Request) {
	s := se.s
	queuedFor, ok := se.admit(ctx, q, req.Progress)
	if !ok {
		return
	}
	ps, ok := s.rp.poolState(q.pool)
	if !ok {
		se.release(q, protocol.CodePoolDropped, dropped(q.pool))
		return
	}
	limit := ps.Query.CPU.VCPU()
	notStarted, err := s.peers.admitted(q.id.UID)
	if err != nil {
		se.release(q, protocol.CodeLimit, err)
		return
	}
	defer notStarted()
	name := s.names.name(q.qid)
	s.reg.admitted(q, name, queuedFor, limit)
	q.cg = pooltree.NewQuery(s.cg, pooltree.QueryKey{Pool: q.pool, Name: name})
	admitted := protocol.Reply{Pool: q.pool, Classifier: q.classifier, Query: name, CPULimit: limit}
	switch req.Op {
	case protocol.OpExec:
		se.runInPlace(ctx, q, client, admitted, notStarted)
		return
	case protocol.OpPlace:
		se.runPlaced(ctx, q, admitted, notStarted)
		return
	}
	se.bound = req.Bound
	admitted.Type = protocol.ReplyAdmitted
	se.send(admitted)
	r, ok := se.awaitStart(ctx, q)
	if !ok {
		return
	}
	target, err := startTarget(s.cfg.ProcRoot, client, fds.take(), r.PID)
	if err == nil {
		defer target.Close()
		_, err = q.place(peer.Placement{Peer: client, UID: q.id.UID, Target: target, Rel: peer.ChildOfPeer})
	}
	// Counted until placed, so that one user holds at most
	// Limits.NotStartedPerUID processes (and the daemon's threads) at once.
	notStarted()
	if !se.placed(ctx, q, err, protocol.Reply{Type: protocol.ReplyStarted}) {
		return
	}
	stats, err := se.finish(ctx, q, s.hits.poolMemoryBefore(q.pool))
	if err != nil && ctx.Err() != nil {
		// The daemon stops: the query runs on, and the next daemon
		// adopts its cgroup.
		return
	}
	if err != nil {
		se.fail(protocol.CodeInternal, err)
		return
	}
	se.send(protocol.Reply{Type: protocol.ReplyDone, Pool: q.pool, Query: name, Stats: &stats})
}

// awaitStart waits for the start request of admitted query q. It reports
// false when none came (the client went away, Limits.Start passed, or the
// daemon stops), having ended q and told the client.
func (se *session) awaitStart(ctx context.Context, q *query) (protocol.Request, bool) {
	s := se.s
	startBy := time.NewTimer(s.limits.Start)
	defer startBy.Stop()
	for {
		select {
		case r, open := <-se.msgs:
			if !open {
				return r, false
			}
			if r.Op == protocol.OpStart {
				return r, true
			}
		case <-startBy.C:
			s.cfg.Log.Info("admitted query not started in time; slot freed", "pool", q.pool, "query", q.name, "uid", q.id.UID, "within", s.limits.Start)
			se.release(q, protocol.CodeTimeout, fmt.Errorf("query %s: no %q within %s of admission; its slot in pool %s was given back", q.name, protocol.OpStart, s.limits.Start, q.pool))
			return protocol.Request{}, false
		case <-ctx.Done():
			// Nothing runs yet: the client is told, as a queued one is,
			// rather than holding up the daemon's stop.
			se.release(q, protocol.CodeStopping, protocol.ErrStopping)
			return protocol.Request{}, false
		}
	}
}

// placed tells the client how the placement of its query's process went
// (err) and reports whether it was placed, sending started if so. A
// placement that failed after its cgroup was made may have moved a
// process (a check failed afterwards): the query then holds its slot
// until the cgroup is empty.
func (se *session) placed(ctx context.Context, q *query, err error, started protocol.Reply) bool {
	switch {
	case errors.Is(err, errPoolDropped):
		// A cgroup made before the drop went with its pool: it reads as
		// empty, and removing it again only forgets it (Query.Remove).
		if _, rerr := q.end(ctx); rerr != nil {
			se.s.cfg.Log.Warn("remove the query cgroup of a dropped pool", "pool", q.pool, "query", q.name, "err", rerr)
		}
		se.fail(protocol.CodePoolDropped, err)
		return false
	case err != nil:
		se.fail(errorCode(err), err)
		se.finish(ctx, q, nil)
		return false
	}
	se.send(started)
	return true
}

// startTarget is the process a start request names: the pidfd sent with
// it (fd, -1 when none came) or, from a client that sends none, a pidfd
// opened for its pid. The caller closes the process.
func startTarget(procRoot string, client peer.Process, fd, pid int) (peer.Process, error) {
	if fd >= 0 {
		p, err := peer.FromPidfd(procRoot, fd)
		if err != nil {
			unix.Close(fd)
			return peer.Process{}, err
		}
		return p, nil
	}
	p, err := peer.FromPID(procRoot, client, pid)
	if errors.Is(err, peer.ErrOwnPIDNamespace) {
		return p, fmt.Errorf("%w, and it sent no pidfd with %q; poolagent run and poolagent-run of this version send one", err, protocol.OpStart)
	}
	return p, err
}

// runInPlace starts an OpExec query: it moves the client itself (client)
// into the query cgroup, tells it so (the client then execs the command),
// and holds the slot until the cgroup is empty. The client's socket closes
// when it execs (close-on-exec), so the connection's end says nothing
// about the query's: only the cgroup does, and the command's children and
// grandchildren keep the slot as they do on the OpRun path. notStarted
// ends the query's count among its user's admitted, not started ones.
// The client's standard error, where a kill of the command at a memory
// limit is told ([limitHits.tellInPlace]), is taken as a path handle while
// the client is alive ([tell.Open]): the client sends no descriptor.
func (se *session) runInPlace(ctx context.Context, q *query, client peer.Process, started protocol.Reply, notStarted func()) {
	s := se.s
	stderr, err := tell.Open(s.cfg.ProcRoot, client)
	if err != nil {
		s.cfg.Log.Debug("in-place client's stderr not taken: its query's end will not be told there", "pool", q.pool, "query", q.name, "err", err)
	}
	defer func() {
		if stderr >= 0 {
			unix.Close(stderr)
		}
	}()
	// As for a start, with the limits its pool has when its cgroup is
	// made (the cap the command is told included).
	ps, err := q.place(peer.Placement{Peer: client, UID: q.id.UID, Target: client, Rel: peer.PeerItself})
	notStarted()
	started.Type, started.CPULimit = protocol.ReplyStarted, ps.Query.CPU.VCPU()
	if !se.placed(ctx, q, err, started) {
		return
	}
	poolBefore := s.hits.poolMemoryBefore(q.pool)
	ended := make(chan protocol.Stats, 1)
	if stderr >= 0 {
		if exited, err := pidfd.Watch(client.FD); err == nil {
			go s.hits.tellInPlace(ctx, stderr, exited, ended, q.id.UID, q.id.GID, q.cg, poolBefore)
			stderr = -1
		}
	}
	stats, err := se.finish(ctx, q, poolBefore)
	ended <- stats
	if err != nil && ctx.Err() == nil {
		s.cfg.Log.Error("query end", "pool", q.pool, "query", q.name, "err", err)
	}
}

// runPlaced starts an OpPlace query: it makes the query cgroup with its
// pool's limits, tells the client where it is, and holds the slot while
// the client's program (an OCI runtime) creates processes below it. Once
// the client says that program has returned (OpExited) or hangs up, the
// query ends when its cgroup is empty: a container created detached runs
// on after its runtime and client have exited, and keeps the slot until
// its last process exits. notStarted ends the query's count among its
// user's admitted, not started ones, once the client is done.
func (se *session) runPlaced(ctx context.Context, q *query, started protocol.Reply, notStarted func()) {
	s := se.s
	found, err := s.rp.withPool(q.pool, func(cur planner.PoolState) error {
		started.CPULimit = cur.Query.CPU.VCPU()
		return q.cg.Make(cur)
	})
	if !found {
		err = dropped(q.pool)
	}
	if err == nil {
		started.Cgroup, err = q.cg.Path()
	}
	started.Type = protocol.ReplyStarted
	if !se.placed(ctx, q, err, started) {
		notStarted()
		return
	}
	poolBefore := s.hits.poolMemoryBefore(q.pool)
	told := se.awaitExited(ctx)
	notStarted()
	stats, err := se.finish(ctx, q, poolBefore)
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Log.Error("query end", "pool", q.pool, "query", q.name, "err", err)
			if told {
				se.fail(protocol.CodeInternal, err)
			}
		}
		return
	}
	if told {
		se.send(protocol.Reply{Type: protocol.ReplyDone, Pool: q.pool, Query: q.name, Stats: &stats})
	}
}

// awaitExited waits until the client of an OpPlace query says its program
// has returned (true) or hangs up (false), or the daemon stops.
func (se *session) awaitExited(ctx context.Context) bool {
	for {
		select {
		case r, open := <-se.msgs:
			if !open {
				return false
			}
			if r.Op == protocol.OpExited {
				return true
			}
		case <-ctx.Done():
			return false
		}
	}
}

// admit submits q and waits for its start. It reports false when the
// query was refused or the client went away (having told the client), and
// otherwise how long it was queued.
func (se *session) admit(ctx context.Context, q *query, progress bool) (time.Duration, bool) {
	s := se.s
	sub, err := s.reg.submit(q, q.arrived)
	position, why := sub.position, sub.why
	if err != nil {
		s.decided(q.pool, 0, "rejected", 0, err)
		se.fail(errorCode(err), err)
		return 0, false
	}
	if sub.started {
		s.decided(q.pool, q.qid, "started", 0, nil)
		s.rp.started(q.pool)
		return 0, true
	}
	if sub.cancelAfter > 0 {
		deadline := time.AfterFunc(sub.cancelAfter, s.reg.tick)
		defer deadline.Stop()
	}
	// Position 0: the backend has not decided yet (fleet mode's etcd
	// transaction is under way); the client is told it is queued once the
	// backend says so, and not at all if it starts or is refused first.
	told := position > 0
	if told {
		s.decided(q.pool, q.qid, "queued", 0, nil)
		se.send(protocol.Reply{Type: protocol.ReplyQueued, Pool: q.pool, Position: position, Wait: &why})
	}
	var tick <-chan time.Time
	if progress {
		t := time.NewTicker(s.cfg.Progress)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case ev := <-q.wait:
			if ev.Queued {
				if !told {
					told = true
					position, why = s.reg.queued(q.qid, q.pool)
					s.decided(q.pool, q.qid, "queued", 0, nil)
					se.send(protocol.Reply{Type: protocol.ReplyQueued, Pool: q.pool, Position: position, Wait: &why})
				}
				continue
			}
			if ev.Err != nil {
				outcome := "failed"
				if !told {
					outcome = "rejected"
				}
				s.decided(q.pool, q.qid, outcome, ev.QueuedFor, ev.Err)
				se.fail(errorCode(ev.Err), ev.Err)
				return 0, false
			}
			s.decided(q.pool, q.qid, "started", ev.QueuedFor, nil)
			s.rp.started(q.pool)
			return ev.QueuedFor, true
		case <-tick:
			p, w := s.reg.queued(q.qid, q.pool)
			if told && p > 0 && (p != position || w != why) {
				position, why = p, w
				se.send(protocol.Reply{Type: protocol.ReplyQueued, Pool: q.pool, Position: p, Wait: &w})
			}
		case _, open := <-se.msgs:
			if !open {
				return 0, false
			}
		case <-ctx.Done():
			s.decided(q.pool, q.qid, "failed", time.Since(q.arrived), protocol.ErrStopping)
			se.release(q, protocol.CodeStopping, protocol.ErrStopping)
			return 0, false
		}
	}
}

// finish holds q until its cgroup is empty, then ends it (query.end). The
// client's OpExited makes it look at once, its OpSignal signals the
// query's processes; the client hanging up does not end the query while
// processes remain in its cgroup, unless the query is bound to it (then
// they are killed). When the daemon stops first, q is kept: it runs on,
// and the next daemon adopts it. poolBefore is the pool's memory as the
// query started; its tasks are read here, as the query starts too.
func (se *session) finish(ctx context.Context, q *query, poolBefore *observe.Memory) (protocol.Stats, error) {
	s := se.s
	pidsBefore := s.hits.poolPidsBefore(q.pool)
	waitCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for {
			select {
			case r, open := <-se.msgs:
				if !open {
					if se.bound && waitCtx.Err() == nil {
						s.endBound(q)
					}
					return
				}
				switch r.Op {
				case protocol.OpExited:
					q.cg.Look()
				case protocol.OpSignal:
					q.passSignal(r)
				}
			case <-waitCtx.Done():
				return
			}
		}
	}()
	st, err := q.end(waitCtx)
	if err != nil {
		return protocol.Stats{}, fmt.Errorf("query %s: %w", q.name, err)
	}
	stats := protocol.Stats{
		ResourcePoolID:  q.pool,
		QueuedTimeUs:    q.queuedFor.Microseconds(),
		TotalDurationUs: time.Since(q.arrived).Microseconds(),
		UsageUsec:       st.CPU.UsageUsec,
		NrPeriods:       st.CPU.NrPeriods,
		NrThrottled:     st.CPU.NrThrottled,
		ThrottledUsec:   st.CPU.ThrottledUsec,
	}
	s.hits.queryMemory(&stats, q.pool, q.name, st.Memory, poolBefore)
	s.hits.queryPids(&stats, q.pool, q.name, st.Pids, pidsBefore)
	return stats, nil
}
