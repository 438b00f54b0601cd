package planner

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/poolagent/poolagent/internal/cpulimit"
)

// Activity is what the planner knows about the pools' current use.
type Activity struct {
	// Active names the pools with running queries. Nil counts every pool
	// whose RESOURCES_WEIGHT is >= 0 as active.
	Active []string
	// DemandCPUs is each pool's observed demand in vCPU: CPU usage plus
	// throttled time over the last interval, divided by its length. A
	// pool that wants less than its share is held to its demand and the
	// rest is divided among the others; a pool without an entry is taken
	// to want its whole cap.
	DemandCPUs map[string]float64
}

// Plan turns the pools of m into the desired cgroup state for node.
//
// Each pool's cap is TOTAL_CPU_LIMIT_PERCENT_PER_NODE of the node's vCPUs
// (the whole node without one), at most the number of its CPUS, lowered
// to its demand when one is known.
// Active pools with RESOURCES_WEIGHT >= 0 divide the node by weighted
// max-min fairness (water-filling): when their caps fit, each gets its
// cap; otherwise a_i = min(cap_i, λ·w_i) with λ such that the allocations
// fill the node. Pools with weight 0 take only what is left once every
// weighted pool has its cap, shared equally. Every other pool is planned
// at its cap, ready for when it becomes active.
//
// The pool's cpu.max quota is allocation × period, rounded to µs and at
// least 1000 µs, or "max" when the pool has no CPU limit and is not held
// below the whole node. Each query's cpu.max is the allocation ×
// QUERY_CPU_LIMIT_PERCENT_PER_NODE, or the whole allocation without that
// limit: always a quota, so a program that sizes itself from its own
// cgroup's cpu.max (Go's GOMAXPROCS, nproc) sees the CPU it may use
// rather than the host's; memory.max is node memory ×
// TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE for the pool and ×
// QUERY_MEMORY_LIMIT_PERCENT_PER_NODE for each query, memory.high the same
// with TOTAL_ and QUERY_MEMORY_HIGH_PERCENT_PER_NODE; the pool's
// memory.min and memory.low are node memory ×
// TOTAL_MEMORY_MIN_PERCENT_PER_NODE and × TOTAL_MEMORY_LOW_PERCENT_PER_NODE,
// and each query of a pool with one claims "max" of it (shareOf); pids.max is
// TOTAL_PIDS_LIMIT for the pool and QUERY_PIDS_LIMIT for each query.
// CPU_BURST_PERCENT of a quota becomes its cpu.max.burst. CPU_IDLE=1
// makes the pool's cgroup idle (cpu.idle 1, no cpu.weight); its queries
// are not idle among themselves. CPUS confines the pool and its queries to those CPUs
// (cpuset.cpus), which must be online on the node; a pool held only by
// its CPUS, at all of them, needs no quota (cpu.max "max").
func Plan(m *Model, node Node, act Activity) (Desired, error) {
	if err := checkNode(node); err != nil {
		return Desired{}, err
	}
	pools := m.Pools()
	active, err := activePools(m, pools, act.Active)
	if err != nil {
		return Desired{}, err
	}
	if err := checkCPUs(pools, node); err != nil {
		return Desired{}, err
	}
	if err := checkDemand(m, act.DemandCPUs); err != nil {
		return Desired{}, err
	}
	d := Desired{Node: node, Pools: states(pools, node, active, act.DemandCPUs)}
	d.activeAt = activeIndexes(d.Pools)
	return d, nil
}

// Replan is Plan(m, node, act) made from prev, a plan Plan or Replan made
// for the same m and node: only the pools active in prev or in act are
// planned again, the rest are prev's. An inactive pool's state is its cap,
// which depends on its model and the node alone, so the result is Plan's
// while the cost follows the active pools rather than all of them. Of
// act.DemandCPUs only the active pools' demands are used and checked.
// prev for another node is refused; the caller vouches for the model.
func Replan(prev Desired, m *Model, node Node, act Activity) (Desired, error) {
	if prev.Node != node {
		return Desired{}, fmt.Errorf("re-plan for node %+v from a plan for node %+v; accepted: a plan for the same node", node, prev.Node)
	}
	if act.Active == nil {
		return Plan(m, node, act) // every weighted pool active: a whole plan
	}
	active, err := activePools(m, nil, act.Active)
	if err != nil {
		return Desired{}, err
	}
	demand := map[string]float64{}
	for name := range active {
		if d, ok := act.DemandCPUs[name]; ok {
			demand[name] = d
		}
	}
	if err := checkDemand(m, demand); err != nil {
		return Desired{}, err
	}
	// The pools to plan again, in prev's order (the model's), so that the
	// division sees its claims in the order Plan gives them: those active
	// in prev, and those active now, found by name.
	at := prev.activeAt
	if at == nil {
		at = activeIndexes(prev.Pools)
	}
	at = slices.Clone(at)
	for name := range active {
		i, ok := prev.index(name)
		if !ok {
			return Desired{}, fmt.Errorf("re-plan: active pool %q is not in the plan; accepted: a plan for the same model", name)
		}
		at = append(at, i)
	}
	slices.Sort(at)
	at = slices.Compact(at)
	pools := make([]Pool, len(at))
	for k, i := range at {
		p, ok := m.Pool(prev.Pools[i].Name)
		if !ok {
			return Desired{}, fmt.Errorf("re-plan: the plan's pool %q is not in the model; accepted: a plan for the same model", prev.Pools[i].Name)
		}
		pools[k] = p
	}
	out := Desired{Node: node, Pools: slices.Clone(prev.Pools), activeAt: []int{}}
	for k, ps := range states(pools, node, active, demand) {
		out.Pools[at[k]] = ps
		if ps.Active {
			out.activeAt = append(out.activeAt, at[k])
		}
	}
	return out, nil
}

// states is the desired state of each of pools, allocated among the
// active ones of them.
func states(pools []Pool, node Node, active map[string]bool, demand map[string]float64) []*PoolState {
	caps, byCPUs, alloc := allocate(pools, node, active, demand)
	out := make([]*PoolState, len(pools))
	for i, p := range pools {
		pool, query := cgroupsOf(p, node, alloc[i])
		out[i] = &PoolState{
			Name:      p.Name,
			Pool:      pool,
			Query:     query,
			Active:    active[p.Name],
			Weight:    p.ResourcesWeight,
			CapCPUs:   caps[i],
			CapByCPUs: byCPUs[i],
			AllocCPUs: alloc[i],
		}
	}
	return out
}

// activePools says which of pools are active: the names given, each a
// pool of m, or with names nil every pool with RESOURCES_WEIGHT >= 0.
func activePools(m *Model, pools []Pool, names []string) (map[string]bool, error) {
	active := make(map[string]bool, len(pools))
	if names == nil {
		for _, p := range pools {
			active[p.Name] = p.ResourcesWeight >= 0
		}
		return active, nil
	}
	for _, name := range names {
		if _, ok := m.pools[name]; !ok {
			return nil, fmt.Errorf("active pool: %s", m.noPool(name))
		}
		active[name] = true
	}
	return active, nil
}

// checkDemand refuses a demand for a pool m does not have, or one that is
// not a finite number of vCPUs >= 0.
func checkDemand(m *Model, demand map[string]float64) error {
	for name, d := range demand {
		if _, ok := m.pools[name]; !ok {
			return fmt.Errorf("demand: %s", m.noPool(name))
		}
		if !(d >= 0) || math.IsInf(d, 0) {
			return fmt.Errorf("demand of pool %q is %v vCPU; accepted: a finite number >= 0", name, d)
		}
	}
	return nil
}

// allocate divides the node among pools, in vCPU: each pool's cap (and
// whether its CPUS made it), and its allocation, which is the cap for an
// inactive pool and the water-filled share, capped also by its demand,
// for an active pool with a weight.
func allocate(pools []Pool, node Node, active map[string]bool, demand map[string]float64) (caps []float64, byCPUs []bool, alloc []float64) {
	caps = make([]float64, len(pools))
	byCPUs = make([]bool, len(pools))
	alloc = make([]float64, len(pools))
	claims := make([]claim, 0, len(pools))
	claimOf := make([]int, 0, len(pools))
	for i, p := range pools {
		caps[i], byCPUs[i] = capOf(p, node)
		alloc[i] = caps[i]
		if !active[p.Name] || p.ResourcesWeight < 0 {
			continue
		}
		c := claim{cap: caps[i], weight: float64(p.ResourcesWeight)}
		if d, ok := demand[p.Name]; ok {
			c.cap = min(c.cap, d)
		}
		claims = append(claims, c)
		claimOf = append(claimOf, i)
	}
	for k, a := range waterFill(node.CPUs, claims) {
		alloc[claimOf[k]] = a
	}
	return caps, byCPUs, alloc
}

// cgroupsOf is the desired state of pool p's cgroup and of each of its
// query cgroups when the pool is allocated alloc vCPU, as Plan's comment
// gives it.
func cgroupsOf(p Pool, node Node, alloc float64) (pool, query Cgroup) {
	period := node.PeriodUsec
	if p.CPUPeriodUsec > 0 {
		period = p.CPUPeriodUsec
	}
	quota := int64(cpulimit.Max)
	if p.TotalCPULimitPercent >= 0 || alloc < reach(p, node)*(1-1e-12) {
		quota = quotaUsec(alloc, period)
	}
	queryCPUs := alloc
	if p.QueryCPULimitPercent >= 0 {
		queryCPUs *= p.QueryCPULimitPercent / 100
	}
	pool = cgroup(quota, period, p.CPUBurstPercent, CPUWeight(p.ResourcesWeight), memoryLimit(node, p.TotalMemoryLimitPercent))
	pool.MemoryHighBytes = memoryLimit(node, p.TotalMemoryHighPercent)
	pool.MemoryMinBytes = max(memoryLimit(node, p.TotalMemoryMinPercent), 0)
	pool.MemoryLowBytes = max(memoryLimit(node, p.TotalMemoryLowPercent), 0)
	pool.PidsMax = p.TotalPidsLimit
	if p.CPUIdle == 1 {
		pool.CPU.Idle, pool.CPU.Weight = true, 0
	}
	query = cgroup(quotaUsec(queryCPUs, period), period, p.CPUBurstPercent, cpulimit.DefaultWeight, memoryLimit(node, p.QueryMemoryLimitPercent))
	query.MemoryHighBytes = memoryLimit(node, p.QueryMemoryHighPercent)
	query.MemoryMinBytes, query.MemoryLowBytes = shareOf(pool.MemoryMinBytes), shareOf(pool.MemoryLowBytes)
	query.PidsMax = p.QueryPidsLimit
	pool.CPU.CPUs, query.CPU.CPUs = p.CPUs, p.CPUs
	return pool, query
}

// capOf is p's cap in vCPU: TOTAL_CPU_LIMIT_PERCENT_PER_NODE of the node
// (the whole node without one), at most the number of its CPUS; byCPUs
// says whether the CPUS made it smaller.
func capOf(p Pool, node Node) (cpus float64, byCPUs bool) {
	cpus = node.CPUs
	if p.TotalCPULimitPercent >= 0 {
		cpus = node.CPUs * p.TotalCPULimitPercent / 100
	}
	if n := float64(p.CPUs.Count()); n > 0 && n < cpus {
		return n, true
	}
	return cpus, false
}

// reach is the most CPU p's queries could use without a quota: the node,
// or the count of its CPUS when that is fewer.
func reach(p Pool, node Node) float64 {
	if n := float64(p.CPUs.Count()); n > 0 && n < node.CPUs {
		return n
	}
	return node.CPUs
}

// checkCPUs refuses a pool whose CPUS names a CPU the node does not have
// online, at the setting.
func checkCPUs(pools []Pool, node Node) error {
	online := node.OnlineCPUs()
	var errs ErrorList
	for _, p := range pools {
		if off := p.CPUs.Minus(online); !off.IsEmpty() {
			errs.errorf(p.CPUsAt, "pool %q: CPUS='%s': CPUs %s are not online on this node (online: %s); accepted: CPUs within %s, or CPUS=-1",
				p.Name, p.CPUs, off, online, online)
		}
	}
	if len(errs) > 0 {
		sortErrors(errs)
		return errs
	}
	return nil
}

// checkNode refuses a node the plan cannot be made for.
func checkNode(n Node) error {
	if !(n.CPUs > 0) || math.IsInf(n.CPUs, 0) {
		return fmt.Errorf("node has %v vCPU; accepted: a finite number > 0", n.CPUs)
	}
	if n.MemoryBytes <= 0 {
		return fmt.Errorf("node has %d bytes of memory; accepted: a number > 0", n.MemoryBytes)
	}
	if n.PeriodUsec < cpulimit.MinPeriodUsec || n.PeriodUsec > cpulimit.MaxPeriodUsec {
		return fmt.Errorf("node period %d µs; accepted: %d..%d (1 ms..1 s)", n.PeriodUsec, cpulimit.MinPeriodUsec, cpulimit.MaxPeriodUsec)
	}
	return nil
}

// quotaUsec is cpus × period rounded to µs, at least the kernel's
// smallest quota.
func quotaUsec(cpus float64, periodUsec int64) int64 {
	return max(int64(math.Round(cpus*float64(periodUsec))), cpulimit.MinQuotaUsec)
}

// shareOf is a query's guarantee below its pool's: -1 ("max", all it
// uses) where the pool has one, so that the kernel divides the pool's
// among its queries in proportion to their use whether or not cgroup2 is
// mounted with memory_recursiveprot; 0 where the pool has none.
func shareOf(pool int64) int64 {
	if pool > 0 {
		return -1
	}
	return 0
}

// memoryLimit is percent of the node's memory in bytes, -1 without a
// limit.
func memoryLimit(n Node, percent float64) int64 {
	if percent < 0 {
		return -1
	}
	return int64(math.Round(float64(n.MemoryBytes) * percent / 100))
}

// cgroup builds one cgroup's desired state. quota cpulimit.Max is
// unlimited; the burst is burstPercent of a limited quota, 0 otherwise.
func cgroup(quota, period int64, burstPercent float64, weight, memory int64) Cgroup {
	l := cpulimit.Limit{QuotaUsec: quota, PeriodUsec: period, Weight: weight}
	if quota >= 0 && burstPercent > 0 {
		l.BurstUsec = int64(math.Round(float64(quota) * burstPercent / 100))
	}
	return Cgroup{CPU: l, MemoryBytes: memory}
}

// claim is one pool's part in the division: the most it may get, vCPU,
// and its weight.
type claim struct {
	cap    float64
	weight float64
}

// waterFill divides capacity vCPU among claims by weighted max-min
// fairness: claims with weight > 0 first; what they leave once all are at
// their caps goes to the weight-0 claims, shared equally, again capped.
func waterFill(capacity float64, claims []claim) []float64 {
	alloc := make([]float64, len(claims))
	var weighted, zero []int
	for i, c := range claims {
		if c.weight > 0 {
			weighted = append(weighted, i)
		} else {
			zero = append(zero, i)
		}
	}
	left := fill(capacity, claims, weighted, func(i int) float64 { return claims[i].weight }, alloc)
	fill(left, claims, zero, func(int) float64 { return 1 }, alloc)
	return alloc
}

// fill gives the claims idx their max-min shares of capacity under
// weights w, writes them to alloc and returns the capacity left over
// (zero unless every claim got its cap). Claims are visited by ascending
// cap/weight: while a claim's cap is within its share of what remains it
// gets the cap and leaves the rest to the others; the first that is not
// fixes λ = remaining / remaining weight for it and every later claim.
func fill(capacity float64, claims []claim, idx []int, w func(int) float64, alloc []float64) float64 {
	total := 0.0
	for _, i := range idx {
		total += claims[i].cap
	}
	if total <= capacity {
		for _, i := range idx {
			alloc[i] = claims[i].cap
		}
		return capacity - total
	}
	slices.SortFunc(idx, func(a, b int) int {
		return cmp.Compare(claims[a].cap*w(b), claims[b].cap*w(a))
	})
	rest, wsum := capacity, 0.0
	for _, i := range idx {
		wsum += w(i)
	}
	for k, i := range idx {
		if claims[i].cap*wsum <= rest*w(i) {
			alloc[i] = claims[i].cap
			rest -= claims[i].cap
			wsum -= w(i)
			continue
		}
		lambda := rest / wsum
		for _, j := range idx[k:] {
			alloc[j] = lambda * w(j)
		}
		return 0
	}
	return max(rest, 0)
}
