package kerneltest

import (
	"encoding/binary"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// CacheFS is a FUSE filesystem of read-only files of zeros whose pages
// the kernel keeps in its page cache (FOPEN_KEEP_CACHE, names and
// attributes valid for an hour) and may reclaim, as a disk file's: a
// test's way to a working set of file pages where the only other
// filesystems are tmpfs and the initramfs, whose pages cannot be
// reclaimed without swap. A file's pages are charged to the memory
// cgroup of the process that reads them.
type CacheFS struct {
	// Dir is where the files are: Dir/NAME for each name given.
	Dir   string
	zeros []byte
}

// MountCacheFS mounts a CacheFS with one file of each size in files
// (name to bytes) in a temporary directory, for the test's duration
// (see [MountStuckFS] for the module and what root needs).
func MountCacheFS(t testing.TB, files map[string]int64) *CacheFS {
	t.Helper()
	c := &CacheFS{zeros: make([]byte, fuseMaxPages*4096)}
	ff := fuseFiles{validSeconds: 3600, openFlags: fopenKeepCache | fopenNoFlush}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		ff.names, ff.sizes = append(ff.names, name), append(ff.sizes, files[name])
	}
	ff.other = func(dev int, op uint32, unique, node uint64, body []byte) bool {
		return c.read(ff, dev, op, unique, node, body)
	}
	c.Dir, _ = mountFUSE(t, "poolagent-cache", ff)
	return c
}

// read answers a read of one of ff's files with zeros, up to its end.
func (c *CacheFS) read(ff fuseFiles, dev int, op uint32, unique, node uint64, body []byte) bool {
	if op != fuseRead {
		return false
	}
	le := binary.LittleEndian
	size, ok := ff.size(node)
	if !ok || len(body) < 20 {
		reply(dev, unique, -int32(unix.EIO), nil)
		return true
	}
	off, n := int64(le.Uint64(body[8:])), int64(le.Uint32(body[16:]))
	n = max(min(n, size-off, int64(len(c.zeros))), 0)
	reply(dev, unique, 0, c.zeros[:n])
	return true
}

// Path is the path of file name.
func (c *CacheFS) Path(name string) string { return filepath.Join(c.Dir, name) }
