package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// replanner divides the CPU among the pools (weighted max-min) and applies
// the result to the pool cgroups: at start, whenever the set of active
// pools or their demand changes, and after every change of the model. It
// holds the policy it plans from, which changes installs (setPolicy):
// changes call the replanner, never the other way. Its
// lock is "plan" in the lock order (see Server): held across a whole plan,
// from reading the inputs to the last cgroup write, so plans never
// interleave.
type replanner struct {
	cg   Cgroups
	log  *slog.Logger
	reg  *registry
	kick chan struct{}
	// inForce is the policy in force, readable without the lock.
	inForce atomic.Pointer[Policy]
	// current is the plan last applied, readable without the lock.
	current atomic.Pointer[planner.Desired]
	// repairs counts the writes reconcile made to undo drift.
	repairs atomic.Uint64

	mu sync.Mutex
	// planned is what current was planned from.
	planned planInput
	demand  map[string]float64
	// lastPoolStats and lastPoolStatsAt are the previous refresh's reading
	// of the pool cgroups, for demand.
	lastPoolStats   map[string]observe.CPUStat
	lastPoolStatsAt time.Time
	// pending are the memory limits the last apply held back (logPending).
	pending []string
}

func newReplanner(cg Cgroups, log *slog.Logger, reg *registry) *replanner {
	return &replanner{cg: cg, log: log, reg: reg, kick: make(chan struct{}, 1)}
}

// policy returns the policy in force.
func (rp *replanner) policy() Policy { return *rp.inForce.Load() }

// setPolicy makes p the policy the next plan is made from.
func (rp *replanner) setPolicy(p Policy) { rp.inForce.Store(&p) }

// request asks the loop for a plan soon; requests made while one is
// pending are one request.
func (rp *replanner) request() {
	select {
	case rp.kick <- struct{}{}:
	default:
	}
}

// loop plans on every request until ctx ends.
func (rp *replanner) loop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-rp.kick:
			if err := rp.plan(); err != nil {
				rp.log.Error("re-plan pools", "err", err)
			}
		}
	}
}

// desired returns the plan last applied to the cgroups.
func (rp *replanner) desired() planner.Desired {
	if d := rp.current.Load(); d != nil {
		return *d
	}
	return planner.Desired{}
}

// poolState returns pool's state in the last applied plan.
func (rp *replanner) poolState(pool string) (planner.PoolState, bool) {
	return rp.desired().Pool(pool)
}

// plan computes the desired state for the current active set and demand
// and applies it when it differs from the last one applied. Pools the
// model no longer has (dropped while queries ran) take no part. Only the
// active pools' demand is taken: the plan holds no other pool to its.
func (rp *replanner) plan() error {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	p := rp.policy()
	m := p.Model
	active := []string{}
	demand := map[string]float64{}
	for _, name := range rp.reg.active() {
		if _, ok := m.Pool(name); !ok {
			continue
		}
		active = append(active, name)
		if d, ok := rp.demand[name]; ok {
			demand[name] = d
		}
	}
	last := rp.current.Load()
	in := planInput{model: m, node: p.Node, active: active, demand: demand}
	if last != nil && in.equal(rp.planned) {
		return nil
	}
	act := planner.Activity{Active: active, DemandCPUs: demand}
	var d planner.Desired
	var err error
	if last != nil && m == rp.planned.model && p.Node == rp.planned.node {
		// Only the active pools' states depend on the activity.
		d, err = planner.Replan(*last, m, p.Node, act)
	} else {
		d, err = planner.Plan(m, p.Node, act)
	}
	if err != nil {
		return fmt.Errorf("plan for active pools %v: %w", active, err)
	}
	if last == nil || !sameCgroups(d, *last) {
		if err := rp.cg.Apply(d); err != nil {
			return err
		}
		rp.log.Info("pools applied", "active", active, "pools", len(d.Pools))
		rp.logPending()
	}
	rp.current.Store(&d)
	rp.reg.tellChanged()
	rp.planned = in
	return nil
}

// reconcile compares the pool tree with the plan last applied and writes
// what differs: drift left by another writer on the same pool root (a
// pool cgroup removed, a value changed), which plan, seeing an unchanged
// plan, would never look for. The writes are logged and counted
// (poolagent_tree_repair_writes_total).
//
// With queries false the values of the query cgroups the daemon made for
// the plan in force are not read (Cgroups.Repair): the periodic
// comparison reads them every QueryRepairEvery times, a reload every time.
func (rp *replanner) reconcile(queries bool) error {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	d := rp.current.Load()
	if d == nil {
		return nil
	}
	writes, err := rp.cg.Repair(*d, queries)
	if writes > 0 {
		rp.repairs.Add(uint64(writes))
		rp.log.Warn("pool tree had drifted from the plan; repaired", "writes", writes)
	}
	rp.logPending()
	if err != nil {
		return fmt.Errorf("reconcile the pool tree with the plan: %w", err)
	}
	return nil
}

// logPending logs the memory limits held back because their cgroups use
// more, when they differ from those the last apply held back: a new one
// as a warning, and that none is left once usage allowed the last.
func (rp *replanner) logPending() {
	var now []string
	for _, p := range rp.cg.Pending() {
		now = append(now, p.String())
	}
	if slices.Equal(now, rp.pending) {
		return
	}
	for _, p := range now {
		if !slices.Contains(rp.pending, p) {
			rp.log.Warn("memory limit not lowered: its cgroup uses more; it is written once usage allows", "pending", p)
		}
	}
	if len(now) == 0 {
		rp.log.Info("pending memory limits written: usage allowed them")
	}
	rp.pending = now
}

// QueryRepairEvery is how many periodic comparisons of the pool tree with
// the plan go by for one that also reads the values of the query cgroups
// the daemon made (every 5 minutes at the default interval). Every
// comparison reads the pools' values, lists every cgroup and reads its
// processes; a query cgroup's values are the daemon's own writes, which
// only another writer changes, and reading them (four or five files each)
// was most of a comparison's cost with many queries running: 0.16 s of CPU
// every 30 s at 1,000 queries on the v1 host (docs/performance.md, At
// scale). A reload (SIGHUP) reads them all at once.
const QueryRepairEvery = 10

// reconcileLoop reconciles every interval until ctx ends.
func (rp *replanner) reconcileLoop(ctx context.Context, every time.Duration) {
	n := 0
	everyTick(ctx, every, func(time.Time) {
		n++
		if err := rp.reconcile(n%QueryRepairEvery == 0); err != nil {
			rp.log.Error("reconcile", "err", err)
		}
	})
}

// everyTick calls fn with the tick's time every interval until ctx ends;
// a tick that comes while fn runs is dropped, as time.Ticker drops it.
func everyTick(ctx context.Context, every time.Duration, fn func(now time.Time)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			fn(now)
		}
	}
}

// observeDemand takes each pool's demand over the last refresh interval:
// (usage + throttled time) / wall time, in vCPUs.
func (rp *replanner) observeDemand(now time.Time) {
	var pools []string
	for _, p := range rp.policy().Model.Pools() {
		pools = append(pools, p.Name)
	}
	stats, err := rp.cg.PoolCPUStats(pools)
	if err != nil {
		rp.log.Error("read pool CPU accounting for demand", "err", err)
		return
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.lastPoolStats != nil {
		elapsedUsec := float64(now.Sub(rp.lastPoolStatsAt).Microseconds())
		demand := map[string]float64{}
		for pool, cur := range stats {
			prev, ok := rp.lastPoolStats[pool]
			if !ok || elapsedUsec <= 0 {
				continue
			}
			d := cur.CPU.Sub(prev)
			demand[pool] = float64(d.UsageUsec+d.ThrottledUsec) / elapsedUsec
		}
		rp.demand = demand
	}
	rp.lastPoolStats = make(map[string]observe.CPUStat, len(stats))
	for pool, s := range stats {
		rp.lastPoolStats[pool] = s.CPU
	}
	rp.lastPoolStatsAt = now
}

// demandNow returns the demand per pool (vCPUs) observed at the last load
// refresh.
func (rp *replanner) demandNow() map[string]float64 {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return maps.Clone(rp.demand)
}

// started notes a query start in pool: the pool's observed demand is
// forgotten until the next refresh measures it again, so a new query is
// never held to what the pool used while it was idle; and the pools are
// re-planned at once, since the active set may have changed, so that the
// CPU limit the query is told (POOLAGENT_CPU_LIMIT) is the one its pool
// has with it running.
func (rp *replanner) started(pool string) {
	rp.mu.Lock()
	delete(rp.demand, pool)
	rp.mu.Unlock()
	if err := rp.plan(); err != nil {
		rp.log.Error("re-plan pools", "err", err)
	}
}

// withPool calls fn with pool's state in the plan last applied, holding
// the plan lock, so that no re-plan is applied between reading the state
// and fn's cgroup writes: a query cgroup made from it has its pool's
// current limits (on cgroup v1 the kernel would refuse a query quota
// above a pool quota that a re-plan had lowered meanwhile). ok is false
// when the plan has no such pool.
func (rp *replanner) withPool(pool string, fn func(planner.PoolState) error) (ok bool, err error) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	ps, ok := rp.desired().Pool(pool)
	if !ok {
		return false, nil
	}
	return true, fn(ps)
}

// planInput is what a plan is made from; the same input gives the same
// plan, so it is not made again.
type planInput struct {
	model  *planner.Model
	node   planner.Node
	active []string
	demand map[string]float64
}

func (a planInput) equal(b planInput) bool {
	return a.model == b.model && a.node == b.node && slices.Equal(a.active, b.active) && maps.Equal(a.demand, b.demand)
}

// sameCgroups reports whether a and b ask for the same cgroup tree: the
// same pools with the same pool and query cgroup values. Whether a pool is
// active, and the allocation figures beside the values, change no file.
func sameCgroups(a, b planner.Desired) bool {
	changed, same := planner.Changed(a, b)
	return same && len(changed) == 0
}
