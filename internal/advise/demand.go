package advise

import (
	"math"

	"github.com/poolagent/poolagent/internal/history"
)

// Slot is the demand reconstructed for one sample interval: work that
// became runnable at StartUsec, NeedUsec of CPU time on up to Threads
// CPUs at once.
type Slot struct {
	StartUsec int64
	NeedUsec  int64
	Threads   int
}

// Demand reconstructs when the pool's work became runnable. A recording
// shows when work ran, not when it arrived: under a limit, work that
// wanted to run while the pool was throttled ran later. The reconstruction
// keeps the work (every sample's usage is some slot's need) and moves
// work earlier only where the recording shows it waited: work left at the
// end of sample i (backlog L_i) exists only if the pool ran in i and was
// throttled in i or at its end (throttled time is booked when a runqueue is unthrottled,
// so also a throttle booked in i+1); it is at
// most the work that ran after it (usage of i+1 plus the backlog left
// then) and at most the throttled time booked in i and i+1 at both levels
// (the CPU time the waiting threads would have used). The demand of sample i is then
// U_i + L_i - L_(i-1), arriving at the start of sample i, the work of a
// sample at once: the way that spends a quota soonest, so the replay errs
// towards more throttling, not less. Threads are the threads that ran in
// the sample (schedstat), or, where unknown, the CPUs' worth of usage and
// throttled time; work moved earlier keeps the width it ran with, so a
// slot that takes a backlog has at least the threads of the sample after
// it. A recording that ends while the pool is still
// throttled lacks the work that was left: its demand is a lower bound.
func Demand(t *history.Trace) []Slot {
	n := len(t.Samples)
	throttled := func(i int) bool { return i < n && t.Samples[i].Throttled() }
	backlog := make([]int64, n+1) // backlog[i+1] is L_i; backlog[0] = L_-1 = 0
	for i := n - 2; i >= 0; i-- {
		if t.Samples[i].UsageUsec == 0 || (!throttled(i) && !throttled(i+1)) {
			continue
		}
		after := int64(t.Samples[i+1].UsageUsec) + backlog[i+2]
		waited := int64(t.Samples[i].ThrottledEitherUsec() + t.Samples[i+1].ThrottledEitherUsec())
		backlog[i+1] = min(after, waited)
	}
	width := make([]int, n+1)
	for i := n - 1; i >= 0; i-- {
		width[i] = threadsOf(t, t.Samples[i])
		if backlog[i+1] > 0 {
			width[i] = max(width[i], width[i+1])
		}
	}
	var slots []Slot
	for i, s := range t.Samples {
		need := int64(s.UsageUsec) + backlog[i+1] - backlog[i]
		if need <= 0 {
			continue
		}
		slots = append(slots, Slot{StartUsec: int64(i) * t.IntervalUsec, NeedUsec: need, Threads: width[i]})
	}
	return slots
}

// threadsOf is a sample's parallelism: the threads that ran, or an
// estimate from its usage and throttled time where that is unknown.
func threadsOf(t *history.Trace, s history.Sample) int {
	if s.Ran > 0 {
		return s.Ran
	}
	est := int(math.Ceil(float64(s.UsageUsec+s.ThrottledEitherUsec()) / float64(t.IntervalUsec)))
	return min(max(est, 1), t.CPUs)
}
