package cgroupfs

import (
	"maps"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/poolagent/poolagent/cpulimit"
	"github.com/poolagent/poolagent/planner"
)

// Changes reads the tree and returns the changes that make it match d, in
// the order they must be made. It refuses an invalid d (wrapping
// ErrInvalid) and a controller that is not available (wrapping
// ErrNoController) before anything is written.
func (t *Tree) Changes(d planner.Desired) (Changes, error) {
	if err := validate(d, t.v2); err != nil {
		return Changes{}, err
	}
	cur, err := t.readCurrent(d)
	if err != nil {
		return Changes{}, err
	}
	return Changes{Ops: diff(cur, d)}, nil
}

// diff is the ordered list of ops that turns cur into d. It reads
// nothing: cur holds all it decides on.
//
// Order: pool roots; controllers in subtree_control (v2); new pools and
// query cgroups, parents first; removal of empty query cgroups; values,
// tightening children before parents, then loosening parents before
// children; dropped pools' processes moved into default; dropped pools
// removed, children first.
func diff(cur *current, d planner.Desired) []Op {
	b := newBuilder(cur)
	for _, h := range cur.hiers {
		if !cur.rootIn[h] {
			b.add(h, ".", OpMkdir, "", "")
		}
	}
	controllers := []string{"cpu"}
	if usesMemory(d) {
		controllers = append(controllers, "memory")
	}
	if cur.v2 {
		// Query cgroups inherit their pool's CPUs: only the pools get
		// cpuset's files.
		top := controllers
		if usesCPUSet(d) {
			top = append(slices.Clone(controllers), "cpuset")
		}
		b.enable(".", top)
	}

	dropped, moves, dests := cur.dropped(d)
	pools, queries, stale := b.targets(d, dests)

	// Create what is missing, parents first.
	for _, pool := range pools {
		b.mkdir(pool.path)
		if cur.v2 {
			b.enable(pool.path, controllers)
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
	b.cpusets(b.cpusetTargets(pools, queries))
	b.allValues(pools, queries)
	b.join(queries)
	for _, mv := range moves {
		for _, h := range cur.hiers {
			if n := cur.nodes[mv.from]; n.in[h] && len(n.procs[h]) > 0 {
				b.ops = append(b.ops, Op{Kind: OpMove, Hier: h, Dir: cur.roots[h], Path: mv.from, To: mv.to, PIDs: n.procs[h]})
			}
		}
	}
	for _, top := range dropped {
		b.rmdirTree(top)
	}
	return b.ops
}

// targets are the cgroups the change keeps, with their wanted values: the
// desired pools, their busy query cgroups and the destinations of moves
// (with default's query template); stale are the empty query cgroups,
// which go.
func (b *builder) targets(d planner.Desired, dests map[string]bool) (pools, queries []target, stale []string) {
	var def planner.PoolState
	var defWant settings
	for _, p := range d.Pools {
		pool := b.target(p.Name, b.cur.cpusetWant(fromDesired(p.Pool), false, b.cur.top))
		if p.Name == planner.DefaultPool {
			def, defWant = p, pool.want
		}
		pools = append(pools, pool)
		for _, q := range b.cur.children(p.Name) {
			if !b.cur.busy(q) && !dests[q] {
				stale = append(stale, q)
				continue
			}
			queries = append(queries, b.target(q, b.cur.cpusetWant(fromDesired(p.Query), true, pool.want)))
		}
	}
	for _, dest := range slices.Sorted(maps.Keys(dests)) {
		if _, ok := b.cur.nodes[dest]; ok {
			continue // an existing query of default, already a target
		}
		queries = append(queries, b.target(dest, b.cur.cpusetWant(fromDesired(def.Query), true, defWant)))
	}
	return pools, queries, stale
}

// allValues writes the values of the pools and queries that differ:
// tightening bottom-up, then loosening top-down, so that on v1 no child is
// ever above its parent in between.
func (b *builder) allValues(pools, queries []target) {
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
}

// target is a cgroup that should exist after the change, with its values.
type target struct {
	path string
	want settings
	cur  settings
}

// builder collects the ops of a change and, for v1's ordering, each
// cgroup's bandwidth as it will be after the ops so far.
type builder struct {
	cur *current
	ops []Op
	bw  map[string]cpulimit.Limit // path -> bandwidth after the ops so far
}

func newBuilder(cur *current) *builder {
	return &builder{cur: cur, bw: map[string]cpulimit.Limit{}}
}

func (b *builder) add(h, p string, kind OpKind, file, value string) {
	b.ops = append(b.ops, Op{Kind: kind, Hier: h, Dir: b.cur.roots[h], Path: p, File: file, Value: value})
}

// move is a cgroup whose processes go to another, both relative to the
// pool root.
type move struct{ from, to string }

// dropped lists the pools in the tree that d does not have, the moves that
// empty them (every cgroup holding processes gets a destination leaf in
// default: "default/<pool>" for the pool's own cgroup,
// "default/<pool>.<query>" for anything below a query) and the set of
// destinations.
func (cur *current) dropped(d planner.Desired) (dropped []string, moves []move, dests map[string]bool) {
	desired := map[string]bool{}
	for _, p := range d.Pools {
		desired[p.Name] = true
	}
	dests = map[string]bool{}
	for _, top := range cur.children(".") {
		if desired[top] {
			continue
		}
		dropped = append(dropped, top)
		for _, p := range cur.subtree(top) {
			if !hasOwnProcs(cur.nodes[p]) {
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

// target is cgroup p with its current values (a new one has the kernel's
// defaults) and the wanted ones; it notes p's bandwidth for v1 ordering.
func (b *builder) target(p string, want settings) target {
	cur, ok := b.cur.values[p]
	if !ok {
		cur = defaults()
	}
	b.bw[p] = cur.cpu
	return target{path: p, want: want, cur: cur}
}

// mkdir creates p in every hierarchy where it is missing.
func (b *builder) mkdir(p string) {
	n := b.cur.nodes[p]
	for _, h := range b.cur.hiers {
		if n == nil || !n.in[h] {
			b.add(h, p, OpMkdir, "", "")
		}
	}
}

// rmdirTree removes p and everything below it, children first, in every
// hierarchy where it exists.
func (b *builder) rmdirTree(p string) {
	sub := b.cur.subtree(p)
	for i := len(sub) - 1; i >= 0; i-- {
		for _, h := range b.cur.hiers {
			if b.cur.nodes[sub[i]].in[h] {
				b.add(h, sub[i], OpRmdir, "", "")
			}
		}
	}
}

// enable writes "+ctrl" to cg's cgroup.subtree_control for each controller
// not yet enabled there, so cg's children get the controller's files.
func (b *builder) enable(cg string, controllers []string) {
	var add []string
	for _, c := range controllers {
		if !slices.Contains(b.cur.enabled[cg], c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) > 0 {
		b.add(HierUnified, cg, OpWrite, fileSubtreeControl, strings.Join(add, " "))
	}
}

// tightens reports whether tg's bandwidth ratio goes down.
func (b *builder) tightens(tg target) bool {
	return tg.want.cpu.Ratio() < tg.cur.cpu.Ratio()
}

// values writes what differs between tg's current and wanted values. The
// burst goes first: the kernel (tg_set_cfs_bandwidth) refuses a burst above
// the quota, and a quota below the burst, so a burst that shrinks must be
// written before the quota shrinks, while a burst that grows above the
// current quota is refused (EINVAL) and written again after the quota.
func (b *builder) values(tg target) {
	cpuH, memH := HierUnified, HierUnified
	if !b.cur.v2 {
		cpuH, memH = HierCPU, HierMemory
	}
	w, c := tg.want, tg.cur
	if w.cpu.BurstUsec != c.cpu.BurstUsec {
		file := fileCFSBurst
		if b.cur.v2 {
			file = fileCPUMaxBurst
		}
		b.add(cpuH, tg.path, OpWrite, file, strconv.FormatInt(w.cpu.BurstUsec, 10))
		b.ops[len(b.ops)-1].RetryAfterMax = true
	}
	if w.cpu.QuotaUsec != c.cpu.QuotaUsec || w.cpu.PeriodUsec != c.cpu.PeriodUsec {
		if b.cur.v2 {
			b.add(cpuH, tg.path, OpWrite, fileCPUMax, w.cpu.CPUMax())
		} else {
			b.v1Bandwidth(tg.path, c.cpu, w.cpu)
		}
		b.bw[tg.path] = w.cpu
	}
	// The kernel refuses a weight for an idle cgroup, and leaving idle
	// sets the weight to the default: idle goes off before the weight is
	// written, on after (an idle cgroup's desired weight is 0, unwritten).
	idle := func() { b.add(cpuH, tg.path, OpWrite, fileCPUIdle, w.cpu.CPUIdle()) }
	if w.cpu.Idle != c.cpu.Idle && !w.cpu.Idle {
		idle()
		c.cpu.Weight, c.shares = cpulimit.DefaultWeight, cpulimit.DefaultShares
	}
	if b.cur.v2 && w.cpu.Weight != 0 && w.cpu.Weight != c.cpu.Weight {
		b.add(cpuH, tg.path, OpWrite, fileCPUWeight, strconv.FormatInt(w.cpu.Weight, 10))
	}
	if !b.cur.v2 && w.shares != 0 && w.shares != c.shares {
		b.add(cpuH, tg.path, OpWrite, fileShares, strconv.FormatInt(w.shares, 10))
	}
	if w.cpu.Idle != c.cpu.Idle && w.cpu.Idle {
		idle()
	}
	if pageDown(w.memBytes, b.cur.pageSize) != pageDown(c.memBytes, b.cur.pageSize) {
		if b.cur.v2 {
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

// cpusetWant is s with the cpuset files a cgroup should read, given its
// parent's wanted ones. On v2 a pool has its own CPUS (empty: every CPU
// the root has) and a query nothing, as it inherits its pool's. On v1,
// where a new cpuset cgroup has neither CPUs nor memory nodes and takes
// no process until it has both, every cgroup holds its CPUs or else its
// parent's, and its parent's memory nodes. Without the v1 cpuset
// hierarchy, nothing.
func (cur *current) cpusetWant(s settings, query bool, parent settings) settings {
	switch {
	case cur.v2 && query:
		s.cpu.CPUs = cpulimit.CPUSet{}
	case !cur.v2 && !slices.Contains(cur.hiers, HierCPUSet):
		s.cpu.CPUs, s.mems = cpulimit.CPUSet{}, ""
	case !cur.v2:
		if s.cpu.CPUs.IsEmpty() {
			s.cpu.CPUs = parent.cpu.CPUs
		}
		s.mems = parent.mems
	}
	return s
}

// cpusetTargets are the cgroups whose cpuset files the change manages,
// parents first: on v1 the pool root (copying its parent's) and every
// pool and query; on v2 the pools.
func (b *builder) cpusetTargets(pools, queries []target) []target {
	if b.cur.v2 {
		return pools
	}
	if !slices.Contains(b.cur.hiers, HierCPUSet) {
		return nil
	}
	root, ok := b.cur.values["."]
	if !ok {
		root = defaults()
	}
	return append(append([]target{{path: ".", want: b.cur.top, cur: root}}, pools...), queries...)
}

// cpusets writes the cpuset files of tgs (parents first) that differ. On
// v1 (validate_change_legacy) a cpuset must stay within its parent's and
// hold its children's, and one with processes may not become empty, at
// every write: so each changed cgroup first goes to the union of its
// current and wanted CPUs, parents first, and then to the wanted ones,
// children first. Memory nodes, the same everywhere, go with the first
// pass. On v2 the kernel keeps no subset rules: one write each.
func (b *builder) cpusets(tgs []target) {
	h := HierUnified
	if !b.cur.v2 {
		h = HierCPUSet
	}
	mid := make([]cpulimit.CPUSet, len(tgs))
	for i := range tgs {
		tg := &tgs[i]
		// NOTE: v2 refuses to empty a populated cgroup's cpuset.cpus as
		// v1 does (ENOSPC, Linux 6.1): a pool that leaves its CPUS keeps
		// a list, every CPU of the pool root's parent.
		if b.cur.v2 && tg.want.cpu.CPUs.IsEmpty() && !tg.cur.cpu.CPUs.IsEmpty() {
			tg.want.cpu.CPUs = b.cur.top.cpu.CPUs
		}
		mid[i] = tg.want.cpu.CPUs
		if !b.cur.v2 {
			mid[i] = tg.cur.cpu.CPUs.Union(mid[i])
		}
		if mid[i] != tg.cur.cpu.CPUs {
			b.add(h, tg.path, OpWrite, fileCPUSetCPUs, cpusValue(mid[i]))
		}
		if tg.want.mems != tg.cur.mems {
			b.add(h, tg.path, OpWrite, fileCPUSetMems, tg.want.mems)
		}
	}
	for i := len(tgs) - 1; i >= 0; i-- {
		if tgs[i].want.cpu.CPUs != mid[i] {
			b.add(h, tgs[i].path, OpWrite, fileCPUSetCPUs, cpusValue(tgs[i].want.cpu.CPUs))
		}
	}
}

// join moves, on v1, the processes of each query cgroup in the cpu
// hierarchy that are not in its cpuset twin into it (an OpMove into the
// cgroup itself): a query running when its pool's CPU sets came into use,
// or a process it forked while it was being placed. It comes after the
// twin's CPUs and memory nodes are written.
func (b *builder) join(queries []target) {
	if b.cur.v2 || !slices.Contains(b.cur.hiers, HierCPUSet) {
		return
	}
	for _, q := range queries {
		n := b.cur.nodes[q.path]
		if n == nil {
			continue
		}
		var pids []int
		for _, pid := range n.procs[HierCPU] {
			if !slices.Contains(n.procs[HierCPUSet], pid) {
				pids = append(pids, pid)
			}
		}
		if len(pids) > 0 {
			b.ops = append(b.ops, Op{Kind: OpMove, Hier: HierCPUSet, Dir: b.cur.roots[HierCPUSet], Path: q.path, To: q.path, PIDs: pids})
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
func (b *builder) v1Bandwidth(cg string, from, to cpulimit.Limit) {
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
func (b *builder) v1Bounds(cg string) (lo, hi uint64) {
	hi = b.cur.rootHi
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
