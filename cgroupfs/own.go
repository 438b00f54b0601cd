package cgroupfs

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/observe"
)

// ErrOwned is wrapped when another process owns the pool root ([Tree.Own]).
var ErrOwned = errors.New("the pool root is owned by another process")

// Own marks the pool root as this process's until release is called or the
// process ends (the kernel then drops the mark): an exclusive flock(2) on
// the root's directory in the cpu controller's hierarchy, made first when
// missing. A daemon owns its root while it runs, and `poolagent apply`
// while it writes, so neither writes a tree another one keeps: a second
// Own of the same root fails with ErrOwned naming the owner's pid, command
// and start time (from /proc/locks and /proc/PID).
func (t *Tree) Own() (release func() error, err error) {
	h := t.order[0]
	root := t.roots[h]
	var n int
	if err := t.do(Op{Kind: OpMkdir, Hier: h, Dir: root, Path: "."}, &n); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("own pool root %s: %w", root, err)
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("own pool root: %w", &os.PathError{Op: "open", Path: root, Err: err})
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is owned by %s; stop it, or use another pool root", ErrOwned, root, observe.FlockOwner(fd))
		}
		return nil, fmt.Errorf("own pool root %s: flock: %w", root, err)
	}
	return func() error { return unix.Close(fd) }, nil
}
