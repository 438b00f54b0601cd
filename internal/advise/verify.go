package advise

import (
	"fmt"
	"math"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/simulate"

	"github.com/poolagent/poolagent/internal/history"
)

// Bounds on a verification, which runs the trace's demand for real: one
// worker process per interval with work, for the trace's whole length.
const (
	// MaxVerifySlots is the most intervals with work a verified trace has.
	MaxVerifySlots = 200
	// MaxVerifyUsec is the longest trace verified, 2 minutes.
	MaxVerifyUsec = 120_000_000
)

// verifyTickUsec is the scenario tick of a verification: needs are
// rounded to it (and the simple model steps in it).
const verifyTickUsec = 1000

// VerifyScenario is the trace's demand as a compare scenario under lim:
// one pool with the limit and, for every interval with work, a task
// arriving at its start that burns its need (rounded to the millisecond,
// at least 1 ms) on its threads. compare runs each task as a worker in a
// query cgroup of its own below the pool, unpinned.
func VerifyScenario(t *history.Trace, lim cpulimit.Limit) (*simulate.Scenario, error) {
	slots := Demand(t)
	dur := int64(len(t.Samples)) * t.IntervalUsec
	switch {
	case len(slots) > MaxVerifySlots:
		return nil, fmt.Errorf("%d intervals with work are too many to replay for real (accepted: at most %d; record a shorter time or a longer interval)", len(slots), MaxVerifySlots)
	case dur > MaxVerifyUsec:
		return nil, fmt.Errorf("a trace of %s is too long to replay for real (accepted: at most %s)", secText(uint64(dur)), secText(MaxVerifyUsec))
	case lim.QuotaUsec < 0:
		return nil, fmt.Errorf("a pool without a CPU limit has nothing to verify")
	}
	tick := gcd(gcd(verifyTickUsec, lim.QuotaUsec), gcd(lim.PeriodUsec, lim.BurstUsec))
	tick = gcd(tick, t.IntervalUsec)
	h := simulate.Host{CPUs: t.CPUs, TickUsec: tick, Groups: []simulate.Group{{
		Name: t.Pool, Limit: lim}}}
	for i, s := range slots {
		need := max(int64(math.Round(float64(s.NeedUsec)/verifyTickUsec))*verifyTickUsec, verifyTickUsec)
		h.Tasks = append(h.Tasks, simulate.HostTask{Name: fmt.Sprintf("s%d", i), Group: t.Pool, ArriveUsec: s.StartUsec, NeedUsec: need, Threads: s.Threads})
	}
	if err := h.Validate(); err != nil {
		return nil, fmt.Errorf("replay of %s: %w", t.Pool, err)
	}
	return &simulate.Scenario{Name: fmt.Sprintf("the demand of pool %s under cpu.max %s", t.Pool, limitText(lim)), Host: h}, nil
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// ReplayOutcome is the outcome of a verification: the pool's cpu.stat
// over the run and its throttled time per period (from time 0). The worst
// delay is estimated as a period's throttled time over the CPUs the
// scenario's threads could run on at most: the kernel does not say how
// many runqueues were throttled.
func ReplayOutcome(sc *simulate.Scenario, st observe.CPUStat, throttledPerPeriod []uint64) Outcome {
	threads := 1
	for _, task := range sc.Host.Tasks {
		threads = max(threads, task.Threads)
	}
	cpus := uint64(min(threads, sc.Host.CPUs))
	o := Outcome{UsageUsec: st.UsageUsec, NrPeriods: st.NrPeriods, NrThrottled: st.NrThrottled, ThrottledUsec: st.ThrottledUsec,
		NrBursts: st.NrBursts, BurstUsec: st.BurstUsec}
	for _, th := range throttledPerPeriod {
		o.MaxDelayUsec = max(o.MaxDelayUsec, int64(th/cpus))
	}
	return o
}
