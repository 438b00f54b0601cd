package pooltree

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// emptyWatcher watches the cgroup.events files of query cgroups on cgroup
// v2, where the kernel raises a file-modified event when the "populated"
// line changes (Documentation/admin-guide/cgroup-v2.rst, cgroup.events).
// A notice only says "look": the kernel delays one that comes within 10 ms
// of the file's last (CGROUP_FILE_NOTIFY_MIN_INTV), so a notice of the
// cgroup filling may arrive after the watch began. One inotify instance
// serves every query: one per query would soon run into
// fs.inotify.max_user_instances (128 by default).
type emptyWatcher struct {
	root string   // the pool root on the unified hierarchy
	f    *os.File // the inotify instance, read by run
	fd   int

	mu   sync.Mutex
	wake map[int32]chan<- struct{} // by watch descriptor
}

// newEmptyWatcher starts watching below the pool root; close ends it.
func newEmptyWatcher(root string) (*emptyWatcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	w := &emptyWatcher{root: root, f: os.NewFile(uintptr(fd), "inotify"), fd: fd, wake: map[int32]chan<- struct{}{}}
	go w.run()
	return w, nil
}

// watch is [Handle.NotifyEmpty] for the query cgroup <pool>/<query>.
func (w *emptyWatcher) watch(pool, query string, wake chan<- struct{}) (func(), error) {
	file := filepath.Join(w.root, pool, query, "cgroup.events")
	w.mu.Lock()
	defer w.mu.Unlock()
	wd, err := unix.InotifyAddWatch(w.fd, file, unix.IN_MODIFY)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", file, err)
	}
	w.wake[int32(wd)] = wake
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.wake[int32(wd)] == wake {
			delete(w.wake, int32(wd))
			// The cgroup may be gone already, which removed the watch.
			unix.InotifyRmWatch(w.fd, uint32(wd))
		}
	}, nil
}

// run hands each event to its waiter until the instance is closed.
func (w *emptyWatcher) run() {
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				w.wakeAll() // no more events: let every waiter look
			}
			return
		}
		w.dispatch(buf[:n])
	}
}

// dispatch hands the inotify events in buf, as read(2) returned them
// (struct inotify_event, each followed by Len bytes of name), to their
// waiters. When the kernel's event queue overflowed
// (fs.inotify.max_queued_events), it dropped events and says so with one
// IN_Q_OVERFLOW event on no watch (wd -1): any waiter may have missed its
// notice, so every waiter is woken to look.
func (w *emptyWatcher) dispatch(buf []byte) {
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		off += unix.SizeofInotifyEvent + int(ev.Len)
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
			w.wakeAll()
			continue
		}
		w.mu.Lock()
		if wake, ok := w.wake[ev.Wd]; ok {
			select {
			case wake <- struct{}{}:
			default:
			}
			if ev.Mask&unix.IN_IGNORED != 0 { // the cgroup was removed
				delete(w.wake, ev.Wd)
			}
		}
		w.mu.Unlock()
	}
}

// wakeAll wakes every waiter once.
func (w *emptyWatcher) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, wake := range w.wake {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// close ends the watcher; waiters fall back to polling.
func (w *emptyWatcher) close() error {
	return w.f.Close()
}
