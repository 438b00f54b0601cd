// Package tell writes a short message to a user's file (an in-place
// client's standard error) without a thread of the daemon ever reading,
// writing, polling or closing it.
//
// A write to a descriptor can sleep in the kernel for as long as whatever
// is behind it wants: a file on a FUSE filesystem whose server never
// answers, a hard-mounted NFS file, a full pipe, a stopped terminal. So
// can a close, which calls the filesystem's flush (FUSE's is a request
// the closer waits for uninterruptibly). A daemon thread caught there
// stays caught, and a daemon whose thread is caught cannot finish dying:
// after kill -9 it stays in the kernel keeping every descriptor, the
// listening socket among them. So the daemon never holds the user's file:
// [Open] takes a path handle of the process's standard error (O_PATH,
// which has no read, write, flush or release), and the write goes to a
// teller: this very executable started again as the user (uid and gid of
// the client), with that handle and nothing else of the daemon's, which
// opens the file anew as the user, writes once and exits. The daemon does
// not wait for it: the teller's pidfd is watched by the Go runtime's
// poller, which costs no thread, and it is reaped once it has exited. A
// teller caught in a write holds its own user's file and nothing of the
// daemon's.
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
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/peer"
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

// targetFD is the teller's descriptor of the path handle [Open] took.
const targetFD = 3

// init is the teller's whole life: open the file the handle names, as
// the user (a pipe is written through the descriptor it came as), write
// the message once and exit, before the program does anything else.
// The open does not wait for a reader of a FIFO (there is none once the
// command has gone); the write then may wait.
func init() {
	msg, ok := syscall.Getenv(envMessage)
	if !ok || len(os.Args) == 0 || os.Args[0] != argv0 {
		return
	}
	// A pipe comes open for writing (Open): written as it is, whoever
	// made it. Any other file comes as a path handle, opened here anew.
	fd := targetFD
	if fl, err := unix.FcntlInt(targetFD, unix.F_GETFL, 0); err != nil || fl&unix.O_PATH != 0 || fl&unix.O_ACCMODE != unix.O_WRONLY {
		if fd, err = unix.Open("/proc/self/fd/"+strconv.Itoa(targetFD), unix.O_WRONLY|unix.O_APPEND|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err != nil {
			syscall.Exit(2)
		}
	}
	unix.SetNonblock(fd, false)
	if _, err := unix.Write(fd, []byte(msg)); err != nil {
		syscall.Exit(1)
	}
	syscall.Exit(0)
}

// Open returns a handle of process p's standard error, for
// [Tellers.Tell]. As a rule it is a path handle (O_PATH): it names the
// file and lets no one read, write or flush it through it, so closing it
// never waits on the file's filesystem. A pipe is held open for writing
// instead: a pipe's close waits on nothing, and the reader at its other
// end (`poolagent-run … 2>&1 | tee`) must not see the end of the pipe
// when the command exits, before the teller has written the query's end
// there. The process is checked alive after the open, so the handle is of
// its own standard error, not of a process that took its pid. procRoot
// is the proc filesystem p's pid is in.
func Open(procRoot string, p peer.Process) (int, error) {
	path := procRoot + "/" + strconv.Itoa(p.PID) + "/fd/2"
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", path, err)
	}
	if err := p.Alive(); err != nil {
		unix.Close(fd)
		return -1, err
	}
	// The link of the handle itself names what it holds without asking
	// the file's filesystem ("pipe:[INODE]" for a pipe).
	self := "/proc/self/fd/" + strconv.Itoa(fd)
	if target, err := os.Readlink(self); err == nil && strings.HasPrefix(target, "pipe:[") {
		if w, err := unix.Open(self, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
			unix.Close(fd)
			return w, nil
		}
	}
	return fd, nil
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

// Tell writes msg to the file of handle (from [Open]) from a teller
// running as uid and gid (no supplementary groups), in a session of its
// own, which opens it anew with the user's rights and appends to it: a
// file the user may not open (a socket, as systemd's journal gives a
// service, or a file of another user opened for it) is not told. handle
// stays the caller's to close. Tell returns once the teller has started
// (the kernel has executed it), never waiting for the write; ErrBusy when
// uid has PerUID tellers running.
func (t *Tellers) Tell(handle int, uid, gid uint32, msg string) error {
	if len(msg) > MaxMessageBytes {
		return fmt.Errorf("message of %d bytes, over %d", len(msg), MaxMessageBytes)
	}
	if !t.reserve(uid) {
		return ErrBusy
	}
	pfd := -1
	closed := ^uintptr(0) // -1: the teller's 0, 1 and 2 are closed (its runtime opens /dev/null there)
	_, err := syscall.ForkExec(t.exe, []string{argv0}, &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{envMessage + "=" + msg},
		Files: []uintptr{closed, closed, closed, uintptr(handle)}, // targetFD
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
