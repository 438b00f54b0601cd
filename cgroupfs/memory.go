package cgroupfs

// The memory controller: its files, how a cgroup's memory limit is read
// back and written, and its counters.

import (
	"errors"
	"io/fs"
	"slices"
	"strconv"

	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// The memory controller's files.
//
//	v2 memory.max            "max" | bytes (read back rounded down to a page)
//	v1 memory.limit_in_bytes "-1" to write; unlimited reads 9223372036854771712
const (
	fileMemoryMax = "memory.max"
	fileMemLimit  = "memory.limit_in_bytes"
)

// memHier is the hierarchy holding the memory files of the tree: v2's
// unified one, v1's memory hierarchy when hiers (the hierarchies a
// change touches) has it, else "".
func (t *Tree) memHier(hiers []string) string {
	switch {
	case t.v2:
		return HierUnified
	case slices.Contains(hiers, HierMemory):
		return HierMemory
	}
	return ""
}

// memoryLimitFile is the memory limit's file on v2 or v1.
func memoryLimitFile(v2 bool) string {
	if v2 {
		return fileMemoryMax
	}
	return fileMemLimit
}

// readMemoryLimit reads cgroup cg's memory limit beneath f, in bytes, -1
// for none ([observe.ParseMemoryLimit]): v2 memory.max, v1
// memory.limit_in_bytes. A missing file (the controller not enabled
// there, a root cgroup) is no limit. dir is f's directory, for messages.
func readMemoryLimit(f FS, cg string, v2 bool, dir string) (int64, error) {
	v, err := readValue(f, cg, memoryLimitFile(v2), dir, observe.ParseMemoryLimit)
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	return v, err
}

// memoryValues writes tg's memory limit when it differs, as the kernel
// keeps it (in pages): v2 memory.max ("max" for none), v1
// memory.limit_in_bytes (-1 for none).
func (b *builder) memoryValues(tg target) {
	w, c := tg.want, tg.cur
	if pageDown(w.memBytes, b.cur.pageSize) == pageDown(c.memBytes, b.cur.pageSize) {
		return
	}
	if b.cur.v2 {
		v := "max"
		if w.memBytes >= 0 {
			v = strconv.FormatInt(w.memBytes, 10)
		}
		b.add(HierUnified, tg.path, OpWrite, fileMemoryMax, v)
		return
	}
	b.add(HierMemory, tg.path, OpWrite, fileMemLimit, strconv.FormatInt(w.memBytes, 10))
}

// usesMemory reports whether any cgroup in d sets a memory limit (-1,
// unlimited, is what a cgroup without the memory controller has anyway).
func usesMemory(d planner.Desired) bool {
	for _, p := range d.Pools {
		if p.Pool.MemoryBytes >= 0 || p.Query.MemoryBytes >= 0 {
			return true
		}
	}
	return false
}

// pageDown is the memory limit the kernel reads back after b is written:
// memory limits are kept in pages.
func pageDown(b, pageSize int64) int64 {
	if b < 0 {
		return -1
	}
	return b / pageSize * pageSize
}
