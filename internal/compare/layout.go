package compare

import (
	"fmt"
	"slices"
	"sort"

	"github.com/poolagent/poolagent/internal/accuracy"
	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/planner"
	"github.com/poolagent/poolagent/simulate"
)

// Layout is how a scenario maps onto poolagent's cgroups: every top-level
// group is a pool, and every task runs in its own query cgroup below its
// pool, named after the task, with the pool's per-query limits.
type Layout struct {
	// Kernel is the scenario as the kernel model and the cgroups see it:
	// pools and one query group per task, limits exact to the µs.
	Kernel simulate.Host
	// Simple is the scenario for the simple model, in its ticks.
	Simple simulate.Host
	// Desired is what cgroupfs writes: the pools with their query template.
	Desired planner.Desired
	// Paths maps every group of Kernel to its cgroup below the pool root.
	Paths map[string]string
	// PoolOf maps every task to its pool.
	PoolOf map[string]string
	// TaskCPUs maps every pinned task to its CPUs.
	TaskCPUs map[string][]int
}

// LayoutOf lays out a scenario. Pools come from its pools block (exact
// planner values) or from its top-level groups; every task runs in a
// query cgroup of its own below its pool, named after the task: the query
// group the pools block derived for it, or one without limits of its own
// for a task in a group-line pool. Nested group lines cannot be laid out.
// Memory limits are refused: compare measures CPU, and on cgroup v1 hosts
// poolagent never moves processes between memory cgroups in tests.
func LayoutOf(sc *simulate.Scenario) (*Layout, error) {
	h := sc.Host
	l := &Layout{Paths: map[string]string{}, PoolOf: map[string]string{}, TaskCPUs: map[string][]int{}, Simple: h}
	l.Kernel = simulate.Host{CPUs: h.CPUs, TickUsec: 1}
	ddl := map[string]*planner.PoolState{}
	if sc.Pools != nil {
		l.Desired = *sc.Pools
		l.Desired.Pools = slices.Clone(sc.Pools.Pools) // appended to and sorted below
		for _, ps := range sc.Pools.Pools {
			if ps.Pool.MemoryBytes >= 0 || ps.Query.MemoryBytes >= 0 {
				return nil, fmt.Errorf("%s: pool %s has a memory limit; compare measures CPU only, remove the memory limits", sc.GroupAt(slices.IndexFunc(h.Groups, func(g simulate.Group) bool { return g.Name == ps.Name })), ps.Name)
			}
			ddl[ps.Name] = ps
		}
	} else {
		l.Desired.Node = planner.Node{CPUs: float64(h.CPUs), MemoryBytes: simulate.ScenarioMemoryBytes, PeriodUsec: cpulimit.DefaultPeriodUsec}
	}
	queryOf := map[string]bool{} // derived query groups of the pools block
	for i, g := range h.Groups {
		if ps, ok := ddl[g.Parent]; ok {
			l.Kernel.Groups = append(l.Kernel.Groups, simulate.Group{Name: g.Name, Parent: g.Parent, Limit: ps.Query.CPU})
			l.Paths[g.Name] = g.Parent + "/" + g.Name
			queryOf[g.Name] = true
			continue
		}
		if g.Parent != "" {
			return nil, fmt.Errorf("%s: group %s has parent %s: compare runs every task in a query cgroup of its own below a pool; write pools and per-query limits in a pools block instead", sc.GroupAt(i), g.Name, g.Parent)
		}
		if ps, ok := ddl[g.Name]; ok {
			l.Kernel.Groups = append(l.Kernel.Groups, simulate.Group{Name: g.Name, Parent: g.Parent, Limit: ps.Pool.CPU})
		} else {
			l.Kernel.Groups = append(l.Kernel.Groups, g)
			l.Desired.Pools = append(l.Desired.Pools, &planner.PoolState{Name: g.Name, Pool: cgroupOf(g), Query: unlimited(g.PeriodUsec)})
		}
		l.Paths[g.Name] = g.Name
	}
	if _, ok := l.Desired.Pool(planner.DefaultPool); !ok {
		l.Desired.Pools = append(l.Desired.Pools, &planner.PoolState{Name: planner.DefaultPool, Pool: unlimited(l.Desired.Node.PeriodUsec), Query: unlimited(l.Desired.Node.PeriodUsec)})
	}
	sort.SliceStable(l.Desired.Pools, func(i, j int) bool {
		a, b := l.Desired.Pools[i].Name, l.Desired.Pools[j].Name
		return a == planner.DefaultPool || (b != planner.DefaultPool && a < b)
	})
	var simpleGroups []simulate.Group
	for i, t := range h.Tasks {
		if queryOf[t.Group] {
			l.PoolOf[t.Name] = groupByName(h, t.Group).Parent
			l.Kernel.Tasks = append(l.Kernel.Tasks, t)
			continue
		}
		if _, dup := l.Paths[t.Name]; dup {
			return nil, fmt.Errorf("%s: task %s has the name of a group; compare names each task's query cgroup after the task, so rename one", sc.TaskAt(i), t.Name)
		}
		pool := t.Group
		q := simulate.Group{Name: t.Name, Parent: pool, Limit: cpulimit.Limit{QuotaUsec: cpulimit.Max, PeriodUsec: groupByName(h, pool).PeriodUsec}}
		l.Kernel.Groups = append(l.Kernel.Groups, q)
		simpleGroups = append(simpleGroups, q)
		l.Paths[t.Name] = pool + "/" + t.Name
		l.PoolOf[t.Name] = pool
		qt := t
		qt.Group = t.Name
		l.Kernel.Tasks = append(l.Kernel.Tasks, qt)
	}
	if len(simpleGroups) > 0 {
		l.Simple.Groups = append(slices.Clone(h.Groups), simpleGroups...)
		l.Simple.Tasks = slices.Clone(l.Kernel.Tasks)
	}
	for name, cpus := range sc.TaskCPUs {
		l.TaskCPUs[name] = cpus
	}
	if err := l.Kernel.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", sc.Name, err)
	}
	if err := l.Simple.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", sc.Name, err)
	}
	return l, nil
}

// cgroupOf is the desired cgroup of a scenario group: its CPU limit with
// the weight made explicit, and no memory limit.
func cgroupOf(g simulate.Group) planner.Cgroup {
	l := g.Limit
	l.Weight = l.EffectiveWeight()
	return planner.Cgroup{CPU: l, MemoryBytes: -1}
}

// unlimited is a cgroup without a CPU limit ("max PERIOD"), default weight.
func unlimited(period int64) planner.Cgroup {
	return planner.Cgroup{CPU: cpulimit.Unlimited(period), MemoryBytes: -1}
}

// Pinned reports whether every task is pinned to exactly one CPU: the
// class of scenarios held to the tighter accuracy target.
func (l *Layout) Pinned() bool {
	for _, t := range l.Kernel.Tasks {
		if len(l.TaskCPUs[t.Name]) != 1 {
			return false
		}
	}
	return len(l.Kernel.Tasks) > 0
}

// LimitText renders group g's limit for the report: "20ms/100ms",
// "max/100ms", with " burst 20ms" and " cpus 0-3" when it has them.
func LimitText(g simulate.Group) string {
	quota := "max"
	if g.QuotaUsec != cpulimit.Max {
		quota = simulate.FormatUsec(g.QuotaUsec)
	}
	s := quota + "/" + simulate.FormatUsec(g.PeriodUsec)
	if g.BurstUsec > 0 {
		s += " burst " + simulate.FormatUsec(g.BurstUsec)
	}
	if !g.CPUs.IsEmpty() {
		s += " cpus " + g.CPUs.String()
	}
	return s
}

// poolOfGroup is the top-level group (the pool) group name is in.
func (l *Layout) poolOfGroup(name string) string {
	for {
		g := groupByName(l.Kernel, name)
		if g.Parent == "" {
			return name
		}
		name = g.Parent
	}
}

// Class is the workload class of group name (docs/accuracy.md): its
// tasks' threads and pinning, its quota, whether pinned work of another
// pool runs on its CPU at the same time, by the kernel model's run kr of
// the layout (arrival to completion), and whether its tasks need a whole
// number of its quotas, within a tick (tickUsec) per CPU they run on.
func (l *Layout) Class(name string, kr simulate.KernelRun, tickUsec int64) accuracy.Class {
	g := groupByName(l.Kernel, name)
	w := accuracy.Work{QuotaCPUs: -1}
	if g.QuotaUsec != cpulimit.Max {
		w.QuotaCPUs = float64(g.QuotaUsec) / float64(g.PeriodUsec)
	}
	pool := l.poolOfGroup(name)
	cpus := map[int]bool{}
	pinned := true
	var mine []int // indexes of the group's tasks
	var need int64
	for i, t := range l.Kernel.Tasks {
		if !l.inGroup(t.Group, name) {
			continue
		}
		mine = append(mine, i)
		need += t.NeedUsec
		c := l.TaskCPUs[t.Name]
		if len(c) != 1 {
			pinned = false
		}
		for _, cpu := range c {
			cpus[cpu] = true
		}
	}
	for _, i := range mine { // the most threads runnable at once
		n := 0
		for _, j := range mine {
			if overlap(kr, l.Kernel.Tasks, i, j) {
				n += max(l.Kernel.Tasks[j].Threads, 1)
			}
		}
		w.Threads = max(w.Threads, n)
	}
	if pinned && len(mine) > 0 {
		w.PinnedCPUs = len(cpus)
	}
	if q := g.QuotaUsec; q != cpulimit.Max && q > 0 && need >= q {
		runqueues := int64(min(w.Threads, l.Kernel.CPUs))
		if w.PinnedCPUs > 0 {
			runqueues = int64(w.PinnedCPUs)
		}
		off := need % q
		w.WholeQuotas = min(off, q-off) <= tickUsec*runqueues
	}
	if w.PinnedCPUs == 1 {
		for _, i := range mine {
			for j, o := range l.Kernel.Tasks {
				c := l.TaskCPUs[o.Name]
				if l.poolOfGroup(o.Group) != pool && len(c) == 1 && cpus[c[0]] && overlap(kr, l.Kernel.Tasks, i, j) {
					w.SharesCPU = true
				}
			}
		}
	}
	return accuracy.Classify(w)
}

// inGroup reports whether group g is name or below it.
func (l *Layout) inGroup(g, name string) bool {
	for g != "" {
		if g == name {
			return true
		}
		g = groupByName(l.Kernel, g).Parent
	}
	return false
}

// overlap reports whether tasks i and j were runnable at the same time
// in the kernel model's run kr; a task overlaps itself.
func overlap(kr simulate.KernelRun, tasks []simulate.HostTask, i, j int) bool {
	return i == j || tasks[i].ArriveUsec < kr.Tasks[j].DoneUsec && tasks[j].ArriveUsec < kr.Tasks[i].DoneUsec
}
