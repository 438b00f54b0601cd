package pooltree

import (
	"context"
	"errors"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/pidfd"
)

// exitWatcher is [Handle.NotifyEmpty] on cgroup v1, whose cgroups raise
// no event when they empty (the release agent is the whole host's, not
// the daemon's to set). A query cgroup cannot empty while a process in it
// lives, so each watch waits on the pidfd of one of its processes, in the
// runtime's poller (a goroutine, no thread, no timer); when that process
// exits it says "look" and waits on the next. A PID reused between the
// read and the pidfd is caught by reading the list again once the pidfd
// is open; a process moved out by an administrator is caught by the
// caller's own slow look ([Query.Wait]'s maxPollNotified).
type exitWatcher struct {
	// procs lists one process of a query cgroup (the Handle's Procs);
	// populated is the Handle's Populated. Fields, so a test can count
	// the looks.
	procs     func(group string) ([]int, error)
	populated func(pool, query string) (bool, error)
}

// Backoff of a watch whose cgroup lists no process while it still holds
// threads on their way out: the kernel counts a thread until it has left.
const (
	exitingFirst = time.Millisecond
	exitingMost  = 100 * time.Millisecond
)

func newExitWatcher(h *Handle) *exitWatcher {
	return &exitWatcher{
		procs: func(group string) ([]int, error) {
			pids, _, err := h.Procs(group, 1)
			return pids, err
		},
		populated: h.Populated,
	}
}

// watch is [Handle.NotifyEmpty] for the query cgroup <pool>/<query>.
func (w *exitWatcher) watch(pool, query string, wake chan<- struct{}) (func(), error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(ctx, pool, query, wake)
	}()
	return func() { cancel(); <-done }, nil
}

// run waits on the query's processes one after another until the cgroup
// is empty (or cannot be read), saying "look" on wake after each exit and
// once at the end, or until ctx ends.
func (w *exitWatcher) run(ctx context.Context, pool, query string, wake chan<- struct{}) {
	look := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	backoff := exitingFirst
	for ctx.Err() == nil {
		pids, err := w.procs(pool + "/" + query)
		if err != nil {
			look()
			return
		}
		if len(pids) == 0 {
			if busy, err := w.populated(pool, query); err != nil || !busy {
				look()
				return
			}
			// Threads on their way out: look again shortly.
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, exitingMost)
			continue
		}
		f, err := pidfd.Open(pids[0])
		if errors.Is(err, unix.ESRCH) {
			continue // gone since the read: read again
		}
		if err != nil {
			look()
			return
		}
		// The process the pidfd holds has the PID now; if the cgroup
		// still lists that PID first, it is that process, in the
		// cgroup. Else the one read may have exited and its PID been
		// taken by another process, elsewhere: read again.
		if again, err := w.procs(pool + "/" + query); err != nil || len(again) == 0 || again[0] != pids[0] {
			f.Close()
			continue
		}
		err = pidfd.Await(ctx, f)
		f.Close()
		if err != nil {
			return
		}
		backoff = exitingFirst
		look()
	}
}
