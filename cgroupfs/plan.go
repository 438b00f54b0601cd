package cgroupfs

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/poolagent/poolagent/cpulimit"
	"github.com/poolagent/poolagent/planner"
)

// OpKind is the kind of change an [Op] makes.
type OpKind int

const (
	// OpMkdir creates a cgroup.
	OpMkdir OpKind = iota
	// OpWrite writes Value to File in the cgroup.
	OpWrite
	// OpMove moves every process of the cgroup into To.
	OpMove
	// OpRmdir removes an empty cgroup.
	OpRmdir
)

// Op is one change to the cgroup filesystem.
type Op struct {
	Kind OpKind
	// Hier is the hierarchy: HierUnified, HierCPU, HierCPUAcct or HierMemory.
	Hier string
	// Dir is the hierarchy's pool root.
	Dir string
	// Path is the cgroup, relative to Dir; "." is the pool root.
	Path string
	// File and Value: for OpWrite, the interface file and what is written.
	File, Value string
	// To and PIDs: for OpMove, the destination cgroup and the processes
	// seen when planning. Processes that appear in Path before the move is
	// done (forks) are moved too.
	To   string
	PIDs []int
	// RetryAfterMax marks a burst write: if the kernel refuses it (EINVAL:
	// burst above the current quota), it is written again after the
	// cgroup's quota.
	RetryAfterMax bool
}

// String renders the op for --dry-run and error reports, with full paths.
func (o Op) String() string {
	p := filepath.Join(o.Dir, filepath.FromSlash(o.Path))
	switch o.Kind {
	case OpMkdir:
		return "mkdir " + p
	case OpWrite:
		s := fmt.Sprintf("write %q to %s", o.Value, filepath.Join(p, o.File))
		if o.RetryAfterMax {
			s += " (again after the quota if refused)"
		}
		return s
	case OpMove:
		pids := make([]string, len(o.PIDs))
		for i, pid := range o.PIDs {
			pids[i] = strconv.Itoa(pid)
		}
		return fmt.Sprintf("move pids [%s] from %s to %s", strings.Join(pids, " "), p, filepath.Join(o.Dir, filepath.FromSlash(o.To)))
	case OpRmdir:
		return "rmdir " + p
	}
	return fmt.Sprintf("op %d on %s", o.Kind, p)
}

// Plan is the ordered list of changes that turns the current tree into the
// desired one.
type Plan struct {
	Ops []Op
}

// Writes is how many writes the plan makes: one per mkdir, rmdir and file
// write, and one per process moved.
func (p Plan) Writes() int {
	n := 0
	for _, o := range p.Ops {
		if o.Kind == OpMove {
			n += len(o.PIDs)
		} else {
			n++
		}
	}
	return n
}

// String lists the ops, one per line.
func (p Plan) String() string {
	var b strings.Builder
	for _, o := range p.Ops {
		b.WriteString(o.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// target is a cgroup that should exist after the apply, with its values.
type target struct {
	path string
	want settings
	cur  settings
}

// planner state: the ops so far and, for v1's ordering, each cgroup's
// bandwidth as it will be after the ops so far.
type planBuilder struct {
	t     *Tree
	hiers []string
	st    *state
	ops   []Op
	bw    map[string]cpulimit.Limit // path -> bandwidth after the ops so far
	// rootHi is the ratio of the pool root's nearest limited
	// ancestor-or-self on v1 (math.MaxUint64: none), the bound for pools.
	rootHi uint64
}

func (b *planBuilder) add(h, p string, kind OpKind, file, value string) {
	b.ops = append(b.ops, Op{Kind: kind, Hier: h, Dir: b.t.roots[h], Path: p, File: file, Value: value})
}

// Plan reads the tree and returns the changes that make it match d, in the
// order they must be made. It refuses an invalid d (wrapping ErrInvalid)
// and a controller that is not available (wrapping ErrNoController) before
// anything is written.
//
// Order: pool roots; controllers in subtree_control (v2); new pools and
// query cgroups, parents first; removal of empty query cgroups; values,
// tightening children before parents, then loosening parents before
// children; dropped pools' processes moved into default; dropped pools
// removed, children first.
func (t *Tree) Plan(d planner.Desired) (Plan, error) {
	if err := validate(d, t.v2); err != nil {
		return Plan{}, err
	}
	mem := usesMemory(d)
	hiers := t.hiers(mem)
	if err := t.checkControllers(mem, hiers); err != nil {
		return Plan{}, err
	}
	st, err := t.read(hiers)
	if err != nil {
		return Plan{}, fmt.Errorf("read pool tree: %w", err)
	}
	b := &planBuilder{t: t, hiers: hiers, st: st, bw: map[string]cpulimit.Limit{}, rootHi: math.MaxUint64}
	if !t.v2 {
		if b.rootHi, err = t.v1RootBound(); err != nil {
			return Plan{}, err
		}
	}

	for _, h := range hiers {
		if st.rootIn[h] {
			continue
		}
		// Only the pool root itself is created, never its parents: they
		// are not poolagent's.
		if parent := filepath.Dir(t.roots[h]); !exists(parent) {
			return Plan{}, fmt.Errorf("%w: %s does not exist, so %s cannot be made in the %s hierarchy; create it or choose a root whose parent exists in every hierarchy",
				ErrBadRoot, parent, filepath.Base(t.roots[h]), h)
		}
		b.add(h, ".", OpMkdir, "", "")
	}
	controllers := []string{"cpu"}
	if mem {
		controllers = append(controllers, "memory")
	}
	if t.v2 {
		if err := b.enable(".", controllers); err != nil {
			return Plan{}, err
		}
	}

	dropped, moves, dests := st.dropped(d)

	// Targets: desired pools, their busy query cgroups, and move
	// destinations; empty query cgroups are stale.
	var pools, queries []target
	var stale []string
	var def planner.PoolState
	for _, p := range d.Pools {
		if p.Name == planner.DefaultPool {
			def = p
		}
		tg, err := b.target(p.Name, fromDesired(p.Pool))
		if err != nil {
			return Plan{}, err
		}
		pools = append(pools, tg)
		for _, q := range st.children(p.Name) {
			if !st.busy(q) && !dests[q] {
				stale = append(stale, q)
				continue
			}
			tg, err := b.target(q, fromDesired(p.Query))
			if err != nil {
				return Plan{}, err
			}
			queries = append(queries, tg)
		}
	}
	for _, dest := range slices.Sorted(maps.Keys(dests)) {
		if _, ok := st.nodes[dest]; ok {
			continue // an existing query of default, already a target
		}
		tg, err := b.target(dest, fromDesired(def.Query))
		if err != nil {
			return Plan{}, err
		}
		queries = append(queries, tg)
	}

	// Create what is missing, parents first.
	for _, pool := range pools {
		b.mkdir(pool.path)
		if t.v2 {
			if err := b.enable(pool.path, controllers); err != nil {
				return Plan{}, err
			}
		}
		for _, q := range queries {
			if path.Dir(q.path) == pool.path {
				b.mkdir(q.path)
			}
		}
	}
	// Empty query cgroups go before values are written: on v1 their
	// limits would still count against a tightened pool.
	for _, q := range stale {
		b.rmdirTree(q)
	}
	// Values: tighten bottom-up, then loosen top-down, so that on v1 no
	// child is ever above its parent in between.
	var tighten, loosen []target
	for _, tg := range append(slices.Clone(queries), pools...) {
		if b.tightens(tg) {
			tighten = append(tighten, tg)
		}
	}
	for _, tg := range append(slices.Clone(pools), queries...) {
		if !b.tightens(tg) {
			loosen = append(loosen, tg)
		}
	}
	for _, tg := range append(tighten, loosen...) {
		b.values(tg)
	}
	for _, mv := range moves {
		for _, h := range hiers {
			if n := st.nodes[mv.from]; n.in[h] && len(n.procs[h]) > 0 {
				b.ops = append(b.ops, Op{Kind: OpMove, Hier: h, Dir: t.roots[h], Path: mv.from, To: mv.to, PIDs: n.procs[h]})
			}
		}
	}
	for _, top := range dropped {
		b.rmdirTree(top)
	}
	return Plan{Ops: b.ops}, nil
}

// move is a cgroup whose processes go to another, both relative to the
// pool root.
type move struct{ from, to string }

// dropped lists the pools in the tree that d does not have, the moves that
// empty them (every cgroup holding processes gets a destination leaf in
// default: "default/<pool>" for the pool's own cgroup,
// "default/<pool>.<query>" for anything below a query) and the set of
// destinations.
func (st *state) dropped(d planner.Desired) (dropped []string, moves []move, dests map[string]bool) {
	desired := map[string]bool{}
	for _, p := range d.Pools {
		desired[p.Name] = true
	}
	dests = map[string]bool{}
	for _, top := range st.children(".") {
		if desired[top] {
			continue
		}
		dropped = append(dropped, top)
		for _, p := range st.subtree(top) {
			if !hasOwnProcs(st.nodes[p]) {
				continue
			}
			dest := path.Join(planner.DefaultPool, top)
			if rest := strings.TrimPrefix(p, top+"/"); rest != p {
				dest = path.Join(planner.DefaultPool, top+"."+strings.SplitN(rest, "/", 2)[0])
			}
			moves = append(moves, move{p, dest})
			dests[dest] = true
		}
	}
	return dropped, moves, dests
}

// hasOwnProcs reports whether processes sit directly in the cgroup.
func hasOwnProcs(n *node) bool {
	for _, pids := range n.procs {
		if len(pids) > 0 {
			return true
		}
	}
	return false
}

// target reads an existing cgroup's values (a new one has the kernel's
// defaults) and notes its bandwidth for v1 ordering.
func (b *planBuilder) target(p string, want settings) (target, error) {
	cur := defaults()
	if n, ok := b.st.nodes[p]; ok && n.in[b.hiers[0]] {
		var err error
		if cur, err = b.t.readSettings(p, b.hiers); err != nil {
			return target{}, fmt.Errorf("read %s: %w", p, err)
		}
	}
	b.bw[p] = cur.cpu
	return target{path: p, want: want, cur: cur}, nil
}

func (b *planBuilder) mkdir(p string) {
	n := b.st.nodes[p]
	for _, h := range b.hiers {
		if n == nil || !n.in[h] {
			b.add(h, p, OpMkdir, "", "")
		}
	}
}

// rmdirTree removes p and everything below it, children first, in every
// hierarchy where it exists.
func (b *planBuilder) rmdirTree(p string) {
	sub := b.st.subtree(p)
	for i := len(sub) - 1; i >= 0; i-- {
		for _, h := range b.hiers {
			if b.st.nodes[sub[i]].in[h] {
				b.add(h, sub[i], OpRmdir, "", "")
			}
		}
	}
}

// enable writes "+ctrl" to cg's cgroup.subtree_control for each controller
// not yet enabled there, so cg's children get the controller's files.
func (b *planBuilder) enable(cg string, controllers []string) error {
	var have []string
	if n, ok := b.st.nodes[cg]; (ok && n.in[HierUnified]) || (cg == "." && b.st.rootIn[HierUnified]) {
		f, err := b.t.fs(HierUnified)
		if err != nil {
			return err
		}
		raw, err := f.ReadFile(path.Join(cg, fileSubtreeControl))
		if err != nil {
			return err
		}
		have = strings.Fields(string(raw))
	}
	var add []string
	for _, c := range controllers {
		if !slices.Contains(have, c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) > 0 {
		b.add(HierUnified, cg, OpWrite, fileSubtreeControl, strings.Join(add, " "))
	}
	return nil
}

// tightens reports whether tg's bandwidth ratio goes down.
func (b *planBuilder) tightens(tg target) bool {
	return tg.want.cpu.Ratio() < tg.cur.cpu.Ratio()
}

// values writes what differs between tg's current and wanted values. The
// burst goes first: the kernel (tg_set_cfs_bandwidth) refuses a burst above
// the quota, and a quota below the burst, so a burst that shrinks must be
// written before the quota shrinks, while a burst that grows above the
// current quota is refused (EINVAL) and written again after the quota.
func (b *planBuilder) values(tg target) {
	cpuH, memH := HierUnified, HierUnified
	if !b.t.v2 {
		cpuH, memH = HierCPU, HierMemory
	}
	w, c := tg.want, tg.cur
	if w.cpu.BurstUsec != c.cpu.BurstUsec {
		file := fileCFSBurst
		if b.t.v2 {
			file = fileCPUMaxBurst
		}
		b.add(cpuH, tg.path, OpWrite, file, strconv.FormatInt(w.cpu.BurstUsec, 10))
		b.ops[len(b.ops)-1].RetryAfterMax = true
	}
	if w.cpu.QuotaUsec != c.cpu.QuotaUsec || w.cpu.PeriodUsec != c.cpu.PeriodUsec {
		if b.t.v2 {
			b.add(cpuH, tg.path, OpWrite, fileCPUMax, w.cpu.CPUMax())
		} else {
			b.v1Bandwidth(tg.path, c.cpu, w.cpu)
		}
		b.bw[tg.path] = w.cpu
	}
	if b.t.v2 && w.cpu.Weight != 0 && w.cpu.Weight != c.cpu.Weight {
		b.add(cpuH, tg.path, OpWrite, fileCPUWeight, strconv.FormatInt(w.cpu.Weight, 10))
	}
	if !b.t.v2 && w.shares != 0 && w.shares != c.shares {
		b.add(cpuH, tg.path, OpWrite, fileShares, strconv.FormatInt(w.shares, 10))
	}
	if pageDown(w.memBytes, b.t.pageSize) != pageDown(c.memBytes, b.t.pageSize) {
		if b.t.v2 {
			v := "max"
			if w.memBytes >= 0 {
				v = strconv.FormatInt(w.memBytes, 10)
			}
			b.add(memH, tg.path, OpWrite, fileMemoryMax, v)
		} else {
			b.add(memH, tg.path, OpWrite, fileMemLimit, strconv.FormatInt(w.memBytes, 10))
		}
	}
}

// v1Bandwidth writes quota and period on v1, where every intermediate state
// must keep the cgroup's ratio at or below its parent's and at or above its
// limited children's (tg_cfs_schedulable_down). When only one of them
// changes that is one write. When both change, quota first is tried, then
// period first; when neither intermediate fits between the bounds, the
// quota is lifted to -1 (unlimited: the cgroup then inherits its parent's
// limit, always valid) for the period write.
func (b *planBuilder) v1Bandwidth(cg string, from, to cpulimit.Limit) {
	q0, p0, q1, p1 := from.QuotaUsec, from.PeriodUsec, to.QuotaUsec, to.PeriodUsec
	quota := func(q int64) {
		b.add(HierCPU, cg, OpWrite, fileCFSQuota, cpulimit.Limit{QuotaUsec: q}.CFSQuota())
	}
	period := func(p int64) { b.add(HierCPU, cg, OpWrite, fileCFSPeriod, strconv.FormatInt(p, 10)) }
	switch {
	case p0 == p1:
		quota(q1)
		return
	case q0 == q1:
		period(p1)
		return
	}
	lo, hi := b.v1Bounds(cg)
	fits := func(q, p int64) bool {
		r := cpulimit.Limit{QuotaUsec: q, PeriodUsec: p}.Ratio()
		return r == math.MaxUint64 || (r >= lo && r <= hi)
	}
	switch {
	case fits(q1, p0):
		quota(q1)
		period(p1)
	case fits(q0, p1):
		period(p1)
		quota(q1)
	default:
		quota(cpulimit.Max)
		period(p1)
		quota(q1)
	}
}

// v1Bounds is the range cg's ratio must stay in: at least its limited
// children's, at most its parent's (for a pool, the pool root's bound).
func (b *planBuilder) v1Bounds(cg string) (lo, hi uint64) {
	hi = b.rootHi
	if parent := path.Dir(cg); parent != "." {
		if bw, ok := b.bw[parent]; ok {
			hi = bw.Ratio()
		}
	}
	for p, bw := range b.bw {
		if path.Dir(p) == cg {
			if r := bw.Ratio(); r != math.MaxUint64 && r > lo {
				lo = r
			}
		}
	}
	return lo, hi
}

// v1RootBound reads the bandwidth of the pool root and its ancestors up to
// the mount (read only; a limit there is the operator's or systemd's) and
// returns the ratio of the nearest limited one, which bounds every pool.
func (t *Tree) v1RootBound() (uint64, error) {
	for dir := t.roots[HierCPU]; ; dir = filepath.Dir(dir) {
		if exists(dir) {
			q, err := os.ReadFile(filepath.Join(dir, fileCFSQuota))
			if err != nil {
				return 0, err
			}
			p, err := os.ReadFile(filepath.Join(dir, fileCFSPeriod))
			if err != nil {
				return 0, err
			}
			qv, err := parseInt(fileCFSQuota, string(q))
			if err != nil {
				return 0, fmt.Errorf("%s: %w", dir, err)
			}
			pv, err := parseUint(fileCFSPeriod, string(p))
			if err != nil {
				return 0, fmt.Errorf("%s: %w", dir, err)
			}
			if qv >= 0 {
				return cpulimit.Limit{QuotaUsec: qv, PeriodUsec: int64(pv)}.Ratio(), nil
			}
		}
		if dir == t.cpuMount || dir == filepath.Dir(dir) {
			return math.MaxUint64, nil
		}
	}
}

// checkControllers refuses a tree where the cpu controller (or memory, when
// a limit is set) will not be available to the pools.
func (t *Tree) checkControllers(mem bool, hiers []string) error {
	if !t.v2 {
		if mem && !slices.Contains(hiers, HierMemory) {
			return fmt.Errorf("memory limit set: %w: no v1 memory hierarchy is mounted", ErrNoController)
		}
		return nil
	}
	// The pool root gets the controllers its parent enables in
	// cgroup.subtree_control; cgroup.controllers lists them once it exists.
	root := t.roots[HierUnified]
	file := filepath.Join(root, fileControllers)
	if !exists(root) {
		file = filepath.Join(filepath.Dir(root), fileSubtreeControl)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("check controllers: %w", err)
	}
	have := strings.Fields(string(raw))
	need := []string{"cpu"}
	if mem {
		need = append(need, "memory")
	}
	for _, c := range need {
		if !slices.Contains(have, c) {
			return fmt.Errorf("%s: %w: %s lists %q; enable it with \"+%s\" in %s",
				c, ErrNoController, file, strings.Join(have, " "), c, filepath.Join(filepath.Dir(root), fileSubtreeControl))
		}
	}
	return nil
}
