package daemon

import (
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/history"
	"github.com/poolagent/poolagent/observe"
)

// statCgroups is fakeCgroups whose pools and query cgroups have counters
// the test sets.
type statCgroups struct {
	*fakeCgroups
	mu      sync.Mutex
	pools   map[string]observe.Sample
	queries map[[2]string]observe.CPUStat
}

func (c *statCgroups) PoolStats(names []string) (map[string]observe.Sample, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]observe.Sample{}
	for _, n := range names {
		if s, ok := c.pools[n]; ok {
			out[n] = s
		}
	}
	return out, nil
}

func (c *statCgroups) QueryStat(pool, query string) (observe.Sample, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return observe.Sample{CPU: c.queries[[2]string{pool, query}]}, nil
}

// historyServer is a server with a minute of history on a v2 host of 2
// CPUs.
func historyServer(t testing.TB, cg Cgroups, pools string) *Server {
	cfg := Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		History: history.Config{Window: time.Minute, Cgroup: "v2", CPUs: 2, SliceUsec: 5000, TickUsec: 4000}}
	srv, err := New(cfg, policyOf(t, pools), cg, rootIdentity, &fixedLoad{})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// cpuCountingCgroups is statCgroups that counts the CPU-only reads of
// each pool (PoolCPUStats) and the full ones (PoolStats).
type cpuCountingCgroups struct {
	*statCgroups
	cpuReads, fullReads map[string]int
}

func (c *cpuCountingCgroups) PoolStats(names []string) (map[string]observe.Sample, error) {
	for _, n := range names {
		c.fullReads[n]++
	}
	return c.statCgroups.PoolStats(names)
}

func (c *cpuCountingCgroups) PoolCPUStats(names []string) (map[string]observe.Sample, error) {
	for _, n := range names {
		c.cpuReads[n]++
	}
	out, err := c.statCgroups.PoolStats(names)
	for n, s := range out {
		out[n] = observe.Sample{Group: s.Group, UsageKnown: s.UsageKnown, CPU: s.CPU}
	}
	return out, err
}

// TestPredictionTakesHistoryReads steps the throttling prediction on the
// counters the history read since those the last step took, reading none
// of those pools again; a step that finds no newer read keeps the last
// one for as long as the history's next read may take, and then reads
// the pool itself. Both read the CPU counters alone (the history reads a
// pool's pressure too when it ran, and nothing of memory or tasks).
func TestPredictionTakesHistoryReads(t *testing.T) {
	cg := &cpuCountingCgroups{statCgroups: &statCgroups{fakeCgroups: newFakeCgroups(t), pools: map[string]observe.Sample{}, queries: map[[2]string]observe.CPUStat{}},
		cpuReads: map[string]int{}, fullReads: map[string]int{}}
	srv := historyServer(t, cg, "CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 20);")
	set := func(usage uint64) {
		cg.mu.Lock()
		defer cg.mu.Unlock()
		cg.pools["olap"] = observe.Sample{CPU: observe.CPUStat{UsageUsec: usage}}
	}
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const keep = 2 * time.Second
	step := func(ms int) { srv.prediction.closeInterval(at(ms), keep) }
	reads := func(when string, want int) {
		t.Helper()
		if cg.cpuReads["olap"] != want || cg.fullReads["olap"] != 0 {
			t.Errorf("%s: olap read %d times CPU-only and %d in full, want %d and 0", when, cg.cpuReads["olap"], cg.fullReads["olap"], want)
		}
	}
	took := func(when string, usage uint64, ms int) {
		t.Helper()
		if c := srv.prediction.took["olap"]; c.cpu.UsageUsec != usage || !c.at.Equal(at(ms)) {
			t.Errorf("%s: the step took olap at %d µs, read at %v; want %d µs read at %d ms", when, c.cpu.UsageUsec, c.at.Sub(t0), usage, ms)
		}
	}
	set(1000)
	srv.history.Sample(at(0))
	step(0)
	// Two seconds of CPU in one interval, far above the pool's 20% cap.
	set(2_001_000)
	srv.history.Sample(at(100))
	step(100)
	reads("the history's reads alone", 2)
	took("a step after the history's read", 2_001_000, 100)
	predicted := srv.prediction.predictor.ThrottledUsec("olap")
	if predicted == 0 {
		t.Error("no throttling predicted for 2 s of CPU in an interval under a 20% cap: the history's counters were not taken")
	}

	// No read since: the step keeps what it took, and adds nothing.
	set(2_500_000)
	step(1100)
	reads("a step with no newer read", 2)
	took("a step with no newer read", 2_001_000, 100)
	if got := srv.prediction.predictor.ThrottledUsec("olap"); got != predicted {
		t.Errorf("a step on the same read predicted %d µs more", got-predicted)
	}

	// Kept as long as keep: then the step reads the pool itself, CPU
	// only, and a pool that has no cgroup is left out.
	stats, err := srv.prediction.counters([]string{"olap", "gone"}, at(2100), keep)
	if _, ok := stats["gone"]; err != nil || ok || stats["olap"].cpu.UsageUsec != 2_500_000 {
		t.Errorf("counters %v after the kept read = %+v, %v; want olap alone at 2500000 µs", keep, stats, err)
	}
	reads("a read after keep", 3)
	step(2100)
	took("a step after keep", 2_500_000, 2100)

	// The history's next read is newer than the step's own: taken.
	set(2_600_000)
	srv.history.Sample(at(2200))
	step(3100)
	reads("a step after the history's next read", 5)
	took("a step after the history's next read", 2_600_000, 2200)
}
