package simulate

import (
	"errors"
	"fmt"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// Host is a node to simulate in the simple host model: CPUs shared by a
// tree of groups, each with its own bandwidth limit and weight, and tasks
// that arrive over time in the leaf groups. Times are in microseconds and
// must be multiples of TickUsec; the simulation steps one tick at a time.
// See docs/simulator.md for the model.
type Host struct {
	// CPUs is the number of CPUs of the node; must be >= 1.
	CPUs int
	// TickUsec is the length of one tick in microseconds; must be >= 1.
	TickUsec int64
	// Groups are the cgroups of the node. A group's Parent must come
	// before it in the slice, so the slice is the tree in pre-order or any
	// other parents-first order.
	Groups []Group
	// Tasks are the work. Within a group they are served in slice order.
	Tasks []HostTask
}

// Group is one cgroup with its CPU limit, the model of cgroup v2 cpu.max
// ("QUOTA PERIOD"), cpu.max.burst and cpu.weight. A group with children
// holds no tasks (cgroup v2's "no internal processes" rule).
type Group struct {
	// Name identifies the group; letters, digits, '_', '.' and '-', not
	// starting with '.' or '-'; unique within the Host.
	Name string
	// Parent is the Name of the parent group, or "" for a group directly
	// under the node. It must name a group earlier in Host.Groups.
	Parent string
	// Limit is the group's CPU limit, with these rules of the model:
	// QuotaUsec is cpulimit.Max for no limit, and the group and every
	// ancestor must have quota left for one of its threads to run;
	// PeriodUsec must be > 0, also without a quota, where it only sets
	// the length of the reported periods; BurstUsec must be 0 without a
	// quota, and unlike the kernel, which refuses a burst above the quota,
	// the model accepts any burst >= 0, as the chapter's experiment needs;
	// Weight is 1..cpulimit.MaxWeight, or 0 for the default; CPUs, when
	// not empty, are the only CPUs of 0..CPUs-1 the group's tasks (and its
	// descendants') may run on, cpuset.cpus: the kernel model runs them
	// there, the simple model, which has no places, runs them on at most
	// that many CPUs at once.
	cpulimit.Limit
}

// HostTask is work that appears at ArriveUsec in Group and is done after it
// has used NeedUsec of CPU time on up to Threads CPUs at once.
type HostTask struct {
	// Name identifies the task in the results; same rules as Group.Name.
	Name string
	// Group is the Name of the leaf group the task runs in.
	Group string
	// ArriveUsec is when the task becomes runnable, in microseconds; >= 0.
	ArriveUsec int64
	// NeedUsec is the CPU time the task uses before it is done, in
	// microseconds; >= 0. A task with NeedUsec 0 is done at its arrival.
	NeedUsec int64
	// Threads is the most CPUs the task runs on at once; 0 means 1.
	Threads int
}

// HostOptions tunes what RunHost records.
type HostOptions struct {
	// TraceTicks is the number of ticks from tick 0 for which RunHost
	// records a GroupTick per group in GroupRun.Trace; 0 records nothing.
	TraceTicks int
}

// HostRun is the outcome of RunHost. Periods, results and traces count in
// ticks of Host.TickUsec, the counters in Stat in microseconds.
type HostRun struct {
	// Ticks is the simulated length: the tick at which the last task with
	// work to do was done.
	Ticks int
	// Groups has one entry per Host.Groups, in the same order.
	Groups []GroupRun
	// Tasks has one entry per Host.Tasks, in the same order.
	Tasks []TaskRun
}

// GroupRun is what one group did.
type GroupRun struct {
	Name string
	// Stat is the group's cpu.stat as the simple model counts it (see
	// docs/simulator.md): usage includes the descendants' usage, the
	// throttling counters only the group's own quota.
	Stat observe.CPUStat
	// Periods has one entry per period of the group from tick 0 until
	// HostRun.Ticks, in ticks. Used counts the CPU-ticks of the group and
	// its descendants; Stalled the ticks in which the group's own quota was
	// spent while its threads or its descendants' wanted to run.
	Periods []Period
	// Trace has one entry per tick for the first HostOptions.TraceTicks
	// ticks (fewer if the run is shorter).
	Trace []GroupTick
}

// GroupTick is what one group did in one tick, counting the threads of
// its descendants as its own.
type GroupTick struct {
	// Ran is the number of CPUs its threads ran on.
	Ran int
	// Throttled is set when a thread wanted to run but the group's own
	// quota was spent.
	Throttled bool
	// Held is set when a thread wanted to run but the quota of another
	// group on its path (an ancestor or, for a parent, a child) was spent,
	// and the group's own quota was not.
	Held bool
	// Waiting is set when a thread wanted to run and every quota on its
	// path had room, but no CPU was left for it.
	Waiting bool
}

// TaskRun is what happened to one HostTask: the chapter's Result in ticks
// (Throttled counts the ticks in which some thread of the task wanted to
// run but the quota of its group or of an ancestor was spent), with the
// task's group and thread count.
type TaskRun struct {
	Result
	Group   string
	Threads int
}

// HostError names the part of a Host that [Host.Validate] rejected. It
// unwraps to [ErrInvalidInput].
type HostError struct {
	// Group is the index into Host.Groups of the rejected group, or -1.
	Group int
	// Task is the index into Host.Tasks of the rejected task, or -1.
	Task int
	// Field is the rejected setting in the words of the scenario format:
	// "cpus", "tick", "name", "parent", "quota", "period", "burst",
	// "weight", "group", "arrive", "need", "threads", or "" for the run
	// as a whole.
	Field string
	// Msg says what is wrong and what would be accepted, in the words of
	// the scenario format, e.g. "weight 0 is out of range (accepted:
	// 1..10000)".
	Msg string
	// name is the group's or task's name, for Error.
	name string
}

// Error reads like `simulate: group "web": weight 0 is out of range
// (accepted: 1..10000)`.
func (e *HostError) Error() string {
	switch {
	case e.Group >= 0:
		return fmt.Sprintf("simulate: group %q: %s", e.name, e.Msg)
	case e.Task >= 0:
		return fmt.Sprintf("simulate: task %q: %s", e.name, e.Msg)
	}
	return "simulate: " + e.Msg
}

// Unwrap returns [ErrInvalidInput].
func (e *HostError) Unwrap() error { return ErrInvalidInput }

// Validate reports every part of h that RunHost cannot simulate, as
// [*HostError] values joined with errors.Join, or nil. Every input rule of
// the model is here, the host's, then each group's (checkGroups), then each
// task's (checkTasks), as docs/simulator.md's Input section gives them, so
// the two read side by side.
func (h Host) Validate() error {
	var errs []error
	hostErr := func(field, msg string, args ...any) {
		errs = append(errs, &HostError{Group: -1, Task: -1, Field: field, Msg: fmt.Sprintf(msg, args...)})
	}
	if h.CPUs < 1 {
		hostErr("cpus", "cpus %d is out of range (accepted: 1 or more)", h.CPUs)
	}
	if h.TickUsec < 1 {
		hostErr("tick", "tick %s is out of range (accepted: 1us or more)", FormatUsec(h.TickUsec))
		return errors.Join(errs...)
	}
	groups, groupErrs := h.checkGroups()
	lastArrive, needTicks, taskErrs := h.checkTasks(groups)
	errs = append(append(errs, groupErrs...), taskErrs...)
	if len(errs) == 0 && !hostEndsInRange(lastArrive, needTicks, groups.periodMax) {
		hostErr("", "the tasks need %d ticks of CPU after the last arrival at tick %d: too long to simulate (accepted: a run that surely ends before tick %d)", needTicks, lastArrive, maxInt)
	}
	return errors.Join(errs...)
}

// hostGroups is what checking the groups learns for checking the tasks
// and the length of the run.
type hostGroups struct {
	index       map[string]int // a group's index by name
	hasChildren []bool         // by group index
	periodMax   int64          // the longest period in ticks, at least 1
}

// checkGroups checks each group of h, whose tick is valid, in order: its
// name, its parent (defined on an earlier line), its bandwidth settings
// in whole ticks, its weight and its CPUs.
func (h Host) checkGroups() (hostGroups, []error) {
	var errs []error
	tick := FormatUsec(h.TickUsec)
	gs := hostGroups{index: make(map[string]int, len(h.Groups)), hasChildren: make([]bool, len(h.Groups)), periodMax: 1}
	for i, g := range h.Groups {
		bad := func(field, msg string, args ...any) {
			errs = append(errs, &HostError{Group: i, Task: -1, Field: field, name: g.Name, Msg: fmt.Sprintf(msg, args...)})
		}
		// Groups and tasks may become cgroups (compare): the rule of
		// pool names.
		if err := planner.CheckName("group", g.Name); err != nil {
			bad("name", "%v", err)
		} else if _, dup := gs.index[g.Name]; dup {
			bad("name", "name %q is already used by another group (accepted: a name of its own)", g.Name)
		} else {
			gs.index[g.Name] = i
		}
		if g.Parent != "" {
			if p, ok := gs.index[g.Parent]; !ok {
				bad("parent", "parent %q is not a group defined before it (accepted: a group on an earlier line)", g.Parent)
			} else {
				gs.hasChildren[p] = true
			}
		}
		switch {
		case g.PeriodUsec <= 0 || g.PeriodUsec%h.TickUsec != 0:
			bad("period", "period %s is not accepted (accepted: a positive multiple of the tick %s)", FormatUsec(g.PeriodUsec), tick)
		default:
			gs.periodMax = max(gs.periodMax, g.PeriodUsec/h.TickUsec)
		}
		switch {
		case g.QuotaUsec == cpulimit.Max:
			if g.BurstUsec != 0 {
				bad("burst", "burst %s needs a quota (accepted: burst 0 with quota max)", FormatUsec(g.BurstUsec))
			}
		case g.QuotaUsec <= 0 || g.QuotaUsec%h.TickUsec != 0:
			bad("quota", "quota %s is not accepted (accepted: max or a positive multiple of the tick %s)", FormatUsec(g.QuotaUsec), tick)
		}
		if g.BurstUsec < 0 || g.BurstUsec%h.TickUsec != 0 {
			bad("burst", "burst %s is not accepted (accepted: 0 or a positive multiple of the tick %s)", FormatUsec(g.BurstUsec), tick)
		}
		if g.Weight < 0 || g.Weight > cpulimit.MaxWeight {
			bad("weight", "weight %d is out of range (accepted: 1..%d)", g.Weight, cpulimit.MaxWeight)
		}
		if g.CPUs.IsEmpty() || h.CPUs < 1 {
			continue // all of them, or the host's error already said
		}
		if off := g.CPUs.Minus(cpulimit.FirstCPUs(h.CPUs)); !off.IsEmpty() {
			bad("cpus", "cpus %s are not on the host (accepted: cpus within 0-%d)", off, h.CPUs-1)
		}
	}
	return gs, errs
}

// checkTasks checks each task of h, whose tick is valid: its name, its
// group (defined, without children), its times in whole ticks and its
// threads. It returns the last arrival and the CPU the tasks need, in
// ticks, for the length of the run.
func (h Host) checkTasks(gs hostGroups) (lastArrive, needTicks int64, errs []error) {
	tick := FormatUsec(h.TickUsec)
	taskNames := make(map[string]bool, len(h.Tasks))
	for i, t := range h.Tasks {
		bad := func(field, msg string, args ...any) {
			errs = append(errs, &HostError{Group: -1, Task: i, Field: field, name: t.Name, Msg: fmt.Sprintf(msg, args...)})
		}
		if err := planner.CheckName("task", t.Name); err != nil {
			bad("name", "%v", err)
		} else if taskNames[t.Name] {
			bad("name", "name %q is already used by another task (accepted: a name of its own)", t.Name)
		}
		taskNames[t.Name] = true
		if g, ok := gs.index[t.Group]; !ok {
			bad("group", "group %q is not defined (accepted: the name of a group)", t.Group)
		} else if gs.hasChildren[g] {
			bad("group", "group %q has child groups and so holds no tasks (accepted: a group without children)", t.Group)
		}
		if t.ArriveUsec < 0 || t.ArriveUsec%h.TickUsec != 0 {
			bad("arrive", "arrive %s is not accepted (accepted: 0 or a positive multiple of the tick %s)", FormatUsec(t.ArriveUsec), tick)
		}
		if t.NeedUsec < 0 || t.NeedUsec%h.TickUsec != 0 {
			bad("need", "need %s is not accepted (accepted: 0 or a positive multiple of the tick %s)", FormatUsec(t.NeedUsec), tick)
		}
		if t.Threads < 0 {
			bad("threads", "threads %d is out of range (accepted: 1 or more)", t.Threads)
		}
		if t.ArriveUsec >= 0 && t.NeedUsec > 0 {
			lastArrive = max(lastArrive, t.ArriveUsec/h.TickUsec)
			needTicks += min(t.NeedUsec/h.TickUsec, int64(maxInt)-needTicks)
		}
	}
	return lastArrive, needTicks, errs
}

// hostEndsInRange reports whether a run surely ends within the int range of
// ticks. While a task is runnable, some CPU-tick is used at least once in
// every periodMax ticks: every group on the task's path refills its quota
// within that time and only running spends it. So the run ends by
// lastArrive + needTicks*periodMax, plus one period for the last row.
func hostEndsInRange(lastArrive, needTicks, periodMax int64) bool {
	limit := int64(maxInt) - lastArrive - periodMax
	return limit > 0 && needTicks <= limit/periodMax
}

// FormatUsec writes microseconds the way scenario files do: "0", "250us",
// "40ms" or "2s", in the largest unit that keeps the value whole.
func FormatUsec(usec int64) string {
	switch {
	case usec == 0:
		return "0"
	case usec%1_000_000 == 0:
		return fmt.Sprintf("%ds", usec/1_000_000)
	case usec%1_000 == 0:
		return fmt.Sprintf("%dms", usec/1_000)
	}
	return fmt.Sprintf("%dus", usec)
}

// RunHost simulates h in the simple host model (docs/simulator.md) and
// returns what every group and task did, or the error of [Host.Validate].
// It steps one tick at a time but skips ticks in which nothing is
// runnable, so its cost grows with the busy ticks times (CPUs x tree depth x
// siblings + tasks).
func RunHost(h Host, opt HostOptions) (HostRun, error) {
	if err := h.Validate(); err != nil {
		return HostRun{}, err
	}
	s := newHostSim(h, opt)
	s.run()
	return s.outcome(), nil
}
