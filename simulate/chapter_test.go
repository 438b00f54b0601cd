package simulate

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// runTicks is the reference model: the chapter's Run loop, one tick at a
// time, plus the edge cases the package defines (a task with Need 0 is done
// at its arrival and takes no part in the loop). runEvents must agree with
// it exactly; input is assumed valid.
func runTicks(limit TickLimit, ncpu int, tasks []Task) ([]Result, []Period) {
	res := make([]Result, len(tasks))
	left := make([]int, len(tasks))
	active := 0
	for i, t := range tasks {
		res[i] = Result{Name: t.Name, Arrive: t.Arrive, Done: -1}
		left[i] = t.Need
		if t.Need == 0 {
			res[i].Done = t.Arrive
		} else {
			active++
		}
	}

	var periods []Period
	remaining := 0
	for t := 0; active > 0; t++ {
		if t%limit.Period == 0 {
			carry := 0
			if len(periods) > 0 {
				carry = min(remaining, limit.Burst)
			}
			remaining = limit.Quota + carry
			periods = append(periods, Period{Start: t, Carried: carry, Exhausted: -1})
		}
		p := &periods[len(periods)-1]

		ran := 0
		stalledHere := false
		for i := range tasks {
			if left[i] == 0 || tasks[i].Arrive > t {
				continue
			}
			if ran >= ncpu {
				break
			}
			if remaining == 0 {
				res[i].Throttled++
				stalledHere = true
				continue
			}
			remaining--
			p.Used++
			if remaining == 0 && p.Exhausted < 0 {
				p.Exhausted = t + 1
			}
			ran++
			left[i]--
			if left[i] == 0 {
				res[i].Done = t + 1
				res[i].Latency = t + 1 - tasks[i].Arrive
				active--
			}
		}
		if stalledHere {
			p.Stalled++
		}
	}
	return res, periods
}

// chapterTasks is the chapter's parallelism experiment: 80 ticks of work as
// 8 tasks of 10 ticks, all arriving at tick 0.
func chapterTasks() []Task {
	var tasks []Task
	for _, name := range []string{"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"} {
		tasks = append(tasks, Task{Name: name, Arrive: 0, Need: 10})
	}
	return tasks
}

// chapterResults builds the expected Results of chapterTasks from Done and
// Throttled per task.
func chapterResults(done, throttled []int) []Result {
	var res []Result
	for i, t := range chapterTasks() {
		res = append(res, Result{Name: t.Name, Arrive: 0, Done: done[i], Latency: done[i], Throttled: throttled[i]})
	}
	return res
}

// idlePeriods is the three idle periods before the burst experiment's task, with
// the carry each of them receives.
func idlePeriods(carried ...int) []Period {
	var ps []Period
	for i, c := range carried {
		ps = append(ps, Period{Start: 100 * i, Carried: c, Exhausted: -1})
	}
	return ps
}

// TestChapterFigures asserts every figure of the seed chapter, with the
// whole Result and Period lists worked out by hand.
func TestChapterFigures(t *testing.T) {
	cpuMax := TickLimit{Quota: 40, Period: 100}
	burstTask := []Task{{Name: "batch", Arrive: 300, Need: 100}}
	tests := []struct {
		name    string
		limit   TickLimit
		ncpu    int
		tasks   []Task
		results []Result
		periods []Period
	}{
		{
			// One task needing 60 ticks under 40/100: it runs 40, waits
			// out the 60 ticks left of period 0, runs 20 more.
			name:    "the quota does not accumulate",
			limit:   cpuMax,
			ncpu:    1,
			tasks:   []Task{{Name: "job", Arrive: 0, Need: 60}},
			results: []Result{{Name: "job", Arrive: 0, Done: 120, Latency: 120, Throttled: 60}},
			periods: []Period{
				{Start: 0, Used: 40, Stalled: 60, Carried: 0, Exhausted: 40},
				{Start: 100, Used: 20, Stalled: 0, Carried: 0, Exhausted: -1},
			},
		},
		{
			// One CPU: t0..t3 finish at 10, 20, 30, 40 and spend the
			// quota; t4..t7 are runnable and throttled for ticks 40..99
			// (60 each), then finish one after another from tick 100.
			name:  "parallelism 1",
			limit: cpuMax,
			ncpu:  1,
			tasks: chapterTasks(),
			results: chapterResults(
				[]int{10, 20, 30, 40, 110, 120, 130, 140},
				[]int{0, 0, 0, 0, 60, 60, 60, 60}),
			periods: []Period{
				{Start: 0, Used: 40, Stalled: 60, Exhausted: 40},
				{Start: 100, Used: 40, Stalled: 0, Exhausted: 140},
			},
		},
		{
			// Two CPUs: pairs finish at 10 and 20, the quota is gone at
			// 20, t4..t7 are throttled for ticks 20..99 (80 each).
			name:  "parallelism 2",
			limit: cpuMax,
			ncpu:  2,
			tasks: chapterTasks(),
			results: chapterResults(
				[]int{10, 10, 20, 20, 110, 110, 120, 120},
				[]int{0, 0, 0, 0, 80, 80, 80, 80}),
			periods: []Period{
				{Start: 0, Used: 40, Stalled: 80, Exhausted: 20},
				{Start: 100, Used: 40, Stalled: 0, Exhausted: 120},
			},
		},
		{
			// Eight CPUs: all eight run 5 ticks, spending 40 by tick 5,
			// are throttled for the other 95 ticks and finish together at
			// 105. The first task no longer finishes at 10.
			name:  "parallelism 8",
			limit: cpuMax,
			ncpu:  8,
			tasks: chapterTasks(),
			results: chapterResults(
				[]int{105, 105, 105, 105, 105, 105, 105, 105},
				[]int{95, 95, 95, 95, 95, 95, 95, 95}),
			periods: []Period{
				{Start: 0, Used: 40, Stalled: 95, Exhausted: 5},
				{Start: 100, Used: 40, Stalled: 0, Exhausted: 105},
			},
		},
		{
			// Without burst the idle periods leave nothing behind: 40,
			// 40 and 20 ticks in periods 300, 400, 500, throttled for 60
			// ticks in each of the first two.
			name:    "no burst after idle periods",
			limit:   cpuMax,
			ncpu:    1,
			tasks:   burstTask,
			results: []Result{{Name: "batch", Arrive: 300, Done: 520, Latency: 220, Throttled: 120}},
			periods: append(idlePeriods(0, 0, 0),
				Period{Start: 300, Used: 40, Stalled: 60, Exhausted: 340},
				Period{Start: 400, Used: 40, Stalled: 60, Exhausted: 440},
				Period{Start: 500, Used: 20, Stalled: 0, Exhausted: -1},
			),
		},
		{
			// Burst 120: the carry grows 40, 80, 120 over the idle
			// periods, so period 300 has 160 and the task runs straight
			// through.
			name:    "burst 120 absorbs the batch",
			limit:   TickLimit{Quota: 40, Period: 100, Burst: 120},
			ncpu:    1,
			tasks:   burstTask,
			results: []Result{{Name: "batch", Arrive: 300, Done: 400, Latency: 100, Throttled: 0}},
			periods: append(idlePeriods(0, 40, 80),
				Period{Start: 300, Used: 100, Stalled: 0, Carried: 120, Exhausted: -1},
			),
		},
		{
			// Burst 20: the carry is capped at 20 in every idle period,
			// so period 300 has 60. The task runs ticks 300..359, is
			// throttled for 360..399 (40 ticks), runs its last 40 ticks
			// in 400..439 with nothing carried (period 300 left 0).
			name:    "burst 20 throttles again",
			limit:   TickLimit{Quota: 40, Period: 100, Burst: 20},
			ncpu:    1,
			tasks:   burstTask,
			results: []Result{{Name: "batch", Arrive: 300, Done: 440, Latency: 140, Throttled: 40}},
			periods: append(idlePeriods(0, 20, 20),
				Period{Start: 300, Used: 60, Stalled: 40, Carried: 20, Exhausted: 360},
				Period{Start: 400, Used: 40, Stalled: 0, Carried: 0, Exhausted: 440},
			),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, e := range chapterEngines {
				results, periods := e.run(tc.limit, tc.ncpu, tc.tasks)
				if !reflect.DeepEqual(results, tc.results) {
					t.Errorf("%s results:\n got %+v\nwant %+v", e.name, results, tc.results)
				}
				if !reflect.DeepEqual(periods, tc.periods) {
					t.Errorf("%s periods:\n got %+v\nwant %+v", e.name, periods, tc.periods)
				}
			}
		})
	}
}

// chapterEngines are the two implementations every named case runs on.
var chapterEngines = []struct {
	name string
	run  func(TickLimit, int, []Task) ([]Result, []Period)
}{
	{"Run", Run},
	{"per-tick reference", runTicks},
}

// TestAverageQuotaSuffices pins the chapter's premise: the quota is enough
// on average, and the task is throttled anyway. Over the periods the run
// spans, the quota granted exceeds the work and the average use stays below
// the quota, yet the work was throttled.
func TestAverageQuotaSuffices(t *testing.T) {
	tests := []struct {
		name  string
		ncpu  int
		tasks []Task
	}{
		{"one task of 60", 1, []Task{{Name: "job", Need: 60}}},
		{"8 tasks of 10 on 8 CPUs", 8, chapterTasks()},
	}
	limit := TickLimit{Quota: 40, Period: 100}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			results, periods := Run(limit, tc.ncpu, tc.tasks)
			need, used, throttled := 0, 0, 0
			for i, r := range results {
				need += tc.tasks[i].Need
				throttled += r.Throttled
			}
			for _, p := range periods {
				used += p.Used
			}
			granted := limit.Quota * len(periods)
			if used != need || need > granted {
				t.Errorf("used %d of need %d, granted %d over %d periods: the quota should suffice on average", used, need, granted, len(periods))
			}
			if throttled == 0 {
				t.Errorf("throttled 0 ticks, want > 0: a fixed window throttles even when the average suffices")
			}
		})
	}
}

// TestEdgeCases pins the cases the package defines beyond the chapter.
func TestEdgeCases(t *testing.T) {
	tests := []struct {
		name    string
		limit   TickLimit
		ncpu    int
		tasks   []Task
		results []Result
		periods []Period
	}{
		{
			name:    "no tasks, no periods",
			limit:   TickLimit{Quota: 40, Period: 100},
			ncpu:    1,
			tasks:   nil,
			results: []Result{},
			periods: nil,
		},
		{
			// A task with Need 0 is done at its arrival and does not
			// extend the periods past the last real work.
			name:  "Need 0 is done at arrival",
			limit: TickLimit{Quota: 40, Period: 100},
			ncpu:  1,
			tasks: []Task{{Name: "work", Arrive: 0, Need: 10}, {Name: "empty", Arrive: 500, Need: 0}},
			results: []Result{
				{Name: "work", Arrive: 0, Done: 10, Latency: 10},
				{Name: "empty", Arrive: 500, Done: 500},
			},
			periods: []Period{{Start: 0, Used: 10, Exhausted: -1}},
		},
		{
			name:    "only Need 0, no periods",
			limit:   TickLimit{Quota: 40, Period: 100},
			ncpu:    1,
			tasks:   []Task{{Name: "empty", Arrive: 7}},
			results: []Result{{Name: "empty", Arrive: 7, Done: 7}},
			periods: nil,
		},
		{
			// Quota 3 on 2 CPUs, four tasks of 2. Tick 0: a, b run (1
			// left). Tick 1: a runs and spends the quota; b, c and d are
			// all throttled, three tasks on two CPUs. Ticks 2..9: b, c, d
			// throttled. Period 10: b, c run; tick 11: c runs, d
			// throttled until 20; d runs 20..21.
			name:  "quota runs out mid-tick: every other runnable task is throttled",
			limit: TickLimit{Quota: 3, Period: 10},
			ncpu:  2,
			tasks: []Task{{Name: "a", Need: 2}, {Name: "b", Need: 2}, {Name: "c", Need: 2}, {Name: "d", Need: 2}},
			results: []Result{
				{Name: "a", Done: 2, Latency: 2},
				{Name: "b", Done: 11, Latency: 11, Throttled: 9},
				{Name: "c", Done: 12, Latency: 12, Throttled: 9},
				{Name: "d", Done: 22, Latency: 22, Throttled: 18},
			},
			periods: []Period{
				{Start: 0, Used: 3, Stalled: 9, Exhausted: 2},
				{Start: 10, Used: 3, Stalled: 9, Exhausted: 12},
				{Start: 20, Used: 2, Exhausted: -1},
			},
		},
		{
			// Quota 2 on 2 CPUs, three tasks of 1. Tick 0: a and b take
			// both CPUs and the quota; c waits for a CPU, which is not
			// throttling. Ticks 1..9: c is throttled.
			name:  "CPUs and quota run out in the same tick",
			limit: TickLimit{Quota: 2, Period: 10},
			ncpu:  2,
			tasks: []Task{{Name: "a", Need: 1}, {Name: "b", Need: 1}, {Name: "c", Need: 1}},
			results: []Result{
				{Name: "a", Done: 1, Latency: 1},
				{Name: "b", Done: 1, Latency: 1},
				{Name: "c", Done: 11, Latency: 11, Throttled: 9},
			},
			periods: []Period{
				{Start: 0, Used: 2, Stalled: 9, Exhausted: 1},
				{Start: 10, Used: 1, Exhausted: -1},
			},
		},
		{
			// A later task with a lower index takes the CPU from a
			// running one: slice order, not arrival order, decides.
			name:  "slice order decides who runs",
			limit: TickLimit{Quota: 10, Period: 10},
			ncpu:  1,
			tasks: []Task{{Name: "late", Arrive: 3, Need: 2}, {Name: "early", Arrive: 0, Need: 5}},
			results: []Result{
				{Name: "late", Arrive: 3, Done: 5, Latency: 2},
				{Name: "early", Arrive: 0, Done: 7, Latency: 7},
			},
			periods: []Period{{Start: 0, Used: 7, Exhausted: -1}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, e := range chapterEngines {
				results, periods := e.run(tc.limit, tc.ncpu, tc.tasks)
				if !reflect.DeepEqual(results, tc.results) {
					t.Errorf("%s results:\n got %+v\nwant %+v", e.name, results, tc.results)
				}
				if !reflect.DeepEqual(periods, tc.periods) {
					t.Errorf("%s periods:\n got %+v\nwant %+v", e.name, periods, tc.periods)
				}
			}
		})
	}
}

// TestInvalidInput checks every rejected input: RunChecked names it, Run
// returns nil, nil.
func TestInvalidInput(t *testing.T) {
	ok := TickLimit{Quota: 40, Period: 100}
	work := []Task{{Name: "job", Need: 60}}
	tests := []struct {
		name  string
		limit TickLimit
		ncpu  int
		tasks []Task
		field string
		value int
		want  string // part of the message
	}{
		{"Period 0", TickLimit{Quota: 40}, 1, work, "TickLimit.Period", 0, "want > 0"},
		{"Period negative", TickLimit{Quota: 40, Period: -100}, 1, work, "TickLimit.Period", -100, "want > 0"},
		{"Quota 0", TickLimit{Period: 100}, 1, work, "TickLimit.Quota", 0, "want > 0"},
		{"Quota negative", TickLimit{Quota: -1, Period: 100}, 1, work, "TickLimit.Quota", -1, "want > 0"},
		{"Burst negative", TickLimit{Quota: 40, Period: 100, Burst: -1}, 1, work, "TickLimit.Burst", -1, "want >= 0"},
		{"Quota+Burst overflows", TickLimit{Quota: 40, Period: 100, Burst: maxInt - 39}, 1, work, "TickLimit.Burst", maxInt - 39, "Quota+Burst fits in int"},
		{"ncpu 0", ok, 0, work, "ncpu", 0, "want >= 1"},
		{"ncpu negative", ok, -2, work, "ncpu", -2, "want >= 1"},
		{"Need negative", ok, 1, []Task{{Name: "a", Need: 1}, {Name: "b", Need: -5}}, `tasks[1] "b".Need`, -5, "want >= 0"},
		{"Arrive negative", ok, 1, []Task{{Name: "a", Arrive: -1, Need: 1}}, `tasks[0] "a".Arrive`, -1, "want >= 0"},
		{"Arrive negative with Need 0", ok, 1, []Task{{Name: "a", Arrive: -1}}, `tasks[0] "a".Arrive`, -1, "want >= 0"},
		{"total Need overflows", ok, 1, []Task{{Name: "a", Need: maxInt}, {Name: "b", Need: 1}}, `tasks[1] "b".Need`, 1, "fits in int"},
		{"run ends past the int range", TickLimit{Quota: 1, Period: 1 << 40}, 1, []Task{{Name: "a", Need: 1 << 30}}, "total Need", 1 << 30, "ends the run before tick"},
		{"last arrival near the int range", ok, 1, []Task{{Name: "a", Arrive: maxInt - 100, Need: 1}}, "total Need", 1, "last arrival at tick"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			results, periods, err := RunChecked(tc.limit, tc.ncpu, tc.tasks)
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("RunChecked error = %v, want one wrapping ErrInvalidInput", err)
			}
			var ie *InputError
			if !errors.As(err, &ie) || ie.Field != tc.field || ie.Value != tc.value {
				t.Errorf("RunChecked error = %#v, want Field %q Value %d", err, tc.field, tc.value)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if results != nil || periods != nil {
				t.Errorf("RunChecked returned results %v periods %v with an error", results, periods)
			}
			if err2 := Validate(tc.limit, tc.ncpu, tc.tasks); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("Validate = %v, want %v", err2, err)
			}
			if results, periods := Run(tc.limit, tc.ncpu, tc.tasks); results != nil || periods != nil {
				t.Errorf("Run = %v, %v, want nil, nil", results, periods)
			}
		})
	}
}

// TestIdleCarry checks how unused quota accumulates over idle periods:
// with Quota Q and Burst B, period k of an idle stretch from tick 0
// starts with min((k+1)*Q, Q+B), so it is carried min(k*Q, B) — a burst
// above the quota fills over several periods and never beyond Q+B.
func TestIdleCarry(t *testing.T) {
	tests := []struct {
		name         string
		quota, burst int
	}{
		{"no burst", 40, 0},
		{"burst below quota", 40, 20},
		{"burst equal to quota", 40, 40},
		{"burst three quotas", 40, 120},
		{"burst not a multiple of quota", 40, 100},
	}
	const idlePeriods = 5
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			limit := TickLimit{Quota: tc.quota, Period: 100, Burst: tc.burst}
			tasks := []Task{{Name: "late", Arrive: idlePeriods * 100, Need: 1}}
			for _, e := range chapterEngines {
				_, periods := e.run(limit, 1, tasks)
				if len(periods) != idlePeriods+1 {
					t.Fatalf("%s: %d periods, want %d", e.name, len(periods), idlePeriods+1)
				}
				for k, p := range periods {
					if want := min(k*tc.quota, tc.burst); p.Carried != want {
						t.Errorf("%s: period %d carried %d, want min(%d*%d, %d) = %d", e.name, k, p.Carried, k, tc.quota, tc.burst, want)
					}
				}
			}
		})
	}
}
