package planner

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/cpulimit"
)

// loadFiles applies pool files in order, as the daemon applies its file
// and then run-time changes.
func loadFiles(t testing.TB, names ...string) *Model {
	t.Helper()
	m := NewModel()
	for _, n := range names {
		path := filepath.Join("..", "testdata", "pools", n)
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		stmts, err := Parse(path, src)
		if err != nil {
			t.Fatalf("parse %s:\n%v", n, err)
		}
		m, _, err = Apply(m, stmts)
		if err != nil {
			t.Fatalf("apply %s:\n%v", n, err)
		}
	}
	return m
}

// tenCPUs is the seed's node: 10 vCPU, the default period.
var tenCPUs = Node{CPUs: 10, MemoryBytes: 64 << 30, PeriodUsec: cpulimit.DefaultPeriodUsec}

func poolState(t *testing.T, d Desired, name string) PoolState {
	t.Helper()
	for _, p := range d.Pools {
		if p.Name == name {
			return *p
		}
	}
	t.Fatalf("pool %q not in plan", name)
	return PoolState{}
}

// TestPlanSeedExamples checks every number of the YDB guide's examples.
func TestPlanSeedExamples(t *testing.T) {
	type want struct {
		alloc             float64
		cpuMax, queryMax  string
		cpuWeight, shares uint64
	}
	tests := []struct {
		name  string
		files []string
		want  map[string]want
	}{
		{
			name:  "olap pool: 7 vCPU per node, 3.5 per query",
			files: []string{"seed.sql"},
			want: map[string]want{
				"olap":    {7, "700000 100000", "350000 100000", 100, 1024},
				"default": {10, "max 100000", "1000000 100000", 100, 1024},
			},
		},
		{
			name:  "four 30% pools with equal weights: 2.5 vCPU each",
			files: []string{"seed_weights.sql"},
			want: map[string]want{
				"pool1": {2.5, "250000 100000", "125000 100000", 100, 1024},
				"pool2": {2.5, "250000 100000", "125000 100000", 100, 1024},
				"pool3": {2.5, "250000 100000", "125000 100000", 100, 1024},
				"pool4": {2.5, "250000 100000", "125000 100000", 100, 1024},
			},
		},
		{
			name:  "one weight raised to 200: its cap 3, the others 7/3",
			files: []string{"seed_weights_200.sql"},
			want: map[string]want{
				"pool1": {7.0 / 3, "233333 100000", "116667 100000", 100, 1024},
				"pool2": {7.0 / 3, "233333 100000", "116667 100000", 100, 1024},
				"pool3": {7.0 / 3, "233333 100000", "116667 100000", 100, 1024},
				"pool4": {3, "300000 100000", "150000 100000", 200, 2048},
			},
		},
		{
			name:  "CEO example as its DDL is written: 1/6 and 5/6 of the node",
			files: []string{"seed_ceo.sql"},
			want: map[string]want{
				"olap":    {10.0 / 6, "166667 100000", "133333 100000", 20, 205},
				"the_ceo": {50.0 / 6, "833333 100000", "833333 100000", 100, 1024},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Plan(loadFiles(t, tc.files...), tenCPUs, Activity{})
			if err != nil {
				t.Fatal(err)
			}
			for name, w := range tc.want {
				p := poolState(t, d, name)
				if math.Abs(p.AllocCPUs-w.alloc) > 1e-9 {
					t.Errorf("%s: alloc %v vCPU, want %v", name, p.AllocCPUs, w.alloc)
				}
				if got := p.Pool.CPU.CPUMax(); got != w.cpuMax {
					t.Errorf("%s: cpu.max %q, want %q", name, got, w.cpuMax)
				}
				if got := p.Query.CPU.CPUMax(); got != w.queryMax {
					t.Errorf("%s: query cpu.max %q, want %q", name, got, w.queryMax)
				}
				if uint64(p.Pool.CPU.Weight) != w.cpuWeight || uint64(p.Pool.CPU.Shares()) != w.shares {
					t.Errorf("%s: cpu.weight %d shares %d, want %d and %d", name, p.Pool.CPU.Weight, p.Pool.CPU.Shares(), w.cpuWeight, w.shares)
				}
			}
		})
	}
}

// TestPlanCEOProseWeights shows what the guide's prose (weight 80, "20% and
// 80%") would need: with RESOURCES_WEIGHT=80 for the_ceo the split is 1:4.
func TestPlanCEOProseWeights(t *testing.T) {
	m := loadFiles(t, "seed_ceo.sql")
	m = mustApply(t, m, "ALTER RESOURCE POOL the_ceo SET (RESOURCES_WEIGHT = 80);")
	d, err := Plan(m, tenCPUs, Activity{})
	if err != nil {
		t.Fatal(err)
	}
	if got := poolState(t, d, "olap").Pool.CPU.CPUMax(); got != "200000 100000" {
		t.Errorf("olap cpu.max %q, want 20%% of 10 vCPU", got)
	}
	if got := poolState(t, d, "the_ceo").Pool.CPU.CPUMax(); got != "800000 100000" {
		t.Errorf("the_ceo cpu.max %q, want 80%% of 10 vCPU", got)
	}
}

func mustApply(t testing.TB, m *Model, src string) *Model {
	t.Helper()
	stmts, err := Parse("test.sql", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	m, _, err = Apply(m, stmts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPlanCases covers the division's rules one at a time.
func TestPlanCases(t *testing.T) {
	tests := []struct {
		name   string
		src    string
		node   Node
		act    Activity
		alloc  map[string]float64
		cpuMax map[string]string
	}{
		{
			name: "only one of four active: it gets its cap, the rest are planned at their caps",
			src:  "seed_weights.sql",
			node: tenCPUs,
			act:  Activity{Active: []string{"pool1"}},
			alloc: map[string]float64{
				"pool1": 3, "pool2": 3, "pool3": 3, "pool4": 3,
			},
		},
		{
			name: "a pool using less than its share is held to its demand and the rest re-split",
			src:  "seed_weights.sql",
			node: tenCPUs,
			act:  Activity{DemandCPUs: map[string]float64{"pool1": 1}},
			alloc: map[string]float64{
				"pool1": 1, "pool2": 3, "pool3": 3, "pool4": 3,
			},
			cpuMax: map[string]string{"pool1": "100000 100000", "pool2": "300000 100000"},
		},
		{
			name: "demand below the share: the others split 10 - 0.4 - 1.1 = 8.5",
			src: `CREATE RESOURCE POOL a WITH (RESOURCES_WEIGHT=1);
			      CREATE RESOURCE POOL b WITH (RESOURCES_WEIGHT=1);
			      CREATE RESOURCE POOL c WITH (RESOURCES_WEIGHT=1);
			      CREATE RESOURCE POOL d WITH (RESOURCES_WEIGHT=1);`,
			node:  tenCPUs,
			act:   Activity{DemandCPUs: map[string]float64{"a": 0.4, "b": 1.1}},
			alloc: map[string]float64{"a": 0.4, "b": 1.1, "c": 4.25, "d": 4.25},
		},
		{
			name: "weight -1 takes no part: the others divide the whole node",
			src: `CREATE RESOURCE POOL free WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=50);
			      CREATE RESOURCE POOL a WITH (RESOURCES_WEIGHT=1);
			      CREATE RESOURCE POOL b WITH (RESOURCES_WEIGHT=3);`,
			node:   tenCPUs,
			act:    Activity{Active: []string{"free", "a", "b"}},
			alloc:  map[string]float64{"free": 5, "a": 2.5, "b": 7.5},
			cpuMax: map[string]string{"free": "500000 100000", "a": "250000 100000", "b": "750000 100000"},
		},
		{
			name: "weight 0 gets only what the weighted pools leave",
			src: `CREATE RESOURCE POOL batch WITH (RESOURCES_WEIGHT=0);
			      CREATE RESOURCE POOL web WITH (RESOURCES_WEIGHT=10, TOTAL_CPU_LIMIT_PERCENT_PER_NODE=40);`,
			node:   tenCPUs,
			alloc:  map[string]float64{"batch": 6, "web": 4},
			cpuMax: map[string]string{"batch": "600000 100000", "web": "400000 100000"},
		},
		{
			name: "weight 0 under contention: nothing, planned at the 1000 µs floor",
			src: `CREATE RESOURCE POOL batch WITH (RESOURCES_WEIGHT=0);
			      CREATE RESOURCE POOL web WITH (RESOURCES_WEIGHT=10);`,
			node:   tenCPUs,
			alloc:  map[string]float64{"batch": 0, "web": 10},
			cpuMax: map[string]string{"batch": "1000 100000", "web": "max 100000"},
		},
		{
			name:   "fractional node: a host capped at 1.5 vCPU",
			src:    "seed_weights.sql",
			node:   Node{CPUs: 1.5, MemoryBytes: 1 << 30, PeriodUsec: cpulimit.DefaultPeriodUsec},
			alloc:  map[string]float64{"pool1": 0.375, "pool2": 0.375, "pool3": 0.375, "pool4": 0.375},
			cpuMax: map[string]string{"pool1": "37500 100000"},
		},
		{
			name:   "tiny allocation: quota raised to the kernel's 1000 µs minimum",
			src:    "CREATE RESOURCE POOL tiny WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=0.1);",
			node:   Node{CPUs: 2, MemoryBytes: 1 << 30, PeriodUsec: cpulimit.DefaultPeriodUsec},
			alloc:  map[string]float64{"tiny": 0.002},
			cpuMax: map[string]string{"tiny": "1000 100000"},
		},
		{
			name:   "quota rounds to the nearest µs",
			src:    "CREATE RESOURCE POOL p WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=33.3333335);",
			node:   Node{CPUs: 1, MemoryBytes: 1 << 30, PeriodUsec: cpulimit.DefaultPeriodUsec},
			cpuMax: map[string]string{"p": "33333 100000"},
		},
		{
			name:   "own period; node period elsewhere",
			src:    "CREATE RESOURCE POOL p WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=25, CPU_PERIOD_USEC=20000); CREATE RESOURCE POOL q WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=25);",
			node:   Node{CPUs: 4, MemoryBytes: 1 << 30, PeriodUsec: 50000},
			cpuMax: map[string]string{"p": "20000 20000", "q": "50000 50000", "default": "max 50000"},
		},
		{
			name:   "TOTAL_CPU 100 is an explicit limit, -1 alone on the node is max",
			src:    "CREATE RESOURCE POOL full WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=100, RESOURCES_WEIGHT=1); CREATE RESOURCE POOL open WITH (RESOURCES_WEIGHT=1);",
			node:   tenCPUs,
			act:    Activity{Active: []string{}},
			cpuMax: map[string]string{"full": "1000000 100000", "open": "max 100000"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m *Model
			if strings.HasSuffix(tc.src, ".sql") {
				m = loadFiles(t, tc.src)
			} else {
				m = mustApply(t, NewModel(), tc.src)
			}
			d, err := Plan(m, tc.node, tc.act)
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.alloc {
				if got := poolState(t, d, name).AllocCPUs; math.Abs(got-want) > 1e-9 {
					t.Errorf("%s: alloc %v vCPU, want %v", name, got, want)
				}
			}
			for name, want := range tc.cpuMax {
				if got := poolState(t, d, name).Pool.CPU.CPUMax(); got != want {
					t.Errorf("%s: cpu.max %q, want %q", name, got, want)
				}
			}
		})
	}
}

// TestPlanCgroupFiles checks every file of one pool's and one query's
// desired state, v2 and v1 alike.
func TestPlanCgroupFiles(t *testing.T) {
	m := mustApply(t, NewModel(), `CREATE RESOURCE POOL etl WITH (
		TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 50, QUERY_CPU_LIMIT_PERCENT_PER_NODE = 20,
		TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE = 25, QUERY_MEMORY_LIMIT_PERCENT_PER_NODE = 10,
		RESOURCES_WEIGHT = 300, CPU_BURST_PERCENT = 50, CPU_PERIOD_USEC = 50000);`)
	node := Node{CPUs: 4, MemoryBytes: 8 << 30, PeriodUsec: cpulimit.DefaultPeriodUsec}
	d, err := Plan(m, node, Activity{})
	if err != nil {
		t.Fatal(err)
	}
	p := poolState(t, d, "etl")
	check := func(what string, got, want any) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	pc, qc := p.Pool.CPU, p.Query.CPU
	check("pool cpu.max", p.Pool.CPU.CPUMax(), "100000 50000")
	check("pool cfs_quota_us", pc.QuotaUsec, 100000)
	check("pool cfs_period_us", pc.PeriodUsec, 50000)
	check("pool cpu.max.burst", pc.BurstUsec, 50000)
	check("pool cpu.weight", pc.Weight, 300)
	check("pool cpu.shares", pc.Shares(), 3072)
	check("pool memory.max", p.Pool.MemoryMax(), 2<<30)
	check("query cpu.max", p.Query.CPU.CPUMax(), "20000 50000")
	check("query cpu.max.burst", qc.BurstUsec, 10000)
	check("query cpu.weight", qc.Weight, 100)
	check("query cpu.shares", qc.Shares(), 1024)
	check("query memory.max", p.Query.MemoryMax(), 858993459) // 8 GiB × 10%, rounded
	check("cap", p.CapCPUs, 2)
	check("active", p.Active, true)

	def := poolState(t, d, DefaultPool)
	check("default cpu.max", def.Pool.CPU.CPUMax(), "max 100000")
	check("default burst", def.Pool.CPU.BurstUsec, 0)
	check("default memory.max", def.Pool.MemoryMax(), "max")
	check("default query memory.max", def.Query.MemoryMax(), "max")
	check("default active", def.Active, false)
}

// TestWeightMapping checks RESOURCES_WEIGHT → cpu.weight → cpu.shares.
func TestWeightMapping(t *testing.T) {
	tests := []struct {
		weight    int64
		cpuWeight int64
		shares    int64
	}{
		{-1, 100, 1024},
		{0, 1, 10},
		{1, 1, 10},
		{3, 3, 31},
		{20, 20, 205},
		{100, 100, 1024},
		{200, 200, 2048},
		{10000, 10000, 102400},
		{10001, 10000, 102400},
		{maxInt32, 10000, 102400},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.weight), func(t *testing.T) {
			w := CPUWeight(tc.weight)
			if w != tc.cpuWeight {
				t.Errorf("CPUWeight(%d) = %d, want %d", tc.weight, w, tc.cpuWeight)
			}
			if s := cpulimit.SharesFromWeight(w); s != tc.shares {
				t.Errorf("cpulimit.SharesFromWeight(%d) = %d, want %d", w, s, tc.shares)
			}
			// The kernel reads cpu.weight back from shares as
			// round(shares × 100 / 1024): the round trip is exact.
			if back := (cpulimit.SharesFromWeight(w)*100 + 512) / 1024; back != w {
				t.Errorf("weight %d → shares %d → weight %d", w, cpulimit.SharesFromWeight(w), back)
			}
		})
	}
}

// TestPlanRefusesBadInput checks the node and activity checks.
func TestPlanRefusesBadInput(t *testing.T) {
	m := loadFiles(t, "seed.sql")
	tests := []struct {
		name string
		node Node
		act  Activity
		want string
	}{
		{"no CPUs", Node{CPUs: 0, MemoryBytes: 1, PeriodUsec: cpulimit.DefaultPeriodUsec}, Activity{}, "node has 0 vCPU; accepted: a finite number > 0"},
		{"NaN CPUs", Node{CPUs: math.NaN(), MemoryBytes: 1, PeriodUsec: cpulimit.DefaultPeriodUsec}, Activity{}, "node has NaN vCPU; accepted: a finite number > 0"},
		{"no memory", Node{CPUs: 1, PeriodUsec: cpulimit.DefaultPeriodUsec}, Activity{}, "node has 0 bytes of memory; accepted: a number > 0"},
		{"short period", Node{CPUs: 1, MemoryBytes: 1, PeriodUsec: 999}, Activity{}, "node period 999 µs; accepted: 1000..1000000 (1 ms..1 s)"},
		{"unknown active pool", tenCPUs, Activity{Active: []string{"olpa"}}, `active pool: pool "olpa" does not exist; did you mean "olap"?`},
		{"unknown demand pool", tenCPUs, Activity{DemandCPUs: map[string]float64{"x": 1}}, `demand: pool "x" does not exist`},
		{"negative demand", tenCPUs, Activity{DemandCPUs: map[string]float64{"olap": -1}}, `demand of pool "olap" is -1 vCPU; accepted: a finite number >= 0`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Plan(m, tc.node, tc.act)
			if err == nil || err.Error() != tc.want {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestPlanAllocationProperties checks, on random pool sets, that the
// division never gives a pool more than its cap or the node more than it
// has, fills min(node, Σ caps of the taking part), and is
// weight-proportional among the pools below their caps.
func TestPlanAllocationProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 2000 {
		n := 1 + rng.IntN(12)
		var src strings.Builder
		demand := map[string]float64{}
		for i := range n {
			weight := []int64{-1, 0, 1, 5, 20, 100, 100, 200, 1000, 20000}[rng.IntN(10)]
			pct := -1.0
			if rng.IntN(4) > 0 {
				pct = float64(rng.IntN(1001)) / 10
			}
			fmt.Fprintf(&src, "CREATE RESOURCE POOL p%d WITH (RESOURCES_WEIGHT=%d, TOTAL_CPU_LIMIT_PERCENT_PER_NODE=%g);\n", i, weight, pct)
			if rng.IntN(3) == 0 {
				demand[fmt.Sprintf("p%d", i)] = rng.Float64() * 8
			}
		}
		m := mustApply(t, NewModel(), src.String())
		node := Node{CPUs: 0.5 + rng.Float64()*15.5, MemoryBytes: 1 << 30, PeriodUsec: cpulimit.DefaultPeriodUsec}
		d, err := Plan(m, node, Activity{DemandCPUs: demand})
		if err != nil {
			t.Fatal(err)
		}
		const eps = 1e-9
		var sumAlloc, sumCaps float64
		lambda := math.NaN()
		weightedLeft := false // a weighted pool below its cap
		for _, p := range d.Pools {
			pool, _ := m.Pool(p.Name)
			limit := p.CapCPUs
			if dm, ok := demand[p.Name]; ok {
				limit = min(limit, dm)
			}
			takesPart := p.Active && p.Weight >= 0
			if !takesPart {
				if p.AllocCPUs != p.CapCPUs {
					t.Fatalf("iter %d: %s takes no part but got %v, not its cap %v", iter, p.Name, p.AllocCPUs, p.CapCPUs)
				}
				continue
			}
			if p.AllocCPUs > limit+eps || p.AllocCPUs < -eps {
				t.Fatalf("iter %d: %s got %v vCPU, above its cap %v\n%s", iter, p.Name, p.AllocCPUs, limit, src.String())
			}
			sumAlloc += p.AllocCPUs
			sumCaps += limit
			if pool.ResourcesWeight > 0 && p.AllocCPUs < limit-eps {
				weightedLeft = true
				l := p.AllocCPUs / float64(pool.ResourcesWeight)
				if math.IsNaN(lambda) {
					lambda = l
				} else if math.Abs(l-lambda) > eps*max(1, lambda) {
					t.Fatalf("iter %d: %s has %v vCPU per weight, another pool below its cap %v\n%s", iter, p.Name, l, lambda, src.String())
				}
			}
		}
		if sumAlloc > node.CPUs+eps {
			t.Fatalf("iter %d: allocated %v of %v vCPU", iter, sumAlloc, node.CPUs)
		}
		if want := min(node.CPUs, sumCaps); math.Abs(sumAlloc-want) > eps*max(1, want) {
			t.Fatalf("iter %d: allocated %v, want min(node %v, caps %v)\n%s", iter, sumAlloc, node.CPUs, sumCaps, src.String())
		}
		// Pools at their caps have cap/weight <= λ: none of them would
		// get more from an equal division.
		for _, p := range d.Pools {
			pool, _ := m.Pool(p.Name)
			if weightedLeft && p.Active && pool.ResourcesWeight > 0 && p.AllocCPUs/float64(pool.ResourcesWeight) > lambda*(1+eps)+eps {
				t.Fatalf("iter %d: %s at its cap has %v per weight, above λ %v", iter, p.Name, p.AllocCPUs/float64(pool.ResourcesWeight), lambda)
			}
			if weightedLeft && p.Active && pool.ResourcesWeight == 0 && p.AllocCPUs > 0 {
				t.Fatalf("iter %d: weight-0 pool %s got %v while weighted pools are below their caps", iter, p.Name, p.AllocCPUs)
			}
		}
	}
}

// BenchmarkPlan10000 plans 10,000 active pools of mixed caps and weights
// on a 64-vCPU node.
func BenchmarkPlan10000(b *testing.B) { benchmarkPlan(b, 10000) }

// BenchmarkPlan1000 is the same with 1,000 pools, for the scaling ratio.
func BenchmarkPlan1000(b *testing.B) { benchmarkPlan(b, 1000) }

func benchmarkPlan(b *testing.B, pools int) {
	var src strings.Builder
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range pools {
		fmt.Fprintf(&src, "CREATE RESOURCE POOL p%05d WITH (RESOURCES_WEIGHT=%d, TOTAL_CPU_LIMIT_PERCENT_PER_NODE=%d, QUERY_CPU_LIMIT_PERCENT_PER_NODE=50);\n",
			i, 1+rng.IntN(1000), 1+rng.IntN(100))
	}
	m := mustApply(b, NewModel(), src.String())
	node := Node{CPUs: 64, MemoryBytes: 256 << 30, PeriodUsec: cpulimit.DefaultPeriodUsec}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Plan(m, node, Activity{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPlanIdle: CPU_IDLE=1 makes the pool's cgroup idle without a weight
// (the kernel refuses one) and leaves its caps and its queries as they
// would be; the normal pool beside it divides the node alone.
func TestPlanIdle(t *testing.T) {
	m, _, err := Load("f.sql", []byte(`
CREATE RESOURCE POOL batch WITH (CPU_IDLE=1, TOTAL_CPU_LIMIT_PERCENT_PER_NODE=50);
CREATE RESOURCE POOL web WITH (RESOURCES_WEIGHT=100);
`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Plan(m, Node{CPUs: 4, MemoryBytes: 1 << 30, PeriodUsec: 100000}, Activity{Active: []string{"batch", "web"}})
	if err != nil {
		t.Fatal(err)
	}
	batch, _ := d.Pool("batch")
	web, _ := d.Pool("web")
	if c := batch.Pool.CPU; !c.Idle || c.Weight != 0 || c.CPUMax() != "200000 100000" || c.Check() != nil {
		t.Errorf("batch pool cgroup %+v (check %v), want idle, no weight, 2 vCPU", c, c.Check())
	}
	if c := batch.Query.CPU; c.Idle || c.CPUMax() != "200000 100000" {
		t.Errorf("batch query template %+v, want not idle, 2 vCPU", c)
	}
	if c := web.Pool.CPU; c.Idle || c.Weight != 100 || web.AllocCPUs != 4 {
		t.Errorf("web %+v alloc %v, want not idle, weight 100, the whole node", c, web.AllocCPUs)
	}
}

// TestPlanCPUs: a pool's CPUS caps it at their count in the max-min
// division (a pool on 4 CPUs is not given 6, the rest goes to the
// others), a pool held only by its CPUS at all of them needs no quota,
// TOTAL_CPU_LIMIT_PERCENT_PER_NODE still applies below the count, and both
// the pool's and its queries' cgroups carry the set.
func TestPlanCPUs(t *testing.T) {
	m, _, err := Load("f.sql", []byte(`
CREATE RESOURCE POOL a WITH (CPUS='0-3', RESOURCES_WEIGHT=300);
CREATE RESOURCE POOL b WITH (RESOURCES_WEIGHT=100);
CREATE RESOURCE POOL c WITH (CPUS='4-7', TOTAL_CPU_LIMIT_PERCENT_PER_NODE=25, QUERY_CPU_LIMIT_PERCENT_PER_NODE=50);
`))
	if err != nil {
		t.Fatal(err)
	}
	online, _ := cpulimit.ParseCPUSet("0-7")
	d, err := Plan(m, Node{CPUs: 8, MemoryBytes: 1 << 30, PeriodUsec: 100000, Online: online}, Activity{Active: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pool, cpus     string
		capCPUs, alloc float64
		byCPUs         bool
		cpuMax, query  string
	}{
		{"a", "0-3", 4, 4, true, "max 100000", "400000 100000"},
		{"b", "", 8, 4, false, "400000 100000", "400000 100000"},
		{"c", "4-7", 2, 2, false, "200000 100000", "100000 100000"},
	} {
		p, _ := d.Pool(tc.pool)
		if p.Pool.CPU.CPUs.String() != tc.cpus || p.Query.CPU.CPUs.String() != tc.cpus || p.CapCPUs != tc.capCPUs ||
			p.AllocCPUs != tc.alloc || p.CapByCPUs != tc.byCPUs || p.Pool.CPU.CPUMax() != tc.cpuMax || p.Query.CPU.CPUMax() != tc.query {
			t.Errorf("%s: cpus %q/%q cap %v (by CPUS %v) alloc %v cpu.max %q query %q; want %q cap %v (%v) alloc %v %q %q",
				tc.pool, p.Pool.CPU.CPUs, p.Query.CPU.CPUs, p.CapCPUs, p.CapByCPUs, p.AllocCPUs, p.Pool.CPU.CPUMax(), p.Query.CPU.CPUMax(),
				tc.cpus, tc.capCPUs, tc.byCPUs, tc.alloc, tc.cpuMax, tc.query)
		}
	}
}

// TestPlanCPUsOffline: a CPUS naming a CPU the node does not have online
// is refused at the setting, with the node's online CPUs; a node given
// only as a number of vCPUs has CPUs 0..n-1 (rounded up).
func TestPlanCPUsOffline(t *testing.T) {
	m, _, err := Load("f.sql", []byte("CREATE RESOURCE POOL a\n  WITH (CPUS='1-3');\nCREATE RESOURCE POOL b WITH (CPUS='2');"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Plan(m, Node{CPUs: 2, MemoryBytes: 1 << 30, PeriodUsec: 100000}, Activity{})
	want := `f.sql:2:14: pool "a": CPUS='1-3': CPUs 2-3 are not online on this node (online: 0-1); accepted: CPUs within 0-1, or CPUS=-1
f.sql:3:35: pool "b": CPUS='2': CPUs 2 are not online on this node (online: 0-1); accepted: CPUs within 0-1, or CPUS=-1`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
	if _, err := Plan(m, Node{CPUs: 2.5, MemoryBytes: 1 << 30, PeriodUsec: 100000}, Activity{}); err == nil || !strings.Contains(err.Error(), "CPUs 3 are not online") {
		t.Errorf("2.5 vCPU: err = %v, want CPUs 0-2 online", err)
	}
}

// TestPlanSoftMemoryLimits: the soft limits are percents of the node's
// memory, like the hard ones; none is -1.
func TestPlanSoftMemoryLimits(t *testing.T) {
	p, def := planPool(t, "CREATE RESOURCE POOL p WITH (TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE=50, TOTAL_MEMORY_HIGH_PERCENT_PER_NODE=40, QUERY_MEMORY_HIGH_PERCENT_PER_NODE=10);")
	if p.Pool.MemoryBytes != 1<<29 || p.Pool.MemoryHighBytes != 429496730 || p.Query.MemoryBytes != -1 || p.Query.MemoryHighBytes != 107374182 || def.Pool.MemoryHighBytes != -1 {
		t.Errorf("pool %+v query %+v default %+v", p.Pool, p.Query, def.Pool)
	}
}

// TestPlanPidsLimits: the process limits go to pids.max of the pool and
// of each query as given; none is 0 or -1, never a limit.
func TestPlanPidsLimits(t *testing.T) {
	p, def := planPool(t, "CREATE RESOURCE POOL p WITH (TOTAL_PIDS_LIMIT=200, QUERY_PIDS_LIMIT=64);")
	if p.Pool.PidsMax != 200 || p.Query.PidsMax != 64 || def.Pool.PidsMax > 0 || def.Query.PidsMax > 0 {
		t.Errorf("pool %+v query %+v default %+v", p.Pool, p.Query, def.Pool)
	}
}

// TestPlanMemoryGuarantees: the guarantees are percents of the node's
// memory on the pool; each query of a pool with one claims all it uses
// (-1, "max"), so the kernel divides the pool's among them.
func TestPlanMemoryGuarantees(t *testing.T) {
	p, def := planPool(t, "CREATE RESOURCE POOL p WITH (TOTAL_MEMORY_MIN_PERCENT_PER_NODE=10, TOTAL_MEMORY_LOW_PERCENT_PER_NODE=25);")
	if p.Pool.MemoryMinBytes != 107374182 || p.Pool.MemoryLowBytes != 1<<28 || p.Query.MemoryMinBytes != -1 || p.Query.MemoryLowBytes != -1 {
		t.Errorf("pool %+v query %+v", p.Pool, p.Query)
	}
	if def.Pool.MemoryMinBytes != 0 || def.Pool.MemoryLowBytes != 0 || def.Query.MemoryMinBytes != 0 || def.Query.MemoryLowBytes != 0 {
		t.Errorf("default %+v query %+v", def.Pool, def.Query)
	}
	p, _ = planPool(t, "CREATE RESOURCE POOL p WITH (TOTAL_MEMORY_LOW_PERCENT_PER_NODE=25);")
	if p.Pool.MemoryMinBytes != 0 || p.Query.MemoryMinBytes != 0 || p.Query.MemoryLowBytes != -1 {
		t.Errorf("low only: pool %+v query %+v", p.Pool, p.Query)
	}
}

// planPool plans src, which creates pool p, on a 2-vCPU node with 1 GiB
// and returns the desired state of p and of default.
func planPool(t *testing.T, src string) (p, def PoolState) {
	t.Helper()
	m, _, err := Load("f.sql", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Plan(m, Node{CPUs: 2, MemoryBytes: 1 << 30, PeriodUsec: 100000}, Activity{})
	if err != nil {
		t.Fatal(err)
	}
	return poolState(t, d, "p"), poolState(t, d, DefaultPool)
}
