package cgroupfs

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Hierarchy names used in [Op.Hier].
const (
	HierUnified = "unified" // cgroup v2: every controller
	HierCPU     = "cpu"     // cgroup v1 cpu
	HierCPUAcct = "cpuacct" // cgroup v1 cpuacct, kept in step for usage
	HierMemory  = "memory"  // cgroup v1 memory, used when a limit is set
	HierCPUSet  = "cpuset"  // cgroup v1 cpuset, used when a pool has CPUS
	HierPids    = "pids"    // cgroup v1 pids, used when a task limit is set
)

// Tree is poolagent's cgroup subtree on one host: the pool root in the
// hierarchy carrying the cpu controller and, on cgroup v1, the same
// relative path in the cpuacct hierarchy (so usage can be read), in the
// memory hierarchy (when a memory limit is set), in the cpuset
// hierarchy (when a pool has CPUS) and in the pids hierarchy (when a task
// limit is set). The pool root belongs to
// poolagent: any cgroup directly below it that is not a desired pool is a
// dropped pool.
type Tree struct {
	v2    bool
	roots map[string]string // hierarchy name -> pool root directory
	// mounts are the hierarchies' mount directories, opened (mfss) for
	// what lies above the pool root: its parent, its ancestors' limits.
	mounts map[string]string
	// acctRoot is, on v1, the pool root in the cpuacct hierarchy: the
	// cpu root itself where the two are mounted together, "" without
	// cpuacct.
	acctRoot string
	order    []string // hierarchy names, cpu's first

	openFS   func(dir string) (FS, error)
	fss      map[string]FS // pool roots, by hierarchy
	mfss     map[string]FS // mounts, by hierarchy
	pageSize int64
	// keep are the query cgroups (pool/query) a change leaves in place
	// even when empty (Keep).
	keep map[string]bool
	// trust are the query cgroups whose values a change takes to be the
	// desired ones without reading them (Trust).
	trust map[string]bool
	// force writes lowered memory limits even below usage (Force).
	force bool
}

// Force makes the changes write a lowered memory limit even where the
// cgroup uses more than it (the kernel then reclaims at once, and
// OOM-kills what it cannot reclaim); without it such a limit is held back
// as [Changes.Pending] until usage allows.
func (t *Tree) Force(force bool) { t.force = force }

// Keep names the query cgroups, as pool/query paths, that [Tree.Changes]
// leaves in place even when they hold no process: those whose owner is
// about to move a process in, or to read their accounting and remove them
// itself. Without it an empty query cgroup is stale and goes, which would
// lose a query's statistics in the moment between its last process's exit
// and its owner's read. Keep replaces the previous set.
func (t *Tree) Keep(queries map[string]bool) { t.keep = queries }

// Trust names the query cgroups, as pool/query paths, whose managed values
// [Tree.Changes] takes to be those the desired state asks of them, without
// reading them: those their owner made with that state's template and has
// not changed since, for a comparison that looks for another writer's
// changes in them less often than in the pools (each query cgroup costs
// a read of every value file). A trusted cgroup is still listed in each
// hierarchy; one also kept (Keep) has neither its processes nor the
// cgroups below it read, as its owner knows what runs in it. One missing
// in a hierarchy is read and made as any other. Trust replaces the
// previous set; nil trusts none.
func (t *Tree) Trust(queries map[string]bool) { t.trust = queries }

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
	t := &Tree{v2: v2, roots: map[string]string{}, mounts: map[string]string{}, openFS: opt.OpenFS,
		fss: map[string]FS{}, mfss: map[string]FS{}, pageSize: int64(os.Getpagesize())}
	if t.openFS == nil {
		t.openFS = func(dir string) (FS, error) { return OpenCgroupDir(dir) }
	}
	if v2 {
		t.roots[HierUnified], t.mounts[HierUnified] = root, cpuDir
		t.order = []string{HierUnified}
		return t, nil
	}
	t.roots[HierCPU], t.mounts[HierCPU] = root, cpuDir
	t.order = []string{HierCPU}
	t.acctRoot = m.Twin(HierCPUAcct, root)
	twins := []string{HierCPUAcct}
	for _, c := range controllers {
		if c.name != HierCPU {
			twins = append(twins, c.name)
		}
	}
	for _, h := range twins {
		if d := m.Twin(h, root); d != "" && d != root {
			t.roots[h], t.mounts[h] = d, m.Twin(h, cpuDir)
			t.order = append(t.order, h)
		}
	}
	return t, nil
}

// V2 reports whether the tree is on cgroup v2.
func (t *Tree) V2() bool { return t.v2 }

// Root returns the pool root in hierarchy h ("" when h is not used).
func (t *Tree) Root(h string) string { return t.roots[h] }

// Reader returns a reader of this pool tree ([Reader]): counters and
// limits from the pool root, and on cgroup v1 usage from its cpuacct
// twin, memory from its memory twin and tasks from its pids twin. It opens its directories as the
// tree does, apart from the tree's own (so it may be used while the tree
// writes), and at its first read of each.
func (t *Tree) Reader() *Reader {
	if t.v2 {
		return NewReader(true, t.roots[HierUnified], "", "", t.openFS)
	}
	r := NewReader(false, t.roots[HierCPU], t.acctRoot, "", t.openFS)
	for _, c := range controllers {
		if d := t.roots[c.name]; d != "" && c.stat != nil {
			r.dirs[c.name] = d
		}
	}
	return r
}

// Close releases the opened pool roots and mounts.
func (t *Tree) Close() error {
	var errs []error
	for _, fss := range []map[string]FS{t.fss, t.mfss} {
		for h, f := range fss {
			if c, ok := f.(io.Closer); ok {
				errs = append(errs, c.Close())
			}
			delete(fss, h)
		}
	}
	return errors.Join(errs...)
}

// fs returns hierarchy h's pool root, opened once.
func (t *Tree) fs(h string) (FS, error) { return t.openOnce(t.fss, h, t.roots[h]) }

// RootsInPlace reports an error wrapping ErrRootGone when a pool root the
// tree has open ([Dir.StillAt]) was removed while it was open: the tree
// writes below the removed directory, and fails, until it is opened anew.
func (t *Tree) RootsInPlace() error {
	for _, h := range slices.Sorted(maps.Keys(t.fss)) {
		if d, ok := t.fss[h].(*Dir); ok {
			if err := d.StillAt(); err != nil {
				return fmt.Errorf("pool root in the %s hierarchy: %w", h, err)
			}
		}
	}
	return nil
}

// mountFS returns hierarchy h's mount directory, opened once, for the
// reads above the pool root.
func (t *Tree) mountFS(h string) (FS, error) { return t.openOnce(t.mfss, h, t.mounts[h]) }

// openOnce returns opened[h], opening dir for it the first time.
func (t *Tree) openOnce(opened map[string]FS, h, dir string) (FS, error) {
	if f, ok := opened[h]; ok {
		return f, nil
	}
	f, err := t.openFS(dir)
	if err != nil {
		return nil, err
	}
	opened[h] = f
	return f, nil
}
