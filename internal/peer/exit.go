package peer

import (
	"context"
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// WatchExit returns a copy of pidfd that [AwaitExit] waits on; the caller
// closes it.
func WatchExit(pidfd int) (*os.File, error) {
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

// AwaitExit returns once the process of the nonblocking pidfd f (as
// [WatchExit] returns it) has exited, or with an error when ctx is done
// first. Waiting costs no thread: the runtime's poller watches the pidfd,
// which polls readable once its process has exited.
func AwaitExit(ctx context.Context, f *os.File) error {
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
