package admission

import (
	"math"
	"testing"
	"time"
)

func cpuLimits(threshold float64) Limits {
	return Limits{ConcurrentQueryLimit: Unlimited, QueueSize: Unlimited, LoadCPUThresholdPercent: threshold}
}

// submitN submits n queries at now and returns how many started.
func submitN(t *testing.T, c *Controller, pool string, n int, now time.Time) (started int, ids []QueryID) {
	t.Helper()
	for range n {
		id, ok, err := c.Submit(pool, "alice", now)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			started++
		}
		ids = append(ids, id)
	}
	return started, ids
}

func TestLoadThresholdReservations(t *testing.T) {
	tests := []struct {
		name      string
		threshold float64
		load      float64 // busy percent of every sample
		arrive    int
		started   int
	}{
		{name: "idle host, threshold 100: ten per refresh", threshold: 100, load: 0, arrive: 25, started: 10},
		{name: "idle host, threshold 80: eight per refresh", threshold: 80, load: 0, arrive: 25, started: 8},
		{name: "half busy, threshold 80: three", threshold: 80, load: 50, arrive: 25, started: 3},
		{name: "just below the threshold: one", threshold: 80, load: 79.5, arrive: 5, started: 1},
		{name: "at the threshold: none", threshold: 80, load: 80, arrive: 5, started: 0},
		{name: "zero threshold checks nothing, as in YDB", threshold: 0, load: 100, arrive: 25, started: 25},
		{name: "unset threshold checks nothing", threshold: Unlimited, load: 100, arrive: 25, started: 25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newController(t, map[string]Limits{"p": cpuLimits(tt.threshold)})
			c.Sample(t0, tt.load)
			started, _ := submitN(t, c, "p", tt.arrive, t0)
			if started != tt.started {
				t.Errorf("started %d of %d, want %d", started, tt.arrive, tt.started)
			}
			if s := poolStats(t, c, "p"); s.Running+s.Queued != tt.arrive {
				t.Errorf("running %d + queued %d, want %d", s.Running, s.Queued, tt.arrive)
			}
		})
	}
}

// TestLoadRefresh follows queries over refreshes: reservations hold until
// the next refresh even after the queries that made them have finished;
// a refresh replaces them by the measured load.
func TestLoadRefresh(t *testing.T) {
	c := newController(t, map[string]Limits{"p": cpuLimits(50)})
	c.Sample(at(0), 0) // first sample refreshes
	started, ids := submitN(t, c, "p", 8, at(0))
	if started != 5 {
		t.Fatalf("started %d, want 5 (0, 10, .., 40 are below 50)", started)
	}
	for _, id := range ids[:5] {
		if ev := c.Leave(id, at(500*time.Millisecond)); len(ev) != 0 {
			t.Fatalf("finishing freed a reservation before the refresh: %+v", ev)
		}
	}
	// Samples within the interval do not refresh.
	for s := 1; s < 10; s++ {
		if ev, refreshed := c.Sample(at(time.Duration(s)*time.Second), 30); len(ev) != 0 || refreshed {
			t.Fatalf("sample at %ds refreshed (%v) or started %+v before the interval", s, refreshed, ev)
		}
	}
	if l := c.Load(); l.AveragePercent != 0 || l.ReservedPercent != 50 {
		t.Fatalf("load before refresh %+v, want average 0, reserved 50", l)
	}
	// At 10 s the window (0 s, 10 s] holds nine samples of 30 and one of 20:
	// average 29, so three queries start (29, 39 and 49 are below 50).
	ev, refreshed := c.Sample(at(10*time.Second), 20)
	if !refreshed {
		t.Fatal("no refresh after the interval")
	}
	l := c.Load()
	if math.Abs(l.AveragePercent-29) > 1e-9 {
		t.Fatalf("average %g, want 29", l.AveragePercent)
	}
	if len(ev) != 3 || ev[0].ID != ids[5] || ev[1].ID != ids[6] || ev[2].ID != ids[7] {
		t.Fatalf("events %+v, want %v to start in order", ev, ids[5:])
	}
	if ev[0].QueuedFor != 10*time.Second {
		t.Errorf("queued for %s, want 10s", ev[0].QueuedFor)
	}
	if l.ReservedPercent != 30 {
		t.Errorf("reserved %g, want 30", l.ReservedPercent)
	}
}

func TestLoadOverThresholdWaits(t *testing.T) {
	l := cpuLimits(80)
	l.CancelAfter = 30 * time.Second
	c := newController(t, map[string]Limits{"p": l, "free": UnlimitedLimits()})
	c.Sample(at(0), 95)
	started, ids := submitN(t, c, "p", 3, at(0))
	if started != 0 {
		t.Fatalf("started %d on a 95%% busy host with threshold 80", started)
	}
	// A pool without a threshold is not held back by the load.
	if _, ok, _ := c.Submit("free", "alice", at(0)); !ok {
		t.Error("a pool without a threshold waited for the load")
	}
	if ev, _ := c.Sample(at(10*time.Second), 85); len(ev) != 0 {
		t.Fatalf("started %+v at an average of 90%%", ev)
	}
	// The window (10 s, 20 s] holds one sample of 0: average 0.
	ev, _ := c.Sample(at(20*time.Second), 0)
	if len(ev) != 3 || ev[0].ID != ids[0] {
		t.Fatalf("events %+v, want all three to start", ev)
	}
}

// TestLoadSharedAcrossPools checks that reservations are host-wide and
// that a refresh starts queued queries oldest first across pools.
func TestLoadSharedAcrossPools(t *testing.T) {
	c := newController(t, map[string]Limits{"a": cpuLimits(30), "b": cpuLimits(30)})
	c.Sample(at(0), 0)
	startedA, _ := submitN(t, c, "a", 2, at(0))
	startedB, _ := submitN(t, c, "b", 2, at(0))
	if startedA != 2 || startedB != 1 {
		t.Fatalf("started a %d, b %d; want 2 and 1 (three reservations fit below 30)", startedA, startedB)
	}
	b2, _, _ := c.Submit("b", "alice", at(time.Second))
	a3, _, _ := c.Submit("a", "alice", at(2*time.Second))
	ev, _ := c.Sample(at(10*time.Second), 15)
	// Average 15: two starts (15 and 25 are below 30, 35 is not), oldest
	// queued first: b's (queued at 0 s), then b2 (1 s); a3 (2 s) waits.
	if len(ev) != 2 || ev[0].Pool != "b" || ev[1].ID != b2 {
		t.Fatalf("events %+v, want b's two oldest", ev)
	}
	if position(c, a3) != 1 {
		t.Errorf("a's query not at the head: %d", position(c, a3))
	}
}

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  LoadConfig
		ok   bool
	}{
		{name: "defaults", cfg: LoadConfig{}, ok: true},
		{name: "one second", cfg: LoadConfig{RefreshInterval: time.Second, ReservePercent: 5}, ok: true},
		{name: "negative interval", cfg: LoadConfig{RefreshInterval: -time.Second}},
		{name: "reservation above 100", cfg: LoadConfig{ReservePercent: 101}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewController(tt.cfg, nil)
			if (err == nil) != tt.ok {
				t.Errorf("error %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
