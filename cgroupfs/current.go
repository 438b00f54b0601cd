package cgroupfs

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/planner"
)

// current is the pool tree as it is, read before anything is decided:
// everything [diff] needs to turn it into the desired tree. Every read
// goes through an [FS], beneath the pool root or, for what lies above it
// (the root's parent, its ancestors' limits), beneath the hierarchy's
// mount.
type current struct {
	v2       bool
	pageSize int64
	roots    map[string]string // hierarchy name -> pool root directory
	// use is what the change uses ([usesIn]).
	use uses
	// hiers are the hierarchies the change touches, cpu's first: on v1
	// a controller's hierarchy only when the change uses it or
	// poolagent's root exists there ([Tree.hiers]).
	hiers []string
	// rootIn says in which hierarchies the pool root exists.
	rootIn map[string]bool
	// keep are the query cgroups kept even when empty (Tree.Keep), and
	// trust those whose values are taken to be the desired ones
	// (Tree.Trust).
	keep, trust map[string]bool
	// only are the pools the change is confined to ([Tree.ReconcilePools]):
	// only they and the cgroups below them are read and written, the
	// other cgroups below the root are neither; nil is the whole tree.
	only map[string]bool
	// nodes are the cgroups below the root, by path relative to it;
	// kids indexes them by parent (children), once they are all read.
	nodes map[string]*node
	kids  map[string][]string
	// values are the managed values of the existing pools and of the
	// cgroups directly below them, by path; a cgroup without an entry is
	// new and has the kernel's defaults.
	values map[string]settings
	// trusted are the query cgroups whose values were not read, taken to
	// be the desired ones (Tree.Trust): in every hierarchy of the change.
	trusted map[string]bool
	// force writes a lowered memory limit even below usage (Tree.Force).
	force bool
	// enabled is, on v2, the controllers in the cgroup.subtree_control
	// of the root (".") and of each existing pool.
	enabled map[string][]string
	// What the controllers read of the pool root and above it (their
	// top hooks).
	//
	// rootHi is, on v1, the ratio of the pool root's nearest limited
	// ancestor-or-self (math.MaxUint64: none), the bound for pools.
	rootHi uint64
	// rootGuarantee is, on v2, the pool root's memory guarantees
	// (memMin, memLow; the rest unused).
	rootGuarantee settings
	// top is, when CPU sets are in use, the pool root's parent's cpuset:
	// on v1 its cpuset.cpus and cpuset.mems, which the root copies (a
	// cpuset cgroup starts with neither); on v2 its effective CPUs. Every
	// pool's CPUS must be within its CPUs.
	top settings
}

// readCurrent reads what [diff] needs to reach d: the tree, the values of
// its pools and of the cgroups below them (each controller its own) and
// what each controller needs of the pool root and above it. It refuses a
// tree whose controllers will not be available (ErrNoController) or
// whose root cannot be made (ErrBadRoot).
func (t *Tree) readCurrent(d planner.Desired, only map[string]bool) (*current, error) {
	use := usesIn(d)
	hiers, err := t.hiers(use)
	if err != nil {
		return nil, fmt.Errorf("read pool tree: %w", err)
	}
	if err := t.checkControllers(d, use, hiers); err != nil {
		return nil, err
	}
	cur := &current{use: use, v2: t.v2, pageSize: t.pageSize, roots: t.roots, hiers: hiers, rootIn: map[string]bool{}, keep: t.keep, trust: t.trust, force: t.force, only: only,
		nodes: map[string]*node{}, values: map[string]settings{}, trusted: map[string]bool{}, enabled: map[string][]string{}, rootHi: math.MaxUint64}
	for _, h := range hiers {
		if err := t.readHier(cur, h); err != nil {
			return nil, fmt.Errorf("read pool tree: %w", err)
		}
	}
	if err := t.readUnlisted(cur); err != nil {
		return nil, fmt.Errorf("read pool tree: %w", err)
	}
	desired := map[string]bool{}
	for _, p := range d.Pools {
		desired[p.Name] = true
	}
	for p, n := range cur.nodes {
		top, _, _ := strings.Cut(p, "/")
		if !desired[top] || strings.Count(p, "/") > 1 || !n.in[hiers[0]] {
			continue
		}
		if t.trust[p] && n.inAll(hiers) {
			cur.trusted[p] = true
			continue
		}
		if cur.values[p], err = t.readSettings(p, hiers); err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
	}
	if err := t.readEnabled(cur, d); err != nil {
		return nil, err
	}
	for _, c := range controllers {
		if c.top == nil {
			continue
		}
		if err := c.top(t, cur, d); err != nil {
			return nil, err
		}
	}
	return cur, nil
}

// readEnabled reads, on v2, the cgroup.subtree_control of the pool root
// and of each of d's pools that exists into cur.enabled.
func (t *Tree) readEnabled(cur *current, d planner.Desired) error {
	if !t.v2 {
		return nil
	}
	cgs := []string{}
	if cur.rootIn[HierUnified] {
		cgs = append(cgs, ".")
	}
	for _, p := range d.Pools {
		if n, ok := cur.nodes[p.Name]; ok && n.in[HierUnified] {
			cgs = append(cgs, p.Name)
		}
	}
	if len(cgs) == 0 {
		return nil
	}
	f, err := t.fs(HierUnified)
	if err != nil {
		return err
	}
	for _, cg := range cgs {
		raw, err := f.ReadFile(path.Join(cg, fileSubtreeControl))
		if err != nil {
			return err
		}
		cur.enabled[cg] = strings.Fields(string(raw))
	}
	return nil
}

// readHier reads hierarchy h's pool root, if it exists, into cur: its
// cgroups and their processes. A root that does not exist will be made,
// which needs its parent: only the pool root itself is created, never its
// parents, which are not poolagent's.
func (t *Tree) readHier(cur *current, h string) error {
	mf, err := t.mountFS(h)
	if err != nil {
		return err
	}
	rel := t.inMount(h, t.roots[h])
	ok, err := isDir(mf, rel)
	if err != nil {
		return err
	}
	if !ok {
		parent := path.Dir(rel)
		if ok, err := isDir(mf, parent); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("%w: %s does not exist, so %s cannot be made in the %s hierarchy; create it or choose a root whose parent exists in every hierarchy",
				ErrBadRoot, filepath.Dir(t.roots[h]), filepath.Base(t.roots[h]), h)
		}
		return nil
	}
	cur.rootIn[h] = true
	f, err := t.fs(h)
	if err != nil {
		return err
	}
	if cur.only == nil {
		return cur.walk(f, h, ".")
	}
	for _, pool := range slices.Sorted(maps.Keys(cur.only)) {
		pids, err := readProcs(f, pool)
		if errors.Is(err, fs.ErrNotExist) {
			continue // not made yet in this hierarchy
		}
		if err != nil {
			return err
		}
		if err := cur.note(f, h, pool, pids); err != nil {
			return err
		}
	}
	return nil
}

// hiers lists the hierarchies a change touches: on v1 the memory hierarchy
// only when a memory limit is wanted, the cpuset hierarchy only when CPU
// sets are, the pids hierarchy only when a task limit is, or poolagent's
// root exists there.
func (t *Tree) hiers(use uses) ([]string, error) {
	var out []string
	for _, h := range t.order {
		if c := controllerOf(h); c != nil && !c.used(use) {
			f, err := t.mountFS(h)
			if err != nil {
				return nil, err
			}
			ok, err := isDir(f, t.inMount(h, t.roots[h]))
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		out = append(out, h)
	}
	return out, nil
}

// inMount is dir's path below hierarchy h's mount ("." for the mount
// itself); Open made sure every root is below its mount.
func (t *Tree) inMount(h, dir string) string {
	rel, err := filepath.Rel(t.mounts[h], dir)
	if err != nil {
		return dir // not reached: Open checked the root
	}
	return filepath.ToSlash(rel)
}

// isDir reports whether name is a directory beneath f.
func isDir(f FS, name string) (bool, error) {
	_, err := f.ReadDir(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// node is what the tree holds at one cgroup path.
type node struct {
	in    map[string]bool  // hierarchy -> directory exists
	procs map[string][]int // hierarchy -> PIDs directly in it
	// unlisted is set for a query cgroup both kept and trusted, whose
	// processes and the cgroups below it were not read (walk).
	unlisted bool
}

// inAll reports whether the cgroup exists in every one of hiers.
func (n *node) inAll(hiers []string) bool {
	for _, h := range hiers {
		if !n.in[h] {
			return false
		}
	}
	return true
}

// walk lists the cgroups below dir in hierarchy h and their processes.
// Of a query cgroup both kept and trusted, which its owner made and
// keeps, and in which it knows what runs, neither the processes nor the
// cgroups below are read: at a thousand queries, those reads were most
// of a whole-tree comparison's cost. One found missing in a hierarchy of
// the change is read after all (readUnlisted).
func (cur *current) walk(f FS, h, dir string) error {
	subs, err := f.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, s := range subs {
		p := path.Join(dir, s)
		if cur.keep[p] && cur.trust[p] {
			n := cur.node(p)
			n.in[h], n.unlisted = true, true
			continue
		}
		if err := cur.visit(f, h, p); err != nil {
			return err
		}
	}
	return nil
}

// node is cgroup p's node, made when first seen.
func (cur *current) node(p string) *node {
	n := cur.nodes[p]
	if n == nil {
		n = &node{in: map[string]bool{}, procs: map[string][]int{}}
		cur.nodes[p] = n
	}
	return n
}

// visit reads the processes of cgroup p in hierarchy h and notes them.
func (cur *current) visit(f FS, h, p string) error {
	pids, err := readProcs(f, p)
	if err != nil {
		return err
	}
	return cur.note(f, h, p, pids)
}

// note records that cgroup p exists in hierarchy h with pids directly in
// it, and walks the cgroups below it.
func (cur *current) note(f FS, h, p string, pids []int) error {
	n := cur.node(p)
	n.in[h] = true
	n.procs[h] = pids
	return cur.walk(f, h, p)
}

// readUnlisted reads the processes and the cgroups below each query
// cgroup that walk did not list and that is missing in a hierarchy of
// the change, in each hierarchy where it exists: it is read and made as
// any other (Tree.Trust), and on v1 its processes are joined to the
// hierarchy made.
func (t *Tree) readUnlisted(cur *current) error {
	for _, p := range slices.Sorted(maps.Keys(cur.nodes)) {
		n := cur.nodes[p]
		if !n.unlisted || n.inAll(cur.hiers) {
			continue
		}
		n.unlisted = false
		for _, h := range cur.hiers {
			if !n.in[h] {
				continue
			}
			f, err := t.fs(h)
			if err != nil {
				return err
			}
			if err := cur.visit(f, h, p); err != nil {
				return err
			}
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

// children lists the existing direct children of dir, sorted; the list
// is the index's own, not to be changed. The index is made at the first
// call, when the tree has been read: the whole-tree comparison asks for
// the children and subtree of each of a thousand query cgroups, and a
// walk of every cgroup for each made it quadratic.
func (cur *current) children(dir string) []string {
	if cur.kids == nil {
		cur.kids = make(map[string][]string, len(cur.nodes))
		for p := range cur.nodes {
			parent := path.Dir(p)
			cur.kids[parent] = append(cur.kids[parent], p)
		}
		for _, k := range cur.kids {
			slices.Sort(k)
		}
	}
	return cur.kids[dir]
}

// subtree lists dir and every cgroup below it, sorted by path ("a" <
// "a/b": parents first).
func (cur *current) subtree(dir string) []string {
	out := slices.Clone(cur.children(dir))
	for i := 0; i < len(out); i++ {
		out = append(out, cur.children(out[i])...)
	}
	if _, ok := cur.nodes[dir]; ok {
		out = append(out, dir)
	}
	slices.Sort(out)
	return out
}

// busy reports whether dir or any cgroup below it holds a process in any
// hierarchy.
func (cur *current) busy(dir string) bool {
	for _, p := range cur.subtree(dir) {
		for _, pids := range cur.nodes[p].procs {
			if len(pids) > 0 {
				return true
			}
		}
	}
	return false
}

// readOr reads cg's file with parse; a missing file (a kernel without
// that feature, a controller not enabled here) reads as def. A value parse
// refuses is an error naming the file.
func readOr(f FS, cg, file string, def int64, parse func(string) (int64, error)) (int64, error) {
	b, err := f.ReadFile(path.Join(cg, file))
	if errors.Is(err, fs.ErrNotExist) {
		return def, nil
	}
	if err != nil {
		return 0, err
	}
	v, err := parse(string(b))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path.Join(cg, file), err)
	}
	return v, nil
}

// parseCount parses a file holding an unsigned number (µs, a weight,
// shares) that fits an int64.
func parseCount(s string) (int64, error) {
	t := strings.TrimSpace(s)
	v, err := strconv.ParseUint(t, 10, 64)
	if err != nil || v > math.MaxInt64 {
		return 0, fmt.Errorf("%q: want an unsigned integer up to %d", t, int64(math.MaxInt64))
	}
	return int64(v), nil
}

// defaults are a new cgroup's values, as the kernel creates it.
func defaults() settings {
	return settings{cpu: cpulimit.Unlimited(cpulimit.DefaultPeriodUsec), shares: cpulimit.DefaultShares, memBytes: -1}
}

// checkAvailable refuses a tree where a controller the change uses has
// no hierarchy mounted (v1) or is not enabled for the pool root (v2).
func (t *Tree) checkAvailable(use uses, hiers []string) error {
	if !t.v2 {
		for _, c := range controllers {
			if c.used(use) && !slices.Contains(hiers, c.name) {
				return fmt.Errorf(c.unmounted, ErrNoController)
			}
		}
		return nil
	}
	// The pool root gets the controllers its parent enables in
	// cgroup.subtree_control; cgroup.controllers lists them once it exists.
	root := t.roots[HierUnified]
	f, err := t.mountFS(HierUnified)
	if err != nil {
		return fmt.Errorf("check controllers: %w", err)
	}
	rel := t.inMount(HierUnified, root)
	file := path.Join(rel, fileControllers)
	if ok, err := isDir(f, rel); err != nil {
		return fmt.Errorf("check controllers: %w", err)
	} else if !ok {
		file = path.Join(path.Dir(rel), fileSubtreeControl)
	}
	raw, err := f.ReadFile(file)
	if err != nil {
		return fmt.Errorf("check controllers: %w", err)
	}
	file = filepath.Join(t.mounts[HierUnified], file)
	have := strings.Fields(string(raw))
	for _, c := range controllers {
		if c.used(use) && !slices.Contains(have, c.name) {
			return fmt.Errorf("%s: %w: %s lists %q; enable it with \"+%s\" in %s",
				c.name, ErrNoController, file, strings.Join(have, " "), c.name, filepath.Join(filepath.Dir(root), fileSubtreeControl))
		}
	}
	return nil
}
