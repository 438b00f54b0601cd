package daemon

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/planner"
)

// ErrNotYourChild: the process a client named for its query is not a
// direct child of the client running as the client's user.
var ErrNotYourChild = errors.New("not the client's own child")

// ErrCannotHold: the daemon could not hold the process still while it
// moved it (see hold), so it did not move it.
var ErrCannotHold = errors.New("cannot hold the process while moving it")

// ErrConfined: the process is held by a CPU or memory limit that its
// query cgroup would not be below, and Config.MayLeave does not allow
// leaving it.
var ErrConfined = errors.New("held by a limit the query would leave")

// procChecker reads what the kernel says about a process, from the proc
// filesystem at root.
type procChecker struct {
	root string
}

// newProcChecker checks that root is a proc filesystem, one where the
// daemon reads its own status.
func newProcChecker(root string) (procChecker, error) {
	if _, err := readStatus(root, os.Getpid()); err != nil {
		return procChecker{}, fmt.Errorf("proc filesystem %s: %w", root, err)
	}
	return procChecker{root: root}, nil
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

// check verifies, through the target's pidfd or /proc (statusOf), that
// p.target is a process (not a thread
// of another one) standing to the peer as p.rel asks, and that its real
// and effective uid are the client's; then, through the pidfds, that both
// still exist, so the facts read were about them: a pid is not reused
// while its process exists, even as a zombie. It returns what it read.
func (c procChecker) check(p placement) (procStatus, error) {
	pid := p.target.pid
	st, err := statusOf(c.root, p.target)
	if err != nil {
		return st, fmt.Errorf("%w: %w", ErrNotYourChild, err)
	}
	switch {
	case st.tgid != pid:
		return st, fmt.Errorf("%w: %d is a thread of process %d", ErrNotYourChild, pid, st.tgid)
	case p.rel == childOfPeer && st.ppid != p.peer.pid:
		return st, fmt.Errorf("%w: process %d has parent %d, the client is %d", ErrNotYourChild, pid, st.ppid, p.peer.pid)
	case p.rel == peerItself && pid != p.peer.pid:
		return st, fmt.Errorf("%w: process %d is not the client %d", ErrNotYourChild, pid, p.peer.pid)
	case st.ruid != p.uid || st.euid != p.uid:
		return st, fmt.Errorf("%w: process %d runs as uid %d (effective %d), the client as %d",
			ErrNotYourChild, pid, st.ruid, st.euid, p.uid)
	}
	if err := alive(p.target); err != nil {
		return st, err
	}
	return st, alive(p.peer)
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
	st, err := s.procs.check(p)
	if err != nil {
		return err
	}
	holdFn := hold
	if st.ppid == os.Getpid() {
		// The daemon's own child (a client in the daemon's process, as
		// in tests): only the daemon could reap it, and a hold would
		// show the daemon's own wait the tracing stops.
		holdFn = func(_ int, fn func() error) error { return fn() }
	}
	err = holdFn(p.target.pid, func() error {
		if _, err := s.procs.check(p); err != nil {
			return err
		}
		if err := s.confined(p.target.pid, ps, query); err != nil {
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
		if st, serr := readStatus(s.procs.root, p.target.pid); serr == nil && st.tracer > 0 {
			return fmt.Errorf("%w: it is traced by process %d (a debugger, strace -f); trace the command inside the query instead", err, st.tracer)
		}
		return fmt.Errorf("%w: the daemon needs CAP_SYS_PTRACE, which kernel.yama.ptrace_scope 3 or a security module may deny", err)
	}
	return err
}

// confined refuses to move process pid out of a CPU or memory limit: one
// on a cgroup holding the process that the query cgroup would not be
// below, unless Config.MayLeave allows that cgroup. Moving such a process
// would free it from what an administrator set for it (a user's session
// capped at 10% would run uncapped in the default pool), or from the caps
// of the query it runs in, and root's write to cgroup.procs is not
// refused by the kernel.
func (s *Server) confined(pid int, ps planner.PoolState, query string) error {
	limits, err := s.cg.LimitsLeft(ps, query, pid)
	if err != nil {
		return err
	}
	for _, l := range limits {
		if mayLeave(s.cfg.MayLeave, l.Cgroup) {
			continue
		}
		what := fmt.Sprintf("%.3g vCPU", l.CPUs)
		if l.MemoryBytes > 0 {
			what = fmt.Sprintf("%d bytes", l.MemoryBytes)
		}
		return fmt.Errorf("%w: process %d is in cgroup %s, limited by its %s %s (%s), "+
			"which a query in pool %s would leave, so it stays where it is; "+
			"an administrator may allow queries to leave that cgroup's limits: poolagent daemon --may-leave %s",
			ErrConfined, pid, l.Cgroup, l.File, l.Value, what, ps.Name, l.Cgroup)
	}
	return nil
}

// mayLeave reports whether cgroup is one of allowed or below one.
func mayLeave(allowed []string, cgroup string) bool {
	for _, a := range allowed {
		if a == "/" || cgroup == a || strings.HasPrefix(cgroup, a+"/") {
			return true
		}
	}
	return false
}

// hold runs fn while process pid cannot be reaped, so that its pid keeps
// naming it. It attaches to the process with ptrace(PTRACE_SEIZE), which
// neither stops nor signals it; while a process is traced, its parent
// cannot reap it even once it has exited (a zombie tracee is visible to
// its tracer only, and passes to its parent when the tracer lets go), so
// no other process can get its pid. Then it lets go (release). The tracer
// is a thread, so hold runs on a thread locked to it. It needs
// CAP_SYS_PTRACE (the unit grants it); a process that is already traced
// (a debugger, strace -f) cannot be held. Either failure wraps
// ErrCannotHold.
//
// A process that does not stop within releaseWait (it sleeps where no
// stop reaches it, as a vfork parent does) is let go as soon as it stops
// or exits, by the same thread, after fn's result has gone back: the
// thread is never left as a tracer with nobody waiting on its tracee. (A
// locked goroutine's end does not do it: the main thread is not ended
// with its goroutine.)
func hold(pid int, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := unix.PtraceSeize(pid); err != nil {
			done <- fmt.Errorf("%w %d: ptrace(PTRACE_SEIZE): %w", ErrCannotHold, pid, err)
			return
		}
		err := fn()
		rerr := release(pid, time.Millisecond)
		done <- err
		for errors.Is(rerr, errNoStop) {
			rerr = release(pid, lateReleasePause)
		}
	}()
	return <-done
}

// releaseWait bounds how long one release waits for the held process to
// stop; lateReleasePause is the longest pause between its looks once a
// first release found the process not stopping.
const (
	releaseWait      = time.Second
	lateReleasePause = 100 * time.Millisecond
)

// errNoStop: the held process did not stop within releaseWait.
var errNoStop = errors.New("the held process did not stop")

// release lets go of process pid, which this thread holds: it asks the
// process to stop (PTRACE_INTERRUPT), waits for the stop, looking again
// after pauses that double up to maxPause, and detaches, passing on a
// signal that stopped it; a process that exited meanwhile is handed to
// its parent by the wait. It returns errNoStop when the process did not
// stop within releaseWait, and the kernel's error when pid is not a
// tracee of this thread.
func release(pid int, maxPause time.Duration) error {
	// A tracee that has exited cannot be interrupted (ESRCH): the wait
	// below finds it and hands it on.
	if err := unix.PtraceInterrupt(pid); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	pause := 10 * time.Microsecond
	for deadline := time.Now().Add(releaseWait); ; {
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, unix.WALL|unix.WNOHANG, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return err
		case got == pid && (ws.Exited() || ws.Signaled()):
			return nil
		case got == pid && ws.Stopped():
			// A signal-delivery stop (no event in the status's high
			// bits) passes its signal on; the interrupt's stop or a
			// group stop (PTRACE_EVENT_STOP) passes nothing, and a
			// group stop goes on after the detach.
			sig := uintptr(0)
			if uint32(ws)>>16 == 0 {
				sig = uintptr(ws.StopSignal())
			}
			if _, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(pid), 0, sig, 0, 0); errno != 0 {
				return errno
			}
			return nil
		}
		if time.Now().After(deadline) {
			return errNoStop
		}
		// On this thread, not through the runtime's timers: a stop
		// takes tens of microseconds, and a timer's sleep can take a
		// millisecond however short it is asked to be, all of it on
		// the client's wait for its answer.
		ts := unix.NsecToTimespec(pause.Nanoseconds())
		unix.Nanosleep(&ts, nil)
		pause = min(2*pause, maxPause)
	}
}

// alive reports whether p still exists (a zombie counts).
func alive(p process) error {
	if err := unix.PidfdSendSignal(p.fd, 0, nil, 0); err != nil {
		return fmt.Errorf("process %d is gone: %w", p.pid, err)
	}
	return nil
}
