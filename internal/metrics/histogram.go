package metrics

import (
	"sync"
	"time"
)

// QueueWaitBuckets are the upper bounds, in seconds, of the queue wait
// histogram: from an admission that barely queued to QUERY_CANCEL_AFTER_SECONDS
// values of minutes.
var QueueWaitBuckets = []float64{0.001, 0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 300}

// Histogram is a snapshot of a queue wait distribution over
// [QueueWaitBuckets]: Counts[i] is the number of waits <= QueueWaitBuckets[i]
// (not cumulative: one count per bucket), waits above the last bound are only
// in Count.
type Histogram struct {
	Count      uint64
	SumSeconds float64
	Counts     []uint64
}

// buckets gives the cumulative counts by upper bound that Prometheus wants.
func (h Histogram) buckets() map[float64]uint64 {
	m := make(map[float64]uint64, len(QueueWaitBuckets))
	var cum uint64
	for i, ub := range QueueWaitBuckets {
		if i < len(h.Counts) {
			cum += h.Counts[i]
		}
		m[ub] = cum
	}
	return m
}

// WaitRecorder accumulates queue waits; safe for concurrent use.
type WaitRecorder struct {
	mu sync.Mutex
	h  Histogram
}

// Observe records one wait.
func (r *WaitRecorder) Observe(wait time.Duration) {
	s := wait.Seconds()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.h.Counts == nil {
		r.h.Counts = make([]uint64, len(QueueWaitBuckets))
	}
	r.h.Count++
	r.h.SumSeconds += s
	for i, ub := range QueueWaitBuckets {
		if s <= ub {
			r.h.Counts[i]++
			break
		}
	}
}

// Snapshot returns the waits recorded so far.
func (r *WaitRecorder) Snapshot() Histogram {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.h
	h.Counts = append([]uint64(nil), r.h.Counts...)
	return h
}
