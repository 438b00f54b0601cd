package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/planner"
)

// ErrNotYourChild: the process a client named for its query is not a
// direct child of the client running as the client's user.
var ErrNotYourChild = errors.New("not the client's own child")

// ErrCannotHold: the daemon could not hold the process still while it
// moved it (see hold), so it did not move it.
var ErrCannotHold = errors.New("cannot hold the process while moving it")

// procChecker reads what the kernel says about a process.
type procChecker struct {
	fs   procfs.FS
	root string
}

func newProcChecker(root string) (procChecker, error) {
	fs, err := procfs.NewFS(root)
	if err != nil {
		return procChecker{}, fmt.Errorf("open proc filesystem %s: %w", root, err)
	}
	return procChecker{fs: fs, root: root}, nil
}

// relation is which process a client may have placed.
type relation int

const (
	// childOfPeer: a direct child of the client (the gate of `poolagent
	// run`, named by OpStart).
	childOfPeer relation = iota
	// peerItself: the client process itself.
	peerItself
)

// placement is a move a client asked for: target into its query cgroup.
type placement struct {
	// peer is the connected client, uid its uid (SO_PEERCRED).
	peer process
	uid  uint32
	// target is the process to move, rel how it must stand to peer.
	target process
	rel    relation
}

// check verifies, through /proc, that p.target is a process (not a thread
// of another one) standing to the peer as p.rel asks, and that its real
// and effective uid are the client's; then, through the pidfds, that both
// still exist, so the facts read were about them: a pid is not reused
// while its process exists, even as a zombie.
func (c procChecker) check(p placement) error {
	pid := p.target.pid
	proc, err := c.fs.Proc(pid)
	if err != nil {
		return fmt.Errorf("%w: process %d: %w", ErrNotYourChild, pid, err)
	}
	st, err := proc.Stat()
	if err != nil {
		return fmt.Errorf("%w: process %d: %w", ErrNotYourChild, pid, err)
	}
	status, err := proc.NewStatus()
	if err != nil {
		return fmt.Errorf("%w: process %d: %w", ErrNotYourChild, pid, err)
	}
	switch {
	case status.TGID != pid:
		return fmt.Errorf("%w: %d is a thread of process %d", ErrNotYourChild, pid, status.TGID)
	case p.rel == childOfPeer && st.PPID != p.peer.pid:
		return fmt.Errorf("%w: process %d has parent %d, the client is %d", ErrNotYourChild, pid, st.PPID, p.peer.pid)
	case p.rel == peerItself && pid != p.peer.pid:
		return fmt.Errorf("%w: process %d is not the client %d", ErrNotYourChild, pid, p.peer.pid)
	case status.UIDs[0] != uint64(p.uid) || status.UIDs[1] != uint64(p.uid):
		return fmt.Errorf("%w: process %d runs as uid %d (effective %d), the client as %d",
			ErrNotYourChild, pid, status.UIDs[0], status.UIDs[1], p.uid)
	}
	if err := alive(p.target); err != nil {
		return err
	}
	return alive(p.peer)
}

// place creates the query cgroup and moves p.target into it, after
// checking that it is the process p allows.
//
// A write to cgroup.procs names a pid, and a pid names whatever process
// holds it at the moment of the write: if the client's process exited and
// was reaped after the checks, another user's new process could get its
// pid and be moved instead. So the checks and the write happen while the
// daemon holds the process (hold): until it lets go, the process cannot be
// reaped, so its pid cannot pass to another process. Before the hold the
// checks run once (so the daemon never holds a process it would refuse);
// under the hold they run again, with the pidfd showing that the process
// held is the one named, and only then is the pid written.
func (s *Server) place(p placement, ps planner.PoolState, query string) error {
	if p.target.pid <= 0 {
		return fmt.Errorf("%w: pid %d", ErrNotYourChild, p.target.pid)
	}
	if err := s.procs.check(p); err != nil {
		return err
	}
	err := hold(p.target.pid, func() error {
		if err := s.procs.check(p); err != nil {
			return err
		}
		if s.cfg.beforeMove != nil {
			s.cfg.beforeMove(p.target.pid)
		}
		if err := s.cg.PlaceQuery(ps, query, p.target.pid); err != nil {
			return err
		}
		// Held, the process cannot have been reaped: this holds unless
		// the kernel broke the hold.
		return alive(p.target)
	})
	if errors.Is(err, ErrCannotHold) {
		if tracer := s.procs.tracer(p.target.pid); tracer > 0 {
			return fmt.Errorf("%w: it is traced by process %d (a debugger, strace -f); trace the command inside the query instead", err, tracer)
		}
		return fmt.Errorf("%w: the daemon needs CAP_SYS_PTRACE, which kernel.yama.ptrace_scope 3 or a security module may deny", err)
	}
	return err
}

// hold runs fn while process pid cannot be reaped, so that its pid keeps
// naming it. It attaches to the process with ptrace(PTRACE_SEIZE), which
// neither stops nor signals it; while a process is traced, its parent
// cannot reap it even once it has exited (a zombie tracee is visible to
// its tracer only, and passes to its parent when the tracer lets go), so
// no other process can get its pid. The tracer is the thread that
// attached: hold runs fn on a thread of its own, which exits afterwards
// (the goroutine never unlocks it), and the kernel lets go of its tracees
// as it exits, handing a zombie back to its parent and delivering a
// signal that arrived meanwhile. It needs CAP_SYS_PTRACE (the unit grants
// it); a process that is already traced (a debugger, strace -f) cannot be
// held. Either failure wraps ErrCannotHold.
func hold(pid int, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: the thread ends with this goroutine.
		if err := unix.PtraceSeize(pid); err != nil {
			done <- fmt.Errorf("%w %d: ptrace(PTRACE_SEIZE): %w", ErrCannotHold, pid, err)
			return
		}
		done <- fn()
	}()
	return <-done
}

// tracer returns the TracerPid of process pid, from /proc/PID/status: 0
// when it is not traced or cannot be read.
func (c procChecker) tracer(pid int) int {
	b, err := os.ReadFile(filepath.Join(c.root, strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "TracerPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// alive reports whether p still exists (a zombie counts).
func alive(p process) error {
	if err := unix.PidfdSendSignal(p.fd, 0, nil, 0); err != nil {
		return fmt.Errorf("process %d is gone: %w", p.pid, err)
	}
	return nil
}
