// Package reread reads small files that are read again and again, such
// as a cgroup's cpu.stat or cpuacct.usage, without opening them each
// time. A file read a second time within an idle span is kept open and
// read again with pread(2) from offset 0, which has the kernel render it
// afresh (cgroup and /proc files are seq_files). Opening is most of a
// read's cost: a path lookup under the filesystem's locks, then a close.
// A file of a cgroup removed (or of a process ended) since it was kept
// refuses the read (ENODEV, ESRCH); it is then closed and opened again,
// so the caller sees the same error as from a fresh open (ENOENT). Files
// not read for an idle span are closed, so a kept descriptor holds a
// removed cgroup for that span at most. The number kept is bounded, and
// falls to none while the process is short of descriptors: what it needs
// them for comes first.
//
// Not every file renders afresh at offset 0: cgroup v1's tasks and
// cgroup.procs answer from a list made for the open file and kept for a
// second after its last read, so they are never to be read through it.
package reread

import (
	"bytes"
	"errors"
	"io/fs"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Idle is how long a kept file stays open without being read: it is
// closed at the first read after it went a whole Idle unread.
const Idle = 10 * time.Second

// Files keeps files open for reading again. Its methods are safe for
// concurrent use.
type Files struct {
	dir  string
	open func(name string, flags int) (fd int, err error)
	max  int
	// high is the descriptor number from which the process counts as
	// short of descriptors (see shedLocked).
	high int
	now  func() time.Time

	mu    sync.Mutex
	files map[string]*file
	// once are the names read once since the last sweep: a name read
	// again before the next is kept.
	once  map[string]bool
	swept time.Time
}

// file is a kept descriptor: used says it was read since the last
// sweep, busy how many reads of it are under way (it is closed only when
// none is).
type file struct {
	fd   int
	used bool
	busy int
	dead bool
}

// New returns the reader of files opened by open with flags (read-only,
// close on exec), keeping at most max of them open. dir names where open
// looks, for errors (a read error is a *fs.PathError with dir/name).
func New(dir string, open func(name string, flags int) (fd int, err error), max int) *Files {
	return &Files{dir: dir, open: open, max: max, high: limit() / 2, now: time.Now, files: map[string]*file{}, once: map[string]bool{}}
}

// Read returns the content of name: from its kept descriptor when it has
// one, else from a fresh open, keeping the descriptor when name was read
// before within Idle and fewer than max are kept.
func (r *Files) Read(name string) ([]byte, error) {
	if b, ok := r.readKept(name); ok {
		return b, nil
	}
	const flags = unix.O_RDONLY | unix.O_CLOEXEC
	fd, err := r.open(name, flags)
	if errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) {
		r.mu.Lock()
		r.shedLocked()
		r.mu.Unlock()
		fd, err = r.open(name, flags)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: r.dir + "/" + name, Err: err}
	}
	b, err := pread(fd)
	if err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "read", Path: r.dir + "/" + name, Err: err}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if fd >= r.high {
		// The kernel hands out the lowest free descriptor: one this
		// high means the process holds at least half its limit, and
		// what it needs them for comes first.
		r.shedLocked()
	}
	switch {
	case fd < r.high && r.files[name] == nil && r.once[name] && len(r.files) < r.max:
		r.files[name] = &file{fd: fd, used: true}
		delete(r.once, name)
	default:
		unix.Close(fd)
		if len(r.once) < r.max {
			r.once[name] = true
		}
	}
	return b, nil
}

// readKept reads name through its kept descriptor; ok is false when it
// has none, or when the read failed (a removed cgroup's ENODEV, an ended
// process's ESRCH, or anything else): the descriptor is then dropped, and
// a fresh open answers as a first read would.
func (r *Files) readKept(name string) (b []byte, ok bool) {
	r.mu.Lock()
	r.sweepLocked()
	f := r.files[name]
	if f != nil {
		f.used, f.busy = true, f.busy+1
	}
	r.mu.Unlock()
	if f == nil {
		return nil, false
	}
	b, err := pread(f.fd)
	r.mu.Lock()
	defer r.mu.Unlock()
	f.busy--
	if err != nil && !f.dead && r.files[name] == f {
		r.dropLocked(name, f)
	} else if f.dead && f.busy == 0 {
		unix.Close(f.fd) // dropped while this read was under way
	}
	return b, err == nil
}

// dropLocked forgets the kept file name, f, and closes it unless a read
// of it is under way (that read closes it when done).
func (r *Files) dropLocked(name string, f *file) {
	f.dead = true
	delete(r.files, name)
	if f.busy == 0 {
		unix.Close(f.fd)
	}
}

// sweepLocked closes the kept files not read since the last sweep, at
// most once an Idle, and forgets the names read once.
func (r *Files) sweepLocked() {
	now := r.now()
	if now.Sub(r.swept) < Idle {
		return
	}
	r.swept = now
	for name, f := range r.files {
		if !f.used {
			r.dropLocked(name, f)
			continue
		}
		f.used = false
	}
	clear(r.once)
}

// shedLocked closes every kept file (for a reader under way, once it is
// done): the process is short of descriptors.
func (r *Files) shedLocked() {
	for name, f := range r.files {
		r.dropLocked(name, f)
	}
	clear(r.once)
}

// kept is how many files are kept open.
func (r *Files) kept() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.files)
}

// Close closes every kept file; a later Read opens afresh.
func (r *Files) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shedLocked()
	return nil
}

// DefaultMax is how many files one Files keeps open at most in a process
// that also serves connections and holds a descriptor per query: a
// thirty-second of its limit on open files (RLIMIT_NOFILE: 128 of 4,096,
// 2,048 at most), so that the two or three a daemon has keep a tenth of
// it at most. Besides, a Files keeps no file, and closes those it kept,
// once the process holds half its limit (New).
func DefaultMax() int { return min(limit()/32, 2048) }

// limit is the process's soft limit on open files.
func limit() int {
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return int(min(l.Cur, 1<<30))
}

// pread reads the whole of fd from offset 0: cgroup and /proc files are
// small, and one pread(2) at offset 0 renders all of one that fits. The
// read goes through a pooled buffer, so that what is left for the
// collector is the content alone.
func pread(fd int) ([]byte, error) {
	bp := buffers.Get().(*[]byte)
	defer buffers.Put(bp)
	buf := *bp
	for {
		n, err := unix.Pread(fd, buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n < len(buf) {
			return bytes.Clone(buf[:n]), nil
		}
		buf = make([]byte, 2*len(buf)) // it may not all have fit: again, whole
	}
}

// buffers are pread's.
var buffers = sync.Pool{New: func() any { b := make([]byte, 4096); return &b }}
