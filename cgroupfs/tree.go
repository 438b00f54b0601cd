package cgroupfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/poolagent/poolagent/cpulimit"
	"github.com/poolagent/poolagent/observe"
)

// Hierarchy names used in [Op.Hier].
const (
	HierUnified = "unified" // cgroup v2: every controller
	HierCPU     = "cpu"     // cgroup v1 cpu
	HierCPUAcct = "cpuacct" // cgroup v1 cpuacct, kept in step for usage
	HierMemory  = "memory"  // cgroup v1 memory, used when a limit is set
)

// Tree is poolagent's cgroup subtree on one host: the pool root in the
// hierarchy carrying the cpu controller and, on cgroup v1, the same
// relative path in the cpuacct hierarchy (so usage can be read) and in the
// memory hierarchy (when a memory limit is set). The pool root belongs to
// poolagent: any cgroup directly below it that is not a desired pool is a
// dropped pool.
type Tree struct {
	v2    bool
	roots map[string]string // hierarchy name -> pool root directory
	// cpuMount is the mount directory of the cpu controller's hierarchy.
	cpuMount string
	// acctRoot is, on v1, the pool root in the cpuacct hierarchy: the
	// cpu root itself where the two are mounted together, "" without
	// cpuacct.
	acctRoot string
	order    []string // hierarchy names, cpu's first

	openFS   func(dir string) (FS, error)
	fss      map[string]FS
	pageSize int64
}

// Options adjust [Open].
type Options struct {
	// OpenFS opens one hierarchy's pool root (and, to create a missing
	// root, its parent). Nil opens a [Dir]; tests wrap it to emulate the
	// kernel or inject faults.
	OpenFS func(dir string) (FS, error)
}

// ErrBadRoot is wrapped when the pool root is not usable: outside the
// cgroup mount, or the mount's own root.
var ErrBadRoot = errors.New("bad pool root")

// Open prepares the pool tree rooted at root, a directory inside the
// mount that carries the cpu controller (for example
// /sys/fs/cgroup/poolagent on v2, /sys/fs/cgroup/cpu/poolagent on v1). It
// neither creates nor writes anything.
func Open(m Mounts, root string, opt Options) (*Tree, error) {
	cpuDir, v2, err := m.Controller("cpu")
	if err != nil {
		return nil, fmt.Errorf("open pool tree %s: %w", root, err)
	}
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("%w: %q: want an absolute path inside %s", ErrBadRoot, root, cpuDir)
	}
	root = filepath.Clean(root)
	rel, err := filepath.Rel(cpuDir, root)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("%w: %s is outside the cpu controller's mount %s", ErrBadRoot, root, cpuDir)
	}
	if rel == "." {
		return nil, fmt.Errorf("%w: %s is the mount's root cgroup; want a directory below it that poolagent owns, such as %s",
			ErrBadRoot, root, filepath.Join(cpuDir, DefaultRootName))
	}
	t := &Tree{v2: v2, cpuMount: cpuDir, roots: map[string]string{}, openFS: opt.OpenFS, fss: map[string]FS{}, pageSize: int64(os.Getpagesize())}
	if t.openFS == nil {
		t.openFS = func(dir string) (FS, error) { return OpenDir(dir) }
	}
	if v2 {
		t.roots[HierUnified] = root
		t.order = []string{HierUnified}
		return t, nil
	}
	t.roots[HierCPU] = root
	t.order = []string{HierCPU}
	t.acctRoot = m.Twin(HierCPUAcct, root)
	for _, h := range []string{HierCPUAcct, HierMemory} {
		if d := m.Twin(h, root); d != "" && d != root {
			t.roots[h] = d
			t.order = append(t.order, h)
		}
	}
	return t, nil
}

// V2 reports whether the tree is on cgroup v2.
func (t *Tree) V2() bool { return t.v2 }

// Root returns the pool root in hierarchy h ("" when h is not used).
func (t *Tree) Root(h string) string { return t.roots[h] }

// Observe returns the reader of this pool tree: cpu.stat and pressure
// from the pool root, and on cgroup v1 usage from its cpuacct twin.
func (t *Tree) Observe() observe.Tree {
	if t.v2 {
		return observe.Tree{Version: observe.V2, Root: t.roots[HierUnified]}
	}
	return observe.Tree{Version: observe.V1, Root: t.roots[HierCPU], CPUAcctRoot: t.acctRoot}
}

// Close releases the opened pool roots.
func (t *Tree) Close() error {
	var errs []error
	for h, f := range t.fss {
		if c, ok := f.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
		delete(t.fss, h)
	}
	return errors.Join(errs...)
}

// fs returns hierarchy h's pool root, opened once.
func (t *Tree) fs(h string) (FS, error) {
	if f, ok := t.fss[h]; ok {
		return f, nil
	}
	f, err := t.openFS(t.roots[h])
	if err != nil {
		return nil, err
	}
	t.fss[h] = f
	return f, nil
}

// hiers lists the hierarchies a plan touches: on v1 the memory hierarchy
// only when a memory limit is wanted or poolagent's memory root exists.
func (t *Tree) hiers(memory bool) []string {
	var out []string
	for _, h := range t.order {
		if h == HierMemory && !memory && !exists(t.roots[h]) {
			continue
		}
		out = append(out, h)
	}
	return out
}

func exists(dir string) bool {
	_, err := os.Stat(dir)
	return err == nil
}

// node is what the tree holds at one cgroup path.
type node struct {
	in    map[string]bool  // hierarchy -> directory exists
	procs map[string][]int // hierarchy -> PIDs directly in it
}

// state is the current tree, read before planning.
type state struct {
	rootIn map[string]bool
	nodes  map[string]*node // by path relative to the pool root
}

// read walks every hierarchy's pool root and lists the cgroups and their
// processes.
func (t *Tree) read(hiers []string) (*state, error) {
	st := &state{rootIn: map[string]bool{}, nodes: map[string]*node{}}
	for _, h := range hiers {
		if !exists(t.roots[h]) {
			continue
		}
		st.rootIn[h] = true
		f, err := t.fs(h)
		if err != nil {
			return nil, err
		}
		if err := st.walk(f, h, "."); err != nil {
			return nil, err
		}
	}
	return st, nil
}

func (st *state) walk(f FS, h, dir string) error {
	subs, err := f.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, s := range subs {
		p := path.Join(dir, s)
		n := st.nodes[p]
		if n == nil {
			n = &node{in: map[string]bool{}, procs: map[string][]int{}}
			st.nodes[p] = n
		}
		n.in[h] = true
		pids, err := readProcs(f, p)
		if err != nil {
			return err
		}
		n.procs[h] = pids
		if err := st.walk(f, h, p); err != nil {
			return err
		}
	}
	return nil
}

// readProcs reads the PIDs in cg's cgroup.procs.
func readProcs(f FS, cg string) ([]int, error) {
	b, err := f.ReadFile(path.Join(cg, fileProcs))
	if err != nil {
		return nil, err
	}
	pids, err := parseProcs(b)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", cg, fileProcs, err)
	}
	return pids, nil
}

// parseProcs parses cgroup.procs: one PID (a positive decimal) per line.
func parseProcs(b []byte) ([]int, error) {
	var out []int
	for _, l := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(l)
		if err != nil || pid <= 0 {
			return nil, fmt.Errorf("%q is not a PID", l)
		}
		out = append(out, pid)
	}
	return out, nil
}

// children lists the existing direct children of dir, sorted.
func (st *state) children(dir string) []string {
	var out []string
	for p := range st.nodes {
		if path.Dir(p) == dir {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// subtree lists dir and every cgroup below it, parents first.
func (st *state) subtree(dir string) []string {
	var out []string
	for p := range st.nodes {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	slices.Sort(out) // "a" < "a/b": parents sort first
	return out
}

// busy reports whether dir or any cgroup below it holds a process in any
// hierarchy.
func (st *state) busy(dir string) bool {
	for _, p := range st.subtree(dir) {
		for _, pids := range st.nodes[p].procs {
			if len(pids) > 0 {
				return true
			}
		}
	}
	return false
}

// readSettings reads the managed values of cgroup cg (which exists). On
// v1, memory is read only when the memory hierarchy is in use.
func (t *Tree) readSettings(cg string, hiers []string) (settings, error) {
	s := defaults() // what a file a kernel lacks reads as
	if t.v2 {
		f, err := t.fs(HierUnified)
		if err != nil {
			return s, err
		}
		b, err := f.ReadFile(path.Join(cg, fileCPUMax))
		if err != nil {
			return s, err
		}
		m, err := cpulimit.ParseCPUMax(string(b))
		if err != nil {
			return s, fmt.Errorf("%s: %w", path.Join(cg, fileCPUMax), err)
		}
		s.cpu.QuotaUsec, s.cpu.PeriodUsec = m.QuotaUsec, m.PeriodUsec
		if s.cpu.BurstUsec, err = readIntOr(f, cg, fileCPUMaxBurst, s.cpu.BurstUsec); err != nil {
			return s, err
		}
		if s.cpu.Weight, err = readIntOr(f, cg, fileCPUWeight, s.cpu.Weight); err != nil {
			return s, err
		}
		if s.memBytes, err = readMemOr(f, cg, fileMemoryMax); err != nil {
			return s, err
		}
		return s, nil
	}
	f, err := t.fs(HierCPU)
	if err != nil {
		return s, err
	}
	b, err := f.ReadFile(path.Join(cg, fileCFSQuota))
	if err != nil {
		return s, err
	}
	if s.cpu.QuotaUsec, err = parseInt(fileCFSQuota, string(b)); err != nil {
		return s, fmt.Errorf("%s: %w", cg, err)
	}
	for _, x := range []struct {
		file string
		dst  *int64
	}{{fileCFSPeriod, &s.cpu.PeriodUsec}, {fileCFSBurst, &s.cpu.BurstUsec}, {fileShares, &s.shares}} {
		if *x.dst, err = readIntOr(f, cg, x.file, *x.dst); err != nil {
			return s, err
		}
	}
	if slices.Contains(hiers, HierMemory) {
		mf, err := t.fs(HierMemory)
		if err != nil {
			return s, err
		}
		if s.memBytes, err = readMemOr(mf, cg, fileMemLimit); err != nil {
			return s, err
		}
	}
	return s, nil
}

// readIntOr reads a file holding an unsigned number; a missing file (a
// kernel without that feature) reads as def.
func readIntOr(f FS, cg, file string, def int64) (int64, error) {
	b, err := f.ReadFile(path.Join(cg, file))
	if errors.Is(err, fs.ErrNotExist) {
		return def, nil
	}
	if err != nil {
		return 0, err
	}
	v, err := parseUint(file, string(b))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", cg, err)
	}
	if v > math.MaxInt64 {
		return 0, fmt.Errorf("%s: %s %d: want at most %d", cg, file, v, int64(math.MaxInt64))
	}
	return int64(v), nil
}

// readMemOr reads a memory limit; a missing file (memory controller not
// enabled here) reads as unlimited.
func readMemOr(f FS, cg, file string) (int64, error) {
	b, err := f.ReadFile(path.Join(cg, file))
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return 0, err
	}
	v, err := observe.ParseMemoryLimit(string(b))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path.Join(cg, file), err)
	}
	return v, nil
}

// defaults are a new cgroup's values, as the kernel creates it.
func defaults() settings {
	return settings{cpu: cpulimit.Unlimited(cpulimit.DefaultPeriodUsec), shares: cpulimit.DefaultShares, memBytes: -1}
}
