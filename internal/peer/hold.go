package peer

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// ErrCannotHold: the daemon could not hold the process still while it
// moved it (see Checker.Hold), so it did not move it.
var ErrCannotHold = errors.New("cannot hold the process while moving it")

// Checker reads what the kernel says about a process, from the proc
// filesystem at its root, and holds processes while they are moved.
type Checker struct {
	root string
}

// NewChecker checks that root is a proc filesystem, one where the daemon
// reads its own status.
func NewChecker(root string) (Checker, error) {
	if _, err := readStatus(root, os.Getpid()); err != nil {
		return Checker{}, fmt.Errorf("proc filesystem %s: %w", root, err)
	}
	return Checker{root: root}, nil
}

// Relation is which process a client may have placed.
type Relation int

const (
	// ChildOfPeer: a direct child of the client (the gate of `poolagent
	// run`, named by its start request).
	ChildOfPeer Relation = iota
	// PeerItself: the client process itself.
	PeerItself
)

// Placement is a move a client asked for: Target into its query cgroup.
type Placement struct {
	// Peer is the connected client, UID its uid (SO_PEERCRED).
	Peer Process
	UID  uint32
	// Target is the process to move, Rel how it must stand to Peer.
	Target Process
	Rel    Relation
}

// check verifies, through the target's pidfd or /proc (statusOf), that
// p.Target is a process (not a thread of another one) standing to the
// peer as p.Rel asks, and that its real and effective uid are the
// client's; then, through the pidfds, that both still exist, so the facts
// read were about them: a pid is not reused while its process exists,
// even as a zombie. It returns what it read.
func (c Checker) check(p Placement) (procStatus, error) {
	pid := p.Target.PID
	st, err := statusOf(c.root, p.Target)
	if err != nil {
		return st, fmt.Errorf("%w: %w", ErrNotYourChild, err)
	}
	switch {
	case st.tgid != pid:
		return st, fmt.Errorf("%w: %d is a thread of process %d", ErrNotYourChild, pid, st.tgid)
	case p.Rel == ChildOfPeer && st.ppid != p.Peer.PID:
		return st, fmt.Errorf("%w: process %d has parent %d, the client is %d", ErrNotYourChild, pid, st.ppid, p.Peer.PID)
	case p.Rel == PeerItself && pid != p.Peer.PID:
		return st, fmt.Errorf("%w: process %d is not the client %d", ErrNotYourChild, pid, p.Peer.PID)
	case st.ruid != p.UID || st.euid != p.UID:
		return st, fmt.Errorf("%w: process %d runs as uid %d (effective %d), the client as %d",
			ErrNotYourChild, pid, st.ruid, st.euid, p.UID)
	}
	if err := p.Target.Alive(); err != nil {
		return st, err
	}
	return st, p.Peer.Alive()
}

// Hold runs move with p.Target's pid after checking that it is the
// process p allows, holding the process so that the pid names it
// throughout.
//
// A write to cgroup.procs names a pid, and a pid names whatever process
// holds it at the moment of the write: if the client's process exited and
// was reaped after the checks, another user's new process could get its
// pid and be moved instead. So the checks and move happen while the
// daemon holds the process (hold): until it lets go, the process cannot be
// reaped, so its pid cannot pass to another process. Before the hold the
// checks run once (so the daemon never holds a process it would refuse);
// under the hold they run again, with the pidfd showing that the process
// held is the one named, and only then does move run.
func (c Checker) Hold(p Placement, move func(pid int) error) error {
	if p.Target.PID <= 0 {
		return fmt.Errorf("%w: pid %d", ErrNotYourChild, p.Target.PID)
	}
	st, err := c.check(p)
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
	err = holdFn(p.Target.PID, func() error {
		if _, err := c.check(p); err != nil {
			return err
		}
		if err := move(p.Target.PID); err != nil {
			return err
		}
		// Held, the process cannot have been reaped: this holds unless
		// the kernel broke the hold.
		return p.Target.Alive()
	})
	if errors.Is(err, ErrCannotHold) {
		if st, serr := readStatus(c.root, p.Target.PID); serr == nil && st.tracer > 0 {
			return fmt.Errorf("%w: it is traced by process %d (a debugger, strace -f); trace the command inside the query instead", err, st.tracer)
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
// no other process can get its pid. Then it lets go (release). The tracer
// is a thread, so hold runs on a thread locked to it (traceFrom). It needs
// CAP_SYS_PTRACE (the unit grants it); a process that is already traced
// (a debugger, strace -f) cannot be held. Either failure wraps
// ErrCannotHold.
func hold(pid int, fn func() error) error {
	done := make(chan error, 1)
	go traceFrom(pid, fn, done)
	return <-done
}

// traceFrom is hold on the thread of its goroutine: it sends fn's result
// on done once it let go of the process.
//
// A process that does not stop within releaseWait (it sleeps where no
// stop reaches it, as a vfork parent does until its child execs or exits)
// is let go by ending the thread: the kernel detaches a tracer's tracees
// when the tracer exits (and drops the interrupt that was asked), and the
// runtime ends a thread whose goroutine ends locked to it. So no thread
// waits for a stop that may never come, and a burst of such processes
// leaves no threads behind.
func traceFrom(pid int, fn func() error, done chan<- error) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// NOTE: the main thread is not ended with a goroutine locked to
		// it (the runtime parks it), so it would stay the tracer. Trace
		// from another thread: while this goroutine waits locked to the
		// main thread, no other goroutine runs on it.
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			traceFrom(pid, fn, done)
		}()
		<-ended
		runtime.UnlockOSThread()
		return
	}
	if err := unix.PtraceSeize(pid); err != nil {
		runtime.UnlockOSThread()
		done <- fmt.Errorf("%w %d: ptrace(PTRACE_SEIZE): %w", ErrCannotHold, pid, err)
		return
	}
	err := fn()
	rerr := release(pid)
	done <- err
	if rerr != nil {
		// Still the tracer, or unsure of it: the thread ends locked.
		return
	}
	runtime.UnlockOSThread()
}

// releaseWait bounds how long release waits for the held process to
// stop; releasePause is the longest pause between its looks.
const (
	releaseWait  = time.Second
	releasePause = 10 * time.Millisecond
)

// errNoStop: the held process did not stop within releaseWait.
var errNoStop = errors.New("the held process did not stop")

// release lets go of process pid, which this thread holds: it asks the
// process to stop (PTRACE_INTERRUPT), waits for the stop, looking again
// after pauses that double up to releasePause, and detaches, passing on a
// signal that stopped it; a process that exited meanwhile is handed to
// its parent by the wait. It returns errNoStop when the process did not
// stop within releaseWait, and the kernel's error when pid is not a
// tracee of this thread.
func release(pid int) error {
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
		pause = min(2*pause, releasePause)
	}
}
