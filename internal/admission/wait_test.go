package admission

import (
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/protocol"
)

// TestWhyWaiting checks each reason on the controller's own state: the
// query is queued there, and the reason is what holds it.
func TestWhyWaiting(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	limited := Limits{ConcurrentQueryLimit: 2, QueueSize: 10, LoadCPUThresholdPercent: Unlimited}
	loaded := Limits{ConcurrentQueryLimit: 5, QueueSize: 10, LoadCPUThresholdPercent: 25}
	tests := []struct {
		name   string
		limits Limits
		busy   float64 // the host's load at the first sample, percent
		submit int     // queries submitted; the last one is explained
		want   protocol.Wait
	}{
		{"concurrency, head", limited, 0, 3, protocol.Wait{Reason: protocol.WaitConcurrency, HeadReason: protocol.WaitConcurrency,
			Running: 2, Limit: 2, ThresholdPercent: Unlimited, UserRunning: 2, UserLimit: Unlimited}},
		{"concurrency, behind the head", limited, 0, 5, protocol.Wait{Reason: protocol.WaitBehindHead, Ahead: 2, OwnAhead: 2, HeadReason: protocol.WaitConcurrency,
			Running: 2, Limit: 2, ThresholdPercent: Unlimited, UserRunning: 2, UserLimit: Unlimited}},
		// 5% measured; two starts reserve 10% each: 25% is not below 25.
		{"load, head", loaded, 5, 3, protocol.Wait{Reason: protocol.WaitLoad, HeadReason: protocol.WaitLoad,
			Running: 2, Limit: 5, LoadPercent: 5, ReservedPercent: 20, ThresholdPercent: 25, UserRunning: 2, UserLimit: Unlimited}},
		{"load, behind the head", loaded, 5, 4, protocol.Wait{Reason: protocol.WaitBehindHead, Ahead: 1, OwnAhead: 1, HeadReason: protocol.WaitLoad,
			Running: 2, Limit: 5, LoadPercent: 5, ReservedPercent: 20, ThresholdPercent: 25, UserRunning: 2, UserLimit: Unlimited}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewController(LoadConfig{}, map[string]Limits{"p": tc.limits})
			if err != nil {
				t.Fatal(err)
			}
			c.Sample(t0, tc.busy)
			var last QueryID
			for range tc.submit {
				id, _, err := c.Submit("p", "alice", t0)
				if err != nil {
					t.Fatal(err)
				}
				last = id
			}
			var stats PoolStats
			for _, p := range c.Pools() {
				if p.Name == "p" {
					stats = p
				}
			}
			pl, _ := c.Place(last, t0)
			if got := WhyWaiting(pl, stats, c.Load()); got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
	// A head that nothing holds back any more (a query left, the start
	// follows at the next event) is starting.
	got := WhyWaiting(Place{Position: 1}, PoolStats{Limits: limited, Running: 1, Queued: 1}, LoadStats{})
	if got.Reason != protocol.WaitStarting || got.HeadReason != protocol.WaitStarting {
		t.Errorf("free head: %+v, want starting", got)
	}
}
