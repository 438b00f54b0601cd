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
// counters the history read since the last step, reading none of those
// pools again, and reads the pools the history did not read since then.
// Both read the CPU counters alone (the history reads a pool's pressure
// too when it ran, and nothing of memory or tasks).
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
	set(1000)
	srv.history.Sample(at(0))
	srv.prediction.closeInterval(at(0))
	// Two seconds of CPU in one interval, far above the pool's 20% cap.
	set(2_001_000)
	srv.history.Sample(at(100))
	srv.prediction.closeInterval(at(100))
	if cg.cpuReads["olap"] != 2 || cg.fullReads["olap"] != 0 {
		t.Errorf("olap read %d times CPU-only and %d in full, want 2 and 0 (the history's reads alone)", cg.cpuReads["olap"], cg.fullReads["olap"])
	}
	if got := srv.prediction.predictor.ThrottledUsec("olap"); got == 0 {
		t.Error("no throttling predicted for 2 s of CPU in an interval under a 20% cap: the history's counters were not taken")
	}

	// The counters grow after the history's last read: a step since
	// then reads the pool itself, CPU only, and sees the growth.
	set(2_500_000)
	stats, err := srv.prediction.counters([]string{"olap", "gone"}, at(150))
	if err != nil || len(stats) != 1 || stats["olap"].CPU.UsageUsec != 2_500_000 {
		t.Errorf("prediction.counters after the history's read = %+v, %v; want olap alone at 2500000 µs", stats, err)
	}
	if cg.cpuReads["olap"] != 3 || cg.fullReads["olap"] != 0 {
		t.Errorf("olap read %d times CPU-only and %d in full, want 3 and 0", cg.cpuReads["olap"], cg.fullReads["olap"])
	}
	// What the history read at 100 ms is still the counters of a step
	// since then.
	if stats, _ := srv.prediction.counters([]string{"olap"}, at(100)); stats["olap"].CPU.UsageUsec != 2_001_000 || cg.cpuReads["olap"] != 3 {
		t.Errorf("prediction.counters since the history's read = %+v after %d CPU-only reads; want the history's 2001000 µs and no read", stats, cg.cpuReads["olap"])
	}
}
