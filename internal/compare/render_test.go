package compare

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/accuracy"
	"github.com/poolagent/poolagent/observe"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// fixtureReport is a fixed two-run report: a pool with one pinned query,
// measured with per-period samples.
func fixtureReport(measured bool) *Report {
	stat := func(usage, periods, thr, thrUsec, bursts, burstUsec uint64) observe.CPUStat {
		return observe.CPUStat{UsageUsec: usage, NrPeriods: periods, NrThrottled: thr, ThrottledUsec: thrUsec, NrBursts: bursts, BurstUsec: burstUsec}
	}
	win := func(pairs ...uint64) []Window {
		var ws []Window
		for i := 0; i < len(pairs); i += 2 {
			ws = append(ws, Window{RanUsec: pairs[i], ThrottledUsec: pairs[i+1]})
		}
		return ws
	}
	r := &Report{
		Scenario:   "testdata/scenarios/example.scn",
		Env:        Env{Measured: measured, Kernel: "6.18.44", Cgroup: "v1", CPUs: 2, SliceUsec: 5000, TickUsec: 4000, TickSource: "CONFIG_HZ=250 from /proc/config.gz", Runs: 2, Load1Start: 0.25, Load1End: 0.5},
		Target:     TargetFor(true, false, 1000),
		WindowUsec: 100000,
		Runs:       []RunInfo{{TickPhaseUsec: 1200}, {TickPhaseUsec: 3100}},
		Groups: []GroupResult{
			{Name: "olap", Path: "olap", Limit: "max/100ms", QuotaUsec: -1, Class: accuracy.OneCPU, Simple: stat(60000, 0, 0, 0, 0, 0),
				Runs: []GroupRun{
					{Measured: stat(60400, 0, 0, 0, 0, 0), Kernel: stat(60000, 0, 0, 0, 0, 0), KernelWindows: win(40000, 0, 20000, 0), MeasuredWindows: win(40100, 0, 20300, 0)},
					{Measured: stat(60300, 0, 0, 0, 0, 0), Kernel: stat(60000, 0, 0, 0, 0, 0), KernelWindows: win(40000, 0, 20000, 0)},
				}},
			{Name: "q1", Path: "olap/q1", Limit: "20ms/100ms burst 20ms", QuotaUsec: 20000, Class: accuracy.OneCPU, Simple: stat(60000, 2, 1, 60000, 1, 20000),
				Runs: []GroupRun{
					{Measured: stat(60400, 4, 2, 59000, 1, 20000), Kernel: stat(60000, 4, 2, 60000, 1, 20000), PhaseUsec: 31000,
						KernelWindows: win(40000, 0, 20000, 60000), MeasuredWindows: win(40100, 0, 20300, 59000)},
					{Measured: stat(60300, 4, 3, 63000, 1, 20000), Kernel: stat(60000, 4, 2, 60000, 1, 20000), PhaseUsec: 12000,
						KernelWindows: win(40000, 0, 20000, 60000)},
				}},
		},
		Tasks: []TaskResult{{Name: "q1", Group: "q1", NeedUsec: 60000, Threads: 1, CPUs: []int{0}, SimpleDoneUsec: 120000,
			Runs: []TaskRun{{MeasuredDoneUsec: 120500, BurntUsec: 60020, KernelDoneUsec: 120000}, {MeasuredDoneUsec: 121500, BurntUsec: 60010, KernelDoneUsec: 120000}}}},
	}
	if !measured {
		r.Env = Env{CPUs: 2, Why: "not root", SliceUsec: 5000, TickUsec: 4000, TickSource: "CONFIG_HZ=250 from /proc/config.gz", Runs: 1}
		for i := range r.Groups {
			r.Groups[i].Runs = r.Groups[i].Runs[:1]
			r.Groups[i].Runs[0].Measured = observe.CPUStat{}
			r.Groups[i].Runs[0].MeasuredWindows = nil
		}
		r.Tasks[0].Runs = []TaskRun{{MeasuredDoneUsec: -1, KernelDoneUsec: 120000}}
		r.Runs = r.Runs[:1]
	}
	r.Finish()
	return r
}

func TestRenderGolden(t *testing.T) {
	for _, measured := range []bool{true, false} {
		name := "measured"
		if !measured {
			name = "simulated"
		}
		renderers := map[string]func(*bytes.Buffer, *Report) error{
			name + ".txt":  func(b *bytes.Buffer, r *Report) error { return WriteText(b, r, 4) },
			name + ".html": func(b *bytes.Buffer, r *Report) error { return WriteHTML(b, r) },
			name + ".json": func(b *bytes.Buffer, r *Report) error { return WriteJSON(b, r) },
		}
		if measured {
			renderers[name+".md"] = func(b *bytes.Buffer, r *Report) error {
				b.WriteString(MarkdownHeader)
				return WriteMarkdownRows(b, r, "example")
			}
		} else if err := WriteMarkdownRows(new(bytes.Buffer), fixtureReport(false), "example"); err == nil {
			t.Error("WriteMarkdownRows of a simulation-only report: no error")
		}
		for file, render := range renderers {
			t.Run(file, func(t *testing.T) {
				var b bytes.Buffer
				if err := render(&b, fixtureReport(measured)); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join("testdata", "golden", file)
				if *update {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./internal/compare -run TestRenderGolden -update)", err)
				}
				if !bytes.Equal(b.Bytes(), want) {
					t.Errorf("%s differs from the golden file; got:\n%s", path, b.String())
				}
			})
		}
	}
}

func TestFinishTargets(t *testing.T) {
	r := fixtureReport(true)
	q := r.Groups[1]
	// nr_throttled: measured 2 and 3 (mean 2.5), kernel 2: off by -0.5,
	// within ±1. throttled_usec: measured mean 61000, kernel 60000: -1.6%.
	if len(q.Misses) != 0 {
		t.Errorf("q1 misses %v, want none", q.Misses)
	}
	r.Groups[1].Runs[1].Measured.NrThrottled = 5       // mean 3.5: off by -1.5
	r.Groups[1].Runs[1].Measured.ThrottledUsec = 80000 // mean 69500, kernel 60000: -13.7%
	r.Finish()
	want := []string{"nr_throttled off by -1.5 periods (target ±1)", "throttled_usec off by -13.7% (target ±5%)"}
	got := r.Groups[1].Misses
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("misses = %q, want %q", got, want)
	}
	// Measured 2 and 5 throttles, 59000 and 80000 µs: both predictions lie
	// within the runs' range though they miss the target.
	q = r.Groups[1]
	if len(q.OutsideSpread) != 0 || q.Verdict(true) != "spread" {
		t.Errorf("outside spread %q, verdict %s; want both misses within the spread", q.OutsideSpread, q.Verdict(true))
	}
	// Measured 3 and 5, 63000 and 80000: the kernel's 2 and 60000 are
	// below both runs.
	r.Groups[1].Runs[0].Measured.NrThrottled = 3
	r.Groups[1].Runs[0].Measured.ThrottledUsec = 63000
	r.Finish()
	q = r.Groups[1]
	if len(q.Misses) != 2 || len(q.OutsideSpread) != 2 || q.Verdict(true) != "missed" {
		t.Errorf("misses %q, outside spread %q, verdict %s; want two misses outside the spread", q.Misses, q.OutsideSpread, q.Verdict(true))
	}
	if q.Verdict(false) != "" {
		t.Errorf("verdict of a simulation = %q, want none", q.Verdict(false))
	}
}

func TestThrottledErrorPercent(t *testing.T) {
	r := fixtureReport(true) // tick 1000 µs
	q := r.Groups[1]
	// measured mean 61000, kernel 60000: 1000 µs off, within the tick.
	if got := q.ThrottledErrorPercent(r.Target); got != 0 {
		t.Errorf("error within a tick = %g%%, want 0", got)
	}
	r.Groups[1].Runs[1].Measured.ThrottledUsec = 83000 // mean 71000: 11000 off, 10000 beyond the tick
	r.Finish()
	if got, want := r.Groups[1].ThrottledErrorPercent(r.Target), 100*10000.0/71000; math.Abs(got-want) > 1e-9 {
		t.Errorf("error = %g%%, want %g%%", got, want)
	}
	r.Groups[1].Runs[0].Measured.ThrottledUsec, r.Groups[1].Runs[1].Measured.ThrottledUsec = 0, 0 // the model predicts 60000 of nothing
	r.Finish()
	if got, want := r.Groups[1].ThrottledErrorPercent(r.Target), 100*59000.0/1000; math.Abs(got-want) > 1e-9 {
		t.Errorf("error on nothing measured = %g%%, want %g%% (of a tick)", got, want)
	}
}

func TestCellCounts(t *testing.T) {
	tests := []struct {
		name     string
		w        Window
		cpus     int
		ran, thr int
	}{
		{"chapter: 40 of 100 ran, 60 throttled", Window{RanUsec: 40000, ThrottledUsec: 60000}, 1, 4, 6},
		{"two CPUs halve the share", Window{RanUsec: 40000, ThrottledUsec: 60000}, 2, 2, 3},
		{"a sliver below half a mark is not drawn", Window{RanUsec: 500, ThrottledUsec: 0}, 1, 0, 0},
		{"half a mark is drawn", Window{RanUsec: 5000, ThrottledUsec: 0}, 1, 1, 0},
		{"throttled over all CPUs is clipped", Window{RanUsec: 50000, ThrottledUsec: 150000}, 1, 5, 5},
		{"idle", Window{}, 1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran, thr := cellCounts(tt.w, 100000, tt.cpus, 10)
			if ran != tt.ran || thr != tt.thr {
				t.Errorf("cellCounts = %d, %d; want %d, %d", ran, thr, tt.ran, tt.thr)
			}
		})
	}
}

func TestTargetEmulated(t *testing.T) {
	r := fixtureReport(true)
	r.Groups[1].Runs[0].Measured.UsageUsec = 75000 // mean 67650 vs 60000: -11.3%
	r.Finish()
	if len(r.Groups[1].Misses) != 1 {
		t.Fatalf("native CPU: misses %q, want the usage miss", r.Groups[1].Misses)
	}
	r.Env.Emulated = true
	r.Target = TargetFor(true, true, 1000)
	r.Finish()
	if len(r.Groups[1].Misses) != 0 {
		t.Errorf("emulated CPU: misses %q, want none (usage not held)", r.Groups[1].Misses)
	}
}

// TestTies: a group with the same cpu.max as its parent group, both
// limited, has its throttling left out of the target, and so has the
// parent; an unlimited or differently limited child does not.
func TestTies(t *testing.T) {
	r := Report{Env: Env{Measured: true}, Target: TargetFor(true, false, 1000), Groups: []GroupResult{
		{Path: "olap", Limit: "40ms/100ms", QuotaUsec: 40000},
		{Path: "olap/q1", Limit: "40ms/100ms", QuotaUsec: 40000},
		{Path: "etl", Limit: "40ms/100ms", QuotaUsec: 40000},
		{Path: "etl/q", Limit: "20ms/100ms", QuotaUsec: 20000},
		{Path: "free", Limit: "max/100ms", QuotaUsec: -1},
		{Path: "free/q", Limit: "max/100ms", QuotaUsec: -1},
	}}
	off := GroupRun{Measured: observe.CPUStat{NrThrottled: 2, ThrottledUsec: 1000000}, Kernel: observe.CPUStat{NrThrottled: 9, ThrottledUsec: 10}}
	for i := range r.Groups {
		r.Groups[i].Runs = []GroupRun{off}
	}
	r.Finish()
	for _, g := range r.Groups {
		tied := g.Path == "olap" || g.Path == "olap/q1"
		if (g.Tie != "") != tied {
			t.Errorf("%s: tie %q, want tied %v", g.Path, g.Tie, tied)
		}
		if missed := len(g.Misses) > 0; missed == tied {
			t.Errorf("%s: misses %v, want missed %v", g.Path, g.Misses, !tied)
		}
	}
}

// TestAxisOf: the chart's y axis ends at the first round step at or above
// the data, never a whole power of ten above it.
func TestAxisOf(t *testing.T) {
	for _, tc := range []struct {
		top   float64
		yMax  float64
		steps int
	}{
		{100, 100, 5}, {100.4, 125, 5}, {101, 125, 5}, {40, 40, 4}, {41, 50, 5}, {95, 100, 5},
		{1, 1, 5}, {3.2, 4, 4}, {250, 250, 5}, {260, 300, 3},
	} {
		yMax, steps := axisOf(tc.top)
		if math.Abs(yMax-tc.yMax) > 1e-9 || steps != tc.steps {
			t.Errorf("axisOf(%g) = %g in %d steps, want %g in %d", tc.top, yMax, steps, tc.yMax, tc.steps)
		}
	}
}

// TestSummarize: the verdict line counts the groups within target, names
// the counters judged over all groups, and lists every miss by group and
// counter, telling a miss within the runs' range from one outside it.
func TestSummarize(t *testing.T) {
	r := fixtureReport(true)
	want := Summary{Line: "verdict: within target on 2 of 2 groups (usage_usec, nr_throttled, throttled_usec)", OK: true}
	if got := r.Summarize(); got != want {
		t.Errorf("all met: %+v, want %+v", got, want)
	}
	r.Groups[1].Runs[1].Measured.ThrottledUsec = 80000 // mean 69500, kernel 60000: -13.7%, inside [59000..80000]
	r.Finish()
	want = Summary{Line: "verdict: within target on 1 of 2 groups (usage_usec, nr_throttled, throttled_usec); " +
		"missed: olap/q1 throttled_usec off by -13.7% (target ±5%), within the runs' range"}
	if got := r.Summarize(); got != want {
		t.Errorf("one miss within the spread:\n got %+v\nwant %+v", got, want)
	}
	r.Groups[1].Runs[0].Measured.ThrottledUsec = 75000 // both runs above the kernel's 60000
	r.Finish()
	want.Line = "verdict: within target on 1 of 2 groups (usage_usec, nr_throttled, throttled_usec); " +
		"missed: olap/q1 throttled_usec off by -22.6% (target ±5%)"
	if got := r.Summarize(); got != want {
		t.Errorf("one miss outside the spread:\n got %+v\nwant %+v", got, want)
	}
	var b bytes.Buffer
	if err := WriteText(&b, r, 4); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if last := lines[len(lines)-1]; last != want.Line {
		t.Errorf("the text's last line is %q, want the verdict %q", last, want.Line)
	}
	if !strings.Contains(b.String(), "  kernel model missed: throttled_usec off by -22.6% (target ±5%); within target on usage_usec, nr_throttled\n") {
		t.Errorf("the group's verdict does not name the counters missed and met:\n%s", b.String())
	}
	if got := fixtureReport(false).Summarize(); got.OK || !strings.HasPrefix(got.Line, "verdict: none, nothing was measured (not root)") {
		t.Errorf("simulation only: %+v, want no verdict and why", got)
	}
}

// TestPeriodMisses: a period is marked when its predicted throttled time
// is off by more than the target's percentage and the tick; a group whose
// throttling is not judged has no marks.
func TestPeriodMisses(t *testing.T) {
	r := fixtureReport(true) // q1 windows: throttled 0 and 60000 predicted, 0 and 59000 measured; tick 1000
	if got := periodMisses(r, r.Groups[1]); len(got) != 2 || got[0] || got[1] {
		t.Errorf("within target: marks %v, want none of 2", got)
	}
	r.Groups[1].Runs[0].MeasuredWindows[1].ThrottledUsec = 8000
	if got := periodMisses(r, r.Groups[1]); len(got) != 2 || got[0] || !got[1] {
		t.Errorf("60 ms predicted against 8 ms: marks %v, want the second period", got)
	}
	r.Groups[1].Judged = []string{"usage_usec"}
	if got := periodMisses(r, r.Groups[1]); got != nil {
		t.Errorf("throttled_usec not judged: marks %v, want none", got)
	}
}

// TestModelCaveatShown: a host the models do not cover is said once, in
// the header of the text and of the page, before any figure.
func TestModelCaveatShown(t *testing.T) {
	r := fixtureReport(true)
	r.Env.ModelCaveat = "the throttling prediction may not match this host: skew_tick=1 is on the kernel command line"
	var text, page bytes.Buffer
	if err := WriteText(&text, r, 4); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&page, r); err != nil {
		t.Fatal(err)
	}
	header, _, _ := strings.Cut(text.String(), "\n\n")
	if n := strings.Count(text.String(), "note: "+r.Env.ModelCaveat+"\n"); n != 1 || !strings.Contains(header, "\nnote: ") {
		t.Errorf("the note is in the text %d times, want once in the header:\n%s", n, text.String())
	}
	if n := strings.Count(page.String(), "Note: "+r.Env.ModelCaveat+"."); n != 1 {
		t.Errorf("the note is in the page %d times, want once", n)
	}
}
