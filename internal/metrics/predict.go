package metrics

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/poolagent/poolagent/internal/cpulimit"
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
	// CPU is the pool's cpu.stat, cumulative, as read at At.
	CPU observe.CPUStat
	At  time.Time
}

// Predictor keeps, per pool, the simulator's predicted throttled time for
// the intervals between calls to [Predictor.Step], summed. For each interval
// it takes the CPU time the pool measurably used (usage_usec delta), splits
// it into Running equal single-threaded tasks (at least one) arriving at the
// interval's start, and runs the kernel-faithful model (simulate.RunKernel,
// the one compare validates against the kernel) under the pool's cpu.max and
// burst on the node's CPUs; the pool's predicted throttled_usec is the
// interval's prediction. docs/metrics.md says what this leaves out and what
// it costs. Safe for concurrent use.
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
// same name starts from zero, as its cgroup's counters do). A pool whose
// interval the model refuses adds nothing; the error names it.
func (p *Predictor) Step(cpus float64, pools []PoolSample) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
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
		throttled, err := PredictThrottledUsec(cpus, s, used)
		if err != nil {
			errs = append(errs, fmt.Errorf("pool %s: %w", s.Name, err))
			continue
		}
		p.total[s.Name] += throttled
	}
	for name := range p.last {
		if !seen[name] {
			delete(p.last, name)
			delete(p.total, name)
		}
	}
	return errors.Join(errs...)
}

// ThrottledUsec is the pool's predicted throttled time so far, µs.
func (p *Predictor) ThrottledUsec(pool string) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total[pool]
}

// PredictThrottledUsec is the throttled time, µs, that the kernel-faithful
// model gives for usageUsec of work split over s.Running single-threaded
// tasks (at least one) arriving together under s's limit on cpus CPUs
// (rounded down, at least 1; fewer when the pool has fewer CPUs), with
// the kernel's default runtime slice and tick (simulate.DefaultKernelParams).
// A burst above the quota is taken as the quota, as the kernel refuses
// more.
func PredictThrottledUsec(cpus float64, s PoolSample, usageUsec uint64) (uint64, error) {
	l := s.Limit
	if !l.Limited() || l.QuotaUsec <= 0 || l.PeriodUsec <= 0 || usageUsec == 0 {
		return 0, nil
	}
	l.BurstUsec = min(max(l.BurstUsec, 0), l.QuotaUsec)
	n := max(s.Running, 1)
	need := int64(usageUsec) / int64(n)
	ncpu := max(int(math.Floor(cpus)), 1)
	if n := l.CPUs.Count(); n > 0 {
		// Alone in the model, the pool's CPU set counts by its size.
		ncpu, l.CPUs = min(ncpu, n), cpulimit.CPUSet{}
	}
	h := simulate.Host{CPUs: ncpu, TickUsec: 1, Groups: []simulate.Group{{Name: "pool", Limit: l}}}
	h.Tasks = make([]simulate.HostTask, n)
	for i := range h.Tasks {
		h.Tasks[i] = simulate.HostTask{Name: "q" + strconv.Itoa(i), Group: "pool", NeedUsec: need, Threads: 1}
	}
	h.Tasks[0].NeedUsec += int64(usageUsec) % int64(n)
	run, err := simulate.RunKernel(h, simulate.DefaultKernelParams())
	if err != nil {
		return 0, fmt.Errorf("predict throttling: %w", err)
	}
	return run.Groups[0].Stat.ThrottledUsec, nil
}

// PredictionCaveats are the throttling model's caveats for the daemon's
// prediction on host h: those about how its kernel enforces cpu.max
// (observe.ModelCaveats.Mechanisms), and, reason tick_slice, a tick or
// bandwidth slice other than the kernel defaults PredictThrottledUsec
// takes. A tick or slice that could not be read is not said: the
// prediction takes the defaults whatever the host's are.
func PredictionCaveats(h observe.ModelHost) observe.ModelCaveats {
	cs := h.Caveats().Mechanisms()
	p := simulate.DefaultKernelParams()
	tickUsec := int64(0)
	if h.HZ > 0 {
		tickUsec = int64(1_000_000 / h.HZ)
	}
	if tickUsec != 0 && tickUsec != p.TickUsec || h.SliceUsec != 0 && h.SliceUsec != p.SliceUsec {
		cs = append(cs, observe.ModelCaveat{Reason: "tick_slice", Text: fmt.Sprintf(
			"this host's tick (CONFIG_HZ=%d) and bandwidth slice (%d µs) are not the %d µs tick and %d µs slice the daemon's prediction takes",
			h.HZ, h.SliceUsec, p.TickUsec, p.SliceUsec)})
	}
	return cs
}
