package simulate

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/observe"
)

// chapterHost is the one-group Host that must behave exactly as the
// chapter's Run(limit, ncpu, tasks), with ticks of tickUsec.
func chapterHost(limit TickLimit, ncpu int, tasks []Task, tickUsec int64) Host {
	tick := func(n int) int64 { return int64(n) * tickUsec }
	h := Host{
		CPUs:     ncpu,
		TickUsec: tickUsec,
		Groups:   []Group{{Name: "g", Limit: cpulimit.Limit{QuotaUsec: tick(limit.Quota), PeriodUsec: tick(limit.Period), BurstUsec: tick(limit.Burst)}}},
	}
	for _, t := range tasks {
		h.Tasks = append(h.Tasks, HostTask{Name: t.Name, Group: "g", ArriveUsec: tick(t.Arrive), NeedUsec: tick(t.Need)})
	}
	return h
}

// hostResults strips a HostRun's task results to the chapter's Result.
func hostResults(run HostRun) []Result {
	res := make([]Result, len(run.Tasks))
	for i, t := range run.Tasks {
		res[i] = t.Result
	}
	return res
}

// TestHostReducesToChapter checks that one group on ncpu CPUs with
// single-thread tasks gives exactly the chapter's results and periods, on
// random scenarios and tick lengths.
func TestHostReducesToChapter(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 17))
	for n := range 800 {
		limit := TickLimit{Quota: 1 + rng.IntN(20), Period: 1 + rng.IntN(30), Burst: rng.IntN(3) * rng.IntN(40)}
		ncpu := 1 + rng.IntN(6)
		var tasks []Task
		for i := range rng.IntN(9) {
			need := rng.IntN(25)
			if rng.IntN(8) == 0 {
				need = 0
			}
			tasks = append(tasks, Task{Name: fmt.Sprintf("t%d", i), Arrive: rng.IntN(4) * rng.IntN(40), Need: need})
		}
		tickUsec := []int64{1, 250, 1000}[rng.IntN(3)]
		wantRes, wantPeriods, err := RunChecked(limit, ncpu, tasks)
		if err != nil {
			t.Fatalf("scenario %d: chapter model refused it: %v", n, err)
		}
		run, err := RunHost(chapterHost(limit, ncpu, tasks, tickUsec), HostOptions{})
		if err != nil {
			t.Fatalf("scenario %d: %v", n, err)
		}
		g := run.Groups[0]
		if !reflect.DeepEqual(hostResults(run), nilIfEmpty(wantRes)) || !reflect.DeepEqual(g.Periods, wantPeriods) {
			t.Fatalf("scenario %d: TickLimit%+v ncpu %d tasks %+v\nhost:    %+v\n         %+v\nchapter: %+v\n         %+v",
				n, limit, ncpu, tasks, hostResults(run), g.Periods, wantRes, wantPeriods)
		}
		if want := chapterStat(limit, wantPeriods, tickUsec); g.Stat != want {
			t.Fatalf("scenario %d: TickLimit%+v ncpu %d tasks %+v\nstat %+v\nwant %+v", n, limit, ncpu, tasks, g.Stat, want)
		}
	}
}

// nilIfEmpty makes an empty result list compare equal to RunHost's.
func nilIfEmpty(res []Result) []Result {
	if len(res) == 0 {
		return []Result{}
	}
	return res
}

// chapterStat is the cpu.stat the simple model derives from the chapter's
// periods (docs/simulator.md, "What the counters mean").
func chapterStat(limit TickLimit, periods []Period, tickUsec int64) observe.CPUStat {
	tick := uint64(tickUsec)
	st := observe.CPUStat{NrPeriods: uint64(len(periods))}
	for _, p := range periods {
		st.UsageUsec += uint64(p.Used) * tick
		if p.Stalled > 0 {
			st.NrThrottled++
			st.ThrottledUsec += uint64(p.Stalled) * tick
		}
		if p.Used > limit.Quota {
			st.NrBursts++
			st.BurstUsec += uint64(p.Used-limit.Quota) * tick
		}
	}
	st.UserUsec = st.UsageUsec
	return st
}

// TestHostChapterFigures runs the chapter's experiments through the host
// model at its scale of 1 tick = 1 ms and checks the chapter's figures.
func TestHostChapterFigures(t *testing.T) {
	const ms = 1000
	eight := make([]Task, 8)
	for i := range eight {
		eight[i] = Task{Name: fmt.Sprintf("t%d", i), Need: 10}
	}
	tests := []struct {
		name      string
		limit     TickLimit
		ncpu      int
		tasks     []Task
		done      []int // per task, in ticks
		throttled []int // per task, in ticks
		periods   []Period
		stat      observe.CPUStat
	}{
		{
			name:  "fixed window: 40/100, one task of 60",
			limit: TickLimit{Quota: 40, Period: 100}, ncpu: 1,
			tasks:     []Task{{Name: "job", Need: 60}},
			done:      []int{120},
			throttled: []int{60},
			periods:   []Period{{Start: 0, Used: 40, Stalled: 60, Exhausted: 40}, {Start: 100, Used: 20, Exhausted: -1}},
			stat:      observe.CPUStat{UsageUsec: 60 * ms, UserUsec: 60 * ms, NrPeriods: 2, NrThrottled: 1, ThrottledUsec: 60 * ms},
		},
		{
			name:  "parallelism: 8 tasks of 10 on 1 CPU",
			limit: TickLimit{Quota: 40, Period: 100}, ncpu: 1, tasks: eight,
			done:      []int{10, 20, 30, 40, 110, 120, 130, 140},
			throttled: []int{0, 0, 0, 0, 60, 60, 60, 60},
			periods:   []Period{{Start: 0, Used: 40, Stalled: 60, Exhausted: 40}, {Start: 100, Used: 40, Exhausted: 140}},
			stat:      observe.CPUStat{UsageUsec: 80 * ms, UserUsec: 80 * ms, NrPeriods: 2, NrThrottled: 1, ThrottledUsec: 60 * ms},
		},
		{
			name:  "parallelism: 8 tasks of 10 on 2 CPUs",
			limit: TickLimit{Quota: 40, Period: 100}, ncpu: 2, tasks: eight,
			done:      []int{10, 10, 20, 20, 110, 110, 120, 120},
			throttled: []int{0, 0, 0, 0, 80, 80, 80, 80},
			periods:   []Period{{Start: 0, Used: 40, Stalled: 80, Exhausted: 20}, {Start: 100, Used: 40, Exhausted: 120}},
			stat:      observe.CPUStat{UsageUsec: 80 * ms, UserUsec: 80 * ms, NrPeriods: 2, NrThrottled: 1, ThrottledUsec: 80 * ms},
		},
		{
			name:  "parallelism: 8 tasks of 10 on 8 CPUs",
			limit: TickLimit{Quota: 40, Period: 100}, ncpu: 8, tasks: eight,
			done:      []int{105, 105, 105, 105, 105, 105, 105, 105},
			throttled: []int{95, 95, 95, 95, 95, 95, 95, 95},
			periods:   []Period{{Start: 0, Used: 40, Stalled: 95, Exhausted: 5}, {Start: 100, Used: 40, Exhausted: 105}},
			stat:      observe.CPUStat{UsageUsec: 80 * ms, UserUsec: 80 * ms, NrPeriods: 2, NrThrottled: 1, ThrottledUsec: 95 * ms},
		},
		{
			name:  "burst: none, 3 idle periods then 100 at 300",
			limit: TickLimit{Quota: 40, Period: 100}, ncpu: 1,
			tasks:     []Task{{Name: "late", Arrive: 300, Need: 100}},
			done:      []int{520},
			throttled: []int{120},
			periods: []Period{{Start: 0, Exhausted: -1}, {Start: 100, Exhausted: -1}, {Start: 200, Exhausted: -1},
				{Start: 300, Used: 40, Stalled: 60, Exhausted: 340}, {Start: 400, Used: 40, Stalled: 60, Exhausted: 440},
				{Start: 500, Used: 20, Exhausted: -1}},
			stat: observe.CPUStat{UsageUsec: 100 * ms, UserUsec: 100 * ms, NrPeriods: 6, NrThrottled: 2, ThrottledUsec: 120 * ms},
		},
		{
			// 40 carried into period 1, 80 into 2, 120 into 3: 160 at hand.
			name:  "burst 120: absorbed",
			limit: TickLimit{Quota: 40, Period: 100, Burst: 120}, ncpu: 1,
			tasks:     []Task{{Name: "late", Arrive: 300, Need: 100}},
			done:      []int{400},
			throttled: []int{0},
			periods: []Period{{Start: 0, Exhausted: -1}, {Start: 100, Carried: 40, Exhausted: -1},
				{Start: 200, Carried: 80, Exhausted: -1}, {Start: 300, Used: 100, Carried: 120, Exhausted: -1}},
			stat: observe.CPUStat{UsageUsec: 100 * ms, UserUsec: 100 * ms, NrPeriods: 4, NrBursts: 1, BurstUsec: 60 * ms},
		},
		{
			// Only 20 carries: 60 at hand at 300, spent by 360, the
			// remaining 40 run from 400: throttled 360..399.
			name:  "burst 20: throttled again",
			limit: TickLimit{Quota: 40, Period: 100, Burst: 20}, ncpu: 1,
			tasks:     []Task{{Name: "late", Arrive: 300, Need: 100}},
			done:      []int{440},
			throttled: []int{40},
			periods: []Period{{Start: 0, Exhausted: -1}, {Start: 100, Carried: 20, Exhausted: -1},
				{Start: 200, Carried: 20, Exhausted: -1}, {Start: 300, Used: 60, Stalled: 40, Carried: 20, Exhausted: 360},
				{Start: 400, Used: 40, Exhausted: 440}},
			stat: observe.CPUStat{UsageUsec: 100 * ms, UserUsec: 100 * ms, NrPeriods: 5, NrThrottled: 1, ThrottledUsec: 40 * ms, NrBursts: 1, BurstUsec: 20 * ms},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, err := RunHost(chapterHost(tt.limit, tt.ncpu, tt.tasks, ms), HostOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, task := range run.Tasks {
				if task.Done != tt.done[i] || task.Throttled != tt.throttled[i] || task.Latency != task.Done-task.Arrive {
					t.Errorf("task %s: done %d throttled %d latency %d, want done %d throttled %d",
						task.Name, task.Done, task.Throttled, task.Latency, tt.done[i], tt.throttled[i])
				}
			}
			if g := run.Groups[0]; !reflect.DeepEqual(g.Periods, tt.periods) {
				t.Errorf("periods\n got %+v\nwant %+v", g.Periods, tt.periods)
			}
			if g := run.Groups[0]; g.Stat != tt.stat {
				t.Errorf("cpu.stat\n got %+v\nwant %+v", g.Stat, tt.stat)
			}
		})
	}
}

// TestHostShares checks how CPUs are divided among groups: by weight when
// the node is oversubscribed, under both a pool's and a query's quota,
// and across the threads of a task.
func TestHostShares(t *testing.T) {
	const ms = 1000
	long := func(name, group string, threads int) HostTask {
		return HostTask{Name: name, Group: group, NeedUsec: 1000 * ms, Threads: threads}
	}
	tests := []struct {
		name   string
		host   Host
		ticks  int   // run the first ticks of the host (0: to the end)
		usage  []int // per group, CPU-ms used in those ticks
		stat   map[string]observe.CPUStat
		done   map[string]int // task → done tick
		thrott map[string]int // task → throttled ticks
	}{
		{
			name: "weights 100/300 on 1 CPU share 1/4 and 3/4",
			host: Host{CPUs: 1, TickUsec: ms,
				Groups: []Group{{Name: "a", Limit: cpulimit.Limit{QuotaUsec: cpulimit.Max, PeriodUsec: 100 * ms, Weight: 100}},
					{Name: "b", Limit: cpulimit.Limit{QuotaUsec: cpulimit.Max, PeriodUsec: 100 * ms, Weight: 300}}},
				Tasks: []HostTask{long("ta", "a", 1), long("tb", "b", 1)}},
			ticks: 400, usage: []int{100, 300},
		},
		{
			name: "weights 100/300 on 4 CPUs with many threads: 1 and 3 CPUs every tick",
			host: Host{CPUs: 4, TickUsec: ms,
				Groups: []Group{{Name: "a", Limit: cpulimit.Limit{QuotaUsec: cpulimit.Max, PeriodUsec: 100 * ms, Weight: 100}},
					{Name: "b", Limit: cpulimit.Limit{QuotaUsec: cpulimit.Max, PeriodUsec: 100 * ms, Weight: 300}}},
				Tasks: []HostTask{long("ta", "a", 8), long("tb", "b", 8)}},
			ticks: 1, usage: []int{1, 3},
		},
		{
			name: "equal weights, one group wants less: the other takes the rest",
			host: Host{CPUs: 4, TickUsec: ms,
				Groups: []Group{{Name: "a", Limit: cpulimit.Limit{QuotaUsec: cpulimit.Max, PeriodUsec: 100 * ms}},
					{Name: "b", Limit: cpulimit.Limit{QuotaUsec: cpulimit.Max, PeriodUsec: 100 * ms}}},
				Tasks: []HostTask{long("ta", "a", 1), long("tb", "b", 8)}},
			ticks: 100, usage: []int{100, 300},
		},
		{
			// The limited group wants 2 CPUs but has 20ms per 100ms: it
			// takes 2 CPUs for 10 ticks, then the other gets all 4.
			name: "a throttled group's CPUs go to its sibling",
			host: Host{CPUs: 4, TickUsec: ms,
				Groups: []Group{{Name: "a", Limit: cpulimit.Limit{QuotaUsec: 20 * ms, PeriodUsec: 100 * ms}},
					{Name: "b", Limit: cpulimit.Limit{QuotaUsec: cpulimit.Max, PeriodUsec: 100 * ms}}},
				Tasks: []HostTask{long("ta", "a", 2), long("tb", "b", 8)}},
			ticks: 100, usage: []int{20, 380},
		},
		{
			// Pool 60ms/100ms over two queries of 40ms/100ms, each with
			// 4 threads on 8 CPUs: 4+4 for 7 ticks (56), then 2+2 at
			// tick 7 spends the pool's last 4 with CPUs free: the pool is
			// throttled from tick 7 to 99 (93 ticks); the queries never
			// spend their own 40 and are not throttled themselves.
			name: "pool cap binds before query caps",
			host: Host{CPUs: 8, TickUsec: ms,
				Groups: []Group{{Name: "pool", Limit: cpulimit.Limit{QuotaUsec: 60 * ms, PeriodUsec: 100 * ms}},
					{Name: "q1", Parent: "pool", Limit: cpulimit.Limit{QuotaUsec: 40 * ms, PeriodUsec: 100 * ms}},
					{Name: "q2", Parent: "pool", Limit: cpulimit.Limit{QuotaUsec: 40 * ms, PeriodUsec: 100 * ms}}},
				Tasks: []HostTask{{Name: "t1", Group: "q1", NeedUsec: 60 * ms, Threads: 4},
					{Name: "t2", Group: "q2", NeedUsec: 60 * ms, Threads: 4}}},
			stat: map[string]observe.CPUStat{
				"pool": {UsageUsec: 120 * ms, UserUsec: 120 * ms, NrPeriods: 2, NrThrottled: 1, ThrottledUsec: 93 * ms},
				"q1":   {UsageUsec: 60 * ms, UserUsec: 60 * ms, NrPeriods: 2},
				"q2":   {UsageUsec: 60 * ms, UserUsec: 60 * ms, NrPeriods: 2},
			},
			// Period 2: 30 each left, 4+4 per tick: q1 and q2 use 28 in
			// 7 ticks, then 2 each at tick 107.
			done:   map[string]int{"t1": 108, "t2": 108},
			thrott: map[string]int{"t1": 93, "t2": 93},
		},
		{
			// Query q1 has 10ms per 100ms for a 4-thread task: 4, 4, 2
			// (exhausted with CPUs free at tick 2), so q1 is throttled
			// from tick 2 to 99 (98 ticks) in each of periods 1..3; q2
			// inside the same pool runs on.
			name: "query cap binds inside a roomy pool",
			host: Host{CPUs: 8, TickUsec: ms,
				Groups: []Group{{Name: "pool", Limit: cpulimit.Limit{QuotaUsec: 400 * ms, PeriodUsec: 100 * ms}},
					{Name: "q1", Parent: "pool", Limit: cpulimit.Limit{QuotaUsec: 10 * ms, PeriodUsec: 100 * ms}},
					{Name: "q2", Parent: "pool", Limit: cpulimit.Limit{QuotaUsec: cpulimit.Max, PeriodUsec: 100 * ms}}},
				Tasks: []HostTask{{Name: "t1", Group: "q1", NeedUsec: 30 * ms, Threads: 4},
					{Name: "t2", Group: "q2", NeedUsec: 40 * ms, Threads: 4}}},
			stat: map[string]observe.CPUStat{
				"pool": {UsageUsec: 70 * ms, UserUsec: 70 * ms, NrPeriods: 3},
				"q1":   {UsageUsec: 30 * ms, UserUsec: 30 * ms, NrPeriods: 3, NrThrottled: 2, ThrottledUsec: 196 * ms},
				"q2":   {UsageUsec: 40 * ms, UserUsec: 40 * ms},
			},
			done:   map[string]int{"t1": 203, "t2": 10},
			thrott: map[string]int{"t1": 196, "t2": 0},
		},
		{
			// One task of 8 threads needing 80 behaves like the chapter's
			// 8 tasks of 10 on 4 CPUs: 4 per tick, quota 40 gone at tick
			// 10, the rest from 100 to 110; throttled 90 wall ticks.
			name: "threads spend the quota faster",
			host: Host{CPUs: 4, TickUsec: ms,
				Groups: []Group{{Name: "g", Limit: cpulimit.Limit{QuotaUsec: 40 * ms, PeriodUsec: 100 * ms}}},
				Tasks:  []HostTask{{Name: "par", Group: "g", NeedUsec: 80 * ms, Threads: 8}}},
			stat: map[string]observe.CPUStat{
				"g": {UsageUsec: 80 * ms, UserUsec: 80 * ms, NrPeriods: 2, NrThrottled: 1, ThrottledUsec: 90 * ms},
			},
			done:   map[string]int{"par": 110},
			thrott: map[string]int{"par": 90},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, err := RunHost(tt.host, HostOptions{TraceTicks: tt.ticks})
			if err != nil {
				t.Fatal(err)
			}
			if tt.usage != nil {
				for i, g := range run.Groups {
					used := 0
					for _, tk := range g.Trace {
						used += tk.Ran
					}
					if used != tt.usage[i] {
						t.Errorf("group %s used %d CPU-ticks in the first %d ticks, want %d", g.Name, used, tt.ticks, tt.usage[i])
					}
				}
			}
			for _, g := range run.Groups {
				if want, ok := tt.stat[g.Name]; ok && g.Stat != want {
					t.Errorf("group %s cpu.stat\n got %+v\nwant %+v", g.Name, g.Stat, want)
				}
			}
			for _, task := range run.Tasks {
				if want, ok := tt.done[task.Name]; ok && task.Done != want {
					t.Errorf("task %s done at %d, want %d", task.Name, task.Done, want)
				}
				if want, ok := tt.thrott[task.Name]; ok && task.Throttled != want {
					t.Errorf("task %s throttled %d ticks, want %d", task.Name, task.Throttled, want)
				}
			}
		})
	}
}

// TestHostTrace checks the per-tick trace: idle gaps are filled, held and
// waiting are told apart, and it stops at the end of the run.
func TestHostTrace(t *testing.T) {
	const ms = 1000
	h := Host{CPUs: 1, TickUsec: ms,
		Groups: []Group{{Name: "pool", Limit: cpulimit.Limit{QuotaUsec: 2 * ms, PeriodUsec: 10 * ms}},
			{Name: "q", Parent: "pool", Limit: cpulimit.Limit{QuotaUsec: cpulimit.Max, PeriodUsec: 10 * ms}},
			{Name: "other", Limit: cpulimit.Limit{QuotaUsec: cpulimit.Max, PeriodUsec: 10 * ms}}},
		Tasks: []HostTask{{Name: "tq", Group: "q", ArriveUsec: 2 * ms, NeedUsec: 3 * ms},
			{Name: "to", Group: "other", ArriveUsec: 3 * ms, NeedUsec: 1 * ms}}}
	run, err := RunHost(h, HostOptions{TraceTicks: 100})
	if err != nil {
		t.Fatal(err)
	}
	// Ticks 0-1 idle; tq runs at 2; at 3 pool (first, tie) runs tq
	// and spends its quota while "to" waits; at 4 "to" runs on the free
	// CPU while pool is throttled and q held; 5..9 throttled; tq's last
	// tick at 10.
	var rows []string
	for _, g := range run.Groups {
		var b strings.Builder
		for _, tk := range g.Trace {
			switch {
			case tk.Ran > 0:
				b.WriteByte('R')
			case tk.Throttled:
				b.WriteByte('T')
			case tk.Held:
				b.WriteByte('H')
			case tk.Waiting:
				b.WriteByte('W')
			default:
				b.WriteByte('.')
			}
		}
		rows = append(rows, b.String())
	}
	want := []string{"..RRTTTTTTR", "..RRHHHHHHR", "...WR......"}
	if !reflect.DeepEqual(rows, want) || run.Ticks != 11 {
		t.Errorf("trace %q over %d ticks, want %q over 11", rows, run.Ticks, want)
	}
}

// TestHostValidate checks that every invalid part of a Host is reported
// with its index and a message saying what is accepted.
func TestHostValidate(t *testing.T) {
	const ms = 1000
	valid := func() Host {
		return Host{CPUs: 2, TickUsec: ms,
			Groups: []Group{{Name: "pool", Limit: cpulimit.Limit{QuotaUsec: 40 * ms, PeriodUsec: 100 * ms}},
				{Name: "q", Parent: "pool", Limit: cpulimit.Limit{QuotaUsec: cpulimit.Max, PeriodUsec: 100 * ms}}},
			Tasks: []HostTask{{Name: "t", Group: "q", NeedUsec: 10 * ms}}}
	}
	tests := []struct {
		name  string
		edit  func(h *Host)
		group int
		task  int
		msg   string
	}{
		{"no CPUs", func(h *Host) { h.CPUs = 0 }, -1, -1, "cpus 0 is out of range"},
		{"no tick", func(h *Host) { h.TickUsec = 0 }, -1, -1, "tick 0 is out of range"},
		{"bad group name", func(h *Host) { h.Groups[0].Name = "../x"; h.Groups[1].Parent = "../x" }, 0, -1, `group name "../x" is refused`},
		{"kernel file as a group name", func(h *Host) { h.Groups[0].Name = "tasks"; h.Groups[1].Parent = "tasks" }, 0, -1, `"tasks" is a cgroup v1 kernel file`},
		{"kernel file as a task name", func(h *Host) { h.Tasks[0].Name = "cgroup.procs" }, -1, 0, `names starting with "cgroup." are the kernel's cgroup files`},
		{"duplicate group", func(h *Host) { h.Groups[1].Name = "pool" }, 1, -1, `name "pool" is already used`},
		{"parent after child", func(h *Host) { h.Groups[0].Parent = "q" }, 0, -1, `parent "q" is not a group defined before it`},
		{"zero period", func(h *Host) { h.Groups[0].PeriodUsec = 0 }, 0, -1, "period 0 is not accepted"},
		{"period off the tick", func(h *Host) { h.Groups[0].PeriodUsec = 1500 }, 0, -1, "period 1500us is not accepted (accepted: a positive multiple of the tick 1ms)"},
		{"zero quota", func(h *Host) { h.Groups[0].QuotaUsec = 0 }, 0, -1, "quota 0 is not accepted"},
		{"quota off the tick", func(h *Host) { h.Groups[0].QuotaUsec = 250 }, 0, -1, "quota 250us is not accepted"},
		{"negative burst", func(h *Host) { h.Groups[0].BurstUsec = -ms }, 0, -1, "burst -1ms is not accepted"},
		{"burst without quota", func(h *Host) { h.Groups[1].BurstUsec = ms }, 1, -1, "burst 1ms needs a quota"},
		{"weight too big", func(h *Host) { h.Groups[0].Weight = 10001 }, 0, -1, "weight 10001 is out of range (accepted: 1..10000)"},
		{"task in a parent", func(h *Host) { h.Tasks[0].Group = "pool" }, -1, 0, `group "pool" has child groups`},
		{"task in no group", func(h *Host) { h.Tasks[0].Group = "nope" }, -1, 0, `group "nope" is not defined`},
		{"duplicate task", func(h *Host) { h.Tasks = append(h.Tasks, h.Tasks[0]) }, -1, 1, `name "t" is already used by another task`},
		{"negative arrival", func(h *Host) { h.Tasks[0].ArriveUsec = -ms }, -1, 0, "arrive -1ms is not accepted"},
		{"need off the tick", func(h *Host) { h.Tasks[0].NeedUsec = 10 }, -1, 0, "need 10us is not accepted"},
		{"negative threads", func(h *Host) { h.Tasks[0].Threads = -1 }, -1, 0, "threads -1 is out of range"},
		{"never ends in range", func(h *Host) { h.Groups[0].PeriodUsec = 1000 * ms; h.Tasks[0].NeedUsec = int64(maxInt) / ms * ms }, -1, -1, "too long to simulate"},
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid host: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := valid()
			tt.edit(&h)
			_, err := RunHost(h, HostOptions{})
			var he *HostError
			if !errors.As(err, &he) || !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("got %v, want a *HostError", err)
			}
			if he.Group != tt.group || he.Task != tt.task || !strings.Contains(he.Msg, tt.msg) {
				t.Errorf("got group %d task %d %q, want group %d task %d %q", he.Group, he.Task, he.Msg, tt.group, tt.task, tt.msg)
			}
		})
	}
}

// randomHost is a random node: up to 3 pools, some with query groups,
// limited or not, with weights and bursts, and up to 10 tasks with threads.
func randomHost(rng *rand.Rand) Host {
	const tick = 1000
	h := Host{CPUs: 1 + rng.IntN(6), TickUsec: tick}
	var leaves []string
	group := func(name, parent string) {
		g := Group{Name: name, Parent: parent, Limit: cpulimit.Limit{QuotaUsec: cpulimit.Max, PeriodUsec: int64(1+rng.IntN(20)) * tick, Weight: int64(1 + rng.IntN(400))}}
		if rng.IntN(4) > 0 {
			g.QuotaUsec = int64(1+rng.IntN(30)) * tick
			g.BurstUsec = int64(rng.IntN(2)*rng.IntN(30)) * tick
		}
		h.Groups = append(h.Groups, g)
	}
	for p := range 1 + rng.IntN(3) {
		pool := fmt.Sprintf("p%d", p)
		group(pool, "")
		queries := rng.IntN(3)
		if queries == 0 {
			leaves = append(leaves, pool)
		}
		for q := range queries {
			name := fmt.Sprintf("%s-q%d", pool, q)
			group(name, pool)
			leaves = append(leaves, name)
		}
	}
	for i := range rng.IntN(11) {
		h.Tasks = append(h.Tasks, HostTask{Name: fmt.Sprintf("t%d", i), Group: leaves[rng.IntN(len(leaves))],
			ArriveUsec: int64(rng.IntN(3)*rng.IntN(50)) * tick, NeedUsec: int64(rng.IntN(40)) * tick, Threads: 1 + rng.IntN(4)})
	}
	return h
}

// TestHostInvariants checks on random nodes what must hold whatever the
// weights, limits and tasks: work is conserved up the tree, no group
// uses more than its quota and carry, throttling follows exhaustion, the
// node never runs more than its CPUs, and a thread waits for a CPU only
// when every CPU is busy.
func TestHostInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 2))
	for n := range 500 {
		h := randomHost(rng)
		run, err := RunHost(h, HostOptions{TraceTicks: 1 << 20})
		if err != nil {
			t.Fatalf("scenario %d: %v", n, err)
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("scenario %d: %s\nhost %+v", n, fmt.Sprintf(format, args...), h)
		}
		var need, rootUsage uint64
		for _, task := range h.Tasks {
			need += uint64(task.NeedUsec)
		}
		childUsage := make(map[string]uint64)
		for i, g := range h.Groups {
			st := run.Groups[i].Stat
			if g.Parent == "" {
				rootUsage += st.UsageUsec
			} else {
				childUsage[g.Parent] += st.UsageUsec
			}
			if len(run.Groups[i].Trace) != run.Ticks {
				fail("group %s traced %d ticks of %d", g.Name, len(run.Groups[i].Trace), run.Ticks)
			}
			quota, period := int(g.QuotaUsec/h.TickUsec), int(g.PeriodUsec/h.TickUsec)
			for _, p := range run.Groups[i].Periods {
				if g.QuotaUsec == cpulimit.Max {
					if p.Stalled != 0 || p.Exhausted != -1 || p.Carried != 0 {
						fail("unlimited group %s has period %+v", g.Name, p)
					}
					continue
				}
				if p.Used > quota+p.Carried || p.Carried > int(g.BurstUsec/h.TickUsec) {
					fail("group %s period %+v beyond quota %d", g.Name, p, quota)
				}
				if p.Stalled > 0 && (p.Exhausted < 0 || p.Stalled > p.Start+period-p.Exhausted+1) {
					fail("group %s period %+v throttled without or before exhaustion", g.Name, p)
				}
			}
		}
		if rootUsage != need {
			fail("top-level groups used %d usec, tasks needed %d", rootUsage, need)
		}
		for i, g := range h.Groups {
			if u, ok := childUsage[g.Name]; ok && u != run.Groups[i].Stat.UsageUsec {
				fail("group %s used %d usec, its children %d", g.Name, run.Groups[i].Stat.UsageUsec, u)
			}
		}
		for tk := range run.Ticks {
			ran, waiting := 0, false
			for i, g := range h.Groups {
				gt := run.Groups[i].Trace[tk]
				if g.Parent == "" {
					ran += gt.Ran
				}
				waiting = waiting || gt.Waiting
			}
			if ran > h.CPUs || (waiting && ran != h.CPUs) {
				fail("tick %d: %d CPUs ran of %d, waiting %v", tk, ran, h.CPUs, waiting)
			}
		}
		for i, task := range run.Tasks {
			ticks := int(h.Tasks[i].NeedUsec / h.TickUsec)
			minLatency := (ticks + task.Threads - 1) / task.Threads
			if task.Latency < minLatency || task.Throttled > task.Latency || task.Done != task.Arrive+task.Latency {
				fail("task %+v needs %d ticks", task, ticks)
			}
		}
	}
}
