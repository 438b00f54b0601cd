package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/admission"
	"github.com/poolagent/poolagent/peer"
	"github.com/poolagent/poolagent/planner"
	"github.com/poolagent/poolagent/protocol"
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
}

// send writes r within Limits.Write. A reply the client does not read in
// time closes the connection: the session then sees the client gone.
func (se *session) send(r any) error {
	se.conn.SetWriteDeadline(time.Now().Add(se.s.limits.Write))
	err := se.enc.Encode(r)
	if err != nil {
		se.conn.Close()
	}
	return err
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
	if req.Op != protocol.OpRun && req.Op != protocol.OpExec {
		se.fail(protocol.CodeBadRequest, fmt.Errorf("first request %q: want %q or %q", req.Op, protocol.OpRun, protocol.OpExec))
		return
	}
	go se.read(in)
	id, err := s.users.Identity(cred)
	if err != nil {
		se.fail(protocol.CodeInternal, err)
		return
	}
	place, err := s.Access().Classify(id, req.Pool, req.App)
	if err != nil {
		s.decided(se, req.Pool, 0, "refused", 0, err)
		se.fail(errorCode(err), err)
		return
	}
	client, err := peer.OfConn(conn, cred, s.cfg.ProcRoot)
	if err != nil {
		se.fail(protocol.CodeInternal, err)
		return
	}
	defer client.Close()
	s.reg.begin(se, &tracked{id: id, clientPID: int(cred.Pid), pool: place.Pool, classifier: place.Classifier, arrived: time.Now()})
	defer s.reg.end(se)
	se.run(ctx, id, client, in.fds, place, req)
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

// run takes a classified query through admission, start and end: req is
// its OpRun or OpExec request.
func (se *session) run(ctx context.Context, id admission.Identity, client peer.Process, fds *fdReader, place admission.Placement, req protocol.Request) {
	s := se.s
	arrived := time.Now()
	qid, queuedFor, ok := se.admit(ctx, place.Pool, id.UserKey(), arrived, req.Progress)
	if !ok {
		return
	}
	name := s.queryName(qid)
	ps, ok := s.rp.poolState(place.Pool)
	if !ok {
		s.leave(qid)
		se.fail(protocol.CodePoolDropped, fmt.Errorf("resource pool %s was dropped before the query started", place.Pool))
		return
	}
	limit := ps.Query.CPU.VCPU()
	notStarted, err := s.peers.admitted(id.UID)
	if err != nil {
		s.leave(qid)
		se.fail(protocol.CodeLimit, err)
		return
	}
	defer notStarted()
	s.admitted(se, name, queuedFor, limit)
	admitted := protocol.Reply{Pool: place.Pool, Classifier: place.Classifier, Query: name, CPULimit: limit}
	if req.Op == protocol.OpExec {
		se.runInPlace(ctx, id, client, qid, place.Pool, admitted, arrived, queuedFor, notStarted)
		return
	}
	admitted.Type = protocol.ReplyAdmitted
	se.send(admitted)
	startBy := time.NewTimer(s.limits.Start)
	defer startBy.Stop()
	var r protocol.Request
	for r.Op != protocol.OpStart {
		select {
		case m, open := <-se.msgs:
			if !open {
				s.leave(qid)
				return
			}
			r = m
		case <-startBy.C:
			s.leave(qid)
			s.cfg.Log.Info("admitted query not started in time; slot freed", "pool", place.Pool, "query", name, "uid", id.UID, "within", s.limits.Start)
			se.fail(protocol.CodeTimeout, fmt.Errorf("query %s: no %q within %s of admission; its slot in pool %s was given back", name, protocol.OpStart, s.limits.Start, place.Pool))
			return
		case <-ctx.Done():
			// Nothing runs yet: the client is told, as a queued one is,
			// rather than holding up the daemon's stop.
			s.leave(qid)
			se.fail(protocol.CodeStopping, protocol.ErrStopping)
			return
		}
	}
	notStarted()
	target, err := startTarget(s.cfg.ProcRoot, client, fds.take(), r.PID)
	if err == nil {
		defer target.Close()
		var found bool
		found, err = s.rp.withPool(place.Pool, func(ps planner.PoolState) error {
			return s.place(peer.Placement{Peer: client, UID: id.UID, Target: target, Rel: peer.ChildOfPeer}, ps, name)
		})
		if !found {
			s.leave(qid)
			se.fail(protocol.CodePoolDropped, fmt.Errorf("resource pool %s was dropped before the query started", place.Pool))
			return
		}
	}
	if err != nil {
		se.fail(errorCode(err), err)
		// A move whose check failed afterwards may have placed a process:
		// the slot stays held until the cgroup (if made) is empty.
		se.finish(ctx, qid, place.Pool, name, arrived, queuedFor)
		return
	}
	se.send(protocol.Reply{Type: protocol.ReplyStarted})
	stats, err := se.finish(ctx, qid, place.Pool, name, arrived, queuedFor)
	if err != nil && ctx.Err() != nil {
		// The daemon stops: the query runs on, and the next daemon
		// adopts its cgroup.
		return
	}
	if err != nil {
		se.fail(protocol.CodeInternal, err)
		return
	}
	se.send(protocol.Reply{Type: protocol.ReplyDone, Pool: place.Pool, Query: name, Stats: &stats})
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

// runInPlace starts an OpExec query: it moves the client itself (peer)
// into the query cgroup, tells it so (the client then execs the command),
// and holds the slot until the cgroup is empty. The client's socket closes
// when it execs (close-on-exec), so the connection's end says nothing
// about the query's: only the cgroup does, and the command's children and
// grandchildren keep the slot as they do on the OpRun path. notStarted
// ends the query's count among its user's admitted, not started ones.
func (se *session) runInPlace(ctx context.Context, id admission.Identity, client peer.Process, qid admission.QueryID, pool string, started protocol.Reply, arrived time.Time, queuedFor time.Duration, notStarted func()) {
	s := se.s
	// As for a start: placed holding the plan lock, with the limits its
	// pool has now (the cap the command is told included).
	found, err := s.rp.withPool(pool, func(ps planner.PoolState) error {
		started.CPULimit = ps.Query.CPU.VCPU()
		return s.place(peer.Placement{Peer: client, UID: id.UID, Target: client, Rel: peer.PeerItself}, ps, started.Query)
	})
	notStarted()
	if !found {
		s.leave(qid)
		se.fail(protocol.CodePoolDropped, fmt.Errorf("resource pool %s was dropped before the query started", pool))
		return
	}
	if err != nil {
		se.fail(errorCode(err), err)
		// As on the OpRun path: a move whose check failed afterwards may
		// have placed a process, so the slot stays held until the cgroup
		// (if made) is empty.
		se.finish(ctx, qid, pool, started.Query, arrived, queuedFor)
		return
	}
	started.Type = protocol.ReplyStarted
	se.send(started)
	if _, err := se.finish(ctx, qid, pool, started.Query, arrived, queuedFor); err != nil && ctx.Err() == nil {
		s.cfg.Log.Error("query end", "pool", pool, "query", started.Query, "err", err)
	}
}

// admit submits the query and waits for its start. It reports false when
// the query was refused or the client went away (having told the client).
func (se *session) admit(ctx context.Context, pool, user string, arrived time.Time, progress bool) (admission.QueryID, time.Duration, bool) {
	s := se.s
	sub, err := s.reg.submit(pool, user, arrived)
	qid, position, why := sub.id, sub.position, sub.why
	if err != nil {
		s.decided(se, pool, 0, "rejected", 0, err)
		se.fail(errorCode(err), err)
		return 0, 0, false
	}
	if sub.started {
		s.decided(se, pool, qid, "started", 0, nil)
		s.rp.started(pool)
		return qid, 0, true
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
		s.decided(se, pool, qid, "queued", 0, nil)
		se.send(protocol.Reply{Type: protocol.ReplyQueued, Pool: pool, Position: position, Wait: &why})
	}
	var tick <-chan time.Time
	if progress {
		t := time.NewTicker(s.cfg.Progress)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case ev := <-sub.wait:
			if ev.Queued {
				if !told {
					told = true
					position, why = s.reg.queued(qid, pool)
					s.decided(se, pool, qid, "queued", 0, nil)
					se.send(protocol.Reply{Type: protocol.ReplyQueued, Pool: pool, Position: position, Wait: &why})
				}
				continue
			}
			if ev.Err != nil {
				outcome := "failed"
				if !told {
					outcome = "rejected"
				}
				s.decided(se, pool, qid, outcome, ev.QueuedFor, ev.Err)
				se.fail(errorCode(ev.Err), ev.Err)
				return 0, 0, false
			}
			s.decided(se, pool, qid, "started", ev.QueuedFor, nil)
			s.rp.started(pool)
			return qid, ev.QueuedFor, true
		case <-tick:
			p, w := s.reg.queued(qid, pool)
			if told && p > 0 && (p != position || w != why) {
				position, why = p, w
				se.send(protocol.Reply{Type: protocol.ReplyQueued, Pool: pool, Position: p, Wait: &w})
			}
		case _, open := <-se.msgs:
			if !open {
				s.leave(qid)
				return 0, 0, false
			}
		case <-ctx.Done():
			s.leave(qid)
			s.decided(se, pool, qid, "failed", time.Since(arrived), protocol.ErrStopping)
			se.fail(protocol.CodeStopping, protocol.ErrStopping)
			return 0, 0, false
		}
	}
}

// finish holds the query's slot until its cgroup is empty, then reads its
// accounting, removes the cgroup and frees the slot. The client's OpExited
// makes it look at once; the client hanging up does not end the query
// while processes remain in its cgroup.
func (se *session) finish(ctx context.Context, qid admission.QueryID, pool, name string, arrived time.Time, queuedFor time.Duration) (protocol.Stats, error) {
	s := se.s
	wake := make(chan struct{}, 1)
	waitCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for {
			select {
			case r, open := <-se.msgs:
				if !open {
					return
				}
				if r.Op == protocol.OpExited {
					select {
					case wake <- struct{}{}:
					default:
					}
				}
			case <-waitCtx.Done():
				return
			}
		}
	}()
	if err := s.waitEmpty(waitCtx, pool, name, wake); err != nil {
		if ctx.Err() == nil {
			// Not the daemon stopping: the cgroup cannot be read, so the
			// slot is freed rather than held for ever.
			s.leave(qid)
		}
		return protocol.Stats{}, fmt.Errorf("query %s: %w", name, err)
	}
	st, statErr := s.cg.QueryStat(pool, name)
	rmErr := s.cg.RemoveQuery(pool, name)
	s.leaveUsed(qid, time.Duration(st.UsageUsec)*time.Microsecond)
	if err := errors.Join(statErr, rmErr); err != nil {
		return protocol.Stats{}, fmt.Errorf("query %s: %w", name, err)
	}
	return protocol.Stats{
		ResourcePoolID:  pool,
		QueuedTimeUs:    queuedFor.Microseconds(),
		TotalDurationUs: time.Since(arrived).Microseconds(),
		UsageUsec:       st.UsageUsec,
		NrPeriods:       st.NrPeriods,
		NrThrottled:     st.NrThrottled,
		ThrottledUsec:   st.ThrottledUsec,
	}, nil
}
