package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/poolagent/poolagent/advise"
	"github.com/poolagent/poolagent/cpulimit"
	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/protocol"
)

// HistoryConfig is what the daemon keeps of each pool's recent CPU
// counters for `poolagent advise --pool` (docs/advise.md): the samples
// `poolagent record` takes, one per interval, for a window of time.
type HistoryConfig struct {
	// Window is how long the samples are kept; 0 keeps none.
	Window time.Duration
	// Interval is the shortest interval a pool is sampled at: a pool
	// is sampled once a period, or once an Interval when that is longer;
	// MinHistoryInterval when less.
	Interval time.Duration
	// Cgroup ("v1" or "v2"), CPUs (online), SliceUsec and TickUsec are
	// the host facts a trace holds (advise.Trace).
	Cgroup    string
	CPUs      int
	SliceUsec int64
	TickUsec  int64
}

// MinHistoryInterval is the shortest interval the history samples a pool
// at: its period, or this when the period is shorter.
const MinHistoryInterval = 100 * time.Millisecond

// MaxHistoryWindow is the longest window: a trace holds at most
// advise.MaxSamples intervals of MinHistoryInterval.
const MaxHistoryWindow = advise.MaxSamples * MinHistoryInterval

// histSample is one interval of a pool's history in which something
// happened, in 32 bytes: an idle interval is not stored. Counters are
// saturated at their type's maximum (an interval is at most 1 s on at
// most 1024 CPUs, so µs fit in 32 bits).
type histSample struct {
	// at is the interval's index in its segment.
	at                                                 uint32
	usageUsec, throttledUsec, burstUsec, queryThrUsec  uint32
	pressureUsec                                       uint32 // math.MaxUint32: none
	nrPeriods, nrThrottled, nrBursts, queryNrThrottled uint16
}

// HistorySampleBytes is the size of one stored interval.
const HistorySampleBytes = 32

// segment is a pool's history under one limit: intervals 0..n-1 from
// start.
type segment struct {
	limit, query cpulimit.Limit
	nodeCPUs     float64
	intervalUsec int64
	start        time.Time
	n            uint32
	samples      []histSample
}

// poolHistory is one pool's segments, oldest first, and the counters of
// the last read.
type poolHistory struct {
	segs []*segment
	// prev is the pool's counters at the last read, prevQueries each of
	// its query cgroups'; base is false until the first read of a
	// segment.
	prev        observe.Sample
	prevQueries map[string]observe.CPUStat
	base        bool
	due         time.Time
}

// history is the daemon's rolling record of every pool. Its lock is a
// leaf: nothing is called while it is held.
type history struct {
	cfg   HistoryConfig
	mu    sync.Mutex
	pools map[string]*poolHistory
}

func newHistory(cfg HistoryConfig) *history {
	return &history{cfg: cfg, pools: map[string]*poolHistory{}}
}

// interval is the interval a pool with limit l is sampled at.
func (h *history) interval(l cpulimit.Limit) time.Duration {
	return max(time.Duration(l.PeriodUsec)*time.Microsecond, h.cfg.Interval, MinHistoryInterval)
}

// historyLoop samples the pools when each is due until ctx ends.
func (s *Server) historyLoop(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-timer.C:
			timer.Reset(time.Until(s.sampleHistory(now)))
		}
	}
}

// sampleHistory reads the pools that are due at now and returns when the
// next one is due.
func (s *Server) sampleHistory(now time.Time) time.Time {
	h := s.history
	d := s.Desired()
	next := now.Add(MinHistoryInterval)
	var due []string
	h.mu.Lock()
	planned := map[string]bool{}
	for _, p := range d.Pools {
		planned[p.Name] = true
		lim := cpulimit.Limit{QuotaUsec: p.Pool.CPU.QuotaUsec, PeriodUsec: p.Pool.CPU.PeriodUsec, BurstUsec: p.Pool.CPU.BurstUsec}
		query := cpulimit.Limit{QuotaUsec: p.Query.CPU.QuotaUsec, PeriodUsec: p.Query.CPU.PeriodUsec, BurstUsec: p.Query.CPU.BurstUsec}
		ph := h.pools[p.Name]
		if ph == nil {
			ph = &poolHistory{due: now}
			h.pools[p.Name] = ph
		}
		if last := ph.last(); last == nil || last.limit != lim || last.query != query || last.nodeCPUs != d.Node.CPUs {
			iv := h.interval(lim)
			ph.segs = append(ph.segs, &segment{limit: lim, query: query, nodeCPUs: d.Node.CPUs, intervalUsec: iv.Microseconds(), start: now})
			ph.base, ph.due = false, now
		}
		if !ph.due.After(now) {
			due = append(due, p.Name)
		} else {
			next = minTime(next, ph.due)
		}
	}
	for name := range h.pools {
		if !planned[name] {
			delete(h.pools, name)
		}
	}
	h.mu.Unlock()
	if len(due) == 0 {
		return next
	}
	stats, err := s.cg.PoolStats(due)
	if err != nil {
		s.cfg.Log.Warn("history: read the pools' counters", "err", err)
	}
	// The query cgroups read are those of the queries this daemon
	// admitted (its own list, no walk of the tree).
	queries := map[string]map[string]observe.CPUStat{}
	cgs := s.reg.runningQueries()
	listed := map[[2]string]bool{}
	for _, q := range cgs {
		if _, ok := stats[q[0]]; !ok {
			continue
		}
		listed[q] = true
		if st, err := s.cg.QueryStat(q[0], q[1]); err == nil {
			if queries[q[0]] == nil {
				queries[q[0]] = map[string]observe.CPUStat{}
			}
			queries[q[0]][q[1]] = st.CPU
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, name := range due {
		ph := h.pools[name]
		if ph == nil {
			continue
		}
		seg := ph.last()
		iv := time.Duration(seg.intervalUsec) * time.Microsecond
		cur, ok := stats[name]
		if !ok {
			ph.base, ph.due = false, now.Add(iv)
			next = minTime(next, ph.due)
			continue
		}
		if ph.base {
			missed := max(int(now.Sub(ph.due)/iv), 0)
			h.add(seg, ph.sample(cur, queries[name], int64(missed+1)*seg.intervalUsec, seg.limit.PeriodUsec, h.cfg.CPUs), missed+1)
			ph.due = ph.due.Add(time.Duration(missed+1) * iv)
		} else {
			// The first read of a segment is its baseline: the
			// segment's intervals start here.
			seg.start, ph.due = now, now.Add(iv)
		}
		// A query that runs but whose cgroup was not read this time
		// keeps its last counters; one that ended is forgotten.
		for q, st := range ph.prevQueries {
			if _, ok := queries[name][q]; !ok && listed[[2]string{name, q}] {
				if queries[name] == nil {
					queries[name] = map[string]observe.CPUStat{}
				}
				queries[name][q] = st
			}
		}
		ph.prev, ph.prevQueries, ph.base = cur, queries[name], true
		h.trim(ph, now)
		next = minTime(next, ph.due)
	}
	return next
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func (ph *poolHistory) last() *segment {
	if len(ph.segs) == 0 {
		return nil
	}
	return ph.segs[len(ph.segs)-1]
}

// sample is what the pool's counters and its queries' grew by since the
// last read: throttling at both levels (docs/advise.md, Levels).
//
// A query cgroup first seen counts with all its counters; what one query
// adds is held to what spanUsec can hold (periods of periodUsec, and
// throttled time on cpus CPUs), so that a query whose earlier counters
// were missed cannot make an interval impossible.
func (ph *poolHistory) sample(cur observe.Sample, queries map[string]observe.CPUStat, spanUsec, periodUsec int64, cpus int) advise.Sample {
	d := cur.CPU.Sub(ph.prev.CPU)
	s := advise.Sample{UsageUsec: d.UsageUsec, NrPeriods: d.NrPeriods, NrThrottled: d.NrThrottled, ThrottledUsec: d.ThrottledUsec,
		NrBursts: d.NrBursts, BurstUsec: d.BurstUsec, Threads: -1, Ran: -1, Runnable: -1}
	if cur.Pressure != nil && ph.prev.Pressure != nil && cur.Pressure.Some.TotalUsec >= ph.prev.Pressure.Some.TotalUsec {
		v := cur.Pressure.Some.TotalUsec - ph.prev.Pressure.Some.TotalUsec
		s.PressureSomeUsec = &v
	}
	for q, st := range queries {
		qd := st.Sub(ph.prevQueries[q]) // a new query: all it ran
		s.QueryNrThrottled = max(s.QueryNrThrottled, min(qd.NrThrottled, uint64(spanUsec/periodUsec+1)))
		s.QueryThrottledUsec += min(qd.ThrottledUsec, uint64(spanUsec)*uint64(cpus))
	}
	s.QueryThrottledUsec = min(s.QueryThrottledUsec, uint64(spanUsec+periodUsec)*uint64(cpus))
	return s
}

// add appends s, which covers n intervals, to seg: shared evenly among
// them (advise.Spread); idle shares are not stored.
func (h *history) add(seg *segment, s advise.Sample, n int) {
	for _, p := range advise.Spread(s, n) {
		if !idle(p) {
			seg.samples = append(seg.samples, compact(seg.n, h.clamp(seg, p)))
		}
		seg.n++
	}
}

// clamp holds p to what a trace's interval can hold (advise.Trace's
// Validate): a host or VM that stalls books a long throttle, or many
// periods, in one read, which the trace would refuse.
func (h *history) clamp(seg *segment, p advise.Sample) advise.Sample {
	span, cpus := uint64(2*seg.intervalUsec), uint64(max(h.cfg.CPUs, 1))
	periods := span/uint64(seg.limit.PeriodUsec) + 2
	throttled := span*cpus + uint64(seg.limit.PeriodUsec)*cpus
	p.UsageUsec = min(p.UsageUsec, span*cpus)
	p.NrPeriods = min(p.NrPeriods, periods)
	p.NrThrottled = min(p.NrThrottled, p.NrPeriods)
	p.ThrottledUsec = min(p.ThrottledUsec, throttled)
	p.QueryNrThrottled = min(p.QueryNrThrottled, periods)
	p.QueryThrottledUsec = min(p.QueryThrottledUsec, throttled)
	if p.PressureSomeUsec != nil {
		v := min(*p.PressureSomeUsec, span)
		p.PressureSomeUsec = &v
	}
	return p
}

// idle reports whether p holds no growth at all, pressure included.
func idle(p advise.Sample) bool {
	q := p
	q.PressureSomeUsec = nil
	return q == advise.Sample{Threads: -1, Ran: -1, Runnable: -1} && (p.PressureSomeUsec == nil || *p.PressureSomeUsec == 0)
}

func sat32(v uint64) uint32 { return uint32(min(v, math.MaxUint32)) }
func sat16(v uint64) uint16 { return uint16(min(v, math.MaxUint16)) }

func compact(at uint32, p advise.Sample) histSample {
	c := histSample{at: at, usageUsec: sat32(p.UsageUsec), throttledUsec: sat32(p.ThrottledUsec), burstUsec: sat32(p.BurstUsec),
		queryThrUsec: sat32(p.QueryThrottledUsec), pressureUsec: math.MaxUint32,
		nrPeriods: sat16(p.NrPeriods), nrThrottled: sat16(p.NrThrottled), nrBursts: sat16(p.NrBursts), queryNrThrottled: sat16(p.QueryNrThrottled)}
	if p.PressureSomeUsec != nil {
		c.pressureUsec = sat32(min(*p.PressureSomeUsec, math.MaxUint32-1))
	}
	return c
}

// trim drops what is older than the window: whole segments that ended
// before it, and the first intervals of the oldest one left.
func (h *history) trim(ph *poolHistory, now time.Time) {
	cutoff := now.Add(-h.cfg.Window)
	for len(ph.segs) > 1 && ph.segs[0].end().Before(cutoff) {
		ph.segs = ph.segs[1:]
	}
	seg := ph.segs[0]
	k := 0
	for k < len(seg.samples) && seg.timeOf(seg.samples[k].at).Before(cutoff) {
		k++
	}
	if k > 0 {
		seg.samples = seg.samples[k:]
	}
}

func (seg *segment) timeOf(at uint32) time.Time {
	return seg.start.Add(time.Duration(int64(at)*seg.intervalUsec) * time.Microsecond)
}

func (seg *segment) end() time.Time { return seg.timeOf(seg.n) }

// traces returns the pool's history since now-since (all of the window
// for since 0) as traces, one per segment, oldest first; a segment with
// no whole interval in the span is left out. ok is false for a pool the
// history does not know.
func (h *history) traces(pool string, since time.Duration, now time.Time) (ts []*advise.Trace, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ph := h.pools[pool]
	if ph == nil {
		return nil, false
	}
	from := now.Add(-h.cfg.Window)
	if since > 0 && since < h.cfg.Window {
		from = now.Add(-since)
	}
	for _, seg := range ph.segs {
		if t := h.trace(pool, seg, from); t != nil {
			ts = append(ts, t)
		}
	}
	return ts, true
}

// trace is seg's intervals from time from as a trace, idle intervals
// filled in; nil when none.
func (h *history) trace(pool string, seg *segment, from time.Time) *advise.Trace {
	first := uint32(0)
	if from.After(seg.start) {
		first = uint32((from.Sub(seg.start).Microseconds() + seg.intervalUsec - 1) / seg.intervalUsec)
	}
	if first >= seg.n {
		return nil
	}
	n := min(seg.n-first, advise.MaxSamples)
	first = seg.n - n
	t := &advise.Trace{Format: advise.TraceFormat, Version: advise.TraceVersion, Pool: pool, Cgroup: h.cfg.Cgroup,
		CPUs: h.cfg.CPUs, NodeCPUs: seg.nodeCPUs, SliceUsec: h.cfg.SliceUsec, TickUsec: h.cfg.TickUsec,
		Limit: seg.limit, QueryLimit: &seg.query, IntervalUsec: seg.intervalUsec, Samples: make([]advise.Sample, n),
		StartUnixUsec: seg.timeOf(first).UnixMicro()}
	psi := h.cfg.Cgroup == "v2"
	for i := range t.Samples {
		t.Samples[i] = advise.Sample{Threads: -1, Ran: -1, Runnable: -1}
		if psi {
			t.Samples[i].PressureSomeUsec = new(uint64)
		}
	}
	for _, c := range seg.samples {
		if c.at < first || c.at >= seg.n {
			continue
		}
		p := &t.Samples[c.at-first]
		p.UsageUsec, p.NrPeriods, p.NrThrottled, p.ThrottledUsec = uint64(c.usageUsec), uint64(c.nrPeriods), uint64(c.nrThrottled), uint64(c.throttledUsec)
		p.NrBursts, p.BurstUsec = uint64(c.nrBursts), uint64(c.burstUsec)
		p.QueryNrThrottled, p.QueryThrottledUsec = uint64(c.queryNrThrottled), uint64(c.queryThrUsec)
		if c.pressureUsec != math.MaxUint32 {
			v := uint64(c.pressureUsec)
			p.PressureSomeUsec = &v
		} else {
			p.PressureSomeUsec = nil
		}
	}
	return t
}

// serveHistory answers OpHistory: the pool's traces, or every pool's.
func (s *Server) serveHistory(req protocol.Request) protocol.AdminReply {
	refuse := func(code, format string, args ...any) protocol.AdminReply {
		return protocol.AdminReply{Type: protocol.ReplyError, Code: code, Error: fmt.Sprintf(format, args...)}
	}
	if s.history == nil {
		return refuse(protocol.CodeBadRequest, "this daemon keeps no history of the pools (it was started with --history-window 0)")
	}
	if req.SinceUsec < 0 {
		return refuse(protocol.CodeBadRequest, "since %d µs: accepted 0 (the whole window) or more", req.SinceUsec)
	}
	since := time.Duration(min(req.SinceUsec, int64(MaxHistoryWindow/time.Microsecond))) * time.Microsecond
	pools := []string{req.Pool}
	if req.Pool == "" {
		pools = nil
		for _, p := range s.Desired().Pools {
			pools = append(pools, p.Name)
		}
	}
	reply := protocol.AdminReply{Type: protocol.ReplyDone}
	now := time.Now()
	for _, pool := range pools {
		ts, ok := s.history.traces(pool, since, now)
		if !ok {
			return refuse(protocol.CodeUnknownPool, "no pool %s in the daemon's history (accepted: a pool of poolagent pools)", advise.Quoted(pool))
		}
		for _, t := range ts {
			b, err := json.Marshal(t)
			if err != nil {
				return refuse(protocol.CodeInternal, "history of pool %s: %v", pool, err)
			}
			reply.Traces = append(reply.Traces, b)
		}
	}
	return reply
}

// runningQueries lists the queries admitted and placed, as [pool, query
// cgroup] pairs.
func (r *registry) runningQueries() [][2]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][2]string
	for q := range r.clients {
		if q.qid != 0 && q.name != "" {
			out = append(out, [2]string{q.pool, q.name})
		}
	}
	return out
}
