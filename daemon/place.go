package daemon

import (
	"errors"
	"fmt"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/planner"
)

// ErrNotYourChild: the process a client named for its query is not a
// direct child of the client running as the client's user.
var ErrNotYourChild = errors.New("not the client's own child")

// procChecker reads what the kernel says about a process.
type procChecker struct {
	fs procfs.FS
}

func newProcChecker(root string) (procChecker, error) {
	fs, err := procfs.NewFS(root)
	if err != nil {
		return procChecker{}, fmt.Errorf("open proc filesystem %s: %w", root, err)
	}
	return procChecker{fs: fs}, nil
}

// check verifies that pid is a process (not a thread of another one) whose
// parent is peerPID and whose real and effective uid are uid.
func (p procChecker) check(pid int, peerPID int32, uid uint32) error {
	proc, err := p.fs.Proc(pid)
	if err != nil {
		return fmt.Errorf("process %d: %w", pid, err)
	}
	st, err := proc.Stat()
	if err != nil {
		return fmt.Errorf("process %d: %w", pid, err)
	}
	status, err := proc.NewStatus()
	if err != nil {
		return fmt.Errorf("process %d: %w", pid, err)
	}
	switch {
	case status.TGID != pid:
		return fmt.Errorf("%w: %d is a thread of process %d", ErrNotYourChild, pid, status.TGID)
	case st.PPID != int(peerPID):
		return fmt.Errorf("%w: process %d has parent %d, the client is %d", ErrNotYourChild, pid, st.PPID, peerPID)
	case status.UIDs[0] != uint64(uid) || status.UIDs[1] != uint64(uid):
		return fmt.Errorf("%w: process %d runs as uid %d (effective %d), the client as %d",
			ErrNotYourChild, pid, status.UIDs[0], status.UIDs[1], uid)
	}
	return nil
}

// place creates the query cgroup and moves the client's child pid into
// it, after checking that it is the client's own direct child.
//
// The race: a pid names whatever process holds it at the moment of the
// write to cgroup.procs. The daemon first opens a pidfd, then checks the
// process through /proc, then checks the pidfd's process is still there:
// a pid cannot be reused while its process exists, even as a zombie, so
// the /proc facts were about the pidfd's process. After the write it
// checks the pidfd again: if the process is still there, the pid written
// was its pid. The child's parent is the client, which must not reap it
// before the daemon answers; only a client that reaps its own child
// during the move, and a pid recycled in that instant, could make the
// write hit another process. The daemon then reports the client's error,
// and the slot stays held until the query cgroup is empty.
func (s *Server) place(peerPID int32, uid uint32, pid int, ps planner.PoolState, query string) error {
	if pid <= 0 {
		return fmt.Errorf("%w: pid %d", ErrNotYourChild, pid)
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("%w: process %d: pidfd_open: %w", ErrNotYourChild, pid, err)
	}
	defer unix.Close(pidfd)
	if err := s.procs.check(pid, peerPID, uid); err != nil {
		return err
	}
	if err := alive(pidfd, pid); err != nil {
		return err
	}
	if err := s.cg.PlaceQuery(ps, query, pid); err != nil {
		return err
	}
	return alive(pidfd, pid)
}

// alive reports whether pidfd's process still exists (a zombie counts).
func alive(pidfd, pid int) error {
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		return fmt.Errorf("process %d is gone: %w", pid, err)
	}
	return nil
}
