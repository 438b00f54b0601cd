package simulate

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/planner"
)

// ScenarioMemoryBytes is the node memory a scenario's pools are planned
// for. The simulator models CPU only; memory limits in a pools block are
// computed against this size and otherwise ignored.
const ScenarioMemoryBytes = 1 << 30

// poolsState is what the parser keeps of a pools block and of task
// placement (docs/scenario.md, "Pools in YDB DDL" and "Placement").
type poolsState struct {
	open      bool     // inside pools … end
	startLine int      // line of the pools keyword
	ddl       []string // DDL text at its own line numbers (index = line-1)
	taskCPUs  map[string][]int
	cpuLines  map[string]int // task → line of its cpus setting
	desired   *planner.Desired
}

// inPools takes the lines of an open pools block: everything up to a line
// that is just "end" is DDL for the planner. It reports whether it took
// the line.
func (p *scenarioParser) inPools(fields []string, line string) bool {
	if !p.pools.open {
		return false
	}
	if len(fields) == 1 && fields[0] == "end" {
		p.pools.open = false
		return true
	}
	for len(p.pools.ddl) < p.line {
		p.pools.ddl = append(p.pools.ddl, "")
	}
	p.pools.ddl[p.line-1] = line
	return true
}

// poolsBlock parses "pools", which opens a block of YDB DDL ended by "end".
func (p *scenarioParser) poolsBlock(args []string) {
	if !p.once("pools", &p.pools.startLine) {
		return
	}
	if len(args) != 0 {
		p.fail("pools takes no arguments: the DDL follows on the next lines, up to a line \"end\"")
	}
	p.pools.open = true
}

// pin records a task's cpus setting: a CPU list such as 0, 0,1 or 0-3.
func (p *scenarioParser) pin(task, v string) bool {
	cpus, err := ParseCPUList(v)
	if err != nil {
		p.fail("cpus %q %v (accepted: CPU numbers as a list like 0,1 or a range like 0-3)", v, err)
		return false
	}
	if p.pools.taskCPUs == nil {
		p.pools.taskCPUs, p.pools.cpuLines = map[string][]int{}, map[string]int{}
	}
	p.pools.taskCPUs[task] = cpus
	p.pools.cpuLines[task] = p.line
	return true
}

// ParseCPUList parses a CPU list such as "0", "0,2" or "0-3,6" (the
// cpuset list format, cpulimit.ParseCPUSet) into CPU numbers, ascending;
// the list may not be empty. The error completes a sentence such as
// `cpus "x" ...`.
func ParseCPUList(v string) ([]int, error) {
	set, err := cpulimit.ParseCPUSet(v)
	var bad *cpulimit.CPUListError
	switch {
	case errors.As(err, &bad):
		return nil, fmt.Errorf("is not a CPU list (%s)", bad.Problem)
	case set.IsEmpty():
		return nil, errors.New("is not a CPU list (empty)")
	}
	return set.CPUs(), nil
}

// finishPools closes the pools block: the DDL goes through the planner
// for the scenario's CPUs, each pool becomes a group and each task placed
// in a pool gets a query group of its own, named after the task, with the
// pool's per-query limits. It also checks the tasks' CPUs.
func (p *scenarioParser) finishPools() {
	for name, cpus := range p.pools.taskCPUs {
		for _, c := range cpus {
			if p.h.CPUs > 0 && c >= p.h.CPUs {
				p.line = p.pools.cpuLines[name]
				p.fail("cpus: task %s pinned to cpu %d (accepted: cpus 0..%d of the cpus line)", name, c, p.h.CPUs-1)
			}
		}
	}
	if p.pools.startLine == 0 {
		return
	}
	p.line = p.pools.startLine
	if p.pools.open {
		p.fail("pools block has no end (add a line: end)")
		return
	}
	if p.h.CPUs < 1 {
		return // reported as the missing cpus line
	}
	model, _, err := planner.Load(p.file, []byte(strings.Join(p.pools.ddl, "\n")))
	if err != nil {
		var list planner.ErrorList
		if !errors.As(err, &list) {
			p.fail("pools: %v", err)
			return
		}
		for _, e := range list {
			p.errs = append(p.errs, &ScenarioError{File: p.file, Line: e.Pos.Line, Msg: fmt.Sprintf("pools: column %d: %s", e.Pos.Col, e.Msg)})
		}
		return
	}
	pools := map[string]bool{}
	for _, pool := range model.Pools() {
		pools[pool.Name] = true
	}
	var active []string
	for _, t := range p.h.Tasks {
		if pools[t.Group] && !slices.Contains(active, t.Group) {
			active = append(active, t.Group)
		}
	}
	node := planner.Node{CPUs: float64(p.h.CPUs), MemoryBytes: ScenarioMemoryBytes, PeriodUsec: cpulimit.DefaultPeriodUsec}
	d, err := planner.Plan(model, node, planner.Activity{Active: active})
	if err != nil {
		p.fail("pools: %v", err)
		return
	}
	p.pools.desired = &d
	for _, ps := range d.Pools {
		if ps.Name == planner.DefaultPool && !slices.Contains(active, ps.Name) {
			continue // always planned; shown only when tasks run in it
		}
		p.h.Groups = append(p.h.Groups, p.groupOf(ps.Name, "", ps.Pool))
		p.groupLines = append(p.groupLines, p.pools.startLine)
	}
	for i := range p.h.Tasks {
		t := &p.h.Tasks[i]
		ps, ok := d.Pool(t.Group)
		if !ok {
			continue
		}
		p.line = p.taskLines[i]
		p.h.Groups = append(p.h.Groups, p.groupOf(t.Name, ps.Name, ps.Query))
		p.groupLines = append(p.groupLines, p.taskLines[i])
		t.Group = t.Name
	}
}

// groupOf turns a planned cgroup into a scenario group. The simple model
// counts in ticks, so the planner's µs values are rounded to the tick: a
// quota to at least one tick, a period to at least one tick; the exact
// values stay in Scenario.Pools for a real run.
func (p *scenarioParser) groupOf(name, parent string, c planner.Cgroup) Group {
	tick := p.h.TickUsec
	round := func(v, least int64) int64 { return max(least, (v+tick/2)/tick*tick) }
	g := Group{Name: name, Parent: parent, Limit: c.CPU}
	g.PeriodUsec = round(g.PeriodUsec, tick)
	if g.QuotaUsec != cpulimit.Max {
		g.QuotaUsec = round(g.QuotaUsec, tick)
	}
	g.BurstUsec = round(g.BurstUsec, 0)
	return g
}
