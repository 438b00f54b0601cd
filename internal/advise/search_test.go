package advise

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/cpulimit"

	"github.com/poolagent/poolagent/internal/history"
)

// randomTrace is a pool on 2..4 CPUs with bursts of work of 1..4 threads
// after idle stretches, recorded per period as the model runs it at the
// trace's limit.
func randomTrace(t *testing.T, seed uint64) *history.Trace {
	r := rand.New(rand.NewPCG(seed, 1))
	cpus := 2 + r.IntN(3)
	period := []int64{50_000, 100_000}[r.IntN(2)]
	quota := period * int64(20+r.IntN(60)) / 100
	tr := &history.Trace{Format: history.TraceFormat, Version: history.TraceVersion, Pool: "p", Cgroup: "v2", CPUs: cpus, NodeCPUs: float64(cpus),
		SliceUsec: 5000, TickUsec: 4000, Limit: cpulimit.Limit{QuotaUsec: quota, PeriodUsec: period}, IntervalUsec: period}
	for range 12 + r.IntN(12) {
		s := history.Sample{Threads: 4, Ran: 0, Runnable: 0}
		if r.IntN(3) == 0 {
			threads := 1 + r.IntN(4)
			s.Ran = threads
			s.UsageUsec = uint64(min(quota+quota*int64(r.IntN(50))/100, int64(cpus)*period))
			if s.UsageUsec > uint64(quota) {
				s.UsageUsec, s.NrThrottled = uint64(quota), 1
				s.ThrottledUsec = uint64(period-quota/int64(min(threads, cpus))) * uint64(min(threads, cpus))
			}
			s.NrPeriods = 1
		}
		tr.Samples = append(tr.Samples, s)
	}
	if err := tr.Validate(); err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	return tr
}

// propertyCases are the golden traces and random ones, with budgets.
func propertyCases(t *testing.T) []struct {
	name   string
	trace  *history.Trace
	budget Budget
} {
	var cs []struct {
		name   string
		trace  *history.Trace
		budget Budget
	}
	for _, g := range goldenCases {
		cs = append(cs, struct {
			name   string
			trace  *history.Trace
			budget Budget
		}{g.name, readTrace(t, g.trace), g.budget})
	}
	budgets := []Budget{{MaxThrottledRatio: 0.1}, {MaxThrottledRatio: -1, MaxDelayUsec: 20_000}, {MaxThrottledRatio: 0.25, MaxDelayUsec: 40_000}}
	for seed := range uint64(6) {
		cs = append(cs, struct {
			name   string
			trace  *history.Trace
			budget Budget
		}{fmt.Sprintf("random-%d", seed), randomTrace(t, seed), budgets[seed%3]})
	}
	return cs
}

// TestAdviceMeetsItsBudget replays every advice afresh: as reconstructed
// and with the class's margin, it is within the budget.
func TestAdviceMeetsItsBudget(t *testing.T) {
	for _, c := range propertyCases(t) {
		t.Run(c.name, func(t *testing.T) {
			a, err := Advise(c.trace, c.budget)
			if err != nil {
				t.Fatal(err)
			}
			if a.Choice == nil {
				t.Skipf("no setting meets %s", c.budget)
			}
			slots := Demand(c.trace)
			for _, scale := range []float64{1, 1 + a.Class.ErrorPercent/100} {
				o, err := Replay(c.trace, slots, a.Choice.Limit, scale)
				if err != nil {
					t.Fatal(err)
				}
				if !c.budget.Meets(o) {
					t.Errorf("advised %s (need x%g) predicts %+v, outside %s", a.Choice.Setting, scale, o, c.budget)
				}
			}
		})
	}
}

// TestAdviceIsMinimal checks the search's order on the grid: nothing with
// a lower cap meets the budget; at the advised cap, no earlier period and,
// at the advised period, no smaller burst does.
func TestAdviceIsMinimal(t *testing.T) {
	for _, c := range propertyCases(t) {
		t.Run(c.name, func(t *testing.T) {
			a, err := Advise(c.trace, c.budget)
			if err != nil {
				t.Fatal(err)
			}
			if a.Choice == nil || a.Choice == &a.Current {
				if a.Choice == nil && !a.CapRaised {
					t.Fatal("no advice, yet the cap was not raised")
				}
				return
			}
			// The same margin as the search took (widened or the class's).
			s := &searcher{t: c.trace, b: c.budget, slots: Demand(c.trace), maxWork: MaxSearchWork, margin: a.Margin}
			meets := func(st Setting) bool {
				cand, err := s.eval(st)
				if err != nil {
					t.Fatal(err)
				}
				return cand.Meets
			}
			ch, cur := a.Choice.Setting, a.Current.Setting
			if a.CapRaised {
				for _, p := range periodsFrom(cur.PeriodUsec) {
					for _, burst := range burstGrid {
						if st := (Setting{cur.CapPercent, burst, p}); st != cur && meets(st) {
							t.Errorf("advised a cap of %g%%, yet %s meets %s at the current cap", ch.CapPercent, st, c.budget)
						}
					}
				}
				if below := ch.CapPercent - 1; below > cur.CapPercent {
					for _, burst := range burstGrid {
						if st := (Setting{below, burst, ch.PeriodUsec}); meets(st) {
							t.Errorf("advised %s, yet %s meets %s", ch, st, c.budget)
						}
					}
				}
			} else {
				for _, p := range periodsFrom(cur.PeriodUsec) {
					if p == ch.PeriodUsec {
						break
					}
					for _, burst := range burstGrid {
						if st := (Setting{ch.CapPercent, burst, p}); st != cur && meets(st) {
							t.Errorf("advised period %d, yet %s meets %s", ch.PeriodUsec, st, c.budget)
						}
					}
				}
			}
			for _, burst := range burstGrid {
				if burst >= ch.BurstPercent {
					break
				}
				if st := (Setting{ch.CapPercent, burst, ch.PeriodUsec}); st != cur && meets(st) {
					t.Errorf("advised %s, yet %s with a smaller burst meets %s", ch, st, c.budget)
				}
			}
		})
	}
}

// busyTrace is n samples of a pool on cpus CPUs whose every thread runs
// and is throttled in every interval, at a cap of one CPU's worth.
func busyTrace(t *testing.T, n, cpus int, intervalUsec, periodUsec int64) *history.Trace {
	tr := &history.Trace{Format: history.TraceFormat, Version: history.TraceVersion, Pool: "p", Cgroup: "v2", CPUs: cpus, NodeCPUs: float64(cpus),
		SliceUsec: 1, TickUsec: 1000, Limit: cpulimit.Limit{QuotaUsec: periodUsec, PeriodUsec: periodUsec}, IntervalUsec: intervalUsec}
	periods := uint64(intervalUsec / periodUsec)
	for range n {
		tr.Samples = append(tr.Samples, history.Sample{UsageUsec: uint64(intervalUsec), NrPeriods: periods, NrThrottled: periods,
			ThrottledUsec: uint64(intervalUsec) * uint64(cpus-1), Threads: cpus, Ran: cpus, Runnable: cpus})
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestAdviseBoundsItsWork holds advise to its work budget on the traces
// that once ran for minutes: a trace whose one replay is over a quarter
// of the budget is refused, saying so; a search that would spend more
// stops, and says so.
func TestAdviseBoundsItsWork(t *testing.T) {
	b := Budget{MaxThrottledRatio: 0.1}
	for _, c := range []struct {
		name string
		tr   *history.Trace
	}{
		{"1024 CPUs, 10 minutes", busyTrace(t, 10, 1024, 60_000_000, 1000)},
		{"600 samples of 8 CPUs", busyTrace(t, 600, 8, 1_000_000, 1000)},
	} {
		_, err := Advise(c.tr, b)
		var long *TraceTooLongError
		if !errors.As(err, &long) || !strings.Contains(err.Error(), "more than a quarter of the 10000000 a search may spend") {
			t.Errorf("%s: error %v, want it refused as too long", c.name, err)
		}
	}
	tr := busyTrace(t, 1, 64, 1_000_000, 1000)
	const budget = 1_000_000
	a, err := adviseWithin(tr, b, budget)
	if err != nil {
		t.Fatal(err)
	}
	// The candidate under way when the budget runs out is finished: two
	// replays, each at most a quarter of the budget.
	if !a.Stopped || a.Work > budget+budget/2 || a.Work == 0 {
		t.Fatalf("stopped %v after %d thread-steps, want it stopped within %d", a.Stopped, a.Work, budget+budget/2)
	}
	var out strings.Builder
	if err := WriteText(&out, tr, Diagnose(tr, b), a); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "the search stopped at its work budget") {
		t.Errorf("the report does not say the search stopped:\n%s", out.String())
	}
}

// BenchmarkAdviseFullBudget is a heavy search, 64 threads busy for 20 s
// (docs/advise.md, Bounds): its time per thread-step, times the work
// budget, bounds how long advise takes on any trace.
func BenchmarkAdviseFullBudget(b *testing.B) {
	t := &testing.T{}
	tr := busyTrace(t, 20, 64, 1_000_000, 1000)
	for b.Loop() {
		a, err := Advise(tr, Budget{MaxThrottledRatio: 0.1})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(a.Work), "thread-steps/op")
	}
}

// hourTrace is an hour of a pool's history at its 100 ms period, as the
// daemon keeps it: a quota of 40 ms on 2 CPUs, queries limited like the
// pool, and every 10 s a query whose two threads burn 100 ms each,
// throttled as the kernel throttles it at both levels, with the threads
// the daemon counts in every interval the pool ran.
func hourTrace(t testing.TB, varied bool) *history.Trace {
	q := cpulimit.Limit{QuotaUsec: 40_000, PeriodUsec: 100_000}
	tr := &history.Trace{Format: history.TraceFormat, Version: history.TraceVersion, Pool: "olap", Cgroup: "v2", CPUs: 2, NodeCPUs: 2,
		SliceUsec: 5000, TickUsec: 4000, Limit: q, QueryLimit: &q, IntervalUsec: 100_000}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 36_000 {
		s := history.Sample{Threads: -1, Ran: -1, Runnable: -1}
		if k := i % 100; k < 5 {
			s.UsageUsec, s.NrPeriods, s.NrThrottled, s.ThrottledUsec = 40_000, 1, 1, 60_000
			s.QueryNrThrottled, s.QueryThrottledUsec = 1, 60_000
			s.Threads, s.Ran, s.Runnable = 2, 2, 2
			if varied { // no two bursts alike, as on a live host
				s.UsageUsec -= uint64(rng.IntN(3000))
			}
		}
		tr.Samples = append(tr.Samples, s)
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	return tr
}

// hourTraceFile is where TestHourTrace also writes the hour of
// BenchmarkAdviseHour with no two bursts alike, for timing `poolagent
// advise --trace` on it (docs/advise.md, Bounds).
var hourTraceFile = flag.String("hour-trace", "", "also write BenchmarkAdviseHour's hour, no two bursts alike, to this trace file")

// TestHourTrace: the hour BenchmarkAdviseHour advises on is a trace file
// like any other: written and read back, it is the same trace.
func TestHourTrace(t *testing.T) {
	tr := hourTrace(t, true)
	var b bytes.Buffer
	if err := history.WriteTrace(&b, tr); err != nil {
		t.Fatal(err)
	}
	if *hourTraceFile != "" {
		if err := os.WriteFile(*hourTraceFile, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := history.ParseTrace("hour", &b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, tr) {
		t.Errorf("read back, the hour is another trace: %d samples, header %+v", len(got.Samples), *got)
	}
}

// BenchmarkAdviseHour is `advise --pool` on an hour of history: bursts
// alike (each distinct run is replayed once) and all different.
func BenchmarkAdviseHour(b *testing.B) {
	for _, varied := range []bool{false, true} {
		b.Run(map[bool]string{false: "alike", true: "varied"}[varied], func(b *testing.B) {
			tr := hourTrace(b, varied)
			for b.Loop() {
				a, err := Advise(tr, Budget{MaxThrottledRatio: 0.1})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(a.Replays), "model-runs/op")
				b.ReportMetric(float64(a.Work), "thread-steps/op")
				b.ReportMetric(map[bool]float64{false: 0, true: 1}[a.Stopped], "stopped")
			}
		})
	}
}

// TestAdviseSaysWhenTheModelDisagrees: query cgroups throttled in every
// period by limits the trace does not name. The replay finds far less
// throttled time than was measured: advise says so and widens its margin;
// and when the replay of the current setting is within the budget the
// measurement is over, it says so and gives no advice rather than
// "nothing to change".
func TestAdviseSaysWhenTheModelDisagrees(t *testing.T) {
	tr := &history.Trace{Format: history.TraceFormat, Version: history.TraceVersion, Pool: "olap", Cgroup: "v2", CPUs: 2, NodeCPUs: 2,
		SliceUsec: 5000, TickUsec: 4000, Limit: cpulimit.Limit{QuotaUsec: 40_000, PeriodUsec: 100_000}, IntervalUsec: 100_000}
	for range 20 {
		tr.Samples = append(tr.Samples, history.Sample{UsageUsec: 10_000, NrPeriods: 1, QueryNrThrottled: 1, QueryThrottledUsec: 90_000,
			Threads: -1, Ran: -1, Runnable: -1})
	}
	b := Budget{MaxThrottledRatio: 0.1}
	a, err := Advise(tr, b)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := WriteText(&out, tr, Diagnose(tr, b), a); err != nil {
		t.Fatal(err)
	}
	if a.Shortfall < 0.5 || a.Margin < 1.5 || !strings.Contains(out.String(), "less throttled time than was measured") || strings.Contains(out.String(), "nothing to change") {
		t.Errorf("shortfall %v, margin %v:\n%s", a.Shortfall, a.Margin, out.String())
	}
	// The pool's own counters alone, far within the budget, and query
	// cgroups throttled in every period: the replay, without a query
	// limit, finds nothing over the budget even with needs tripled.
	for i := range tr.Samples {
		tr.Samples[i].UsageUsec, tr.Samples[i].QueryThrottledUsec = 1000, 1000
	}
	if a, err = Advise(tr, b); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := WriteText(&out, tr, Diagnose(tr, b), a); err != nil {
		t.Fatal(err)
	}
	if !a.Disagrees || a.Choice != nil || !strings.Contains(out.String(), "the model does not reproduce the measurement") || strings.Contains(out.String(), "nothing to change") {
		t.Errorf("disagrees %v, choice %v:\n%s", a.Disagrees, a.Choice, out.String())
	}
}
