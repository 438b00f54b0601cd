package history

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"time"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/observe"
)

// PoolReader is what a recording reads of a live pool tree, one pool at
// a time: *cgroupfs.Reader.
type PoolReader interface {
	ThreadLister
	// Read reads the pool's counters.
	Read(pool string) (observe.Sample, error)
	// CPULimit reads the pool's CPU limit.
	CPULimit(pool string) (cpulimit.Limit, error)
	// Root is the tree's root, for errors.
	Root() string
}

// Recorder samples one pool of a live pool tree: each Sample is what the
// pool's counters grew by since the previous one, and what its threads
// did. Threads are read more often than the counters ([Recorder.Poll]),
// so that a thread that ran and ended within an interval still counts.
// It only reads.
type Recorder struct {
	tree     PoolReader
	pool     string
	procRoot string
	prev     observe.Sample
	// runUsec is every thread's run time at the last poll; nil when the
	// threads cannot be read (no permission for /proc).
	runUsec map[int]uint64
	// grewUsec is the run time each thread gained in the current interval,
	// also of threads that have ended since.
	grewUsec map[int]uint64
	runnable int
	// intervalUsec is the sampling interval: a thread ran in it when its
	// run time grew by 1% of it or more, so that the runtime threads of
	// a process that wake for a few µs do not count as parallelism.
	intervalUsec int64
	// Truncated is set once a poll found more than MaxThreads threads;
	// the thread counts are then of the first MaxThreads.
	Truncated bool
}

// NewRecorder reads the pool's counters as the baseline of the first
// sample, to be taken every intervalUsec. procRoot is normally /proc.
func NewRecorder(tree PoolReader, pool, procRoot string, intervalUsec int64) (*Recorder, error) {
	r := &Recorder{tree: tree, pool: pool, procRoot: procRoot, intervalUsec: intervalUsec, grewUsec: map[int]uint64{}}
	s, err := tree.Read(pool)
	if err != nil {
		return nil, fmt.Errorf("pool %s: %w", pool, err)
	}
	if !s.UsageKnown {
		return nil, fmt.Errorf("pool %s: its CPU usage cannot be read: no cgroup v1 cpuacct counterpart of %s (accepted: a pool root poolagent apply made, or give the cpuacct root)", pool, tree.Root())
	}
	r.prev = s
	if r.runUsec, r.runnable, err = r.threads(); err != nil {
		return nil, err
	}
	return r, nil
}

// Poll reads the pool's threads and adds what each ran since the last
// poll to the current interval. A thread that appeared since counts with
// all its run time.
func (r *Recorder) Poll() error {
	run, runnable, err := r.threads()
	if err != nil {
		return err
	}
	if run != nil {
		for tid, usec := range run {
			r.grewUsec[tid] += usec - min(usec, r.runUsec[tid])
		}
	}
	r.runUsec, r.runnable = run, runnable
	return nil
}

// Sample polls the threads, reads the pool's counters again and returns
// the interval since the last sample. An error wrapping fs.ErrNotExist
// means the pool is gone.
func (r *Recorder) Sample() (Sample, error) {
	if err := r.Poll(); err != nil {
		return Sample{}, err
	}
	cur, err := r.tree.Read(r.pool)
	if err != nil {
		return Sample{}, fmt.Errorf("pool %s: %w", r.pool, err)
	}
	s := grown(r.prev, cur)
	if r.runUsec != nil {
		// grewUsec holds each thread's growth: from nothing.
		s.Threads, s.Ran, s.Runnable = len(r.runUsec), ranSince(nil, r.grewUsec, r.intervalUsec), r.runnable
		// A thread that ended within the interval is not in Threads but
		// may have run: Threads counts it then, so that Ran <= Threads.
		s.Threads = max(s.Threads, s.Ran)
	}
	r.prev = cur
	clear(r.grewUsec)
	return s, nil
}

// grown is the sample of an interval whose counters were prev at its
// start and cur at its end: what the pool's CPU accounting, throttling
// and CPU pressure grew by, thread counts unknown (-1). Pressure is
// unknown (nil) where either read lacks it or it went back. Both the
// recorder and the rolling history sample a pool so.
func grown(prev, cur observe.Sample) Sample {
	d := cur.CPU.Sub(prev.CPU)
	s := Sample{UsageUsec: d.UsageUsec, NrPeriods: d.NrPeriods, NrThrottled: d.NrThrottled, ThrottledUsec: d.ThrottledUsec,
		NrBursts: d.NrBursts, BurstUsec: d.BurstUsec, Threads: -1, Ran: -1, Runnable: -1}
	if cur.Pressure != nil && prev.Pressure != nil && cur.Pressure.Some.TotalUsec >= prev.Pressure.Some.TotalUsec {
		v := cur.Pressure.Some.TotalUsec - prev.Pressure.Some.TotalUsec
		s.PressureSomeUsec = &v
	}
	return s
}

// threads reads the run time (µs) of every thread of the pool, and how
// many are runnable; run is nil when the threads cannot be read at all
// (no permission for /proc).
func (r *Recorder) threads() (run map[int]uint64, runnable int, err error) {
	tids, truncated, err := r.tree.Threads(r.pool, MaxThreads)
	if err != nil {
		return nil, 0, err
	}
	r.Truncated = r.Truncated || truncated
	return threadTimes(r.procRoot, tids)
}

// threadTimes reads the run time (µs, /proc/TID/schedstat's first field
// in ns) of each thread of tids below procRoot, and counts those runnable
// (state R in /proc/TID/stat). A thread that ended between listing and
// reading is left out; run is nil when /proc denies reading the threads.
func threadTimes(procRoot string, tids []int) (run map[int]uint64, runnable int, err error) {
	run = make(map[int]uint64, len(tids))
	for _, tid := range tids {
		st, err := observe.ReadThreadStat(procRoot, tid)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue // the thread ended between listing and reading
		}
		if errors.Is(err, fs.ErrPermission) {
			return nil, 0, nil
		}
		if err != nil {
			return nil, 0, err
		}
		run[tid] = st.RunNs / 1000
		if st.Runnable {
			runnable++
		}
	}
	return run, runnable, nil
}

// ranSince counts the threads of run whose run time (µs) grew by at least
// 1% of intervalUsec since prev (a thread not in prev with all of its run
// time): the threads that ran in an interval, as a sample's Ran counts
// them. The few µs a process's runtime threads run do not count.
func ranSince(prev, run map[int]uint64, intervalUsec int64) int {
	least, ran := uint64(intervalUsec/100), 0
	for tid, usec := range run {
		if usec-min(usec, prev[tid]) >= least {
			ran++
		}
	}
	return ran
}

// Recording says how a [Record] ended.
type Recording struct {
	// Why says why it stopped: "recorded 10m0s", "interrupted", "the
	// pool was removed" or "the pool's CPU limit changed".
	Why string
	// Stalls counts reads that came an interval or more late (the host
	// stalled), each shared among the intervals it covers ([Spread]).
	Stalls int
	// Truncated is set when a poll found more than MaxThreads threads.
	Truncated bool
}

// Record samples pool t.Pool of tree into t.Samples, one sample every
// t.IntervalUsec on a fixed schedule (start + k × interval), until it has
// n samples, ctx is done, the pool is removed or its CPU limit is no
// longer t.Limit (a trace holds one limit). Between samples it reads the
// threads every interval/10, at least 10 ms apart, while there is time,
// so that a thread that runs and ends within an interval is seen; on a
// slow host there are fewer such reads, not later samples. A read that
// comes a whole interval or more late covers the intervals it missed
// too: its growth is shared among them, so every sample still covers
// about one interval. t's header must be valid; an error means reading
// failed, and t.Samples is then not to be written.
func Record(ctx context.Context, tree PoolReader, procRoot string, t *Trace, n int) (Recording, error) {
	interval := time.Duration(t.IntervalUsec) * time.Microsecond
	// The schedule starts when the baseline's counters are read, before
	// its threads: on a slow host reading them may take intervals, which
	// the first sample then covers (and shares) too.
	start := time.Now()
	rec, err := NewRecorder(tree, t.Pool, procRoot, t.IntervalUsec)
	if err != nil {
		return Recording{}, err
	}
	step := max(interval/10, min(interval, 10*time.Millisecond))
	out := Recording{Why: fmt.Sprintf("recorded %s", time.Duration(n)*interval)}
	for k := 1; len(t.Samples) < n; k++ {
		deadline := start.Add(time.Duration(k) * interval)
		var err error
		for next := time.Now().Add(step); next.Before(deadline) && err == nil; next = time.Now().Add(step) {
			if !sleepUntil(ctx, next) {
				break
			}
			err = rec.Poll()
		}
		var s Sample
		var readAt time.Time
		if err == nil && sleepUntil(ctx, deadline) {
			s, err = rec.Sample()
			readAt = time.Now()
		}
		if ctx.Err() != nil {
			out.Why = "interrupted"
			break
		}
		if errors.Is(err, fs.ErrNotExist) {
			out.Why = "the pool was removed"
			break
		}
		if err != nil {
			return Recording{}, err
		}
		if now, err := tree.CPULimit(t.Pool); err != nil || now != t.Limit {
			out.Why = "the pool's CPU limit changed"
			break
		}
		missed := int(readAt.Sub(deadline) / interval)
		if missed > 0 {
			out.Stalls++
		}
		// Shares past the recording's end cover time after it: dropped.
		t.Samples = append(t.Samples, Spread(s, missed+1)...)
		t.Samples = t.Samples[:min(len(t.Samples), n)]
		k += missed
	}
	out.Truncated = rec.Truncated
	return out, nil
}

// sleepUntil sleeps until t and reports true, or false as soon as ctx is
// done.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// Spread shares s, a sample that covers n intervals (its read came
// n-1 whole intervals late, the host stalled), evenly over n samples, so
// that the trace keeps one sample per interval: each counter's growth is
// divided by n, the remainder going to the first samples (so nr_throttled
// stays at most nr_periods in each), and the thread counts are repeated.
// n < 2 returns s alone.
func Spread(s Sample, n int) []Sample {
	out := make([]Sample, max(n, 1))
	for i := range out {
		out[i] = share(s, n, i)
	}
	return out
}

// share is sample i of Spread(s, n): s itself when n < 2.
func share(s Sample, n, i int) Sample {
	if n < 2 {
		return s
	}
	part := func(v uint64) uint64 {
		q, r := v/uint64(n), v%uint64(n)
		if uint64(i) < r {
			q++
		}
		return q
	}
	p := s
	p.UsageUsec, p.NrPeriods, p.NrThrottled = part(s.UsageUsec), part(s.NrPeriods), part(s.NrThrottled)
	p.ThrottledUsec, p.NrBursts, p.BurstUsec = part(s.ThrottledUsec), part(s.NrBursts), part(s.BurstUsec)
	p.QueryNrThrottled, p.QueryThrottledUsec = part(s.QueryNrThrottled), part(s.QueryThrottledUsec)
	if s.PressureSomeUsec != nil {
		v := part(*s.PressureSomeUsec)
		p.PressureSomeUsec = &v
	}
	return p
}
