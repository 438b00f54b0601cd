package advise

import (
	"testing"

	"github.com/poolagent/poolagent/internal/accuracy"
	"github.com/poolagent/poolagent/internal/cpulimit"

	"github.com/poolagent/poolagent/internal/history"
)

// TestClassFor files demand under a limit by threads and quota, and takes
// each class's error from the measured table.
func TestClassFor(t *testing.T) {
	tr := &history.Trace{CPUs: 4}
	one := []Slot{{NeedUsec: 50_000, Threads: 1}, {StartUsec: 100_000, NeedUsec: 30_000, Threads: 1}}
	par := []Slot{{NeedUsec: 50_000, Threads: 1}, {StartUsec: 100_000, NeedUsec: 80_000, Threads: 3}}
	tests := []struct {
		name  string
		slots []Slot
		lim   cpulimit.Limit
		want  accuracy.Class
	}{
		{"one thread under 40% of a CPU", one, cpulimit.Limit{QuotaUsec: 40_000, PeriodUsec: 100_000}, accuracy.OneCPU},
		{"one thread under 3 CPUs", one, cpulimit.Limit{QuotaUsec: 300_000, PeriodUsec: 100_000}, accuracy.OneCPU},
		{"3 threads under 40% of a CPU", par, cpulimit.Limit{QuotaUsec: 40_000, PeriodUsec: 100_000}, accuracy.PlacedBelowCPU},
		{"3 threads under one CPU", par, cpulimit.Limit{QuotaUsec: 50_000, PeriodUsec: 50_000}, accuracy.PlacedCPUOrMore},
		{"3 threads without a quota", par, cpulimit.Unlimited(100_000), accuracy.PlacedCPUOrMore},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := classFor(tr, tt.slots, tt.lim)
			if err != nil {
				t.Fatal(err)
			}
			e, err := accuracy.ErrorOf(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if c.Name != tt.want || c.ErrorPercent != e.Percent {
				t.Errorf("class %q with %g%%, want %q with the measured %g%%", c.Name, c.ErrorPercent, tt.want, e.Percent)
			}
		})
	}
	// One CPU: a slot's threads beyond the CPUs do not make it parallel.
	if c, err := classFor(&history.Trace{CPUs: 1}, par, cpulimit.Limit{QuotaUsec: 40_000, PeriodUsec: 100_000}); err != nil || c.Name != accuracy.OneCPU {
		t.Errorf("3 threads on one CPU: class %q (%v), want %q", c.Name, err, accuracy.OneCPU)
	}
}

// TestMarginFollowsClass checks that every candidate's margin replays the
// demand with the needs raised by its own class's measured error, and
// that the advice reports the class of the setting it advises.
func TestMarginFollowsClass(t *testing.T) {
	seen := map[accuracy.Class]bool{}
	for _, c := range propertyCases(t) {
		t.Run(c.name, func(t *testing.T) {
			s := &searcher{t: c.trace, b: c.budget, slots: Demand(c.trace), maxWork: MaxSearchWork}
			for _, cap := range []float64{10, 30, 60, 100} {
				st := Setting{CapPercent: cap, PeriodUsec: c.trace.Limit.PeriodUsec}
				cand, err := s.eval(st)
				if err != nil {
					t.Fatal(err)
				}
				want, err := classFor(c.trace, s.slots, cand.Limit)
				if err != nil {
					t.Fatal(err)
				}
				if cand.Class != want {
					t.Errorf("%s: class %+v, want %+v", st, cand.Class, want)
				}
				margin, err := Replay(c.trace, s.slots, cand.Limit, 1+want.ErrorPercent/100)
				if err != nil {
					t.Fatal(err)
				}
				if cand.Margin != margin {
					t.Errorf("%s: margin %+v, want the replay with needs +%g%%: %+v", st, cand.Margin, want.ErrorPercent, margin)
				}
				seen[cand.Class.Name] = true
			}
			a, err := Advise(c.trace, c.budget)
			if err != nil {
				t.Fatal(err)
			}
			want := a.Current.Class
			if a.Choice != nil {
				want = a.Choice.Class
			}
			if a.Class != want {
				t.Errorf("advice reports class %+v, its setting's is %+v", a.Class, want)
			}
		})
	}
	// The cases cover every class a recording can fall into.
	for _, c := range []accuracy.Class{accuracy.OneCPU, accuracy.PlacedBelowCPU, accuracy.PlacedCPUOrMore} {
		if !seen[c] {
			t.Errorf("no candidate of class %q", c)
		}
	}
}
