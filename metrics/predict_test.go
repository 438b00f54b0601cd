package metrics

import (
	"testing"

	"github.com/poolagent/poolagent/cpulimit"
	"github.com/poolagent/poolagent/observe"
)

func TestPredictThrottledUsec(t *testing.T) {
	tests := []struct {
		name  string
		cpus  float64
		s     PoolSample
		usage uint64
		want  uint64
	}{
		// The chapter's first figure in µs: 40/100, one task needing 60
		// → throttled 60 (the rest of the first period).
		{"chapter fixed window", 1, PoolSample{Limit: cpulimit.Limit{QuotaUsec: 40_000, PeriodUsec: 100_000}, Running: 1}, 60_000, 60_000},
		// The chapter's parallelism figure, ncpu 8: 8 tasks of 10 under
		// 40/100 exhaust the quota at 5 and all 8 wait 95 → 760.
		{"chapter parallelism ncpu 8", 8, PoolSample{Limit: cpulimit.Limit{QuotaUsec: 40_000, PeriodUsec: 100_000}, Running: 8}, 80_000, 8 * 95_000},
		{"fits the quota", 4, PoolSample{Limit: cpulimit.Limit{QuotaUsec: 700_000, PeriodUsec: 100_000}, Running: 3}, 300_000, 0},
		{"unlimited", 4, PoolSample{Limit: cpulimit.Limit{QuotaUsec: -1, PeriodUsec: 100_000}, Running: 3}, 4_000_000, 0},
		{"idle", 4, PoolSample{Limit: cpulimit.Limit{QuotaUsec: 40_000, PeriodUsec: 100_000}, Running: 0}, 0, 0},
		// Burst 20 of quota 40 carries nothing into the first period:
		// bursts only help after idle periods, so the same as no burst.
		{"burst with no idle history", 1, PoolSample{Limit: cpulimit.Limit{QuotaUsec: 40_000, PeriodUsec: 100_000, BurstUsec: 20_000}, Running: 1}, 60_000, 60_000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := PredictThrottledUsec(tc.cpus, tc.s, tc.usage); got != tc.want {
				t.Errorf("PredictThrottledUsec = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPredictorSteps(t *testing.T) {
	p := NewPredictor()
	olap := PoolSample{Name: "olap", Limit: cpulimit.Limit{QuotaUsec: 40_000, PeriodUsec: 100_000}, Running: 1}
	step := func(usage uint64, pools ...PoolSample) {
		for i := range pools {
			pools[i].CPU = observe.CPUStat{UsageUsec: usage}
		}
		p.Step(1, pools)
	}
	step(1_000_000, olap)
	if got := p.ThrottledUsec("olap"); got != 0 {
		t.Fatalf("after the first step %d, want 0 (no interval yet)", got)
	}
	step(1_060_000, olap)
	step(1_120_000, olap)
	if got := p.ThrottledUsec("olap"); got != 120_000 {
		t.Fatalf("after two intervals of 60 ms work %d, want 120000", got)
	}
	step(0) // olap dropped
	step(60_000, olap)
	if got := p.ThrottledUsec("olap"); got != 0 {
		t.Fatalf("a pool created again starts from %d, want 0", got)
	}
}
