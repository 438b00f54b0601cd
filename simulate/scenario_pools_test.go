package simulate

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/cpulimit"
)

func TestScenarioPools(t *testing.T) {
	// The seed's worked example on one node of 10 vCPUs: the pool gets
	// 70% (700ms per 100ms), each query 50% of that (350ms).
	src := `cpus 10
pools
  CREATE RESOURCE POOL olap WITH (
      TOTAL_CPU_LIMIT_PERCENT_PER_NODE=70, QUERY_CPU_LIMIT_PERCENT_PER_NODE=50);
end
task q1 group olap need 1s threads 8 cpus 0-3
task q2 group olap need 1s threads 8
`
	s, err := ParseScenario("seed.scn", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []Group{
		{Name: "olap", Limit: cpulimit.Limit{QuotaUsec: 700_000, PeriodUsec: 100_000, Weight: 100}},
		{Name: "q1", Parent: "olap", Limit: cpulimit.Limit{QuotaUsec: 350_000, PeriodUsec: 100_000, Weight: 100}},
		{Name: "q2", Parent: "olap", Limit: cpulimit.Limit{QuotaUsec: 350_000, PeriodUsec: 100_000, Weight: 100}},
	}
	if !slices.Equal(s.Host.Groups, want) {
		t.Errorf("groups = %+v\nwant     %+v", s.Host.Groups, want)
	}
	if s.Host.Tasks[0].Group != "q1" || s.Host.Tasks[1].Group != "q2" {
		t.Errorf("tasks run in %q and %q, want their own query groups q1 and q2", s.Host.Tasks[0].Group, s.Host.Tasks[1].Group)
	}
	if got := s.TaskCPUs["q1"]; !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Errorf("q1 cpus = %v, want 0-3", got)
	}
	if s.Pools == nil || len(s.Pools.Pools) != 2 || s.Pools.Pools[0].Name != "default" {
		t.Fatalf("Pools = %+v, want the planner's default and olap", s.Pools)
	}
}

func TestScenarioPoolsWeights(t *testing.T) {
	// The seed's weights: four pools capped at 30% of 10 vCPUs share the
	// node by weight when all are busy; raising one weight to 200 gives it
	// its cap (3 vCPU) and the others 7/3 each. The simple model rounds
	// 233333.3us to the 1 ms tick; the planner's value stays exact.
	src := `cpus 10
pools
CREATE RESOURCE POOL a WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=30, RESOURCES_WEIGHT=200);
CREATE RESOURCE POOL b WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=30, RESOURCES_WEIGHT=100);
CREATE RESOURCE POOL c WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=30, RESOURCES_WEIGHT=100);
CREATE RESOURCE POOL d WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=30, RESOURCES_WEIGHT=100);
end
task ta group a need 1s threads 4
task tb group b need 1s threads 4
task tc group c need 1s threads 4
task td group d need 1s threads 4
`
	s, err := ParseScenario("weights.scn", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	quota := map[string]int64{}
	weight := map[string]int64{}
	for _, g := range s.Host.Groups {
		quota[g.Name], weight[g.Name] = g.QuotaUsec, g.Weight
	}
	if quota["a"] != 300_000 || quota["b"] != 233_000 || weight["a"] != 200 || weight["b"] != 100 {
		t.Errorf("quota a %d b %d, weight a %d b %d; want 300000, 233000, 200, 100", quota["a"], quota["b"], weight["a"], weight["b"])
	}
	for _, ps := range s.Pools.Pools {
		if ps.Name == "b" && ps.Pool.CPU.QuotaUsec != 233_333 {
			t.Errorf("planned quota of b = %d, want 233333", ps.Pool.CPU.QuotaUsec)
		}
	}
}

func TestScenarioPoolsErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"ddl error keeps its line", "cpus 2\npools\nCREATE RESOURCE POOL a WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=170);\nend\n",
			[]string{"x.scn:3: pools: column"}},
		{"no end", "cpus 2\npools\nCREATE RESOURCE POOL a WITH (RESOURCES_WEIGHT=1);\n",
			[]string{"x.scn:2: pools block has no end (add a line: end)"}},
		{"two pools blocks", "cpus 2\npools\nend\npools\nend\n",
			[]string{"x.scn:4: pools is already set on line 2"}},
		{"pinned past the cpus", "cpus 2\ngroup g\ntask t group g need 1ms cpus 2\n",
			[]string{"x.scn:3: cpus: task t pinned to cpu 2 (accepted: cpus 0..1 of the cpus line)"}},
		{"not a cpu list", "cpus 2\ngroup g\ntask t group g need 1ms cpus 1-0\n",
			[]string{`x.scn:3: cpus "1-0" is not a CPU list`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseScenario("x.scn", []byte(tt.src))
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("err = %v, want a scenario error", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestScenarioPoolsIdle: an idle pool's group carries cpu.idle, and on one
// CPU beside a normal pool the kernel model gives it only the idle weight's
// share (3 of 1027) until the normal pool's work is done.
func TestScenarioPoolsIdle(t *testing.T) {
	src := `cpus 1
pools
CREATE RESOURCE POOL batch WITH (CPU_IDLE=1);
CREATE RESOURCE POOL web;
end
task b group batch need 500ms cpus 0
task w group web need 500ms cpus 0
`
	s, err := ParseScenario("idle.scn", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range s.Host.Groups {
		if idle := g.Name == "batch"; g.Idle != idle {
			t.Errorf("group %s idle %v, want %v", g.Name, g.Idle, idle)
		}
	}
	p := DefaultKernelParams()
	p.TaskCPUs = s.TaskCPUs
	r, err := RunKernel(s.Host, p)
	if err != nil {
		t.Fatal(err)
	}
	done := map[string]int64{}
	for i, tk := range s.Host.Tasks {
		done[tk.Name] = r.Tasks[i].DoneUsec
	}
	// web runs at 1024/1027 of the CPU: done within 2 ms of its need;
	// batch got about 1.5 ms meanwhile and finishes the rest after.
	if done["w"] > 502_000 || done["b"] < 998_000 {
		t.Errorf("done at %v µs; want web by 502 ms, batch after 998 ms", done)
	}
}

// TestScenarioPoolsCPUSets: a pool's CPUS confines its tasks in both
// models. On two CPUs a pool on CPU 0 with a two-thread task gets one CPU
// (1 s of work takes 1 s, not 0.5 s), and a pool on CPU 1 beside it runs
// undisturbed: two pools on disjoint CPUs do not contend.
func TestScenarioPoolsCPUSets(t *testing.T) {
	src := `cpus 2
pools
CREATE RESOURCE POOL a WITH (CPUS='0', RESOURCES_WEIGHT=100);
CREATE RESOURCE POOL b WITH (CPUS='1', RESOURCES_WEIGHT=100);
end
task wide group a need 1s threads 2
task solo group b need 500ms
`
	s, err := ParseScenario("cpusets.scn", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.Pools.Pool("a")
	if a.Pool.CPU.CPUs.String() != "0" || a.AllocCPUs != 1 || !a.CapByCPUs {
		t.Errorf("pool a: cpus %q alloc %v (by CPUS %v), want 0, 1 vCPU, capped by CPUS", a.Pool.CPU.CPUs, a.AllocCPUs, a.CapByCPUs)
	}
	p := DefaultKernelParams()
	p.TaskCPUs = s.TaskCPUs
	kr, err := RunKernel(s.Host, p)
	if err != nil {
		t.Fatal(err)
	}
	hr, err := RunHost(s.Host, HostOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, tk := range s.Host.Tasks {
		want := map[string]int64{"wide": 1_000_000, "solo": 500_000}[tk.Name]
		kernel, simple := kr.Tasks[i].DoneUsec, int64(hr.Tasks[i].Done)*s.Host.TickUsec
		if kernel < want-5_000 || kernel > want+5_000 || simple != want {
			t.Errorf("task %s done at %d µs (kernel model), %d µs (simple); want %d in both", tk.Name, kernel, simple, want)
		}
	}
	bad := strings.Replace(src, "CPUS='1'", "CPUS='2'", 1)
	if _, err := ParseScenario("cpusets.scn", []byte(bad)); err == nil || !strings.Contains(err.Error(), "CPUs 2 are not online") {
		t.Errorf("CPUS='2' on 2 cpus: err = %v, want it refused as not online", err)
	}
}

// TestGroupCPUsConfineTasks: a task pinned to CPUs its group does not have
// is refused; one pinned within them runs there.
func TestGroupCPUsConfineTasks(t *testing.T) {
	set, _ := cpulimit.ParseCPUSet("1")
	h := Host{CPUs: 2, TickUsec: 1000, Groups: []Group{{Name: "g", Limit: cpulimit.Unlimited(100000)}},
		Tasks: []HostTask{{Name: "t", Group: "g", NeedUsec: 10_000}}}
	h.Groups[0].CPUs = set
	p := DefaultKernelParams()
	p.TaskCPUs = map[string][]int{"t": {0}}
	if _, err := RunKernel(h, p); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("task on cpu 0 in a group on cpu 1: err = %v, want ErrInvalidInput", err)
	}
	p.TaskCPUs = map[string][]int{"t": {0, 1}}
	if _, err := RunKernel(h, p); err != nil {
		t.Error(err)
	}
	h.Groups[0].CPUs, _ = cpulimit.ParseCPUSet("2")
	if err := h.Validate(); err == nil || !strings.Contains(err.Error(), "cpus 2 are not on the host") {
		t.Errorf("group on cpu 2 of 2: err = %v", err)
	}
}
