package peer

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ErrMayNotSignal: a process of a query runs as a user that the client
// could not signal itself.
var ErrMayNotSignal = errors.New("may not signal the process")

// Signal sends sig to process pid on behalf of a client of uid, as kill(2)
// would let that client send it: uid 0, or the process's real or saved
// uid is uid. A process that has gone in the meantime is not an error.
// The signal goes through a pidfd opened before the process's uids are
// read, so it reaches the process that was checked or none.
func (c Checker) Signal(pid int, uid uint32, sig unix.Signal) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("process %d: pidfd_open: %w", pid, err)
	}
	p := Process{FD: fd, PID: pid}
	defer p.Close()
	st, err := statusOf(c.root, p)
	if err != nil {
		if p.Alive() != nil {
			return nil
		}
		return err
	}
	if uid != 0 && st.ruid != uid && st.suid != uid {
		return fmt.Errorf("%w %d: it runs as uid %d (saved %d), the client as %d", ErrMayNotSignal, pid, st.ruid, st.suid, uid)
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("process %d: send %v: %w", pid, sig, err)
	}
	return nil
}
