package metrics

import (
	"testing"
	"time"

	"github.com/poolagent/poolagent/observe"
)

// TestStarvation: only intervals with queries running at both ends and
// under 1% of a CPU used count, with their whole wall time.
func TestStarvation(t *testing.T) {
	s := NewStarvation()
	t0 := time.Unix(1000, 0)
	step := func(sec int, running int, usageUsec uint64) {
		s.Step([]PoolSample{{Name: "batch", Running: running, CPU: observe.CPUStat{UsageUsec: usageUsec}, At: t0.Add(time.Duration(sec) * time.Second)}})
	}
	step(0, 1, 0)
	step(10, 1, 5_000)     // 0.05% of a CPU: starved 10 s
	step(20, 1, 2_005_000) // 20%: not starved
	step(30, 0, 2_005_000) // nothing running at the end
	step(40, 1, 2_005_000) // nothing running at the start
	step(50, 1, 2_010_000) // starved 10 s
	step(50, 1, 2_010_000) // the same read again: nothing
	if got := s.Starved("batch"); got != 20*time.Second {
		t.Errorf("starved %v, want 20s", got)
	}
	s.Step(nil)
	if got := s.Starved("batch"); got != 0 {
		t.Errorf("a pool gone still has %v", got)
	}
}
