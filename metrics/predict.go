package metrics

import (
	"math"
	"sync"

	"github.com/poolagent/poolagent/cpulimit"
	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/simulate"
)

// PoolSample is one pool's state at a prediction step.
type PoolSample struct {
	Name string
	// Limit is the pool's CPU limit; without a quota there is nothing to
	// predict: never throttled.
	Limit cpulimit.Limit
	// Running is the number of queries running in the pool: the parallel
	// tasks of the model.
	Running int
	// CPU is the pool's cpu.stat, cumulative.
	CPU observe.CPUStat
}

// Predictor keeps, per pool, the simulator's predicted throttled time for
// the intervals between calls to [Predictor.Step], summed. For each interval
// it takes the CPU time the pool measurably used (usage_usec delta), splits
// it into Running equal tasks (at least one) arriving at the interval's
// start, and runs the chapter's model (simulate.Run, ticks of 1 µs) under the
// pool's cpu.max and burst on the node's CPUs; the tasks' throttled ticks,
// summed, are the interval's prediction — the same per-CPU sum the kernel's
// throttled_usec is. docs/metrics.md says what this model leaves out.
// Safe for concurrent use.
type Predictor struct {
	mu    sync.Mutex
	last  map[string]observe.CPUStat
	total map[string]uint64
}

// NewPredictor returns a Predictor with no history.
func NewPredictor() *Predictor {
	return &Predictor{last: map[string]observe.CPUStat{}, total: map[string]uint64{}}
}

// Step closes the interval since the previous Step for every pool in pools
// and adds its prediction. A pool's first Step only records its counters.
// Pools missing from pools are forgotten (a pool created again under the
// same name starts from zero, as its cgroup's counters do).
func (p *Predictor) Step(cpus float64, pools []PoolSample) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := make(map[string]bool, len(pools))
	for _, s := range pools {
		seen[s.Name] = true
		prev, ok := p.last[s.Name]
		p.last[s.Name] = s.CPU
		if !ok {
			continue
		}
		used := s.CPU.UsageUsec - prev.UsageUsec
		if s.CPU.UsageUsec < prev.UsageUsec {
			// The cgroup was removed and created again between two steps.
			used = s.CPU.UsageUsec
		}
		p.total[s.Name] += PredictThrottledUsec(cpus, s, used)
	}
	for name := range p.last {
		if !seen[name] {
			delete(p.last, name)
			delete(p.total, name)
		}
	}
}

// ThrottledUsec is the pool's predicted throttled time so far, µs.
func (p *Predictor) ThrottledUsec(pool string) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total[pool]
}

// PredictThrottledUsec is the throttled time, µs, the chapter's model gives
// for usageUsec of work split over s.Running tasks arriving together under
// s's cpu.max and burst on cpus CPUs (rounded down, at least 1).
func PredictThrottledUsec(cpus float64, s PoolSample, usageUsec uint64) uint64 {
	l := s.Limit
	if l.QuotaUsec <= 0 || l.PeriodUsec <= 0 || usageUsec == 0 {
		return 0
	}
	n := max(s.Running, 1)
	ncpu := max(int(math.Floor(cpus)), 1)
	need := int(usageUsec) / n
	tasks := make([]simulate.Task, n)
	for i := range tasks {
		tasks[i] = simulate.Task{Arrive: 0, Need: need}
	}
	tasks[0].Need += int(usageUsec) % n
	limit := simulate.Limit{Quota: int(l.QuotaUsec), Period: int(l.PeriodUsec), Burst: int(min(max(l.BurstUsec, 0), l.QuotaUsec))}
	results, _ := simulate.Run(limit, ncpu, tasks)
	var throttled uint64
	for _, r := range results {
		throttled += uint64(r.Throttled)
	}
	return throttled
}
