package cgroupfs

import (
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/planner"
)

// Changes reads the tree and returns the changes that make it match d, in
// the order they must be made. It refuses an invalid d (wrapping
// ErrInvalid) and a controller that is not available (wrapping
// ErrNoController) before anything is written.
func (t *Tree) Changes(d planner.Desired) (Changes, error) {
	return t.changes(d, nil)
}

// changes is Changes confined to the pools of only (nil: the whole tree).
// A confined change whose tree is not ready for it (a hierarchy's pool
// root not made yet, on v2 a controller the root does not enable yet to
// its pools) is made for the whole tree: every pool needs that.
func (t *Tree) changes(d planner.Desired, only map[string]bool) (Changes, error) {
	if err := validate(d, t.v2); err != nil {
		return Changes{}, err
	}
	cur, err := t.readCurrent(d, only)
	if err != nil {
		return Changes{}, err
	}
	if only != nil && !cur.ready(d) {
		return t.changes(d, nil)
	}
	ops, pending := diffPending(cur, d)
	return Changes{Ops: ops, Pending: pending}, nil
}

// ready reports whether the parts of the tree every pool shares are as d
// needs them: the pool root made in every hierarchy the change touches
// and, on v2, every controller d uses enabled in its
// cgroup.subtree_control.
func (cur *current) ready(d planner.Desired) bool {
	for _, h := range cur.hiers {
		if !cur.rootIn[h] {
			return false
		}
	}
	top, _ := enabled(cur.use)
	for _, c := range top {
		if cur.v2 && !slices.Contains(cur.enabled["."], c) {
			return false
		}
	}
	return true
}

// diff is the ordered list of ops that turns cur into d. It reads
// nothing: cur holds all it decides on.
//
// Order: pool roots; controllers in subtree_control (v2); new pools and
// query cgroups, parents first; removal of empty query cgroups; the
// controllers' writes before the values (cpuset's CPUs); values, each
// cgroup's controller by controller, tightening children before parents,
// then loosening parents before children; the controllers' writes after
// the values (the root's memory guarantees, v1's cpuset twins joined);
// dropped pools' processes moved into default; dropped pools removed,
// children first.
func diff(cur *current, d planner.Desired) []Op {
	ops, _ := diffPending(cur, d)
	return ops
}

// diffPending is diff, and the lowered memory limits it left out because
// their cgroups use more (memoryValues).
func diffPending(cur *current, d planner.Desired) ([]Op, []Pending) {
	b := newBuilder(cur)
	for _, h := range cur.hiers {
		if !cur.rootIn[h] {
			b.add(h, ".", OpMkdir, "", "")
		}
	}
	top, below := enabled(usesIn(d))
	if cur.v2 {
		b.enable(".", top)
	}

	dropped, moves, dests := cur.dropped(d)
	pools, queries, stale := b.targets(d, dests)

	// Create what is missing, parents first.
	for _, pool := range pools {
		b.mkdir(pool.path)
		if cur.v2 {
			b.enable(pool.path, below)
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
	for _, c := range controllers {
		if c.before != nil {
			c.before(b, pools, queries)
		}
	}
	b.allValues(pools, queries)
	for _, c := range controllers {
		if c.after != nil {
			c.after(b, d, queries)
		}
	}
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
	return b.ops, b.pending
}

// targets are the cgroups the change keeps, with their wanted values: the
// desired pools, their busy query cgroups and the destinations of moves
// (with default's query template); stale are the empty query cgroups,
// which go.
func (b *builder) targets(d planner.Desired, dests map[string]bool) (pools, queries []target, stale []string) {
	var def planner.PoolState
	var defWant settings
	for _, p := range d.Pools {
		if b.cur.only != nil && !b.cur.only[p.Name] {
			continue
		}
		pool := b.target(p.Name, b.cur.cpusetWant(fromDesired(p.Pool), false, b.cur.top))
		if p.Name == planner.DefaultPool {
			def, defWant = *p, pool.want
		}
		pools = append(pools, pool)
		for _, q := range b.cur.children(p.Name) {
			if !b.cur.busy(q) && !dests[q] && !b.cur.keep[q] {
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
	// pending are the lowered memory limits held back.
	pending []Pending
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
// defaults, a trusted one the wanted ones) and the wanted ones; it notes
// p's bandwidth for v1 ordering.
func (b *builder) target(p string, want settings) target {
	cur, ok := b.cur.values[p]
	switch {
	case b.cur.trusted[p]:
		cur = want
	case !ok:
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

// values writes what differs between tg's current and wanted values,
// each controller its own, in the table's order.
func (b *builder) values(tg target) {
	for _, c := range controllers {
		if c.values != nil {
			c.values(b, tg)
		}
	}
}
