package advise

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/simulate"

	"github.com/poolagent/poolagent/internal/history"
)

var update = flag.Bool("update", false, "rewrite the golden files and the traces made from the chapter's scenarios")

// chapterTraces are the seed chapter's three experiments as traces: the
// chapter's scenario (testdata/scenarios) run by the kernel-faithful model
// with idle intervals before and after, sampled per period as record
// samples a pool. They are written by -update and read back like any
// recorded trace.
var chapterTraces = []struct {
	file, scenario, group string
	cpus                  int
}{
	{"chapter-fixed-window.json", "compare-chapter-fixed-window.scn", "app", 1},
	{"chapter-parallelism.json", "chapter-parallelism.scn", "app", 8},
	{"chapter-burst.json", "compare-chapter-burst.scn", "noburst", 1},
}

// TestChapterTraces checks that the traces in testdata are what the
// model records for the chapter's scenarios (rewritten with -update).
func TestChapterTraces(t *testing.T) {
	for _, c := range chapterTraces {
		t.Run(c.file, func(t *testing.T) {
			var b bytes.Buffer
			if err := history.WriteTrace(&b, modelTrace(t, c.scenario, c.group, c.cpus)); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "traces", c.file)
			if *update {
				if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(want, b.Bytes()) {
				t.Errorf("%s differs from the model's recording of %s; run go test ./internal/advise -run TestChapterTraces -update and review the diff", path, c.scenario)
			}
		})
	}
}

// modelTrace records group of a scenario as the kernel-faithful model
// runs it: the group's tasks only, on cpus CPUs, moved one period later
// so the trace starts with an idle period, sampled per period until two
// idle periods after the model's end. Each task is a process whose
// threads stay until the recording ends.
func modelTrace(t *testing.T, scenario, group string, cpus int) *history.Trace {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "testdata", "scenarios", scenario))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := simulate.ParseScenario(scenario, src)
	if err != nil {
		t.Fatal(err)
	}
	h := simulate.Host{CPUs: cpus, TickUsec: 1}
	var g simulate.Group
	for _, x := range sc.Host.Groups {
		if x.Name == group {
			g = x
		}
	}
	h.Groups = []simulate.Group{g}
	for _, task := range sc.Host.Tasks {
		if task.Group == group {
			task.ArriveUsec += g.PeriodUsec
			h.Tasks = append(h.Tasks, task)
		}
	}
	p := simulate.DefaultKernelParams()
	p.WindowUsec = g.PeriodUsec
	p.PeriodPhaseUsec = map[string]int64{group: g.PeriodUsec - 1}
	run, err := simulate.RunKernel(h, p)
	if err != nil {
		t.Fatal(err)
	}
	tr := &history.Trace{Format: history.TraceFormat, Version: history.TraceVersion, Pool: group, Cgroup: "v2", CPUs: cpus, NodeCPUs: float64(cpus),
		SliceUsec: p.SliceUsec, TickUsec: p.TickUsec, Limit: cpulimit.Limit{QuotaUsec: g.QuotaUsec, PeriodUsec: g.PeriodUsec, BurstUsec: g.BurstUsec},
		IntervalUsec: g.PeriodUsec}
	ws := run.Groups[0].Windows
	n := int((run.EndUsec+g.PeriodUsec-1)/g.PeriodUsec) + 2
	for k := range n {
		var w simulate.KernelWindow
		if k < len(ws) {
			w = ws[k]
		}
		from, to := int64(k)*g.PeriodUsec, int64(k+1)*g.PeriodUsec
		s := history.Sample{UsageUsec: w.RanUsec, ThrottledUsec: w.ThrottledUsec, Threads: 0}
		if w.ThrottledCPUs > 0 {
			s.NrThrottled = 1
		}
		// The timer counts every period from the first draw until the
		// period after the last one without demand (rule 5).
		if w.RanUsec > 0 || (k > 0 && k-1 < len(ws) && ws[k-1].RanUsec > 0) {
			s.NrPeriods = 1
		}
		for i, task := range h.Tasks {
			done, threads := run.Tasks[i].DoneUsec, max(task.Threads, 1)
			if task.ArriveUsec >= to {
				continue
			}
			s.Threads += threads // a finished task's process stays until the end
			if done >= to {
				s.Runnable += threads
			}
			if done > from {
				s.Ran += threads
			}
		}
		tr.Samples = append(tr.Samples, s)
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	return tr
}

// goldenCases are the traces advise is held to, with their budgets.
var goldenCases = []struct {
	name, trace string
	budget      Budget
}{
	{"chapter-fixed-window", "chapter-fixed-window.json", Budget{MaxThrottledRatio: 0.1}},
	{"chapter-parallelism", "chapter-parallelism.json", Budget{MaxThrottledRatio: 0.1}},
	{"chapter-burst", "chapter-burst.json", Budget{MaxThrottledRatio: -1, MaxDelayUsec: 30_000}},
	{"chapter-burst-periods", "chapter-burst.json", Budget{MaxThrottledRatio: 0.1}},
}

func readTrace(t testing.TB, name string) *history.Trace {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "traces", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := history.ParseTrace(name, f)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestGolden holds the diagnosis and advice of every golden case to
// testdata/golden (rewritten with -update).
func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			tr := readTrace(t, c.trace)
			a, err := Advise(tr, c.budget)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			if err := WriteText(&b, tr, Diagnose(tr, c.budget), a); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", c.name+".txt")
			if *update {
				if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(want) != b.String() {
				t.Errorf("advise %s differs from %s; run go test ./internal/advise -run TestGolden -update and review the diff\ngot:\n%s", c.trace, path, b.String())
			}
		})
	}
}

// TestDocsExample keeps docs/advise.md's example output true.
func TestDocsExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "advise.md"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "golden", "chapter-burst.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "--max-delay 30ms\n"+string(want)+"```\n") {
		t.Errorf("docs/advise.md's example is not testdata/golden/chapter-burst.txt:\n%s", want)
	}
}

// TestGoldenNode holds `poolagent advise --all` on a three-pool node, in
// text and JSON, to testdata/golden/node.{txt,json}: the chapter's three
// experiments as the node's pools, worst first.
func TestGoldenNode(t *testing.T) {
	var traces []*history.Trace
	for _, c := range []struct{ file, pool string }{
		{"chapter-fixed-window.json", "report"}, {"chapter-parallelism.json", "olap"}, {"chapter-burst.json", "batch"},
	} {
		tr := readTrace(t, c.file)
		tr.Pool = c.pool
		traces = append(traces, tr)
	}
	b := Budget{MaxThrottledRatio: 0.1}
	pools, err := AdviseNode(traces, b)
	if err != nil {
		t.Fatal(err)
	}
	var text, js bytes.Buffer
	if err := WriteNode(&text, pools, b); err != nil {
		t.Fatal(err)
	}
	if err := WriteNodeJSON(&js, pools, b); err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{"node.txt": text.Bytes(), "node.json": js.Bytes()} {
		path := filepath.Join("testdata", "golden", name)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want, got) {
			t.Errorf("%s differs; run go test ./internal/advise -run TestGoldenNode -update and review the diff\ngot:\n%s", path, got)
		}
	}
}
