// Package peer says which process is at the other end of the daemon's
// socket, and holds a process still while it is moved: the kernel's peer
// credentials (SO_PEERCRED) and pidfd (SO_PEERPIDFD), a pidfd a client
// sends for its child, what /proc/PID/status or PIDFD_GET_INFO says of a
// process, the names and groups of a uid, and the ptrace hold that keeps a
// pid naming its process while the daemon writes it to cgroup.procs.
package peer

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrNotYourChild: the process a client named for its query is not a
// direct child of the client running as the client's user.
var ErrNotYourChild = errors.New("not the client's own child")

// Process is a stable reference to one process: a pidfd, which names the
// process itself and never another that later gets its pid, and the pid
// it has in the daemon's pid namespace.
type Process struct {
	FD  int
	PID int
}

// Close closes p's pidfd.
func (p Process) Close() error { return unix.Close(p.FD) }

// Alive reports whether p still exists (a zombie counts).
func (p Process) Alive() error {
	if err := unix.PidfdSendSignal(p.FD, 0, nil, 0); err != nil {
		return fmt.Errorf("process %d is gone: %w", p.PID, err)
	}
	return nil
}

// Cred returns the credentials the kernel recorded for the process that
// connected to conn (SO_PEERCRED: its pid and effective uid and gid at
// connect time).
func Cred(conn *net.UnixConn) (*unix.Ucred, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return nil, fmt.Errorf("peer credentials: getsockopt SO_PEERCRED: %w", credErr)
	}
	return cred, nil
}

// OfConn returns the connected client as a process: the kernel's pidfd of
// the peer (SO_PEERPIDFD, Linux 6.5) or, on older kernels, a pidfd opened
// for SO_PEERCRED's pid, checked to run as the peer's uid (that pid may
// have been recycled if the peer exited at once; the uid check keeps such
// a process from standing in for another user's). The caller closes it.
func OfConn(conn *net.UnixConn, cred *unix.Ucred, procRoot string) (Process, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return Process{}, fmt.Errorf("peer process: %w", err)
	}
	fd, optErr := -1, error(nil)
	if err := raw.Control(func(s uintptr) {
		fd, optErr = unix.GetsockoptInt(int(s), unix.SOL_SOCKET, unix.SO_PEERPIDFD)
	}); err != nil {
		return Process{}, fmt.Errorf("peer process: %w", err)
	}
	if optErr == nil {
		unix.CloseOnExec(fd)
		return Process{FD: fd, PID: int(cred.Pid)}, nil
	}
	if !errors.Is(optErr, unix.ENOPROTOOPT) {
		return Process{}, fmt.Errorf("peer process: getsockopt SO_PEERPIDFD: %w", optErr)
	}
	if fd, err = unix.PidfdOpen(int(cred.Pid), 0); err != nil {
		return Process{}, fmt.Errorf("peer process %d: pidfd_open: %w", cred.Pid, err)
	}
	p := Process{FD: fd, PID: int(cred.Pid)}
	if err := checkUID(procRoot, p, cred.Uid); err != nil {
		unix.Close(fd)
		return Process{}, fmt.Errorf("peer process: %w", err)
	}
	return p, nil
}

// checkUID verifies that p's real and effective uid are uid.
func checkUID(procRoot string, p Process, uid uint32) error {
	st, err := readStatus(procRoot, p.PID)
	if err != nil {
		return err
	}
	if err := p.Alive(); err != nil {
		return err
	}
	if st.ruid != uid || st.euid != uid {
		return fmt.Errorf("process %d runs as uid %d (effective %d), the client as %d", p.PID, st.ruid, st.euid, uid)
	}
	return nil
}

// FromPidfd makes a process of a pidfd a client sent: its pid is the Pid
// line of the pidfd's /proc/self/fdinfo entry, which the kernel gives in
// the daemon's pid namespace, so a client in a pid namespace of its own
// names its process as well as any other. A descriptor that is not a
// pidfd, or whose process is gone, is refused (ErrNotYourChild).
func FromPidfd(procRoot string, fd int) (Process, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "self/fdinfo", strconv.Itoa(fd)))
	if err != nil {
		return Process{}, fmt.Errorf("descriptor sent with start: %w", err)
	}
	pid, err := parsePidfdInfo(b)
	if err != nil {
		return Process{}, fmt.Errorf("%w: the descriptor sent with start: %w", ErrNotYourChild, err)
	}
	return Process{FD: fd, PID: pid}, nil
}

// parsePidfdInfo returns the pid in a pidfd's fdinfo, whose lines are
// "key:\tvalue" and include
//
//	Pid:	4242
//
// (the pid in the reader's pid namespace; 0 or -1 once the process is
// gone). Other descriptors have no Pid line.
func parsePidfdInfo(b []byte) (int, error) {
	for line := range strings.Lines(string(b)) {
		v, ok := strings.CutPrefix(line, "Pid:")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return 0, fmt.Errorf("fdinfo Pid %q: want a number", strings.TrimSpace(v))
		}
		if pid <= 0 {
			return 0, errors.New("its process has exited")
		}
		return pid, nil
	}
	return 0, errors.New("it is not a pidfd (its fdinfo has no Pid line)")
}

// ErrOwnPIDNamespace: a client in a pid namespace of its own named a
// process by pid, a number of its namespace, not of the daemon's.
var ErrOwnPIDNamespace = errors.New("the client runs in a pid namespace of its own")

// FromPID opens a pidfd for process pid, which client named by its pid
// alone. A client in another pid namespace than the daemon's is refused
// (ErrOwnPIDNamespace wrapping ErrNotYourChild): its numbers name other
// processes here. The caller closes the process.
func FromPID(procRoot string, client Process, pid int) (Process, error) {
	if pid <= 0 {
		return Process{}, fmt.Errorf("%w: pid %d", ErrNotYourChild, pid)
	}
	if ownPIDNamespace(procRoot, client.PID) {
		return Process{}, fmt.Errorf("%w: %w (process %d here), where pid %d names another process than here",
			ErrNotYourChild, ErrOwnPIDNamespace, client.PID, pid)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return Process{}, fmt.Errorf("%w: process %d: pidfd_open: %w", ErrNotYourChild, pid, err)
	}
	return Process{FD: fd, PID: pid}, nil
}

// ownPIDNamespace reports whether process pid is in another pid namespace
// than the daemon; false when that cannot be read.
func ownPIDNamespace(procRoot string, pid int) bool {
	theirs, err := os.Readlink(filepath.Join(procRoot, strconv.Itoa(pid), "ns", "pid"))
	if err != nil {
		return false
	}
	ours, err := os.Readlink(filepath.Join(procRoot, "self", "ns", "pid"))
	return err == nil && theirs != ours
}
