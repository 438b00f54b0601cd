package simulate

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// runInput is one input to both engines.
type runInput struct {
	limit TickLimit
	ncpu  int
	tasks []Task
}

// String prints the input as a Go literal to paste into a table test.
func (s runInput) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "TickLimit{Quota: %d, Period: %d, Burst: %d}, ncpu %d, tasks []Task{", s.limit.Quota, s.limit.Period, s.limit.Burst, s.ncpu)
	for i, t := range s.tasks {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "{Name: %q, Arrive: %d, Need: %d}", t.Name, t.Arrive, t.Need)
	}
	b.WriteString("}")
	return b.String()
}

// engineMismatch runs both engines and describes how runEvents differs from the
// per-tick reference or breaks an invariant of the model, or returns "".
func engineMismatch(s runInput) string {
	wantRes, wantPer := runTicks(s.limit, s.ncpu, s.tasks)
	gotRes, gotPer := runEvents(s.limit, s.ncpu, s.tasks)
	if !reflect.DeepEqual(gotRes, wantRes) {
		return fmt.Sprintf("results:\n got %+v\nwant %+v", gotRes, wantRes)
	}
	if !reflect.DeepEqual(gotPer, wantPer) {
		return fmt.Sprintf("periods:\n got %+v\nwant %+v", gotPer, wantPer)
	}
	return modelInvariants(s, wantRes, wantPer)
}

// modelInvariants checks what must hold for any run, so that the reference
// itself is held to the model.
func modelInvariants(s runInput, results []Result, periods []Period) string {
	need, used := 0, 0
	for i, r := range results {
		t := s.tasks[i]
		need += t.Need
		if r.Latency != r.Done-r.Arrive || r.Latency < t.Need || r.Throttled < 0 || r.Throttled > r.Latency-t.Need {
			return fmt.Sprintf("task %d: %+v for Need %d", i, r, t.Need)
		}
	}
	for i, p := range periods {
		used += p.Used
		switch {
		case p.Start != i*s.limit.Period,
			p.Stalled < 0 || p.Stalled > s.limit.Period,
			p.Carried < 0 || p.Carried > s.limit.Burst,
			p.Used < 0 || p.Used > s.limit.Quota+p.Carried,
			(p.Exhausted >= 0) != (p.Used == s.limit.Quota+p.Carried),
			p.Stalled > 0 && p.Exhausted < 0:
			return fmt.Sprintf("period %d: %+v", i, p)
		}
	}
	if used != need {
		return fmt.Sprintf("periods used %d CPU-ticks, tasks need %d", used, need)
	}
	return ""
}

// randomInput draws a small input covering the model's corners:
// bursts below and above the quota, idle gaps of several periods, arrivals
// mid-period and at equal ticks, ncpu above and below the task count, and
// tasks with Need 0.
func randomInput(r *rand.Rand) runInput {
	period := 1 + r.IntN(20)
	ncpu := 1 + r.IntN(6)
	quota := 1 + r.IntN(period*min(ncpu, 3))
	burst := 0
	switch r.IntN(3) {
	case 1:
		burst = 1 + r.IntN(quota)
	case 2:
		burst = quota + r.IntN(2*quota+1)
	}
	tasks := make([]Task, r.IntN(9))
	arrive := 0
	for i := range tasks {
		switch r.IntN(4) {
		case 0: // same tick as the previous task
		case 1:
			arrive = r.IntN(3 * period)
		case 2: // after an idle gap
			arrive += r.IntN(6 * period)
		default:
			arrive += r.IntN(period)
		}
		need := 0
		if r.IntN(8) > 0 {
			need = 1 + r.IntN(30)
		}
		tasks[i] = Task{Name: fmt.Sprintf("t%d", i), Arrive: arrive, Need: need}
	}
	return runInput{TickLimit{Quota: quota, Period: period, Burst: burst}, ncpu, tasks}
}

// shrinkInput makes a failing input smaller while it still fails: it drops
// tasks and lowers numbers one step at a time, keeping any step that still
// fails, until none does.
func shrinkInput(s runInput) runInput {
	for {
		smaller := false
		for _, c := range smallerInputs(s) {
			if Validate(c.limit, c.ncpu, c.tasks) == nil && engineMismatch(c) != "" {
				s, smaller = c, true
				break
			}
		}
		if !smaller {
			return s
		}
	}
}

// smallerInputs lists the inputs one step smaller than s.
func smallerInputs(s runInput) []runInput {
	var cs []runInput
	with := func(f func(*runInput)) {
		c := runInput{s.limit, s.ncpu, append([]Task(nil), s.tasks...)}
		f(&c)
		cs = append(cs, c)
	}
	for i := range s.tasks {
		with(func(c *runInput) { c.tasks = append(c.tasks[:i], c.tasks[i+1:]...) })
	}
	lower := func(v int) []int { return []int{0, v / 2, v - 1} }
	for i, t := range s.tasks {
		for _, v := range lower(t.Arrive) {
			if v < t.Arrive {
				with(func(c *runInput) { c.tasks[i].Arrive = v })
			}
		}
		for _, v := range lower(t.Need) {
			if v < t.Need {
				with(func(c *runInput) { c.tasks[i].Need = v })
			}
		}
	}
	for _, v := range lower(s.ncpu) {
		if v < s.ncpu {
			with(func(c *runInput) { c.ncpu = v })
		}
	}
	for _, v := range lower(s.limit.Quota) {
		if v < s.limit.Quota {
			with(func(c *runInput) { c.limit.Quota = v })
		}
	}
	for _, v := range lower(s.limit.Period) {
		if v < s.limit.Period {
			with(func(c *runInput) { c.limit.Period = v })
		}
	}
	for _, v := range lower(s.limit.Burst) {
		if v < s.limit.Burst {
			with(func(c *runInput) { c.limit.Burst = v })
		}
	}
	return cs
}

// TestEventsMatchTicks compares the event engine with the per-tick
// reference on 5,000 seeded random scenarios, exactly, Results and Periods.
// A failure prints the input's seed and a shrunk input that still
// fails.
func TestEventsMatchTicks(t *testing.T) {
	const scenarios = 5000
	// covered counts the scenarios that exercise each corner, so that a
	// generator that stops reaching one fails the test.
	covered := map[string]int{}
	for seed := range uint64(scenarios) {
		s := randomInput(rand.New(rand.NewPCG(2, seed)))
		if err := Validate(s.limit, s.ncpu, s.tasks); err != nil {
			t.Fatalf("seed %d: generated invalid input %v: %v", seed, s, err)
		}
		if diff := engineMismatch(s); diff != "" {
			small := shrinkInput(s)
			t.Fatalf("seed %d: event engine differs from per-tick reference\nscenario: %v\nshrunk:   %v\n%s", seed, s, small, engineMismatch(small))
		}
		results, periods := runTicks(s.limit, s.ncpu, s.tasks)
		for name, hit := range inputCorners(s, results, periods) {
			if hit {
				covered[name]++
			}
		}
	}
	t.Logf("scenarios per corner: %v", covered)
	for _, name := range []string{"burst below quota", "burst above quota", "idle period", "arrival mid-period",
		"equal arrivals", "ncpu above tasks", "ncpu below tasks", "Need 0", "throttled", "more tasks throttled than CPUs", "carry used"} {
		if covered[name] < scenarios/100 {
			t.Errorf("only %d of %d scenarios cover %q, want >= %d", covered[name], scenarios, name, scenarios/100)
		}
	}
}

// inputCorners says which corners of the model an input exercises.
func inputCorners(s runInput, results []Result, periods []Period) map[string]bool {
	c := map[string]bool{
		"burst below quota": s.limit.Burst > 0 && s.limit.Burst < s.limit.Quota,
		"burst above quota": s.limit.Burst > s.limit.Quota,
		"ncpu above tasks":  s.ncpu > len(s.tasks),
		"ncpu below tasks":  s.ncpu < len(s.tasks),
	}
	arrivals := map[int]int{}
	for _, t := range s.tasks {
		arrivals[t.Arrive]++
		c["arrival mid-period"] = c["arrival mid-period"] || t.Arrive%s.limit.Period != 0
		c["equal arrivals"] = c["equal arrivals"] || arrivals[t.Arrive] > 1
		c["Need 0"] = c["Need 0"] || t.Need == 0
	}
	throttledAtOnce := 0
	for _, r := range results {
		c["throttled"] = c["throttled"] || r.Throttled > 0
		if r.Throttled > 0 {
			throttledAtOnce++
		}
	}
	c["more tasks throttled than CPUs"] = throttledAtOnce > s.ncpu
	for _, p := range periods {
		c["idle period"] = c["idle period"] || p.Used == 0
		c["carry used"] = c["carry used"] || (p.Carried > 0 && p.Used > s.limit.Quota)
	}
	return c
}

// FuzzRun compares the event engine with the per-tick reference on fuzzed
// small inputs, and checks that invalid input is rejected the same way by
// Validate, RunChecked and Run. Each two bytes of spec are one task: the
// arrival tick and the Need, both signed so that negative values reach
// Validate.
func FuzzRun(f *testing.F) {
	f.Fuzz(func(t *testing.T, quota, period, burst, ncpu int8, spec []byte) {
		s := runInput{limit: TickLimit{Quota: int(quota), Period: int(period), Burst: int(burst)}, ncpu: int(ncpu)}
		for i := 0; i+1 < len(spec) && len(s.tasks) < 12; i += 2 {
			s.tasks = append(s.tasks, Task{Name: fmt.Sprint(i / 2), Arrive: int(int8(spec[i])), Need: int(int8(spec[i+1])) % 64})
		}
		if err := Validate(s.limit, s.ncpu, s.tasks); err != nil {
			results, periods, errChecked := RunChecked(s.limit, s.ncpu, s.tasks)
			if errChecked == nil || errChecked.Error() != err.Error() || results != nil || periods != nil {
				t.Fatalf("%v: Validate says %v, RunChecked returned %v, %v, %v", s, err, results, periods, errChecked)
			}
			if results, periods := Run(s.limit, s.ncpu, s.tasks); results != nil || periods != nil {
				t.Fatalf("%v: Run returned %v, %v for invalid input: %v", s, results, periods, err)
			}
			return
		}
		if diff := engineMismatch(s); diff != "" {
			t.Fatalf("%v: event engine differs from per-tick reference\n%s", s, diff)
		}
	})
}

// TestMinHeap pops indices in ascending order whatever the push order,
// with pops interleaved, at sizes the random scenarios do not reach.
func TestMinHeap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var h minHeap
	var want []int
	for round := range 2000 {
		if round%3 == 2 && len(want) > 0 {
			slices.Sort(want)
			if got := h.pop(); got != want[0] {
				t.Fatalf("round %d: pop = %d, want %d", round, got, want[0])
			}
			want = want[1:]
			continue
		}
		i := r.IntN(500)
		h.push(i)
		want = append(want, i)
	}
	slices.Sort(want)
	for _, w := range want {
		if got := h.pop(); got != w {
			t.Fatalf("draining: pop = %d, want %d", got, w)
		}
	}
	if len(h) != 0 {
		t.Fatalf("%d indices left after draining", len(h))
	}
}
