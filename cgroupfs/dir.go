package cgroupfs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// FS is the file operations cgroupfs makes on one cgroup hierarchy below a
// pool root. Names are slash-separated and relative to the pool root
// ("olap/cpu.max"); "." is the pool root itself. [Dir] is the real one;
// tests wrap it to emulate the kernel or to fail on the Nth write.
type FS interface {
	// ReadFile returns the content of a file.
	ReadFile(name string) ([]byte, error)
	// WriteFile writes value to an existing file in one write(2), as the
	// cgroup filesystem expects.
	WriteFile(name, value string) error
	// Mkdir creates a cgroup, marked as poolagent's (see Marked).
	Mkdir(name string) error
	// Marked reports whether cgroup name carries the mark Mkdir leaves:
	// whether poolagent made it.
	Marked(name string) (bool, error)
	// Rmdir removes an empty cgroup.
	Rmdir(name string) error
	// ReadDir returns the names of the subdirectories (child cgroups).
	ReadDir(name string) ([]string, error)
}

// resolveBeneath keeps every lookup below the pool root: no "..", absolute
// path or symlink (magic /proc links included) may lead out of it.
const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// ErrNotCgroup is wrapped when a directory opened as a cgroup is not on a
// cgroup file system.
var ErrNotCgroup = errors.New("not on a cgroup file system")

// Dir is an [FS] on the real filesystem. It opens the pool root once and
// resolves every name beneath it with openat2(2), so a name can never
// address a path outside the root, even if validation were bypassed or a
// symlink were planted in the tree. Errors keep the full path and, for
// writes, the value. Needs Linux 5.6 or later.
type Dir struct {
	path    string
	fd      int
	resolve uint64 // openat2's RESOLVE_* flags
	// links is set on a cgroup file system, where a directory's link
	// count is 2 and its subdirectories (kernfs keeps it so): ReadDir
	// then asks it before reading the entries.
	links bool
}

// OpenDir opens the pool root dir (an existing directory) on any file
// system: for tests on plain directories. The real cgroup tree is opened
// with [OpenCgroupDir].
func OpenDir(dir string) (*Dir, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open pool root", Path: dir, Err: err}
	}
	return &Dir{path: dir, fd: fd, resolve: resolveBeneath}, nil
}

// OpenCgroupDir opens dir, an existing cgroup directory, after checking
// with fstatfs(2) on the opened directory that it is on a cgroup file
// system (cgroup2, or a cgroup v1 hierarchy), so nothing is ever written
// to a directory that only looks like a cgroup (a tmpfs mounted over it, a
// wrong mount table). Every lookup beneath it also refuses to cross a
// mount (RESOLVE_NO_XDEV): the cgroup tree below a hierarchy's directory
// is one mount, so a crossing is a mount placed inside it. (runc adds
// RESOLVE_NO_XDEV on cgroup v2 only, because it resolves v1 paths from the
// tmpfs at /sys/fs/cgroup; the directory opened here is always on the
// hierarchy's own mount, v1 or v2.)
func OpenCgroupDir(dir string) (*Dir, error) {
	d, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(d.fd, &st); err != nil {
		d.Close()
		return nil, &os.PathError{Op: "statfs pool root", Path: dir, Err: err}
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC && st.Type != unix.CGROUP_SUPER_MAGIC {
		d.Close()
		return nil, fmt.Errorf("%w: %s has file system type %#x (accepted: cgroup2 %#x or cgroup %#x)",
			ErrNotCgroup, dir, st.Type, unix.CGROUP2_SUPER_MAGIC, unix.CGROUP_SUPER_MAGIC)
	}
	d.resolve |= unix.RESOLVE_NO_XDEV
	d.links = true
	return d, nil
}

// Path returns the pool root's path as given to OpenDir.
func (d *Dir) Path() string { return d.path }

// Close releases the pool root.
func (d *Dir) Close() error { return unix.Close(d.fd) }

// ErrRootGone is wrapped when the directory a Dir has open is no longer
// the one at its path.
var ErrRootGone = errors.New("removed while it was open")

// StillAt reports an error wrapping ErrRootGone when the directory d has
// open is not the one at its path any more: removed, or removed and made
// again (a new directory, which d's lookups do not reach).
func (d *Dir) StillAt() error {
	var open, now unix.Stat_t
	if err := unix.Fstat(d.fd, &open); err != nil {
		return &os.PathError{Op: "stat open pool root", Path: d.path, Err: err}
	}
	err := unix.Stat(d.path, &now)
	switch {
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%s: %w, and nothing is there now", d.path, ErrRootGone)
	case err != nil:
		return &os.PathError{Op: "stat pool root", Path: d.path, Err: err}
	case now.Dev != open.Dev || now.Ino != open.Ino:
		return fmt.Errorf("%s: %w, and another directory is there now", d.path, ErrRootGone)
	}
	return nil
}

// full is the path a name was asked for, uncleaned, so an error shows what
// was attempted ("/root/../secret").
func (d *Dir) full(name string) string {
	if name == "." {
		return d.path
	}
	return d.path + "/" + name
}

// open resolves name beneath the root with openat2, or by walking it
// when openat2 is refused (see walk).
func (d *Dir) open(name string, flags int) (int, error) {
	if !openat2Missing.Load() {
		how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: d.resolve}
		for range 8 {
			fd, err := unix.Openat2(d.fd, name, &how)
			// EAGAIN: a concurrent rename or mount raced the lookup; the
			// kernel asks the caller to retry.
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
				continue
			}
			if !errors.Is(err, unix.ENOSYS) {
				return fd, err
			}
			openat2Missing.Store(true)
			break
		}
		if !openat2Missing.Load() {
			return -1, unix.EAGAIN
		}
	}
	return d.walk(name, flags)
}

// openat2Missing is set once openat2 answered ENOSYS: a kernel before 5.6,
// or a seccomp filter that cannot inspect openat2's flags and refuses the
// call (systemd's RestrictSUIDSGID= and similar, docs/operate.md). Every
// later lookup walks instead.
var openat2Missing atomic.Bool

// walk resolves name beneath the root one component at a time with
// openat(2), keeping openat2's guarantees by other means: no component
// may be a symlink (O_NOFOLLOW; ELOOP, as RESOLVE_NO_SYMLINKS answers),
// ".." and an absolute path are refused (EXDEV, as RESOLVE_BENEATH
// answers; stricter than openat2, which allows a ".." that stays inside,
// and no name cgroupfs makes has one), and with
// RESOLVE_NO_XDEV every component must be on the root's mount (its mount
// id from statx; EXDEV). Each step opens from the previous step's
// descriptor, never from a path, so a rename elsewhere cannot redirect it.
func (d *Dir) walk(name string, flags int) (int, error) {
	if strings.HasPrefix(name, "/") {
		return -1, unix.EXDEV
	}
	var parts []string
	for _, p := range strings.Split(name, "/") {
		switch p {
		case "..":
			return -1, unix.EXDEV
		case ".", "":
		default:
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		// The root itself.
		return openatRetry(d.fd, ".", flags|unix.O_CLOEXEC)
	}
	var rootMnt uint64
	if d.resolve&unix.RESOLVE_NO_XDEV != 0 {
		var err error
		if rootMnt, err = mountID(d.fd); err != nil {
			return -1, err
		}
	}
	fd := d.fd
	closeFD := func() {
		if fd != d.fd {
			unix.Close(fd)
		}
	}
	for i, p := range parts {
		last := i == len(parts)-1
		f := unix.O_PATH | unix.O_DIRECTORY
		if last {
			f = flags
		}
		next, err := openatRetry(fd, p, f|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		if err != nil {
			// A symlink opened with O_DIRECTORY|O_NOFOLLOW reads ENOTDIR;
			// say ELOOP, as openat2 does.
			var st unix.Stat_t
			if errors.Is(err, unix.ENOTDIR) && unix.Fstatat(fd, p, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = unix.ELOOP
			}
			closeFD()
			return -1, err
		}
		closeFD()
		fd = next
		if rootMnt != 0 {
			mnt, err := mountID(fd)
			if err == nil && mnt != rootMnt {
				err = unix.EXDEV
			}
			if err != nil {
				closeFD()
				return -1, err
			}
		}
	}
	return fd, nil
}

// openatRetry is openat(2) retried on EINTR.
func openatRetry(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// mountID is the id of the mount the open file fd is on (statx
// STATX_MNT_ID, Linux 5.8).
func mountID(fd int) (uint64, error) {
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &stx); err != nil {
		return 0, err
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, fmt.Errorf("statx: the kernel gives no mount id (Linux 5.8 or later needed to keep lookups on one mount without openat2): %w", unix.ENOSYS)
	}
	return stx.Mnt_id, nil
}

// ReadFile implements FS. Cgroup files are small: it reads with plain
// read(2) calls, without an os.File.
func (d *Dir) ReadFile(name string) ([]byte, error) {
	fd, err := d.open(name, unix.O_RDONLY)
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: d.full(name), Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 512)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: d.full(name), Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// WriteFile implements FS. The error reads
// `write "VALUE" to PATH: ERRNO` and wraps the errno (unix.EINVAL when
// the kernel refuses the value).
func (d *Dir) WriteFile(name, value string) error {
	fd, err := d.open(name, unix.O_WRONLY|unix.O_TRUNC)
	if err == nil {
		_, err = unix.Write(fd, []byte(value))
		if cerr := unix.Close(fd); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", value, d.full(name), err)
	}
	return nil
}

// The mark Mkdir leaves on a cgroup it made: an extended attribute,
// trusted.poolagent where the caller may set trusted attributes (root),
// user.poolagent otherwise (cgroup v2 takes user attributes from the
// directory's owner, a delegated user). Its value says nothing.
const (
	markTrusted = "trusted.poolagent"
	markUser    = "user.poolagent"
)

// Mkdir implements FS: mkdirat(2) in the parent opened beneath the root,
// then the mark on the new directory. A mark the filesystem refuses is
// not an error: the cgroup is made, and a teardown lists it as not
// poolagent's rather than remove it.
func (d *Dir) Mkdir(name string) error {
	return d.inParent("mkdir", name, func(pfd int, base string) error {
		if err := unix.Mkdirat(pfd, base, 0o755); err != nil {
			return err
		}
		fd, err := unix.Openat(pfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil
		}
		defer unix.Close(fd)
		if unix.Fsetxattr(fd, markTrusted, []byte("1"), 0) != nil {
			unix.Fsetxattr(fd, markUser, []byte("1"), 0)
		}
		return nil
	})
}

// Marked implements FS: whether the directory carries either mark.
func (d *Dir) Marked(name string) (bool, error) {
	fd, err := d.open(name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return false, &os.PathError{Op: "read the mark of", Path: d.full(name), Err: err}
	}
	defer unix.Close(fd)
	for _, attr := range []string{markTrusted, markUser} {
		_, err := unix.Fgetxattr(fd, attr, nil)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.ENODATA), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EPERM):
		default:
			return false, &os.PathError{Op: "read the mark of", Path: d.full(name), Err: err}
		}
	}
	return false, nil
}

// Rmdir implements FS: unlinkat(2, AT_REMOVEDIR) in the parent opened
// beneath the root.
func (d *Dir) Rmdir(name string) error {
	return d.inParent("rmdir", name, func(pfd int, base string) error { return unix.Unlinkat(pfd, base, unix.AT_REMOVEDIR) })
}

func (d *Dir) inParent(op, name string, fn func(pfd int, base string) error) error {
	parent, base := path.Split(path.Clean(name))
	if base == "." || base == ".." || base == "" || base == "/" {
		return &os.PathError{Op: op, Path: d.full(name), Err: unix.EINVAL}
	}
	if parent == "" {
		parent = "."
	}
	pfd, err := d.open(parent, unix.O_PATH|unix.O_DIRECTORY)
	if err == nil {
		err = fn(pfd, base)
		unix.Close(pfd)
	}
	if err != nil {
		return &os.PathError{Op: op, Path: d.full(name), Err: err}
	}
	return nil
}

// ReadDir implements FS. Symlinks and files are not listed. It reads the
// directory with bare getdents64 calls and keeps the subdirectories'
// names alone (appendDirs): a cgroup's directory holds dozens of control
// files, of which os.File.ReadDir makes an entry each, and the history
// lists a running query's cgroup every interval. On a cgroup file system
// a directory whose link count says it has no subdirectory (a query's
// cgroup, as a rule) is not read at all.
func (d *Dir) ReadDir(name string) ([]string, error) {
	fd, err := d.open(name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, &os.PathError{Op: "readdir", Path: d.full(name), Err: err}
	}
	defer unix.Close(fd)
	if d.links {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, &os.PathError{Op: "readdir", Path: d.full(name), Err: err}
		}
		if st.Nlink == 2 {
			return nil, nil
		}
	}
	var buf [8192]byte
	var out []string
	for {
		n, err := unix.Getdents(fd, buf[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err == nil && n == 0 {
			return out, nil
		}
		if err == nil {
			out, err = appendDirs(out, buf[:n], func(name string) (bool, error) {
				var st unix.Stat_t
				err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
				return st.Mode&unix.S_IFMT == unix.S_IFDIR, err
			})
		}
		if err != nil {
			return nil, &os.PathError{Op: "readdir", Path: d.full(name), Err: err}
		}
	}
}

// direntHeader is the size of a linux_dirent64 record before its name:
// inode (8 bytes), offset (8), record length (2) and type (1).
const direntHeader = 19

// appendDirs appends to dirs the names of the directories among the
// linux_dirent64 records of b, as getdents64(2) fills it: each a header
// (direntHeader) and a NUL-terminated name, padded to the record's
// length. "." and ".." are left out; a record whose type the file system
// does not give (DT_UNKNOWN) is asked of isDir. An error says which
// record is malformed, and what would be accepted.
func appendDirs(dirs []string, b []byte, isDir func(name string) (bool, error)) ([]string, error) {
	for off := 0; off < len(b); {
		rec := b[off:]
		if len(rec) < direntHeader+1 {
			return nil, fmt.Errorf("directory record at byte %d: %d bytes left, want a %d-byte header and a name", off, len(rec), direntHeader)
		}
		reclen := int(binary.NativeEndian.Uint16(rec[16:18]))
		if reclen < direntHeader+1 || reclen > len(rec) {
			return nil, fmt.Errorf("directory record at byte %d: length %d, want %d to the %d bytes left", off, reclen, direntHeader+1, len(rec))
		}
		name, _, terminated := bytes.Cut(rec[direntHeader:reclen], []byte{0})
		if !terminated || len(name) == 0 || bytes.IndexByte(name, '/') >= 0 {
			return nil, fmt.Errorf("directory record at byte %d: name %.64q, want a NUL-terminated name without '/'", off, name)
		}
		off += reclen
		if n := string(name); n != "." && n != ".." {
			dir := rec[18] == unix.DT_DIR
			if rec[18] == unix.DT_UNKNOWN {
				var err error
				if dir, err = isDir(n); errors.Is(err, fs.ErrNotExist) {
					continue // removed since it was listed
				} else if err != nil {
					return nil, err
				}
			}
			if dir {
				dirs = append(dirs, n)
			}
		}
	}
	return dirs, nil
}
