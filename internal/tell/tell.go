// Package tell writes a short message to a descriptor a user handed the
// daemon (an in-place client's standard error) without a thread of the
// daemon ever reading, writing or polling it.
//
// A write to a descriptor can sleep in the kernel for as long as whatever
// is behind it wants: a file on a FUSE filesystem whose server never
// answers, a hard-mounted NFS file, a full pipe, a stopped terminal. A
// daemon thread caught there stays caught (FUSE's wait is uninterruptible
// once the request is read), and a daemon whose thread is caught cannot
// finish dying: after kill -9 it stays a zombie that keeps every
// descriptor, the listening socket among them. So the daemon hands the
// write to a teller: this very executable started again as the user
// (uid and gid of the client), with the descriptor as its standard error
// and nothing else, that writes once and exits. The daemon does not wait
// for it: the teller's pidfd is watched by the Go runtime's poller, which
// costs no thread, and it is reaped once it has exited. A teller caught
// in a write holds its own user's file and nothing of the daemon's.
//
// Tellers are bounded per uid ([PerUID] running at once): a user whose
// tellers are all caught gets no more until one exits, and the daemon's
// log has every message that was not told.
package tell

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/pidfd"
)

// PerUID is how many tellers of one uid may run at once.
const PerUID = 4

// MaxMessageBytes bounds a message (its environment variable in the
// teller).
const MaxMessageBytes = 4096

// argv0 is a teller's argv[0], and envMessage the variable its message
// comes in: both must be set for init to act.
const (
	argv0      = "poolagent-tell"
	envMessage = "POOLAGENT_TELL_MESSAGE"
)

// ErrBusy is returned by [Tellers.Tell] when the uid has PerUID tellers
// running already.
var ErrBusy = errors.New("the user's tellers are all still running")

// init is the teller's whole life: write the message to standard error
// once and exit, before the program does anything else.
func init() {
	msg, ok := syscall.Getenv(envMessage)
	if !ok || len(os.Args) == 0 || os.Args[0] != argv0 {
		return
	}
	if _, err := syscall.Write(2, []byte(msg)); err != nil {
		syscall.Exit(1)
	}
	syscall.Exit(0)
}

// Tellers starts tellers and counts them per uid. The zero value is not
// usable: make one with [New].
type Tellers struct {
	exe string

	mu      sync.Mutex
	running map[uint32]int
}

// New returns Tellers that start the running executable
// (/proc/self/exe, which stays the same program even if its file is
// replaced or removed by an upgrade).
func New() *Tellers {
	return &Tellers{exe: "/proc/self/exe", running: map[uint32]int{}}
}

// Tell writes msg to fd from a teller running as uid and gid (no
// supplementary groups), in a session of its own; fd stays the caller's
// to close. It returns once the teller has started (the kernel has
// executed it), never waiting for the write; ErrBusy when uid has PerUID
// tellers running.
func (t *Tellers) Tell(fd int, uid, gid uint32, msg string) error {
	if len(msg) > MaxMessageBytes {
		return fmt.Errorf("message of %d bytes, over %d", len(msg), MaxMessageBytes)
	}
	if !t.reserve(uid) {
		return ErrBusy
	}
	pfd := -1
	closed := ^uintptr(0) // -1: the teller's stdin and stdout are closed (its runtime opens /dev/null there)
	_, err := syscall.ForkExec(t.exe, []string{argv0}, &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{envMessage + "=" + msg},
		Files: []uintptr{closed, closed, uintptr(fd)},
		Sys: &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}},
			Setsid:     true,
			PidFD:      &pfd,
		},
	})
	if err != nil {
		t.release(uid)
		return fmt.Errorf("start a teller as uid %d: %w", uid, err)
	}
	// Nonblocking, the pidfd is watched by the runtime's poller, which
	// costs no thread however long the teller runs.
	unix.SetNonblock(pfd, true)
	exited := os.NewFile(uintptr(pfd), "teller pidfd")
	go func() {
		defer t.release(uid)
		defer exited.Close()
		pidfd.Await(context.Background(), exited)
		rc, err := exited.SyscallConn()
		if err != nil {
			return
		}
		rc.Control(func(fd uintptr) {
			var info unix.Siginfo
			unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG, nil)
		})
	}()
	return nil
}

// Running returns how many tellers of uid are running.
func (t *Tellers) Running(uid uint32) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running[uid]
}

func (t *Tellers) reserve(uid uint32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running[uid] >= PerUID {
		return false
	}
	t.running[uid]++
	return true
}

func (t *Tellers) release(uid uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running[uid]--; t.running[uid] <= 0 {
		delete(t.running, uid)
	}
}
