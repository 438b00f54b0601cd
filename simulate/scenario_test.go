package simulate

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/cpulimit"
)

// scenarioDir holds the shipped scenarios.
const scenarioDir = "../testdata/scenarios"

// readScenario parses a shipped scenario.
func readScenario(t testing.TB, name string) *Scenario {
	t.Helper()
	path := filepath.Join(scenarioDir, name)
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseScenario(path, src)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestParseScenario parses a file with every keyword and setting.
func TestParseScenario(t *testing.T) {
	src := `# every keyword
cpus 4   # node
tick 500us

group pool quota 2s period 1s burst 500ms weight 200
group q parent pool quota max
group other                       # all defaults
task a group q need 1500us
task b group other arrive 3ms need 0 threads 3
`
	want := Host{CPUs: 4, TickUsec: 500,
		Groups: []Group{
			{Name: "pool", Limit: cpulimit.Limit{QuotaUsec: 2_000_000, PeriodUsec: 1_000_000, BurstUsec: 500_000, Weight: 200}},
			{Name: "q", Parent: "pool", Limit: cpulimit.Limit{QuotaUsec: cpulimit.Max, PeriodUsec: cpulimit.DefaultPeriodUsec, Weight: cpulimit.DefaultWeight}},
			{Name: "other", Limit: cpulimit.Limit{QuotaUsec: cpulimit.Max, PeriodUsec: cpulimit.DefaultPeriodUsec, Weight: cpulimit.DefaultWeight}},
		},
		Tasks: []HostTask{
			{Name: "a", Group: "q", NeedUsec: 1500, Threads: 1},
			{Name: "b", Group: "other", ArriveUsec: 3000, Threads: 3},
		}}
	s, err := ParseScenario("every.scn", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Host, want) || s.Name != "every.scn" {
		t.Errorf("got %q %+v\nwant %+v", s.Name, s.Host, want)
	}
}

// TestParseScenarioErrors checks that every problem is reported at its
// line with what would be accepted, and that no scenario comes back.
func TestParseScenarioErrors(t *testing.T) {
	const head = "cpus 1\ngroup g quota 40ms period 100ms\n"
	tests := []struct {
		name string
		src  string
		want []string // every error, in order
	}{
		{"unknown keyword", head + "node\n", []string{`x.scn:3: unknown keyword "node" (accepted: cpus, tick, group, task, pools)`}},
		{"no cpus", "tick 1ms\n", []string{"x.scn: no cpus line (add one, e.g. cpus 8)"}},
		{"cpus twice", head + "cpus 2\n", []string{"x.scn:3: cpus is already set on line 1 (accepted: one cpus line)"}},
		{"cpus not a number", "cpus eight\n", []string{`x.scn:1: cpus "eight" is not accepted (accepted: a whole number, 1 or more)`}},
		{"cpus zero", "cpus 0\n", []string{`x.scn:1: cpus "0" is not accepted (accepted: a whole number, 1 or more)`}},
		{"cpus signed", "cpus +2\n", []string{`x.scn:1: cpus "+2" is not accepted (accepted: a whole number, 1 or more)`}},
		{"cpus two values", "cpus 1 2\n", []string{"x.scn:1: cpus takes one number (e.g. cpus 8)"}},
		{"tick twice", "tick 1ms\ntick 1ms\ncpus 1\n", []string{"x.scn:2: tick is already set on line 1 (accepted: one tick line)"}},
		{"tick without value", "cpus 1\ntick\n", []string{"x.scn:2: tick takes one duration (e.g. tick 1ms)"}},
		{"duration without unit", head + "task t group g need 10\n",
			[]string{`x.scn:3: need "10" has no unit (accepted: 0, or a whole number with us, ms or s: 250us, 40ms, 1s)`}},
		{"fractional duration", head + "task t group g need 1.5ms\n",
			[]string{`x.scn:3: need "1.5ms" is not a whole number with a unit (accepted: 0, or a whole number with us, ms or s: 250us, 40ms, 1s)`}},
		{"unknown unit", head + "task t group g need 10min\n",
			[]string{`x.scn:3: need "10min" has an unknown unit "min" (accepted: 0, or a whole number with us, ms or s: 250us, 40ms, 1s)`}},
		{"huge duration", head + "task t group g need 99999999999999999999s\n",
			[]string{`x.scn:3: need "99999999999999999999s" is too large (accepted: 0, or a whole number with us, ms or s: 250us, 40ms, 1s)`}},
		{"overflowing unit", head + "task t group g need 9999999999999999s\n",
			[]string{`x.scn:3: need "9999999999999999s" is too large (accepted: 0, or a whole number with us, ms or s: 250us, 40ms, 1s)`}},
		{"group without name", "cpus 1\ngroup\n", []string{"x.scn:2: group needs a name (e.g. group web quota 40ms period 100ms)"}},
		{"unknown group setting", "cpus 1\ngroup g quot 40ms\n",
			[]string{`x.scn:2: unknown group setting "quot" (accepted: quota, period, burst, weight, parent)`}},
		{"setting twice", "cpus 1\ngroup g quota 40ms quota 50ms\n", []string{"x.scn:2: quota is given twice (accepted: each setting once)"}},
		{"setting without value", "cpus 1\ngroup g quota\n",
			[]string{"x.scn:2: quota needs a value (accepted: group KEY VALUE ..., with KEY one of quota, period, burst, weight, parent)"}},
		{"weight zero", "cpus 1\ngroup g weight 0\n", []string{`x.scn:2: weight "0" is not accepted (accepted: a whole number, 1 or more)`}},
		{"weight too big", "cpus 1\ngroup g weight 20000\n", []string{"x.scn:2: weight 20000 is out of range (accepted: 1..10000)"}},
		{"task without name", head + "task\n", []string{"x.scn:3: task needs a name (e.g. task t1 group web need 10ms)"}},
		{"task without group and need", head + "task t arrive 0\n",
			[]string{"x.scn:3: task t has no group (add: group NAME)", "x.scn:3: task t has no need (add: need DURATION, e.g. need 10ms)"}},
		{"unknown task setting", head + "task t group g need 1ms cpu 2\n",
			[]string{`x.scn:3: unknown task setting "cpu" (accepted: group, arrive, need, threads, cpus)`}},
		{"threads zero", head + "task t group g need 1ms threads 0\n", []string{`x.scn:3: threads "0" is not accepted (accepted: a whole number, 1 or more)`}},
		{"quota off the tick", "cpus 1\ntick 1ms\ngroup g quota 250us\n",
			[]string{"x.scn:3: quota 250us is not accepted (accepted: max or a positive multiple of the tick 1ms)"}},
		{"bad name", "cpus 1\ngroup ../etc\n",
			[]string{`x.scn:2: group name "../etc" is refused: it contains '/', which would address another directory; accepted: 1 to 64 of A-Z a-z 0-9 _ -, not starting with '-'`}},
		{"group defined twice", head + "group g\n", []string{`x.scn:3: name "g" is already used by another group (accepted: a name of its own)`}},
		{"parent defined later", "cpus 1\ngroup q parent p\ngroup p\n", []string{`x.scn:2: parent "p" is not a group defined before it (accepted: a group on an earlier line)`}},
		{"task in a pool with queries", head + "group q parent g\ntask t group g need 1ms\n",
			[]string{`x.scn:4: group "g" has child groups and so holds no tasks (accepted: a group without children)`}},
		{"task in a missing group", head + "task t group nope need 1ms\n", []string{`x.scn:3: group "nope" is not defined (accepted: the name of a group)`}},
		{"task twice", head + "task t group g need 1ms\ntask t group g need 1ms\n", []string{`x.scn:4: name "t" is already used by another task (accepted: a name of its own)`}},
		{"burst without quota", "cpus 1\ngroup g burst 10ms\n", []string{"x.scn:2: burst 10ms needs a quota (accepted: burst 0 with quota max)"}},
		{"too long", "cpus 1\ntick 1us\ngroup g period 1s\ntask t group g need 9000000000000s\n",
			[]string{"x.scn: the tasks need 9000000000000000000 ticks of CPU after the last arrival at tick 0: too long to simulate (accepted: a run that surely ends before tick 9223372036854775807)"}},
		{"every line checked", "cpus 0\ngroup g quota 4\ntask t group g need 1ms threads x\n", []string{
			`x.scn:1: cpus "0" is not accepted (accepted: a whole number, 1 or more)`,
			`x.scn:2: quota "4" has no unit (accepted: 0, or a whole number with us, ms or s: 250us, 40ms, 1s)`,
			`x.scn:3: threads "x" is not accepted (accepted: a whole number, 1 or more)`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseScenario("x.scn", []byte(tt.src))
			if s != nil || err == nil {
				t.Fatalf("got a scenario %+v, want errors %q", s, tt.want)
			}
			if !errors.Is(err, ErrInvalidInput) {
				t.Errorf("error %v does not wrap ErrInvalidInput", err)
			}
			if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestShippedScenarios runs the chapter's three experiments from their
// files and checks the chapter's figures, both directly and against the
// chapter's Run.
func TestShippedScenarios(t *testing.T) {
	type figures struct {
		group     string
		cpus      int // 0: as in the file
		lastDone  int // ticks
		exhausted int // first period
		stalled   int // first period
		latency   int // of the group's first task
		throttled int // of the group's first task
	}
	tests := []struct {
		file string
		want []figures
	}{
		{"chapter-fixed-window.scn", []figures{{group: "app", lastDone: 120, exhausted: 40, stalled: 60, latency: 120, throttled: 60}}},
		{"chapter-parallelism.scn", []figures{
			{group: "app", cpus: 1, lastDone: 140, exhausted: 40, stalled: 60, latency: 10},
			{group: "app", cpus: 2, lastDone: 120, exhausted: 20, stalled: 80, latency: 10, throttled: 0},
			{group: "app", lastDone: 105, exhausted: 5, stalled: 95, latency: 105, throttled: 95},
		}},
		{"chapter-burst.scn", []figures{
			{group: "noburst", lastDone: 520, exhausted: -1, latency: 220, throttled: 120},
			{group: "burst120", lastDone: 400, exhausted: -1, latency: 100, throttled: 0},
			{group: "burst20", lastDone: 440, exhausted: -1, latency: 140, throttled: 40},
		}},
	}
	for _, tt := range tests {
		for _, f := range tt.want {
			s := readScenario(t, tt.file)
			if f.cpus > 0 {
				s.Host.CPUs = f.cpus
			}
			run, err := RunHost(s.Host, HostOptions{})
			if err != nil {
				t.Fatal(err)
			}
			gi := slicesIndex(s.Host.Groups, f.group)
			g := run.Groups[gi]
			lastDone, first := 0, -1
			for i, task := range run.Tasks {
				if task.Group == f.group {
					lastDone = max(lastDone, task.Done)
					if first < 0 {
						first = i
					}
				}
			}
			got := figures{group: f.group, cpus: f.cpus, lastDone: lastDone, exhausted: g.Periods[0].Exhausted,
				stalled: g.Periods[0].Stalled, latency: run.Tasks[first].Latency, throttled: run.Tasks[first].Throttled}
			if got != f {
				t.Errorf("%s: got %+v, want %+v", tt.file, got, f)
			}

			// The same group alone in the chapter's model.
			limit, tasks := chapterOf(t, s.Host, gi)
			res, periods, err := RunChecked(limit, s.Host.CPUs, tasks)
			if err != nil {
				t.Fatal(err)
			}
			var mine []Result
			for _, task := range run.Tasks {
				if task.Group == f.group {
					mine = append(mine, task.Result)
				}
			}
			if !reflect.DeepEqual(mine, res) || !reflect.DeepEqual(g.Periods[:len(periods)], periods) {
				t.Errorf("%s group %s: host model %+v %+v, chapter %+v %+v", tt.file, f.group, mine, g.Periods, res, periods)
			}
		}
	}
}

// slicesIndex is the index of the group named name.
func slicesIndex(groups []Group, name string) int {
	for i, g := range groups {
		if g.Name == name {
			return i
		}
	}
	return -1
}

// chapterOf translates group gi of h and its tasks into the chapter's
// model; the group must have a quota and single-thread tasks.
func chapterOf(t *testing.T, h Host, gi int) (TickLimit, []Task) {
	t.Helper()
	g := h.Groups[gi]
	ticks := func(usec int64) int { return int(usec / h.TickUsec) }
	limit := TickLimit{Quota: ticks(g.QuotaUsec), Period: ticks(g.PeriodUsec), Burst: ticks(g.BurstUsec)}
	var tasks []Task
	for _, task := range h.Tasks {
		if task.Group == g.Name {
			if task.Threads != 1 {
				t.Fatalf("task %s has %d threads", task.Name, task.Threads)
			}
			tasks = append(tasks, Task{Name: task.Name, Arrive: ticks(task.ArriveUsec), Need: ticks(task.NeedUsec)})
		}
	}
	return limit, tasks
}

// TestBuiltinScenarioIsTheFile keeps the built-in default equal to the
// shipped file it stands for.
func TestBuiltinScenarioIsTheFile(t *testing.T) {
	file := readScenario(t, "chapter-parallelism.scn")
	if got := BuiltinScenario().Host; !reflect.DeepEqual(got, file.Host) {
		t.Errorf("built-in %+v\n    file %+v", got, file.Host)
	}
}
