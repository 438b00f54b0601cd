// Package pidfd waits for a process to exit without a thread: the Go
// runtime's poller watches the process's pidfd, which polls readable once
// the process has exited. The daemon waits so for an in-place command
// (its client's pidfd) and for the members of a query cgroup on cgroup
// v1, which raises no event when a cgroup empties.
package pidfd

import (
	"context"
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Watch returns a copy of pidfd that [Await] waits on; the caller closes
// it.
func Watch(pidfd int) (*os.File, error) {
	dup, err := unix.FcntlInt(uintptr(pidfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(dup, true); err != nil {
		unix.Close(dup)
		return nil, err
	}
	return os.NewFile(uintptr(dup), "pidfd"), nil
}

// Open returns a pidfd of process pid that [Await] waits on; the caller
// closes it. An error wrapping unix.ESRCH means no such process.
func Open(pid int) (*os.File, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "pidfd"), nil
}

// Await returns once the process of the nonblocking pidfd f (as [Watch]
// or [Open] return it) has exited, or with an error when ctx is done
// first.
func Await(ctx context.Context, f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Now()) })
	defer stop()
	exited := func(fd uintptr) bool {
		n, _ := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
		return n > 0
	}
	if err := rc.Read(exited); err != nil {
		return errors.Join(err, ctx.Err())
	}
	return nil
}
