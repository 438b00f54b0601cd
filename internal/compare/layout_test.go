package compare

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/accuracy"
	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
	"github.com/poolagent/poolagent/simulate"
)

func parse(t *testing.T, src string) *simulate.Scenario {
	t.Helper()
	sc, err := simulate.ParseScenario("x.scn", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func TestLayoutGroupLines(t *testing.T) {
	sc := parse(t, "cpus 2\ngroup app quota 20ms period 100ms burst 10ms weight 200\ntask job group app need 60ms cpus 1\n")
	l, err := LayoutOf(sc)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Paths["job"]; got != "app/job" {
		t.Errorf("query path = %q, want app/job", got)
	}
	if l.PoolOf["job"] != "app" || l.Kernel.Tasks[0].Group != "job" || l.Simple.Tasks[0].Group != "job" {
		t.Errorf("task not in its query group: pool %q, kernel group %q, simple group %q", l.PoolOf["job"], l.Kernel.Tasks[0].Group, l.Simple.Tasks[0].Group)
	}
	if len(l.Desired.Pools) != 2 || l.Desired.Pools[0].Name != planner.DefaultPool || l.Desired.Pools[1].Pool.CPU.CPUMax() != "20000 100000" ||
		l.Desired.Pools[1].Pool.CPU.BurstUsec != 10000 || l.Desired.Pools[1].Pool.CPU.Weight != 200 || l.Desired.Pools[1].Query.CPU.CPUMax() != "max 100000" {
		t.Errorf("desired pools = %+v", l.Desired.Pools)
	}
	if !l.Pinned() {
		t.Error("Pinned() = false for a scenario whose only task is pinned to one CPU")
	}
}

func TestLayoutPoolsBlock(t *testing.T) {
	// The pool gets 33% of 2 CPUs (66000 µs per 100 ms), each query 33% of
	// that: 21780 µs, which the simple model rounds to its 1 ms tick
	// (22ms) while the kernel model and the cgroups keep it exact.
	sc := parse(t, `cpus 2
pools
CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=33, QUERY_CPU_LIMIT_PERCENT_PER_NODE=33);
end
task q1 group olap need 100ms threads 2
`)
	l, err := LayoutOf(sc)
	if err != nil {
		t.Fatal(err)
	}
	quota := map[string]int64{}
	for _, g := range l.Kernel.Groups {
		quota[g.Name] = g.QuotaUsec
	}
	if quota["olap"] != 66000 || quota["q1"] != 21780 {
		t.Errorf("kernel quotas = %v, want olap 66000 and q1 21780 (exact planner values)", quota)
	}
	for _, g := range l.Simple.Groups {
		if g.Name == "q1" && g.QuotaUsec != 22000 {
			t.Errorf("simple quota of q1 = %d, want 22000", g.QuotaUsec)
		}
	}
	if l.Paths["q1"] != "olap/q1" || l.PoolOf["q1"] != "olap" {
		t.Errorf("q1 path %q pool %q, want olap/q1 in olap", l.Paths["q1"], l.PoolOf["q1"])
	}
	if l.Pinned() {
		t.Error("Pinned() = true without any pinning")
	}
}

func TestLayoutErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"nested group lines", "cpus 1\ngroup p\ngroup c parent p\ntask t group c need 1ms\n", ":3: group c has parent p"},
		{"memory limit", "cpus 1\npools\nCREATE RESOURCE POOL p WITH (QUERY_MEMORY_LIMIT_PERCENT_PER_NODE=10);\nend\ntask t group p need 1ms\n", ":2: pool p has a memory limit"},
		{"task named like a group", "cpus 1\ngroup t\ntask t group t need 1ms\n", ":3: task t has the name of a group"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LayoutOf(parse(t, tt.src))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestPredict(t *testing.T) {
	sc := parse(t, "cpus 1\ntick 1ms\ngroup app quota 40ms period 100ms\ntask job group app need 60ms cpus 0\n")
	l, err := LayoutOf(sc)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Predict(sc.Name, l, Options{Kernel: observe.KernelSettings{SliceUsec: 5000, HZ: 250}}, "not root")
	if err != nil {
		t.Fatal(err)
	}
	app := r.Groups[0]
	// See simulate.TestRunKernelHost, "chapter fixed window".
	if k := app.Runs[0].Kernel; k.NrThrottled != 1 || k.ThrottledUsec != 60000 || k.NrPeriods != 3 {
		t.Errorf("kernel prediction %+v, want 1 throttled period of 3, 60000 µs", k)
	}
	if s := app.Simple; s.NrThrottled != 1 || s.ThrottledUsec != 60000 {
		t.Errorf("simple prediction %+v, want 1 throttled period, 60000 µs", s)
	}
	if r.Tasks[0].Runs[0].KernelDoneUsec != 120000 || r.Tasks[0].SimpleDoneUsec != 120000 || r.Env.Measured {
		t.Errorf("task %+v, env %+v", r.Tasks[0], r.Env)
	}
	if len(app.Runs[0].KernelWindows) == 0 {
		t.Error("no kernel timeline")
	}
}

func TestDefaultScenario(t *testing.T) {
	l, err := LayoutOf(DefaultScenario())
	if err != nil {
		t.Fatal(err)
	}
	if !l.Pinned() || l.Kernel.CPUs != 1 || l.Paths["q1"] != "olap/q1" {
		t.Errorf("built-in layout: pinned %v, %d CPUs, q1 at %q; want pinned, 1 CPU, olap/q1", l.Pinned(), l.Kernel.CPUs, l.Paths["q1"])
	}
}

// TestLayoutClass files the shipped compare scenarios' groups with a
// quota under the workload classes of docs/accuracy.md.
func TestLayoutClass(t *testing.T) {
	want := map[string]map[string]accuracy.Class{
		// Queries carry their pool's allocation, so they have a quota too.
		"compare-burst-queries.scn":        {"etl": accuracy.OneCPU, "load1": accuracy.OneCPU, "load2": accuracy.OneCPU, "load3": accuracy.OneCPU},
		"compare-chapter-burst.scn":        {"noburst": accuracy.OneCPU, "burst": accuracy.OneCPU},
		"compare-chapter-fixed-window.scn": {"app": accuracy.OneCPU},
		// 80 ms of work under 40 ms per period: two quotas exactly.
		"compare-chapter-parallelism-1cpu.scn": {"app": accuracy.QuotaEdge},
		"compare-chapter-parallelism-2cpu.scn": {"app": accuracy.QuotaEdge},
		"compare-pinned-spread.scn":            {"one": accuracy.PinnedSpread, "onehalf": accuracy.PinnedSpread},
		"compare-placed-multicpu.scn":          {"one": accuracy.PlacedCPUOrMore, "onehalf": accuracy.PlacedCPUOrMore},
		// packed and spread run at different times: neither shares CPU 0.
		"compare-placement.scn": {"packed": accuracy.OneCPU, "spread": accuracy.PinnedSpread,
			"packed-a": accuracy.OneCPU, "packed-b": accuracy.OneCPU, "spread-a": accuracy.OneCPU, "spread-b": accuracy.OneCPU},
		// olap's share of the node when both pools are busy is a third of a CPU.
		"compare-seed-olap-ceo.scn": {"olap": accuracy.PlacedBelowCPU, "report": accuracy.PlacedBelowCPU,
			"the_ceo": accuracy.PlacedCPUOrMore, "strategy": accuracy.PlacedCPUOrMore},
		"compare-seed-weights.scn": {"a": accuracy.SharedCPU, "b": accuracy.SharedCPU, "c": accuracy.SharedCPU, "d": accuracy.SharedCPU,
			"qa": accuracy.SharedCPU, "qb": accuracy.SharedCPU, "qc": accuracy.SharedCPU, "qd": accuracy.SharedCPU},
		// Queries without a cap of their own: only the pools have a quota.
		"compare-shared-under.scn": {"a": accuracy.SharedCPU, "b": accuracy.SharedCPU},
		"compare-shared-over.scn":  {"a": accuracy.SharedCPU, "b": accuracy.SharedCPU},
		// Unpinned, the two pools' threads are placed by the kernel.
		"compare-shared-2cpu.scn": {"a": accuracy.PlacedBelowCPU, "b": accuracy.PlacedBelowCPU},
		// Queries of one pool sharing its quota: pinned to one CPU, with
		// and without caps of their own, and three placed by the kernel.
		"compare-siblings-1cpu.scn":   {"olap": accuracy.OneCPU},
		"compare-siblings-capped.scn": {"olap": accuracy.OneCPU, "q1": accuracy.OneCPU, "q2": accuracy.OneCPU},
		"compare-siblings-2cpu.scn":   {"olap": accuracy.PlacedCPUOrMore},
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "scenarios", "compare-*.scn"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no shipped compare scenarios: %v", err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			sc, err := simulate.ParseScenario(name, src)
			if err != nil {
				t.Fatal(err)
			}
			l, err := LayoutOf(sc)
			if err != nil {
				t.Fatal(err)
			}
			p := simulate.DefaultKernelParams()
			p.TaskCPUs = l.TaskCPUs
			kr, err := simulate.RunKernel(l.Kernel, p)
			if err != nil {
				t.Fatal(err)
			}
			w, ok := want[name]
			if !ok {
				t.Fatalf("no expected classes for %s: add them", name)
			}
			for _, g := range l.Kernel.Groups {
				if g.QuotaUsec == cpulimit.Max {
					continue
				}
				if got := l.Class(g.Name, kr, p.TickUsec); got != w[g.Name] {
					t.Errorf("group %s: class %q, want %q", g.Name, got, w[g.Name])
				}
			}
		})
	}
}
