package simulate

import (
	"fmt"
	"math"
	"slices"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/observe"
)

// KernelParams are the kernel settings the kernel-faithful mode needs
// beyond the scenario itself. Times are microseconds. The simulator never
// reads them from the host: the caller does (the CLI reads
// /proc/sys/kernel/sched_cfs_bandwidth_slice_us and CONFIG_HZ).
type KernelParams struct {
	// SliceUsec is sched_cfs_bandwidth_slice_us: how much quota a CPU's
	// runqueue takes from its group's pool at a time. Kernel default 5000.
	SliceUsec int64
	// TickUsec is the scheduler tick, 1e6/CONFIG_HZ: 4000 at HZ=250. A
	// runqueue that spent its silo keeps running until its CPU's next
	// tick, so the tick bounds how far a group overruns its quota.
	TickUsec int64
	// TickPhaseUsec is the time of the first tick after the scenario's
	// time 0, in [0, TickUsec). Ticks of all CPUs are aligned.
	TickPhaseUsec int64
	// PeriodPhaseUsec gives, per Group.Name ("olap", "q1"; not the path
	// "olap/q1"), the phase of its period timer: the timer expires at
	// phase + k*period.
	// A group not listed has phase 0 (a boundary at time 0). The kernel
	// picks each phase at random when the cgroup is created.
	PeriodPhaseUsec map[string]int64
	// WindowUsec, when > 0, asks for a timeline: every group's run and
	// throttled time in consecutive windows of this length from time 0.
	WindowUsec int64
	// TaskCPUs restricts, per task name, the CPUs its threads may run on
	// (the worker's sched_setaffinity). A task not listed may use every
	// CPU of the host. Placement changes the counters: throttled time is
	// summed per CPU.
	TaskCPUs map[string][]int
	// WakeCreditUsec is CFS's credit to an entity enqueued after a
	// throttle (kernels before 6.6): place_entity puts it at
	// min_vruntime minus half of sched_latency, so a group that was
	// throttled while its siblings on the CPU ran comes back up to this
	// much vruntime behind them and runs alone until it has caught up.
	// EEVDF (6.6 and later) keeps the entity's lag instead: 0.
	WakeCreditUsec int64
}

// DefaultKernelParams are the kernel's defaults: a 5 ms slice and
// HZ=250, every phase 0, no timeline.
func DefaultKernelParams() KernelParams {
	return KernelParams{SliceUsec: 5000, TickUsec: 4000}
}

// Validate reports the first parameter the kernel model cannot use as an
// [*InputError], or nil.
func (p KernelParams) Validate() error {
	switch {
	case p.SliceUsec < 1:
		return &InputError{Field: "KernelParams.SliceUsec", Value: int(p.SliceUsec), Want: ">= 1 (sched_cfs_bandwidth_slice_us, kernel default 5000)"}
	case p.TickUsec < 1:
		return &InputError{Field: "KernelParams.TickUsec", Value: int(p.TickUsec), Want: ">= 1 (1e6/CONFIG_HZ, 4000 at HZ=250)"}
	case p.TickPhaseUsec < 0 || p.TickPhaseUsec >= p.TickUsec:
		return &InputError{Field: "KernelParams.TickPhaseUsec", Value: int(p.TickPhaseUsec), Want: fmt.Sprintf("in [0, %d)", p.TickUsec)}
	case p.WakeCreditUsec < 0:
		return &InputError{Field: "KernelParams.WakeCreditUsec", Value: int(p.WakeCreditUsec), Want: ">= 0 (0 for EEVDF, 6.6 and later)"}
	case p.WindowUsec < 0:
		return &InputError{Field: "KernelParams.WindowUsec", Value: int(p.WindowUsec), Want: ">= 0 (0: no timeline)"}
	}
	for name, ph := range p.PeriodPhaseUsec {
		if ph < 0 {
			return &InputError{Field: fmt.Sprintf("KernelParams.PeriodPhaseUsec[%q]", name), Value: int(ph), Want: ">= 0"}
		}
	}
	return nil
}

// KernelRun is the outcome of [RunKernel]. Times are microseconds from the
// scenario's time 0.
type KernelRun struct {
	// EndUsec is when the last period timer stopped: every task was done
	// and every group's counters had stopped moving.
	EndUsec int64
	// Groups has one entry per Host.Groups, in the same order.
	Groups []KernelGroupRun
	// Tasks has one entry per Host.Tasks, in the same order.
	Tasks []KernelTaskRun
}

// KernelGroupRun is one group's predicted cpu.stat and timeline.
type KernelGroupRun struct {
	Name string
	// Stat is the group's cpu.stat as the kernel would print it: usage
	// includes descendants, the bandwidth counters are the group's own.
	// UserUsec and SystemUsec stay 0: the model does not split usage.
	Stat observe.CPUStat
	// Windows is the timeline when KernelParams.WindowUsec > 0: one entry
	// per window from time 0 until EndUsec.
	Windows []KernelWindow
}

// KernelWindow is a group's activity in one window of the timeline.
type KernelWindow struct {
	// RanUsec is the CPU time the group and its descendants ran.
	RanUsec uint64
	// ThrottledUsec is throttled time added to the counter in this window:
	// like the kernel, a runqueue's throttled time is added when it is
	// unthrottled, so this is what sampling cpu.stat at the window's edges
	// shows.
	ThrottledUsec uint64
	// ThrottledCPUs counts the group's per-CPU runqueues throttled at some
	// moment of the window.
	ThrottledCPUs int
}

// KernelTaskRun is when one task was done.
type KernelTaskRun struct {
	Name       string
	Group      string
	ArriveUsec int64
	// DoneUsec is when its threads had used its need.
	DoneUsec int64
}

// RunKernel simulates h in the kernel-faithful mode (docs/kernel-model.md):
// per-CPU runqueues drawing quota in slices, throttling at ticks, period
// timers that run only while there is demand, throttled time summed per
// CPU, bursts counted from the global pool. It returns the error of
// [Host.Validate] or [KernelParams.Validate], or an error wrapping
// [ErrInvalidInput] when a pinned CPU is outside the host.
//
// At time 0 every group is as the kernel leaves it after its limit was
// written and its timer went idle: the pool holds quota+burst, no timer
// runs, every counter is 0.
func RunKernel(h Host, p KernelParams) (KernelRun, error) {
	m, err := NewKernelModel(h, p)
	if err != nil {
		return KernelRun{}, err
	}
	return m.Run()
}

// KernelModel is a Host with its KernelParams, checked once and ready to
// run whole ([KernelModel.Run], which is [RunKernel]) or a stretch of its
// tasks at a time ([KernelModel.RunTasks]): a caller that replays many
// stretches of one workload under one setting checks the whole once
// instead of each stretch. It is not changed by running, so several
// goroutines may run one model at once.
type KernelModel struct {
	h  Host
	p  KernelParams
	in kernelInput
}

// NewKernelModel checks h and p as [RunKernel] does and returns the model
// of them, or the error RunKernel would return.
func NewKernelModel(h Host, p KernelParams) (*KernelModel, error) {
	if err := h.Validate(); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	in, err := kernelInputOf(h, p)
	if err != nil {
		return nil, err
	}
	return &KernelModel{h: h, p: p, in: in}, nil
}

// Run simulates the whole host: [RunKernel] of the model's Host and
// KernelParams.
func (m *KernelModel) Run() (KernelRun, error) {
	groups := make([]int, len(m.in.groups))
	for i := range groups {
		groups[i] = i
	}
	var run KernelRun
	err := runKernelInput(m.in, m.p, func(out kernelOutput) { run = m.runOf(out, groups, 0, 0) })
	return run, err
}

// RunTasks simulates the tasks Host.Tasks[from:to] alone, each arriving
// shiftUsec earlier than the Host says, in the groups on their paths
// (their own and every ancestor), as the Host has them, and with the
// model's KernelParams. It is what [RunKernel] returns for the Host cut
// down to those tasks and groups with every ArriveUsec less shiftUsec,
// and needs no check: a part of a valid host is valid. shiftUsec must be
// from 0 to the earliest of the tasks' arrivals, and a multiple of both
// ticks (Host.TickUsec, KernelParams.TickUsec), of the period of every
// group of the part and of KernelParams.WindowUsec, so that every tick,
// period timer and window keeps its phase; otherwise RunTasks returns an
// [*InputError].
//
// The outcome's times are from the part's time 0, shiftUsec of the
// Host's; KernelRun.Groups has one entry per group of the part, in the
// order of Host.Groups, KernelRun.Tasks one per task of the part.
func (m *KernelModel) RunTasks(from, to int, shiftUsec int64) (KernelRun, error) {
	switch {
	case to < 0 || to > len(m.h.Tasks):
		return KernelRun{}, &InputError{Field: "RunTasks to", Value: to, Want: fmt.Sprintf("in [0, %d] (the Host's tasks)", len(m.h.Tasks))}
	case from < 0 || from > to:
		return KernelRun{}, &InputError{Field: "RunTasks from", Value: from, Want: fmt.Sprintf("in [0, %d] (to)", to)}
	}
	// The groups on the tasks' paths, in the Host's order.
	var groups []int
	for _, t := range m.in.tasks[from:to] {
		for g := t.group; g >= 0; g = m.in.groups[g].parent {
			if !slices.Contains(groups, g) {
				groups = append(groups, g)
			}
		}
	}
	slices.Sort(groups)
	if err := m.checkShift(from, to, groups, shiftUsec); err != nil {
		return KernelRun{}, err
	}
	part := kernelInput{ncpu: m.in.ncpu, groups: make([]kernelGroupSpec, len(groups)), tasks: make([]kernelTaskSpec, 0, to-from)}
	newIndex := func(g int) int {
		i, _ := slices.BinarySearch(groups, g)
		return i
	}
	for i, g := range groups {
		part.groups[i] = m.in.groups[g]
		if parent := m.in.groups[g].parent; parent >= 0 {
			part.groups[i].parent = newIndex(parent)
		}
	}
	for i, t := range m.in.tasks[from:to] {
		t.group = newIndex(t.group)
		t.arriveUsec = float64(m.h.Tasks[from+i].ArriveUsec - shiftUsec)
		part.tasks = append(part.tasks, t)
	}
	var run KernelRun
	err := runKernelInput(part, m.p, func(out kernelOutput) { run = m.runOf(out, groups, from, shiftUsec) })
	return run, err
}

// checkShift is RunTasks' rule for shiftUsec.
func (m *KernelModel) checkShift(from, to int, groups []int, shiftUsec int64) error {
	earliest := int64(math.MaxInt64)
	for _, t := range m.h.Tasks[from:to] {
		earliest = min(earliest, t.ArriveUsec)
	}
	if shiftUsec < 0 || shiftUsec > earliest {
		return &InputError{Field: "RunTasks shiftUsec", Value: int(shiftUsec), Want: fmt.Sprintf("in [0, %d] (the part's earliest arrival)", earliest)}
	}
	bad := func(what string, usec int64) error {
		return &InputError{Field: "RunTasks shiftUsec", Value: int(shiftUsec), Want: fmt.Sprintf("a multiple of %s, %d µs, which keeps every phase", what, usec)}
	}
	switch {
	case shiftUsec%m.h.TickUsec != 0:
		return bad("Host.TickUsec", m.h.TickUsec)
	case shiftUsec%m.p.TickUsec != 0:
		return bad("KernelParams.TickUsec", m.p.TickUsec)
	case m.p.WindowUsec > 0 && shiftUsec%m.p.WindowUsec != 0:
		return bad("KernelParams.WindowUsec", m.p.WindowUsec)
	}
	for _, g := range groups {
		if period := m.h.Groups[g].PeriodUsec; shiftUsec%period != 0 {
			return bad(fmt.Sprintf("the period of group %q", m.h.Groups[g].Name), period)
		}
	}
	return nil
}

// runOf is the KernelRun of the engine's output out for the Host's groups
// groups and its tasks from from on, shifted by shiftUsec.
func (m *KernelModel) runOf(out kernelOutput, groups []int, from int, shiftUsec int64) KernelRun {
	p := m.p
	run := KernelRun{EndUsec: roundUsec(out.endUsec)}
	for i, g := range out.groups {
		st := observe.CPUStat{
			UsageUsec:     uint64(roundUsec(g.usageUsec)),
			NrPeriods:     uint64(g.nrPeriods),
			NrThrottled:   uint64(g.nrThrottled),
			ThrottledUsec: uint64(roundUsec(g.throttledUsec)),
			NrBursts:      uint64(g.nrBursts),
			BurstUsec:     uint64(roundUsec(g.burstUsec)),
		}
		gr := KernelGroupRun{Name: m.h.Groups[groups[i]].Name, Stat: st}
		if p.WindowUsec > 0 {
			n := int((out.endUsec + float64(p.WindowUsec) - 1) / float64(p.WindowUsec))
			gr.Windows = make([]KernelWindow, max(n, len(g.windows)))
			for j, w := range g.windows {
				gr.Windows[j] = KernelWindow{RanUsec: uint64(roundUsec(w.ranUsec)), ThrottledUsec: uint64(roundUsec(w.throttledUsec)), ThrottledCPUs: w.throttledCPUs}
			}
		}
		run.Groups = append(run.Groups, gr)
	}
	for i, t := range out.tasks {
		ht := m.h.Tasks[from+i]
		run.Tasks = append(run.Tasks, KernelTaskRun{Name: ht.Name, Group: ht.Group,
			ArriveUsec: ht.ArriveUsec - shiftUsec, DoneUsec: roundUsec(t.doneUsec)})
	}
	return run
}

func roundUsec(v float64) int64 { return int64(math.Round(v)) }

// within is a group's CPUs below a parent with CPUs parent, as the kernel
// has them in effect: the CPUs of both, or the parent's when the group has
// none of its own or none of the parent's (cgroup v2's effective CPUs).
func within(parent, own cpulimit.CPUSet) cpulimit.CPUSet {
	switch both := own.Intersect(parent); {
	case parent.IsEmpty():
		return own
	case own.IsEmpty(), both.IsEmpty():
		return parent
	default:
		return both
	}
}

// kernelInputOf converts a validated Host to the engine's input.
func kernelInputOf(h Host, p KernelParams) (kernelInput, error) {
	in := kernelInput{ncpu: h.CPUs}
	index := make(map[string]int, len(h.Groups))
	sets := make([]cpulimit.CPUSet, len(h.Groups)) // each group's CPUs, its ancestors' applied
	for i, g := range h.Groups {
		index[g.Name] = i
		parent := -1
		sets[i] = g.CPUs
		if g.Parent != "" {
			parent = index[g.Parent]
			sets[i] = within(sets[parent], g.CPUs)
		}
		quota := float64(g.QuotaUsec)
		if g.QuotaUsec == cpulimit.Max {
			quota = 0
		}
		in.groups = append(in.groups, kernelGroupSpec{name: g.Name, parent: parent, quotaUsec: quota,
			periodUsec: float64(g.PeriodUsec), burstUsec: float64(g.BurstUsec), weight: g.SchedWeight(),
			phaseUsec: float64(p.PeriodPhaseUsec[g.Name])})
	}
	for _, t := range h.Tasks {
		threads := max(t.Threads, 1)
		var cpus []int // nil: every CPU
		if len(p.TaskCPUs[t.Name]) > 0 {
			cpus = p.TaskCPUs[t.Name]
		}
		for _, c := range cpus {
			if c < 0 || c >= h.CPUs {
				return kernelInput{}, fmt.Errorf("simulate: task %q pinned to cpu %d, outside the host's cpus 0..%d: %w", t.Name, c, h.CPUs-1, ErrInvalidInput)
			}
		}
		if set := sets[index[t.Group]]; !set.IsEmpty() {
			allowed := slices.DeleteFunc(slices.Clone(cpus), func(c int) bool { return !set.Contains(c) })
			if cpus == nil {
				allowed = set.CPUs()
			}
			if len(allowed) == 0 {
				return kernelInput{}, fmt.Errorf("simulate: task %q pinned to cpus %v, none of its group's cpus %s: %w", t.Name, cpus, set, ErrInvalidInput)
			}
			cpus = allowed
		}
		in.tasks = append(in.tasks, kernelTaskSpec{name: t.Name, group: index[t.Group], arriveUsec: float64(t.ArriveUsec),
			needUsec: float64(t.NeedUsec), threads: threads, cpus: cpus})
	}
	return in, nil
}
