package daemon

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/protocol"
)

// A client that is a systemd service's process (docs/operate.md
// "Services and timers in a pool") stays in its unit's cgroup while its
// command runs in the query cgroup, which systemd does not see: the
// client passes on the signals systemd sends it (OpSignal), and a query
// bound to its client (protocol.Request.Bound) is killed when the client
// is, so that nothing of a stopped unit runs on.

// procLister is a Cgroups that can list the processes of a query cgroup
// and the cgroups below it: *pooltree.Handle.
type procLister interface {
	Procs(group string, limit int) (pids []int, truncated bool, err error)
}

const (
	// signalPasses bounds how often query.signal lists the query's
	// processes again for ones forked since the last pass.
	signalPasses = 8
	// maxSignalled bounds the processes one pass lists.
	maxSignalled = 1 << 16
	// maxSignal is the highest signal number Linux has (SIGRTMAX).
	maxSignal = 64
)

// signal sends sig to every process of q's cgroup that q's client could
// signal itself ([peer.Checker.Signal]), listing the cgroup again while
// it finds processes forked since, as systemd does for a unit's cgroup.
// It returns how many processes it signalled; a query cgroup that is gone
// has none.
func (q *query) signal(sig unix.Signal) (int, error) {
	s := q.s
	pl, ok := s.cg.(procLister)
	if !ok {
		return 0, errors.New("this pool tree cannot list a query's processes")
	}
	sent := map[int]bool{}
	var errs []error
	for range signalPasses {
		pids, _, err := pl.Procs(q.cg.Key().String(), maxSignalled)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return len(sent), err
		}
		fresh := 0
		for _, pid := range pids {
			if sent[pid] {
				continue
			}
			sent[pid] = true
			fresh++
			if err := s.procs.Signal(pid, q.id.UID, sig); err != nil {
				errs = append(errs, err)
			}
		}
		if fresh == 0 {
			break
		}
	}
	return len(sent), errors.Join(errs...)
}

// passSignal carries out a client's OpSignal r for its running query q.
func (q *query) passSignal(r protocol.Request) {
	s := q.s
	if r.Signal < 1 || r.Signal > maxSignal {
		s.cfg.Log.Warn("signal request refused", "pool", q.pool, "query", q.name, "uid", q.id.UID,
			"err", fmt.Sprintf("signal %d is not a signal number (accepted: 1 to %d)", r.Signal, maxSignal))
		return
	}
	sig := unix.Signal(r.Signal)
	n, err := q.signal(sig)
	if n == 0 && err == nil {
		// Nothing left to signal: the usual end of a query whose command
		// exited (the client's SIGTERM for what it left behind).
		return
	}
	s.cfg.Log.Info("signal passed to the query's processes", "pool", q.pool, "query", q.name, "uid", q.id.UID,
		"signal", unix.SignalName(sig), "processes", n, "err", err)
}

// endBound kills the processes of q, whose client has gone before its
// cgroup emptied, all at once ([cgroupfs.Tree.KillQuery]: cgroup.kill,
// else freezing and signalling), so that no child forked meanwhile
// outlives its unit.
func (s *Server) endBound(q *query) {
	err := q.cg.Kill()
	if errors.Is(err, fs.ErrNotExist) {
		err = nil // its processes were gone, and their cgroup with them
	}
	s.cfg.Log.Info("the client of a bound query is gone: its processes killed", "pool", q.pool, "query", q.name,
		"uid", q.id.UID, "err", err)
}
