package cgroupfs

// The memory controller: its files, how a cgroup's memory limits and
// guarantees are read back and written, and its counters.

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"

	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// The memory controller's files ([observe.Memory] says what each holds).
//
//	v2 memory.max                 "max" | bytes (read back rounded down to a page)
//	v2 memory.high                "max" | bytes
//	v2 memory.min, memory.low     "max" | bytes (guarantees; 0, the default, is none)
//	v2 memory.current, memory.peak, memory.swap.current   bytes
//	v2 memory.events              "key count" lines
//	v2 memory.pressure            PSI
//	v2, v1 memory.stat            "key bytes" lines
//	v1 memory.limit_in_bytes      "-1" to write; unlimited reads 9223372036854771712
//	v1 memory.soft_limit_in_bytes as limit_in_bytes
//	v1 memory.usage_in_bytes, memory.max_usage_in_bytes   bytes
//	v1 memory.failcnt             count
//	v1 memory.oom_control         "oom_kill_disable 0\nunder_oom 0\noom_kill 1"
const (
	fileMemoryMax      = "memory.max"
	fileMemoryHigh     = "memory.high"
	fileMemoryMin      = "memory.min"
	fileMemoryLow      = "memory.low"
	fileMemoryCurrent  = "memory.current"
	fileMemoryPeak     = "memory.peak"
	fileMemorySwap     = "memory.swap.current"
	fileMemoryEvents   = "memory.events"
	fileMemoryPressure = "memory.pressure"
	fileMemoryStat     = "memory.stat"
	fileMemLimit       = "memory.limit_in_bytes"
	fileMemSoftLimit   = "memory.soft_limit_in_bytes"
	fileMemUsage       = "memory.usage_in_bytes"
	fileMemMaxUsage    = "memory.max_usage_in_bytes"
	fileMemFailcnt     = "memory.failcnt"
	fileMemOOMControl  = "memory.oom_control"
)

// memoryController manages a cgroup's memory limits (memory.max,
// memory.high) and guarantees (memory.min, memory.low; v2 only). A
// lowered limit is held back while the cgroup uses more (memoryValues).
var memoryController = controller{
	name: HierMemory,
	need: func(s settings, use *uses) {
		use.guarantee = use.guarantee || s.memMin > 0 || s.memLow > 0
		use.memory = use.memory || use.guarantee || s.memBytes >= 0 || s.memHigh > 0
	},
	in:        func(use uses) bool { return use.memory },
	unmounted: "memory limit set: %w: no v1 memory hierarchy is mounted",
	desired: func(c planner.Cgroup, s *settings) {
		s.memBytes, s.memHigh, s.memMin, s.memLow = c.MemoryBytes, max(c.MemoryHighBytes, 0), c.MemoryMinBytes, c.MemoryLowBytes
	},
	check:  checkMemory,
	refuse: refuseGuarantees,
	read:   readMemory,
	top:    readRootGuarantees,
	values: (*builder).memoryValues,
	after:  func(b *builder, d planner.Desired, _ []target) { b.rootGuarantees(d) },
	stat: func(r *Reader, group string, s *observe.Sample) (err error) {
		s.Memory, err = r.Memory(group)
		return err
	},
}

// checkMemory refuses memory limits and guarantees the kernel would not
// take.
func checkMemory(c planner.Cgroup) error {
	if c.MemoryBytes < -1 {
		return fmt.Errorf("memory limit %d bytes: want -1 (unlimited) or bytes", c.MemoryBytes)
	}
	if c.MemoryMinBytes < -1 || c.MemoryLowBytes < -1 {
		return fmt.Errorf("memory guarantees %d and %d bytes: want 0 (none), -1 (all it uses) or bytes", c.MemoryMinBytes, c.MemoryLowBytes)
	}
	return nil
}

// refuseGuarantees refuses memory guarantees on cgroup v1, which has none.
func refuseGuarantees(t *Tree, _ planner.Desired, use uses) error {
	if !t.v2 && use.guarantee {
		return fmt.Errorf("TOTAL_MEMORY_MIN_PERCENT_PER_NODE or TOTAL_MEMORY_LOW_PERCENT_PER_NODE set: %w: cgroup v1 has no memory guarantee (memory.min and memory.low are cgroup v2's; v1's soft limit only reclaims, it protects nothing); accepted here: -1 for both", ErrNoController)
	}
	return nil
}

// readMemory reads cg's memory limits, its guarantees (v2) and what it
// uses into s.
func readMemory(f FS, cg string, v2 bool, dir string, s *settings) error {
	var err error
	if s.memBytes, err = readMemoryLimit(f, cg, v2, dir); err != nil {
		return err
	}
	if s.memHigh, err = readMemoryHigh(f, cg, v2, dir); err != nil {
		return err
	}
	if v2 {
		if s.memMin, s.memLow, err = readMemoryGuarantees(f, cg, dir); err != nil {
			return err
		}
	}
	s.memUsed, err = readMemoryUsage(f, cg, v2, dir)
	return err
}

// readRootGuarantees reads, on v2, the pool root's memory guarantees into
// cur.rootGuarantee, where the root exists.
func readRootGuarantees(t *Tree, cur *current, _ planner.Desired) error {
	if !t.v2 || !cur.rootIn[HierUnified] {
		return nil
	}
	f, err := t.fs(HierUnified)
	if err != nil {
		return err
	}
	g := &cur.rootGuarantee
	if g.memMin, g.memLow, err = readMemoryGuarantees(f, ".", t.roots[HierUnified]); err != nil {
		return fmt.Errorf("read pool root: %w", err)
	}
	return nil
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

// readMemoryHigh reads cgroup cg's soft memory limit beneath f, in bytes,
// 0 for none: v2 memory.high, v1 memory.soft_limit_in_bytes; a missing
// file is none.
func readMemoryHigh(f FS, cg string, v2 bool, dir string) (int64, error) {
	file := fileMemSoftLimit
	if v2 {
		file = fileMemoryHigh
	}
	v, err := readValue(f, cg, file, dir, observe.ParseMemoryLimit)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	return max(v, 0), err
}

// readMemoryGuarantees reads cgroup cg's memory guarantees beneath f
// (v2): memory.min and memory.low in bytes, -1 for "max"; a missing file
// (the controller not enabled there) is none, 0.
func readMemoryGuarantees(f FS, cg, dir string) (lo, low int64, err error) {
	read := func(file string) (int64, error) {
		v, err := readValue(f, cg, file, dir, observe.ParseMemoryLimit)
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return v, err
	}
	if lo, err = read(fileMemoryMin); err != nil {
		return 0, 0, err
	}
	low, err = read(fileMemoryLow)
	return lo, low, err
}

// guaranteeValues writes cgroup cg's memory guarantees that differ from
// cur (v2 memory.min and memory.low, as the kernel keeps them: in pages,
// "max" for -1). The kernel keeps no order between a cgroup's and its
// children's: a child's larger claim is scaled down to its parent's.
func (b *builder) guaranteeValues(cg string, want, cur settings) {
	for _, g := range []struct {
		file      string
		want, cur int64
	}{{fileMemoryMin, want.memMin, cur.memMin}, {fileMemoryLow, want.memLow, cur.memLow}} {
		if w := pageDown(g.want, b.cur.pageSize); w != pageDown(g.cur, b.cur.pageSize) {
			b.add(HierUnified, cg, OpWrite, g.file, memoryValue(w, true))
		}
	}
}

// rootGuarantees writes the pool root's memory guarantees: the sum of its
// pools'. The kernel gives a cgroup no more protection than its parent
// has, so without it the pools' guarantees would protect nothing; the
// sum, and not "max", so that with memory_recursiveprot the pools
// without one are not protected by what the others leave unused.
func (b *builder) rootGuarantees(d planner.Desired) {
	if !b.cur.v2 {
		return
	}
	var want settings
	for _, p := range d.Pools {
		want.memMin += pageDown(p.Pool.MemoryMinBytes, b.cur.pageSize)
		want.memLow += pageDown(p.Pool.MemoryLowBytes, b.cur.pageSize)
	}
	b.guaranteeValues(".", want, b.cur.rootGuarantee)
}

// memoryValues writes tg's memory limits that differ, as the kernel
// keeps them (in pages): the hard one, v2 memory.max ("max" for none), v1
// memory.limit_in_bytes (-1 for none); the soft one, v2 memory.high, v1
// memory.soft_limit_in_bytes, alike. The kernel keeps no order between
// the two. A hard limit lowered below what the cgroup uses is not
// written but held back (Pending), unless the tree forces it: written,
// the kernel would reclaim at once and OOM-kill what it cannot.
func (b *builder) memoryValues(tg target) {
	w, c := tg.want, tg.cur
	h, hard, soft := HierUnified, fileMemoryMax, fileMemoryHigh
	if !b.cur.v2 {
		h, hard, soft = HierMemory, fileMemLimit, fileMemSoftLimit
	}
	if limit := pageDown(w.memBytes, b.cur.pageSize); limit != pageDown(c.memBytes, b.cur.pageSize) {
		if !b.cur.force && limit >= 0 && (c.memBytes < 0 || limit < c.memBytes) && c.memUsed > limit {
			b.pending = append(b.pending, Pending{Dir: path.Join(b.cur.roots[h], tg.path), File: hard, Path: tg.path, UsageBytes: c.memUsed, LimitBytes: limit, KeptBytes: c.memBytes})
		} else {
			b.add(h, tg.path, OpWrite, hard, memoryValue(w.memBytes, b.cur.v2))
		}
	}
	high := func(v int64) int64 { // none is 0 here, -1 to the kernel's files
		if v <= 0 {
			return -1
		}
		return pageDown(v, b.cur.pageSize)
	}
	if high(w.memHigh) != high(c.memHigh) {
		b.add(h, tg.path, OpWrite, soft, memoryValue(high(w.memHigh), b.cur.v2))
	}
	if b.cur.v2 {
		b.guaranteeValues(tg.path, w, c)
	}
}

// memoryValue renders a memory limit in bytes, -1 for none: v2 "max",
// v1 "-1".
func memoryValue(v int64, v2 bool) string {
	if v < 0 && v2 {
		return "max"
	}
	return strconv.FormatInt(v, 10)
}

// readMemoryUsage reads cgroup cg's memory in use beneath f: v2
// memory.current, v1 memory.usage_in_bytes; 0, unknown, where the file
// is missing.
func readMemoryUsage(f FS, cg string, v2 bool, dir string) (int64, error) {
	file := fileMemUsage
	if v2 {
		file = fileMemoryCurrent
	}
	v, err := readValue(f, cg, file, dir, func(s string) (uint64, error) { return observe.ParseBytes([]byte(s)) })
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	return int64(min(v, 1<<62)), err
}

// pageDown is the memory limit the kernel reads back after b is written:
// memory limits are kept in pages.
func pageDown(b, pageSize int64) int64 {
	if b < 0 {
		return -1
	}
	return b / pageSize * pageSize
}

// Memory reads group's memory ([observe.Memory]); nil when the memory
// controller is not there for it: v2 without memory.current (the parent
// does not enable memory), v1 without a memory twin of the tree or of
// the group.
func (r *Reader) Memory(group string) (*observe.Memory, error) {
	h := r.memHier()
	if h == "" {
		return nil, nil
	}
	current, usage := fileMemoryCurrent, fileMemUsage
	if !r.v2 {
		current = usage
	}
	cur, err := read(r, h, group, current, observe.ParseBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m := &observe.Memory{CurrentBytes: cur, V1: !r.v2}
	if r.v2 {
		err = r.memoryV2(group, m)
	} else {
		err = r.memoryV1(group, m)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// memoryV2 reads the rest of a v2 group's memory into m.
func (r *Reader) memoryV2(group string, m *observe.Memory) error {
	var err error
	if m.PeakBytes, err = optional(read(r, HierUnified, group, fileMemoryPeak, observe.ParseBytes)); err != nil {
		return err
	}
	if m.SwapBytes, err = optional(read(r, HierUnified, group, fileMemorySwap, observe.ParseBytes)); err != nil {
		return err
	}
	if m.LimitBytes, err = r.limit(HierUnified, group, fileMemoryMax); err != nil {
		return err
	}
	if m.HighBytes, err = r.limit(HierUnified, group, fileMemoryHigh); err != nil {
		return err
	}
	if m.MinBytes, err = r.guarantee(group, fileMemoryMin); err != nil {
		return err
	}
	if m.LowBytes, err = r.guarantee(group, fileMemoryLow); err != nil {
		return err
	}
	if m.Events, err = read(r, HierUnified, group, fileMemoryEvents, observe.ParseMemoryEvents); err != nil {
		return err
	}
	if m.Pressure, err = r.pressure(group, fileMemoryPressure); err != nil {
		return err
	}
	m.Stat, err = read(r, HierUnified, group, fileMemoryStat, observe.ParseMemoryStat)
	return err
}

// memoryV1 reads the rest of a v1 group's memory into m: failcnt stands
// for the max events, oom_control's oom_kill for the kills.
func (r *Reader) memoryV1(group string, m *observe.Memory) error {
	var err error
	if m.PeakBytes, err = optional(read(r, HierMemory, group, fileMemMaxUsage, observe.ParseBytes)); err != nil {
		return err
	}
	if m.LimitBytes, err = r.limit(HierMemory, group, fileMemLimit); err != nil {
		return err
	}
	if m.HighBytes, err = r.limit(HierMemory, group, fileMemSoftLimit); err != nil {
		return err
	}
	if m.Events.Max, err = read(r, HierMemory, group, fileMemFailcnt, observe.ParseBytes); err != nil {
		return err
	}
	kills, err := read(r, HierMemory, group, fileMemOOMControl, func(b []byte) (uint64, error) {
		n, _, err := observe.ParseOOMKills(b)
		return n, err
	})
	if err != nil {
		return err
	}
	m.Events.OOMKill = kills
	m.Stat, err = read(r, HierMemory, group, fileMemoryStat, observe.ParseMemoryStat)
	return err
}

// limit reads a memory limit file of group: bytes, -1 for none.
func (r *Reader) limit(h, group, file string) (int64, error) {
	v, err := read(r, h, group, file, func(b []byte) (int64, error) { return observe.ParseMemoryLimit(string(b)) })
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	return v, err
}

// guarantee reads a v2 memory guarantee file of group: bytes, -1 for
// "max", 0 for none or a kernel without it.
func (r *Reader) guarantee(group, file string) (int64, error) {
	v, err := read(r, HierUnified, group, file, func(b []byte) (int64, error) { return observe.ParseMemoryLimit(string(b)) })
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	return v, err
}

// optional is a value read, nil for a file that is not there (a kernel
// without it).
func optional[T any](v T, err error) (*T, error) {
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &v, nil
}
