package kerneltest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// fuseModule is where scripts/vm/run.sh puts the VM kernel's FUSE module
// (setup.sh takes it from the kernel package).
const fuseModule = "/lib/modules/fuse.ko"

// StuckFS is two FUSE filesystems of one file each. File's every write is
// read by the server and never answered: a writer sleeps in the kernel,
// uninterruptibly, until the filesystem is aborted (at the test's end);
// it is opened with FOPEN_NOFLUSH, so that a close does not wait behind
// that write (a FUSE flush takes the file's lock, which a writer holds).
// FlushFile takes writes, and leaves unanswered every flush (which a
// close asks for) of the process StallFlushesOf names, as a server that
// tells requesters apart by their pid can do; other processes' flushes
// are answered, so that they can close it. Everything else the kernel
// asks is answered: the lookups, the opens, the attributes; what the
// server does not do is refused with ENOSYS.
type StuckFS struct {
	// File is the path of the file whose writes are never answered.
	File string
	// FlushFile is the path of the file whose flushes by one process
	// are never answered.
	FlushFile string
	writes    atomic.Int64
	stall     atomic.Int64 // a process's pid (its thread group's)
	stalled   atomic.Int64
	abort     func()
}

// Abort ends the filesystems' connections now, as the test's end does:
// every write and flush waiting fails. A test whose daemon may be caught
// in one registers it as a cleanup after the daemon's, so that it comes
// first.
func (s *StuckFS) Abort() { s.abort() }

// Writes returns how many writes the server has read (and not answered).
func (s *StuckFS) Writes() int64 { return s.writes.Load() }

// StallFlushesOf makes the server leave unanswered every flush of
// FlushFile asked by a thread of process pid.
func (s *StuckFS) StallFlushesOf(pid int) { s.stall.Store(int64(pid)) }

// StalledFlushes returns how many flushes the server has read and left
// unanswered.
func (s *StuckFS) StalledFlushes() int64 { return s.stalled.Load() }

// MountStuckFS mounts a StuckFS in temporary directories, loading the
// FUSE module first where /dev/fuse is missing (the test VM's kernel has
// FUSE as a module). At the test's end the connections are aborted, which
// ends every write and flush still waiting with an error, and the mounts
// are detached. Needs root; a missing FUSE fails the test where
// POOLAGENT_REQUIRE_KERNEL=1 and skips it otherwise.
func MountStuckFS(t testing.TB) *StuckFS {
	t.Helper()
	s := &StuckFS{}
	dir, abortWrites := mountFUSE(t, "poolagent-stuck", fuseFiles{names: []string{"f"}, sizes: []int64{0}, openFlags: fopenDirectIO | fopenNoFlush, other: s.handle})
	flushDir, abortFlushes := mountFUSE(t, "poolagent-stuck-flush", fuseFiles{names: []string{"g"}, sizes: []int64{0}, openFlags: fopenDirectIO, other: s.handleFlushFile, answerFlush: s.answerFlush})
	s.File, s.FlushFile = filepath.Join(dir, "f"), filepath.Join(flushDir, "g")
	s.abort = func() { abortWrites(); abortFlushes() }
	return s
}

// mountFUSE mounts the FUSE filesystem files, named source, in a
// temporary directory and returns the directory and the function that
// aborts the connection and detaches the mount, which the test's end
// calls too.
func mountFUSE(t testing.TB, source string, files fuseFiles) (dir string, abort func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "needs root to mount a FUSE filesystem")
	}
	if err := loadFUSE(); err != nil {
		skipOrFail(t, err.Error())
	}
	dev, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		skipOrFail(t, fmt.Sprintf("open /dev/fuse: %v", err))
	}
	dir = t.TempDir()
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other", dev)
	if err := unix.Mount(source, dir, "fuse", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		unix.Close(dev)
		t.Fatalf("mount fuse at %s: %v", dir, err)
	}
	stop, served := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(served)
		serveFUSE(dev, stop, files)
	}()
	abort = sync.OnceFunc(func() {
		close(stop)
		<-served
		// Closing the server's end aborts the connection: every request
		// still waiting fails with ECONNABORTED.
		unix.Close(dev)
		unix.Unmount(dir, unix.MNT_DETACH)
	})
	t.Cleanup(abort)
	return dir, abort
}

func skipOrFail(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(EnvRequire) == "1" {
		t.Fatalf("%s (%s=1 makes this a failure)", why, EnvRequire)
	}
	t.Skip(why)
}

// loadFUSE loads fuseModule when the kernel has no /dev/fuse.
func loadFUSE() error {
	if _, err := os.Stat("/dev/fuse"); err == nil {
		return nil
	}
	mod, err := os.Open(fuseModule)
	if err != nil {
		return fmt.Errorf("no /dev/fuse and no module to load: %w", err)
	}
	defer mod.Close()
	if err := unix.FinitModule(int(mod.Fd()), "", 0); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("load %s: %w", fuseModule, err)
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		// devtmpfs makes the node; without it, make it (misc 10:229).
		if err := unix.Mknod("/dev/fuse", unix.S_IFCHR|0o666, int(unix.Mkdev(10, 229))); err != nil {
			return fmt.Errorf("loaded %s, but no /dev/fuse: %w", fuseModule, err)
		}
	}
	return nil
}

// The FUSE protocol's messages this server reads and writes
// (include/uapi/linux/fuse.h), little-endian.
const (
	fuseLookup    = 1
	fuseForget    = 2
	fuseGetattr   = 3
	fuseOpen      = 14
	fuseRead      = 15
	fuseWrite     = 16
	fuseFlush     = 25
	fuseRelease   = 18
	fuseInit      = 26
	fuseInterrupt = 36
	fuseBatchFrgt = 42

	fuseInHeaderBytes = 40
	fuseAttrBytes     = 88
	fopenDirectIO     = 1 << 0
	fopenKeepCache    = 1 << 1
	fopenNoFlush      = 1 << 5
	fuseMaxPagesFlag  = 1 << 22 // FUSE_MAX_PAGES: init's max_pages is set
	fuseMaxPages      = 256     // 1 MiB a read
	fuseRootID        = 1
)

// fuseFiles is a FUSE filesystem of files in its root directory: what
// every one of this package's filesystems answers alike, and other for
// what each does with its files (false: not done, ENOSYS).
type fuseFiles struct {
	// names and sizes are the files; file i is node fuseRootID+1+i.
	names []string
	sizes []int64
	// validSeconds is how long the kernel may keep names and attributes.
	validSeconds uint64
	// openFlags are the FOPEN_ flags of every open.
	openFlags uint32
	other     func(dev int, op uint32, unique, node uint64, body []byte) bool
	// answerFlush, when set, says whether a flush (what a close asks)
	// by thread tid is answered; unset, flushes go to other.
	answerFlush func(tid uint32) bool
}

// size is node's size in bytes; ok is false for no file.
func (f fuseFiles) size(node uint64) (int64, bool) {
	i := int(node) - fuseRootID - 1
	if i < 0 || i >= len(f.sizes) {
		return 0, false
	}
	return f.sizes[i], true
}

// serveFUSE answers requests read from dev (nonblocking) until stop is
// closed: INIT (reads of up to fuseMaxPages pages at once), lookups,
// attributes, opens and releases of files' files, the requests that
// expect no answer by none, every other by files.other. It polls dev
// itself, a tenth of a second at a time, as the Go runtime's poller does
// not take /dev/fuse.
func serveFUSE(dev int, stop <-chan struct{}, files fuseFiles) {
	buf := make([]byte, 1<<20+4096)
	for {
		select {
		case <-stop:
			return
		default:
		}
		unix.Poll([]unix.PollFd{{Fd: int32(dev), Events: unix.POLLIN}}, 100)
		n, err := unix.Read(dev, buf)
		if err == unix.EAGAIN || err == unix.ENOENT || err == unix.EINTR {
			continue // nothing yet, or a request interrupted before it was read
		}
		if err != nil || n < fuseInHeaderBytes {
			return
		}
		le := binary.LittleEndian
		op, unique, node := le.Uint32(buf[4:]), le.Uint64(buf[8:]), le.Uint64(buf[16:])
		body := buf[fuseInHeaderBytes:n]
		switch op {
		case fuseInterrupt, fuseForget, fuseBatchFrgt:
			// no answer is expected
		case fuseInit:
			out := make([]byte, 64)
			le.PutUint32(out[0:], 7)                 // major
			le.PutUint32(out[4:], 31)                // minor
			le.PutUint32(out[8:], fuseMaxPages*4096) // max_readahead
			le.PutUint32(out[12:], fuseMaxPagesFlag) // flags
			le.PutUint16(out[16:], 16)               // max_background
			le.PutUint16(out[18:], 12)               // congestion_threshold
			le.PutUint32(out[20:], 65536)            // max_write
			le.PutUint32(out[24:], 1)                // time_gran
			le.PutUint16(out[28:], fuseMaxPages)     // max_pages
			reply(dev, unique, 0, out)
		case fuseLookup:
			i := slices.Index(files.names, string(trimNUL(body)))
			if i < 0 || node != fuseRootID {
				reply(dev, unique, -int32(unix.ENOENT), nil)
				continue
			}
			id := uint64(fuseRootID + 1 + i)
			out := make([]byte, 40+fuseAttrBytes)
			le.PutUint64(out[0:], id)
			le.PutUint64(out[16:], files.validSeconds) // entry_valid
			le.PutUint64(out[24:], files.validSeconds) // attr_valid
			putAttr(out[40:], id, files.sizes[i])
			reply(dev, unique, 0, out)
		case fuseGetattr:
			size, _ := files.size(node)
			out := make([]byte, 16+fuseAttrBytes)
			le.PutUint64(out[0:], files.validSeconds) // attr_valid
			putAttr(out[16:], node, size)
			reply(dev, unique, 0, out)
		case fuseOpen:
			out := make([]byte, 16)
			le.PutUint32(out[8:], files.openFlags)
			reply(dev, unique, 0, out)
		case fuseRelease:
			reply(dev, unique, 0, nil)
		case fuseFlush:
			if files.answerFlush == nil {
				if !files.other(dev, op, unique, node, body) {
					reply(dev, unique, -int32(unix.ENOSYS), nil)
				}
			} else if files.answerFlush(le.Uint32(buf[32:])) { // fuse_in_header.pid
				reply(dev, unique, 0, nil)
			}
		default:
			if !files.other(dev, op, unique, node, body) {
				reply(dev, unique, -int32(unix.ENOSYS), nil)
			}
		}
	}
}

// handle does StuckFS's writes: each is read and never answered.
func (s *StuckFS) handle(dev int, op uint32, unique, node uint64, body []byte) bool {
	if op != fuseWrite {
		return false
	}
	s.writes.Add(1) // never answered
	return true
}

// handleFlushFile does FlushFile's writes: all answered.
func (s *StuckFS) handleFlushFile(dev int, op uint32, unique, node uint64, body []byte) bool {
	if op != fuseWrite {
		return false
	}
	out := make([]byte, 8)
	binary.LittleEndian.PutUint32(out[0:], binary.LittleEndian.Uint32(body[16:])) // fuse_write_in.size: all written
	reply(dev, unique, 0, out)
	return true
}

// answerFlush leaves unanswered a flush of FlushFile by a thread of the
// stalled process (the requester is a thread, its pid its own; the
// status file under /proc/TID names its process), counting it.
func (s *StuckFS) answerFlush(tid uint32) bool {
	if stall := s.stall.Load(); stall != 0 && tgid(tid) == stall {
		s.stalled.Add(1)
		return false
	}
	return true
}

// tgid returns the process of thread tid, 0 when it is unknown.
func tgid(tid uint32) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// putAttr writes the fuse_attr of node: the root directory, or a file
// of size bytes.
func putAttr(b []byte, node uint64, size int64) {
	le := binary.LittleEndian
	mode := uint32(unix.S_IFREG | 0o666)
	if node == fuseRootID {
		mode, size = unix.S_IFDIR|0o755, 0
	}
	le.PutUint64(b[0:], node)                  // ino
	le.PutUint64(b[8:], uint64(size))          // size
	le.PutUint64(b[16:], uint64(size+511)/512) // blocks
	le.PutUint32(b[60:], mode)
	le.PutUint32(b[64:], 1)    // nlink
	le.PutUint32(b[80:], 4096) // blksize
}

func trimNUL(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// reply writes a fuse_out_header and body; a write the kernel refuses
// (the request was interrupted meanwhile) is dropped.
func reply(dev int, unique uint64, errno int32, body []byte) {
	out := make([]byte, 16+len(body))
	le := binary.LittleEndian
	le.PutUint32(out[0:], uint32(len(out)))
	le.PutUint32(out[4:], uint32(errno))
	le.PutUint64(out[8:], unique)
	copy(out[16:], body)
	unix.Write(dev, out)
}
