// Package compare runs a scenario for real under poolagent's cgroups and
// puts what the kernel measured beside what the simulator predicted: the
// kernel-faithful model (simulate.RunKernel) and the simple model
// (simulate.RunHost), counter by counter, with the error.
package compare

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strings"

	"github.com/poolagent/poolagent/internal/accuracy"
	"github.com/poolagent/poolagent/observe"
)

// Report is the outcome of a compare run: for every group and task of a
// scenario, what the kernel measured in each run and what both models
// predicted. It is also the JSON the CLI prints with --format json.
type Report struct {
	// Scenario is the scenario's name (its file, or "built-in: ...").
	Scenario string `json:"scenario"`
	Env      Env    `json:"env"`
	// Target is the accuracy the kernel model is held to in this scenario.
	Target Target `json:"target"`
	// WindowUsec is the timeline's window (one period), 0 without one.
	WindowUsec int64 `json:"window_usec,omitempty"`
	// Runs says how each run was predicted, in run order.
	Runs   []RunInfo     `json:"runs"`
	Groups []GroupResult `json:"groups"`
	Tasks  []TaskResult  `json:"tasks"`
	// Verdict is Summarize's verdict, set by Finish.
	Verdict Summary `json:"verdict"`
}

// RunInfo is what the kernel model took from one run besides the
// scenario: the scheduler tick's phase (the groups' period phases are in
// GroupRun.PhaseUsec).
type RunInfo struct {
	// TickPhaseUsec is the first scheduler tick after the run's time 0.
	TickPhaseUsec int64 `json:"tick_phase_usec"`
}

// Env is where and how the scenario ran.
type Env struct {
	// Measured is false when the scenario was only simulated (no root, or
	// no cgroup with the cpu controller): Runs then hold predictions only.
	Measured bool `json:"measured"`
	// Why says why nothing was measured; empty when Measured.
	Why string `json:"why,omitempty"`
	// Kernel is the kernel release (uname -r).
	Kernel string `json:"kernel,omitempty"`
	// Cgroup is "v1" or "v2", the interface of the cpu controller used.
	Cgroup string `json:"cgroup,omitempty"`
	// CPUs is the number of CPUs of the scenario.
	CPUs int `json:"cpus"`
	// SliceUsec is sched_cfs_bandwidth_slice_us as read from the host.
	SliceUsec int64 `json:"slice_usec"`
	// TickUsec is 1e6/CONFIG_HZ; TickSource says where CONFIG_HZ came from.
	TickUsec   int64  `json:"tick_usec"`
	TickSource string `json:"tick_source"`
	// Runs is how many times the scenario ran (--repeat).
	Runs int `json:"runs"`
	// Load1Start and Load1End are the host's 1-minute load average before
	// the first run and after the last: other work competes for the CPUs.
	Load1Start float64 `json:"load1_start"`
	Load1End   float64 `json:"load1_end"`
	// Emulated is true on a software-emulated CPU (qemu TCG), where the
	// guest charges code translation and time the host took away to the
	// running task: usage is then not a measure of the work done.
	Emulated bool `json:"emulated,omitempty"`
	// ModelCaveat says which of the models' assumptions do not hold on
	// this host (observe.ModelHost.Caveats: a sched_ext scheduler, no CFS
	// bandwidth control, an unknown CONFIG_HZ, ...), "" when all hold.
	ModelCaveat string `json:"model_caveat,omitempty"`
}

// Target is the accuracy goal of the kernel model for one scenario.
type Target struct {
	// Class is "pinned" when every task runs on one CPU of its own choice,
	// "unpinned" otherwise.
	Class string `json:"class"`
	// NrThrottled is the largest accepted |predicted − measured| of
	// nr_throttled, in periods.
	NrThrottled float64 `json:"nr_throttled"`
	// Pct is the largest accepted relative error of usage_usec and
	// throttled_usec, in percent of the measured value.
	Pct float64 `json:"pct"`
	// FloorUsec is an absolute error always accepted for usage_usec and
	// throttled_usec, so a group that barely throttles is not held to a
	// percentage of almost nothing.
	FloorUsec float64 `json:"floor_usec"`
	// Usage says whether usage_usec is held to Pct; not on an emulated CPU
	// (Env.Emulated).
	Usage bool `json:"usage"`
}

// TargetFor returns the accuracy goal: nr_throttled within ±1 period,
// usage and throttled time within 5% when pinned, 10% otherwise, always
// accepting one scheduler tick (tickUsec): a runqueue is throttled at the
// first tick after its quota runs out, so a throttled interval is known to
// a tick at best. Usage is not held on an emulated CPU.
func TargetFor(pinned, emulated bool, tickUsec int64) Target {
	t := Target{Class: "unpinned", NrThrottled: 1, Pct: 10, FloorUsec: float64(tickUsec), Usage: !emulated}
	if pinned {
		t.Class, t.Pct = "pinned", 5
	}
	return t
}

// Text renders the target for reports.
func (t Target) Text() string {
	s := fmt.Sprintf("nr_throttled ±%g, throttled_usec", t.NrThrottled)
	if t.Usage {
		s += " and usage_usec"
	}
	s += fmt.Sprintf(" ±%g%% (or ±%.0fµs)", t.Pct, t.FloorUsec)
	if !t.Usage {
		s += "; usage_usec not held: on an emulated CPU the guest charges translation and host time as run time"
	}
	return s
}

// GroupResult is one cgroup of the scenario: a pool or a query.
type GroupResult struct {
	// Name is the group's name in the scenario.
	Name string `json:"name"`
	// Path is the cgroup below the pool root, e.g. "olap/q1".
	Path string `json:"path"`
	// Limit renders the group's cpu.max and burst, e.g. "20ms/100ms".
	Limit string `json:"limit"`
	// QuotaUsec is the group's quota per period, µs; -1 when it has none
	// ("max").
	QuotaUsec int64 `json:"quota_usec"`
	// Runs has one entry per run.
	Runs []GroupRun `json:"runs"`
	// Simple is the simple model's prediction; it does not depend on the
	// run.
	Simple observe.CPUStat `json:"simple"`
	// Fields compares the counters over all runs, in FieldNames order.
	Fields []FieldCompare `json:"fields"`
	// Class is the group's workload class (docs/accuracy.md): how many
	// runqueues its work is on at once and who placed it there.
	Class accuracy.Class `json:"class"`
	// Judged lists the counters held to the target for this group, in
	// FieldNames order: usage_usec unless on an emulated CPU, nr_throttled
	// and throttled_usec unless tied (Tie); empty when nothing was
	// measured.
	Judged []string `json:"judged,omitempty"`
	// Misses lists the targets the kernel model missed, empty when it met
	// them all or nothing was measured.
	Misses []string `json:"misses,omitempty"`
	// OutsideSpread lists the misses whose prediction also falls outside
	// the measured runs' range [min..max]: a miss within the run-to-run
	// spread is no larger than the kernel's own scatter.
	OutsideSpread []string `json:"outside_spread,omitempty"`
	// Tie says why nr_throttled and throttled_usec are not held to the
	// target, when the group has the same cpu.max as its parent group (a
	// query without a cap of its own carries its pool's allocation);
	// empty otherwise.
	Tie string `json:"tie,omitempty"`
}

// Verdict says how the group's prediction fared: "target" when it met
// the target, "spread" when every miss is within the measured runs'
// range, "missed" otherwise; "" when nothing was measured.
func (g GroupResult) Verdict(measured bool) string {
	switch {
	case !measured:
		return ""
	case len(g.Misses) == 0:
		return "target"
	case len(g.OutsideSpread) == 0:
		return "spread"
	}
	return "missed"
}

// Summary is the run's verdict over every group and every counter judged:
// the one line compare ends on, and whether the kernel model met the
// target on all of them.
type Summary struct {
	// Line is the verdict as printed, e.g. "verdict: within target on 3
	// of 3 groups (usage_usec, nr_throttled, throttled_usec)".
	Line string `json:"line"`
	// OK is true when something was measured and every group met its
	// target; a miss within the runs' spread is still a miss.
	OK bool `json:"ok"`
}

// Summarize returns r's verdict: how many groups met the target on the
// counters judged, and every miss by group and counter.
func (r *Report) Summarize() Summary {
	if !r.Env.Measured {
		return Summary{Line: "verdict: none, nothing was measured (" + r.Env.Why + "): the prediction alone is shown"}
	}
	var judged, missed []string
	met := 0
	for _, g := range r.Groups {
		for _, name := range g.Judged {
			if !slices.Contains(judged, name) {
				judged = append(judged, name)
			}
		}
		if len(g.Misses) == 0 {
			met++
			continue
		}
		for _, m := range g.Misses {
			if !slices.Contains(g.OutsideSpread, m) {
				m += ", within the runs' range"
			}
			missed = append(missed, g.Path+" "+m)
		}
	}
	slices.SortFunc(judged, func(a, b string) int { return slices.Index(FieldNames, a) - slices.Index(FieldNames, b) })
	line := fmt.Sprintf("verdict: within target on %d of %d groups (%s)", met, len(r.Groups), strings.Join(judged, ", "))
	if len(missed) > 0 {
		line += "; missed: " + strings.Join(missed, "; ")
	}
	return Summary{Line: line, OK: len(missed) == 0}
}

// ThrottledErrorPercent is the kernel model's error of throttled_usec
// beyond the one scheduler tick the target always accepts (t.FloorUsec),
// in percent of the measured mean (of the tick when the mean is below
// it): 0 within a tick. This is the error the accuracy run files under
// the group's class.
func (g GroupResult) ThrottledErrorPercent(t Target) float64 {
	for _, f := range g.Fields {
		if f.Field == "throttled_usec" {
			return 100 * max(math.Abs(f.Diff)-t.FloorUsec, 0) / max(f.Measured.Mean, t.FloorUsec, 1)
		}
	}
	return 0
}

// GroupRun is one group in one run.
type GroupRun struct {
	// Measured is the cpu.stat delta over the run; zero when not measured.
	Measured observe.CPUStat `json:"measured"`
	// Kernel is the kernel model's prediction for this run.
	Kernel observe.CPUStat `json:"kernel"`
	// PhaseUsec is the period timer's phase the prediction used: the time
	// of its first expiry after the run's time 0, within one period.
	PhaseUsec int64 `json:"phase_usec"`
	// MeasuredWindows and KernelWindows are the timeline, one entry per
	// window from time 0; MeasuredWindows is empty unless sampled.
	MeasuredWindows []Window `json:"measured_windows,omitempty"`
	KernelWindows   []Window `json:"kernel_windows,omitempty"`
}

// Window is a group's activity in one window of the timeline.
type Window struct {
	RanUsec       uint64 `json:"ran_usec"`
	ThrottledUsec uint64 `json:"throttled_usec"`
}

// FieldCompare is one counter of one group over all runs.
type FieldCompare struct {
	Field    string `json:"field"`
	Measured Spread `json:"measured"`
	Kernel   Spread `json:"kernel"`
	Simple   uint64 `json:"simple"`
	// Diff is Kernel.Mean − Measured.Mean.
	Diff float64 `json:"diff"`
	// DiffPct is Diff in percent of Measured.Mean; nil when that is 0.
	DiffPct *float64 `json:"diff_pct,omitempty"`
}

// Spread is the mean, smallest and largest of a counter over the runs.
type Spread struct {
	Mean float64 `json:"mean"`
	Min  uint64  `json:"min"`
	Max  uint64  `json:"max"`
}

// TaskResult is one task of the scenario.
type TaskResult struct {
	Name       string `json:"name"`
	Group      string `json:"group"`
	ArriveUsec int64  `json:"arrive_usec"`
	NeedUsec   int64  `json:"need_usec"`
	Threads    int    `json:"threads"`
	CPUs       []int  `json:"cpus,omitempty"`
	// Runs has one entry per run.
	Runs []TaskRun `json:"runs"`
	// SimpleDoneUsec is when the simple model has it done.
	SimpleDoneUsec int64 `json:"simple_done_usec"`
}

// TaskRun is one task in one run; times are from the run's time 0.
type TaskRun struct {
	// MeasuredDoneUsec is when the worker had burnt its need, -1 when not
	// measured.
	MeasuredDoneUsec int64 `json:"measured_done_usec"`
	// BurntUsec is the CPU time the worker burnt by its own clock.
	BurntUsec int64 `json:"burnt_usec,omitempty"`
	// KernelDoneUsec is when the kernel model has it done.
	KernelDoneUsec int64 `json:"kernel_done_usec"`
}

// doneSpreads returns the spread over the runs of the measured completion
// (0 for a run that measured none) and of the kernel model's.
func (t TaskResult) doneSpreads() (measured, kernel Spread) {
	var m, k []uint64
	for _, run := range t.Runs {
		m = append(m, uint64(max(run.MeasuredDoneUsec, 0)))
		k = append(k, uint64(run.KernelDoneUsec))
	}
	return spread(m), spread(k)
}

// cpusText renders the task's pinning for the reports' "pinned to"
// column: "CPU 0", "CPUs 0,1", or "any CPU".
func (t TaskResult) cpusText() string {
	switch len(t.CPUs) {
	case 0:
		return "any CPU"
	case 1:
		return "CPU " + formatCPUs(t.CPUs)
	}
	return "CPUs " + formatCPUs(t.CPUs)
}

// FieldNames are the counters compared, in report order.
var FieldNames = []string{"usage_usec", "nr_periods", "nr_throttled", "throttled_usec", "nr_bursts", "burst_usec"}

// field returns the named counter of st.
func field(st observe.CPUStat, name string) uint64 {
	switch name {
	case "usage_usec":
		return st.UsageUsec
	case "nr_periods":
		return st.NrPeriods
	case "nr_throttled":
		return st.NrThrottled
	case "throttled_usec":
		return st.ThrottledUsec
	case "nr_bursts":
		return st.NrBursts
	case "burst_usec":
		return st.BurstUsec
	}
	panic(fmt.Sprintf("compare: unknown field %q", name))
}

// Finish computes every group's Fields and Misses from its runs.
func (r *Report) Finish() {
	ties := r.ties()
	for i := range r.Groups {
		g := &r.Groups[i]
		g.Tie = ties[g.Path]
		g.Fields = g.Fields[:0]
		for _, name := range FieldNames {
			var m, k []uint64
			for _, run := range g.Runs {
				m = append(m, field(run.Measured, name))
				k = append(k, field(run.Kernel, name))
			}
			fc := FieldCompare{Field: name, Measured: spread(m), Kernel: spread(k), Simple: field(g.Simple, name)}
			fc.Diff = fc.Kernel.Mean - fc.Measured.Mean
			if fc.Measured.Mean != 0 {
				pct := 100 * fc.Diff / fc.Measured.Mean
				fc.DiffPct = &pct
			}
			g.Fields = append(g.Fields, fc)
		}
		g.Judged, g.Misses, g.OutsideSpread = nil, nil, nil
		if r.Env.Measured {
			g.Judged = r.Target.judged(g.Tie != "")
			g.Misses, g.OutsideSpread = r.Target.misses(g.Fields, g.Tie != "")
		}
	}
	r.Verdict = r.Summarize()
}

func spread(v []uint64) Spread {
	if len(v) == 0 {
		return Spread{}
	}
	s := Spread{Min: v[0], Max: v[0]}
	sum := 0.0
	for _, x := range v {
		s.Min, s.Max = min(s.Min, x), max(s.Max, x)
		sum += float64(x)
	}
	s.Mean = sum / float64(len(v))
	return s
}

// judged returns the counters the target holds a group to, in FieldNames
// order: a tied group's throttling is not (GroupResult.Tie), nor usage on
// an emulated CPU.
func (t Target) judged(tied bool) []string {
	var out []string
	for _, name := range FieldNames {
		switch {
		case name == "usage_usec" && t.Usage, (name == "nr_throttled" || name == "throttled_usec") && !tied:
			out = append(out, name)
		}
	}
	return out
}

// misses checks the kernel model's mean against the measured mean, and
// returns the targets missed and, of those, the ones whose predicted mean
// also lies outside the measured runs' range.
func (t Target) misses(fields []FieldCompare, tied bool) (missed, outside []string) {
	for _, f := range fields {
		var miss string
		switch f.Field {
		case "nr_throttled":
			if !tied && math.Abs(f.Diff) > t.NrThrottled {
				miss = fmt.Sprintf("nr_throttled off by %+.1f periods (target ±%g)", f.Diff, t.NrThrottled)
			}
		case "usage_usec", "throttled_usec":
			if f.Field == "usage_usec" && !t.Usage || f.Field == "throttled_usec" && tied {
				continue
			}
			if math.Abs(f.Diff) > max(t.FloorUsec, t.Pct/100*f.Measured.Mean) {
				miss = fmt.Sprintf("%s off by %s (target ±%g%%)", f.Field, pctText(f), t.Pct)
			}
		}
		if miss == "" {
			continue
		}
		missed = append(missed, miss)
		if f.Kernel.Mean < float64(f.Measured.Min) || f.Kernel.Mean > float64(f.Measured.Max) {
			outside = append(outside, miss)
		}
	}
	return missed, outside
}

// ties finds the groups whose cpu.max and burst are their parent group's,
// both limited, and says why only their usage is compared: both levels
// run out of quota in the same scheduler tick, and which of them the
// kernel throttles, so which counts the period and the time, is decided
// anew in each period by the order of their period timers and runtime
// slices. The measured split scatters from run to run: with the
// built-in scenario on the host, olap's throttled_usec over three runs
// spanned 240..384 ms and its nr_throttled 5..8, where with the queries
// unlimited they spanned under 2 ms and none.
func (r *Report) ties() map[string]string {
	byPath := map[string]GroupResult{}
	for _, g := range r.Groups {
		byPath[g.Path] = g
	}
	out := map[string]string{}
	for _, g := range r.Groups {
		parent, ok := byPath[path.Dir(g.Path)]
		if !ok || g.QuotaUsec < 0 || parent.QuotaUsec < 0 || g.Limit != parent.Limit {
			continue
		}
		why := fmt.Sprintf("%s's limit equals its pool's (cpu.max %s): the kernel may throttle the query or the pool in a period, so only usage_usec is compared for them", g.Path, g.Limit)
		out[g.Path], out[parent.Path] = why, why
	}
	return out
}

// pctText renders a field's difference in percent, or its absolute value
// when the measured mean is 0.
func pctText(f FieldCompare) string {
	if f.DiffPct == nil {
		return fmt.Sprintf("%+.0f", f.Diff)
	}
	return fmt.Sprintf("%+.1f%%", *f.DiffPct)
}
