package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// Config is what the daemon keeps of each pool's recent CPU
// counters for `poolagent advise --pool` (docs/md): the samples
// `poolagent record` takes, one per interval, for a window of time.
type Config struct {
	// Window is how long the samples are kept; 0 keeps none.
	Window time.Duration
	// Interval is the shortest interval a pool is sampled at: a pool
	// is sampled once a period, or once an Interval when that is longer;
	// MinInterval when less.
	Interval time.Duration
	// Cgroup ("v1" or "v2"), CPUs (online), SliceUsec and TickUsec are
	// the host facts a trace holds (Trace).
	Cgroup    string
	CPUs      int
	SliceUsec int64
	TickUsec  int64
}

// MinInterval is the shortest interval the history samples a pool
// at: its period, or this when the period is shorter.
const MinInterval = 100 * time.Millisecond

// MaxWindow is the longest window: a trace holds at most
// MaxSamples intervals of MinInterval.
const MaxWindow = MaxSamples * MinInterval

// histSample is one interval of a pool's history in which something
// happened, in 40 bytes: an idle interval is not stored. Counters are
// saturated at their type's maximum (an interval is at most 1 s on at
// most 1024 CPUs, so µs fit in 32 bits).
type histSample struct {
	// at is the interval's index in its segment.
	at                                                 uint32
	usageUsec, throttledUsec, burstUsec, queryThrUsec  uint32
	pressureUsec                                       uint32 // math.MaxUint32: none
	nrPeriods, nrThrottled, nrBursts, queryNrThrottled uint16
	// threads, ran and runnable are the sample's thread counts
	// (Sample), unknownThreads for -1.
	threads, ran, runnable uint16
}

// unknownThreads is a thread count of -1 in a histSample.
const unknownThreads = math.MaxUint16

// SampleBytes is the size of one stored interval.
const SampleBytes = 40

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
	// its query cgroups' (changed in place by store alone, after the
	// read that takes it); base is false until the first read of a
	// segment.
	prev        observe.Sample
	prevQueries map[string]observe.CPUStat
	// prevRun is the run time (µs) of every thread of the pool at the
	// last read of its threads, queryRun that of each running query's
	// (the part of prevRun a query that did not run since keeps); nil
	// when not read.
	prevRun  map[int]uint64
	queryRun map[string]map[int]uint64
	// ownRun is the part of prevRun outside the query cgroups, as last
	// listed; nil when not read.
	ownRun map[int]uint64
	// hot are the queries whose usage grew at the last read of the
	// pool's queries, and those that came since and were not read (the
	// pool did not run), all of them running at the last read; fullAt
	// is when its queries and threads were last all read (or known not
	// to have run): the history reads only the hot ones while they
	// account for all the pool ran (duePool.partial).
	hot    []queryRead
	fullAt time.Time
	base   bool
	// quiet is set when the last read found the pool idle: it is then
	// read once a QuietInterval (readAt is when it was read last) until
	// a query not in running, the list of those running at that read,
	// comes; seen is the set of running, made when first asked (arrived).
	quiet bool
	// idleSince is when the pool was last found running, or a query
	// arrived in it: it has been idle since.
	idleSince time.Time
	// pinnedReads counts the reads in a row that found the pool
	// running and throttled in every period (pinnedSample), pinnedSince
	// the first of them: one pinned for a QuietInterval is read on that
	// grid until its queries change (pinned), and on that of
	// PinnedInterval once pinned for PinnedAfter.
	pinnedReads int
	pinnedSince time.Time
	// counts are the thread counts (Threads, Ran, Runnable) of the last
	// sample: a pinned pool's samples between its reads in full keep
	// them (duePool.keepThreads).
	counts [3]int
	// ended is what the pool's ended queries had used at the last read
	// (Pools.Running).
	ended   Ended
	running []string
	// seen is the set of running, made when first asked (arrived) and
	// then kept with it (store); each query's value is the last look
	// that found it in a new list (changes, stamp).
	seen   map[string]uint32
	stamp  uint32
	readAt time.Time
	due    time.Time
	// look is the last look whose plan had the pool.
	look uint64
}

// Reader is what the history reads of the pool tree: the pools' CPU
// counters and pressure and those of their query cgroups, no more (a
// sample holds nothing of memory or tasks). *pooltree.Handle is one; one
// that is also a [QueryThreadLister] has the pools' threads read too.
type Reader interface {
	// PoolCPUStats reads the named pools' CPU accounting and throttling
	// (the samples' CPU and UsageKnown); a pool without a cgroup is left
	// out.
	PoolCPUStats(pools []string) (map[string]observe.Sample, error)
	// PoolCPUPressure reads the named pools' CPU pressure; a pool
	// without it (cgroup v1) is left out.
	PoolCPUPressure(pools []string) (map[string]*observe.Pressure, error)
	// QueryUsage reads the CPU time (µs) the query cgroup <pool>/<query>
	// has used, from one file; known is false where the kernel keeps
	// none for it (the query is then read as one that ran).
	QueryUsage(pool, query string) (usec uint64, known bool, err error)
	// QueryThrottling reads the query cgroup's throttling counters.
	QueryThrottling(pool, query string) (observe.CPUStat, error)
}

// ThreadLister lists the threads of a pool and its queries, at most
// limit: *pooltree.Handle and *cgroupfs.Reader.
type ThreadLister interface {
	Threads(pool string, limit int) (tids []int, truncated bool, err error)
}

// QueryThreadLister is a ThreadLister that also lists the threads of a
// pool outside the query cgroups except names, so that the history lists
// those of each query that ran apart and not those of the queries that
// did not: *pooltree.Handle.
type QueryThreadLister interface {
	ThreadLister
	ThreadsExcept(pool string, except map[string]bool, limit int) (tids []int, truncated bool, err error)
}

// Pools is what the history samples: the plan in force (the pools and
// their limits) and the queries running in each pool, those whose cgroups
// it reads (the daemon's own list: no walk of the tree). The history does
// not modify what Running returns, so the list may be shared between
// looks; nor may its source change a list once returned (a query that
// comes or goes makes a new one): the history takes a pool's list that is
// the very one of its last read to say no query came or went.
type Pools interface {
	Desired() planner.Desired
	// Running lists the queries running in each pool and, taken at
	// once with that list, what the queries of each pool that no
	// longer run in it used (Ended).
	Running() (running map[string][]string, ended map[string]Ended)
	// Changed receives after a query came or went, or the plan changed;
	// changes that come before the history looks may be told once.
	Changed() <-chan struct{}
}

// Ended is what the queries of a pool that ended have used, summed since
// the daemon started: each query's usage as its cgroup's counters said
// once it was empty, at its end. A pool's usage counts its ended queries'
// too (the kernel keeps a removed cgroup's usage in its parent's), so
// the history tells what they ran since its last read from these sums
// rather than by reading every query of a pool to which queries come and
// go (read).
type Ended struct {
	// Usec is the sum of the ended queries' usage, µs.
	Usec uint64
	// Unread counts the ended queries whose usage was not read: their
	// end found no counters, or came before the query ran.
	Unread uint64
}

// Rolling is the daemon's rolling record of every pool: each pool's
// samples for the last Config.Window, one per interval in which
// something happened. Its lock is a leaf: nothing is called while it is
// held.
type Rolling struct {
	cfg Config
	log *slog.Logger
	r   Reader
	src Pools
	mu  sync.Mutex
	// pools is each planned pool's history, by name.
	pools map[string]*poolHistory
	// origin is the first look, from which every read is timed (grid);
	// looks counts the looks.
	origin time.Time
	looks  uint64
	// threads reads the threads of a pool: those outside its running
	// queries and those of the queries in ran; nil where they cannot be
	// listed (thread counts are then -1).
	threads func(pool string, running, ran []string, own map[int]uint64) threadRead
	// dueBuf is the array of the last look's due pools, which the next
	// reuses (Sample).
	dueBuf []duePool
	// replying lets one reply per uid be built and written at a time
	// (Reply).
	replying replyTurns
}

// New makes a rolling history of src's pools read through r. The threads
// are read below procRoot (normally /proc) where r is a ThreadLister.
func New(cfg Config, r Reader, src Pools, procRoot string, log *slog.Logger) *Rolling {
	h := &Rolling{cfg: cfg, log: log, r: r, src: src, pools: map[string]*poolHistory{}, replying: replyTurns{turns: map[uint32]*replyTurn{}}}
	if tl, ok := r.(QueryThreadLister); ok {
		h.threads = func(pool string, running, ran []string, own map[int]uint64) threadRead {
			return readThreads(tl, procRoot, pool, running, ran, own)
		}
	}
	return h
}

// Check says what is wrong with cfg: a window or interval out of range.
func (cfg Config) Check() error {
	if w := cfg.Window; w < 0 || w > MaxWindow {
		return fmt.Errorf("history window %s: accepted 0 (none) to %s", w, MaxWindow)
	}
	if iv := cfg.Interval; iv < 0 || iv > time.Minute || (cfg.Window > 0 && cfg.Window/max(iv, MinInterval) > MaxSamples) {
		return fmt.Errorf("history interval %s: accepted 0 (the period) to 1m, and at most %d intervals in the window", iv, MaxSamples)
	}
	return nil
}

// replyTurns gives each uid one turn at a time to build and write a large
// reply: a reply nobody reads holds its uid's turn until the write
// deadline, and no other uid's. Its lock is a leaf.
type replyTurns struct {
	mu    sync.Mutex
	turns map[uint32]*replyTurn
}

// replyTurn is a uid's turn (a token in a channel of one) and how many
// of its requests hold or wait for it.
type replyTurn struct {
	token chan struct{}
	users int
}

// take waits up to wait for uid's turn and returns its release; false
// when the turn did not come.
func (r *replyTurns) take(uid uint32, wait time.Duration) (release func(), ok bool) {
	r.mu.Lock()
	t := r.turns[uid]
	if t == nil {
		t = &replyTurn{token: make(chan struct{}, 1)}
		r.turns[uid] = t
	}
	t.users++
	r.mu.Unlock()
	leave := func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if t.users--; t.users == 0 {
			delete(r.turns, uid)
		}
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case t.token <- struct{}{}:
		return func() { <-t.token; leave() }, true
	case <-timer.C:
		leave()
		return nil, false
	}
}

// interval is the interval a pool with limit l is sampled at.
func (h *Rolling) interval(l cpulimit.Limit) time.Duration {
	return max(time.Duration(l.PeriodUsec)*time.Microsecond, h.cfg.Interval, MinInterval)
}

// Run samples the pools when each is due until ctx ends. Between reads it
// sleeps until the next pool is due (an IdleInterval at most), and no
// longer than the next step of the MinInterval grid once its source says
// that a query came or went or the plan changed (Pools.Changed): a quiet
// pool to which the daemon admits a query is so read within a period, and
// a daemon whose pools are all idle wakes once an IdleInterval.
func (h *Rolling) Run(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	next := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.src.Changed():
			// looks and origin are only Sample's, on this goroutine;
			// before the first look, that look is the next.
			if h.looks == 0 {
				continue
			}
			if at := h.grid(time.Now(), MinInterval); at.Before(next) {
				next = at
				timer.Reset(time.Until(at))
			}
		case now := <-timer.C:
			next = h.Sample(now)
			timer.Reset(time.Until(next))
		}
	}
}

// Sample reads the pools that are due at now and returns when the next
// one is due. It is called from one goroutine at a time (Run's): a look
// reuses the last one's list of due pools, and reads outside the lock
// what only Sample changes.
func (h *Rolling) Sample(now time.Time) time.Time {
	running, ended := h.src.Running()
	due, next := h.due(h.src.Desired(), now, running, ended)
	if len(due) > 0 {
		next = h.store(due, h.read(due, running), now, next)
	}
	clear(due) // what the entries hold is not kept until the next look
	h.dueBuf = due[:0]
	return next
}

// QuietInterval is how often the history reads a quiet pool: one that
// did not run at its last read and runs no query of this daemon, or one
// whose queries all sleep and that has been idle for a QuietInterval
// (read each period until then, so that a pool whose queries pause
// between bursts is read each period), until it has been idle for
// IdleAfter: it is then read once an IdleInterval. A pool of long sleepers
// so costs the daemon what an idle one does; what it ran before a late
// read is shared among the intervals since its last read (Spread), as for
// any late read. A quiet pool is read each period again as soon as the
// daemon admits a query to it (the history looks on the next step of the
// MinInterval grid: Run), for a QuietInterval, and once it is found to
// have run.
const QuietInterval = time.Second

// IdleAfter is how long a quiet pool is read once a QuietInterval before
// it is read once an IdleInterval: most idle pools, and most pools of
// sleepers, stay so for long, and reading each of them every second was
// most of what a hundred such pools cost the daemon (docs/performance.md,
// At scale). What one that wakes ran in its first IdleInterval is so
// shared among the intervals of that late read.
const (
	IdleAfter    = 10 * time.Second
	IdleInterval = 5 * time.Second
)

// FullInterval is how often, at least, the history reads all of a pool
// that runs: every running query's usage and its own threads, where
// reading the hot queries alone would do (read). A query that ran less
// than 1% of an interval between two reads of its pool, all the time the
// hot ones account for it, is so read up to FullInterval late, its
// counters booked to the interval it was read in; a pool that runs
// without a break is read in full once in FullInterval, not once a
// second, and neither are its sleeping queries.
const FullInterval = 10 * time.Second

// PinnedAfter is how long a pinned pool is read once a QuietInterval
// before it is read once a PinnedInterval: a pool held at its cap mostly
// stays so for long, and reading each such pool every second was the
// largest part of the history's cost at scale once idle pools were read
// less (docs/performance.md, At scale). A pool that leaves its cap after
// that is read each period again up to a PinnedInterval late, what it ran
// since its last read shared among the intervals that read covers.
const (
	PinnedAfter    = 10 * time.Second
	PinnedInterval = 5 * time.Second
)

// pinned reports whether the pool, whose interval is iv, is read on the
// grid of QuietInterval because its reads found it running and throttled
// in every period for that long (pinnedSample); pinnedAfter says when it
// is read once a PinnedInterval instead. Each period's sample of
// such a pool says what the one before said: it ran its quota, and was
// throttled. Reading it each period would cost the daemon its counters,
// its busy queries' and their threads ten times a second for nothing a
// sample would not have said; read once a second, what it ran is shared
// among the intervals since its last read (Spread), as for any late read.
// The first read that finds a period in which it did not run or was not
// throttled (at the pool's level, or at its queries' in some periods
// only) makes it read each period again, as does any query that comes or
// goes. So a pool that leaves its cap is read each period again a second
// late at most (a PinnedInterval once pinned for PinnedAfter), the time
// before booked evenly. Nor are its threads read at each such read while
// its hot queries account for what it ran (read): only
// with its read in full, once a FullInterval, its samples in between
// keeping the thread counts that read found. Listing a busy query's
// threads and reading each one's stat was the largest part of the
// history's cost at scale, for counts a pool held at its cap keeps.
func (ph *poolHistory) pinned(iv time.Duration) bool {
	return iv < QuietInterval && time.Duration(ph.pinnedReads)*iv >= QuietInterval
}

// pinnedSample reports whether p, what a pool grew by over a read of
// spanUsec, says it ran in every period of the span and was throttled in
// each, and its queries in none or in every one. The kernel counts only
// the periods in which the pool had work (its period timer stops while it
// is idle), so a pool whose bursts are throttled in every period they
// last, with idle periods between them, also has as many throttled
// periods as periods: the span's periods tell the two apart, to within one
// for where the read fell against the kernel's period timer.
func pinnedSample(p Sample, spanUsec, periodUsec int64) bool {
	return p.NrPeriods > 0 && p.NrPeriods+1 >= uint64(spanUsec/periodUsec) && p.NrThrottled >= p.NrPeriods &&
		(p.QueryNrThrottled == 0 || p.QueryNrThrottled >= p.NrPeriods)
}

// pinnedAfter is the step of the grid on which a pinned pool is next
// read: PinnedInterval once its reads have found it pinned for
// PinnedAfter, else QuietInterval.
func (ph *poolHistory) pinnedAfter() time.Duration {
	if ph.readAt.Sub(ph.pinnedSince) >= PinnedAfter {
		return PinnedInterval
	}
	return QuietInterval
}

// quietAfter is the step of the grid on which the pool is next read
// while quiet: IdleInterval once it has been idle for IdleAfter at its
// last read, QuietInterval when it runs no query of this daemon or has
// been idle that long, else iv.
func (ph *poolHistory) quietAfter(active bool, iv time.Duration) time.Duration {
	idle := ph.readAt.Sub(ph.idleSince)
	switch {
	case idle >= IdleAfter:
		return max(IdleInterval, iv)
	case active && idle < QuietInterval:
		return iv
	}
	return max(QuietInterval, iv)
}

// dueAt is when the pool, whose interval is iv, is next read: at its
// interval's end, or on the grid of its quiet interval while it is quiet
// or pinned and no query arrived (arrived) since its last read; running
// is how many of this daemon's queries run in it now.
func (h *Rolling) dueAt(ph *poolHistory, iv time.Duration, arrived bool, running int) time.Time {
	switch {
	case ph.base && ph.quiet && !arrived:
		return maxTime(ph.due, h.grid(ph.readAt, ph.quietAfter(running > 0, iv)))
	case ph.base && ph.pinned(iv) && !arrived && running == len(ph.running):
		// No query came, and so none went.
		return maxTime(ph.due, h.grid(ph.readAt, ph.pinnedAfter()))
	}
	return ph.due
}

// duePool is a pool whose interval has ended: its name, and whether its
// threads are to be read (the first read of a segment, or a pool whose
// usage may have grown: one not read before).
type duePool struct {
	name      string
	base      bool
	prevUsage uint64
	// prevPressure is the pool's CPU pressure at the last read, kept
	// when the pool did not run (read).
	prevPressure *observe.Pressure
	// running are the queries this daemon admitted that run in the
	// pool; arrived is set when one of them did not at its last read.
	running []string
	arrived bool
	// ended is what the pool's ended queries had used when running
	// was listed; fresh are the queries of running not listed at the
	// last read (those that arrived since), gone those listed then that
	// no longer run (changes).
	ended       Ended
	fresh, gone []string
	// isGone says whether a query is one of gone (goneSet).
	isGone func(string) bool
	// prevQueries are the counters of each of the pool's queries at the
	// last read (the history's own, read only).
	prevQueries map[string]observe.CPUStat
	// partial is set when the pool's queries may be read in part: only
	// hot (those of running whose usage grew at the last read) and
	// fresh, when what they grew by and endedUsec, what the queries
	// that ended since the last read ran since, account for what the
	// pool grew by to within slackUsec, and its own threads not listed
	// again (prevOwn, as last listed, stand). See read.
	partial   bool
	endedUsec uint64
	// keepThreads is set when the pool is pinned and its queries may
	// be read in part: its threads are then not read either, and its
	// sample keeps the last one's thread counts (pinned).
	keepThreads bool
	hot         []string
	prevOwn     map[int]uint64
	slackUsec   uint64
}

// grid is the first time after t that is a whole number of steps from
// the history's first look. Every pool is read on the grid of its
// interval (and a quiet one on that of QuietInterval), so that the pools
// due together are read in one look, whenever each started: a look costs
// a walk of every planned pool, and the history so wakes once an
// interval rather than once for each pool.
func (h *Rolling) grid(t time.Time, step time.Duration) time.Time {
	return h.origin.Add((t.Sub(h.origin)/step + 1) * step)
}

// due starts a segment for every pool whose limit changed, forgets the
// pools no longer planned, and returns the pools due at now and when the
// next of the others is.
func (h *Rolling) due(d planner.Desired, now time.Time, running map[string][]string, ended map[string]Ended) (due []duePool, next time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.looks == 0 {
		h.origin = now
	}
	h.looks++
	next = h.grid(now, IdleInterval)
	due = h.dueBuf
	for _, p := range d.Pools {
		lim := cpulimit.Limit{QuotaUsec: p.Pool.CPU.QuotaUsec, PeriodUsec: p.Pool.CPU.PeriodUsec, BurstUsec: p.Pool.CPU.BurstUsec}
		query := cpulimit.Limit{QuotaUsec: p.Query.CPU.QuotaUsec, PeriodUsec: p.Query.CPU.PeriodUsec, BurstUsec: p.Query.CPU.BurstUsec}
		ph := h.pools[p.Name]
		if ph == nil {
			ph = &poolHistory{due: now}
			h.pools[p.Name] = ph
		}
		ph.look = h.looks
		if last := ph.last(); last == nil || last.limit != lim || last.query != query || last.nodeCPUs != d.Node.CPUs {
			iv := h.interval(lim)
			ph.segs = append(ph.segs, &segment{limit: lim, query: query, nodeCPUs: d.Node.CPUs, intervalUsec: iv.Microseconds(), start: now})
			ph.base, ph.due = false, now
		}
		list := running[p.Name]
		arrived := ph.arrived(list)
		at := h.dueAt(ph, h.interval(lim), arrived, len(list))
		if !at.After(now) {
			dp := duePool{name: p.Name, base: ph.base, prevUsage: ph.prev.CPU.UsageUsec, prevPressure: ph.prev.Pressure,
				running: list, arrived: arrived, ended: ended[p.Name]}
			dp.fresh, dp.gone = ph.changes(list)
			dp.isGone = goneSet(dp.gone)
			if ph.base && len(list) > 0 {
				dp.prevQueries = ph.prevQueries
				endedUsec, known := ph.endedSince(dp.ended, dp.gone)
				// Every query of the last read's has its counters
				// (keepQueries keeps those of the queries that run).
				counted := len(ph.prevQueries) == len(ph.running)
				dp.partial = known && counted && ph.prev.UsageKnown && (h.threads == nil || ph.ownRun != nil) &&
					now.Before(h.grid(ph.fullAt, FullInterval))
				dp.endedUsec = endedUsec
				if dp.partial {
					for _, q := range ph.hot {
						if dp.isGone == nil || !dp.isGone(q.name) {
							dp.hot = append(dp.hot, q.name)
						}
					}
				}
			}
			if dp.partial {
				dp.prevOwn, dp.slackUsec = ph.ownRun, uint64(h.interval(lim).Microseconds()/100)
				dp.keepThreads = !arrived && ph.pinned(h.interval(lim))
			}
			due = append(due, dp)
		} else {
			next = minTime(next, at)
		}
	}
	if len(h.pools) > len(d.Pools) {
		for name, ph := range h.pools {
			if ph.look != h.looks {
				delete(h.pools, name)
			}
		}
	}
	return due, next
}

// historyRead is what one round of sampling read, outside the history's
// lock: the due pools' counters, their queries' (the queries this daemon
// admitted: its own list, no walk of the tree), which queries are
// running, and the threads of the pools that ran.
type historyRead struct {
	stats   map[string]observe.Sample
	threads map[string]threadRead
	// grew are, of each pool that ran, its queries whose usage grew,
	// with their counters; partial the pools of which only the hot
	// queries were read.
	grew    map[string][]queryRead
	partial map[string]bool
}

// queryRead is a query's counters as a read found them.
type queryRead struct {
	name string
	st   observe.CPUStat
}

// threadRead is the run time (µs) of every thread of a pool outside its
// running queries (own) and of each query that ran (queries), and how
// many of them were runnable; own is nil when they could not be read.
type threadRead struct {
	own      map[int]uint64
	queries  map[string]map[int]uint64
	runnable int
	// ownKept is set when own is what the last read listed, passed in
	// (readThreads).
	ownKept bool
}

// read reads the due pools' CPU counters and, of each pool that ran
// since its last read (or whose segment starts), its CPU pressure, its
// running queries' usage, and the throttling and threads of those that
// ran. A pool whose usage did not grow ran no thread, and so neither did
// its queries (usage counts a cgroup's children; a throttled query runs
// again within the interval, which is at least a period), nor did its
// pressure grow (no thread of it waited to run: the scheduler starves
// none for a whole interval): those are what the last read found, and
// reading them again, every interval for as long as the pool sleeps,
// would cost the daemon CPU for each idle pool and each sleeping query.
// The same holds of each query of a pool that ran: one whose usage did
// not grow keeps its throttling and threads as last read. An idle pool
// costs one read of its CPU counters (one file on cgroup v2), which the
// throttling prediction takes too (Counters).
//
// Nor are the usage of every running query and the pool's own threads
// read each interval the pool ran: a pool's usage counts its own threads
// and all its queries', so when the hot queries (those whose usage grew
// at the last read) grew by what the pool did, to within 1% of an
// interval (what a sample's Ran counts a thread for), the others ran
// nothing worth counting and keep what they had, as do the pool's own
// threads (partial). A query that arrived since is read with the hot ones
// (all it used was run since), and what the queries that ended since ran
// is told by the daemon's reads at their ends (Ended, endedSince). The
// pool's other queries and threads are read once these do not account
// for it, and at least on the grid of FullInterval. A pool of one busy
// query and many sleepers so costs its counters and the busy query's, not
// every sleeper's, whether or not queries come and go beside them; one
// held at its cap, not even its busy query's threads (pinned).
func (h *Rolling) read(due []duePool, running map[string][]string) historyRead {
	names := make([]string, len(due))
	for i, p := range due {
		names[i] = p.name
	}
	r := historyRead{threads: map[string]threadRead{}, grew: map[string][]queryRead{}, partial: map[string]bool{}}
	var err error
	if r.stats, err = h.r.PoolCPUStats(names); err != nil {
		h.log.Warn("history: read the pools' counters", "err", err)
	}
	ran := map[string]bool{}
	var ranNames []string
	for _, p := range due {
		cur, read := r.stats[p.name]
		switch {
		case read && (!p.base || cur.CPU.UsageUsec != p.prevUsage):
			ran[p.name] = true
			ranNames = append(ranNames, p.name)
		case read:
			cur.Pressure = p.prevPressure // kept as last read
			r.stats[p.name] = cur
		}
	}
	if len(ranNames) > 0 {
		psi, err := h.r.PoolCPUPressure(ranNames)
		if err != nil {
			h.log.Warn("history: read the pools' CPU pressure", "err", err)
		}
		for _, name := range ranNames {
			cur := r.stats[name]
			cur.Pressure = psi[name]
			r.stats[name] = cur
		}
	}
	for _, p := range due {
		if _, ok := r.stats[p.name]; !ok {
			continue
		}
		names := running[p.name]
		if !ran[p.name] {
			continue // its queries are kept as last read (keepQueries)
		}
		rest := names
		var grew []queryRead
		var own map[int]uint64
		if p.partial {
			var grewUsec uint64
			var complete bool
			first := slices.Concat(p.hot, p.fresh)
			grew, grewUsec, complete = h.readQueries(p, first, nil)
			if pool := r.stats[p.name].CPU.UsageUsec; complete && pool >= p.prevUsage && pool-p.prevUsage <= grewUsec+p.endedUsec+p.slackUsec {
				rest, own = nil, p.prevOwn
				r.partial[p.name] = true
			} else {
				rest = slices.DeleteFunc(slices.Clone(names), func(q string) bool { return slices.Contains(first, q) })
			}
		}
		grew, _, _ = h.readQueries(p, rest, grew)
		r.grew[p.name] = grew
		if h.threads != nil && !(p.keepThreads && r.partial[p.name]) {
			ran := make([]string, len(grew))
			for i, q := range grew {
				ran[i] = q.name
			}
			r.threads[p.name] = h.threads(p.name, names, ran, own)
		}
	}
	return r
}

// readQueries reads the usage of the queries names of pool p, which ran,
// and the throttling of those whose usage grew since the last read (all at
// a segment's first, and a query not read before), appends those with
// their counters to grew, and returns them and what their usage grew by
// (µs): all a query not read before used (one fresh since the last read:
// it is listed before its cgroup is made), nothing for one whose usage is
// not known or went back. A query whose usage did not grow, or whose read
// failed, is left out: it keeps its last counters (keepQueries). complete
// is false when a read failed.
func (h *Rolling) readQueries(p duePool, names []string, grew []queryRead) (_ []queryRead, grewUsec uint64, complete bool) {
	complete = true
	for _, name := range names {
		usage, known, err := h.r.QueryUsage(p.name, name)
		if err != nil {
			complete = false
			continue
		}
		prevStat, seen := p.prevQueries[name]
		prev := prevStat.UsageUsec
		if p.base && known && seen && usage == prev {
			continue
		}
		if known && usage > prev {
			grewUsec += usage - prev
		}
		st, err := h.r.QueryThrottling(p.name, name)
		if err != nil {
			complete = false
			continue
		}
		st.UsageUsec = usage
		grew = append(grew, queryRead{name, st})
	}
	return grew, grewUsec, complete
}

// Read is a pool's counters as the history last read them, at At.
type Read struct {
	At     time.Time
	Sample observe.Sample
}

// Counters returns the counters the history last read of each of pools,
// and when, for a reader of the same counters each interval (the daemon's
// throttling prediction), so that the two share one read; a pool not read
// yet, or whose last read failed, is left out.
func (h *Rolling) Counters(pools []string) map[string]Read {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]Read, len(pools))
	for _, p := range pools {
		if ph := h.pools[p]; ph != nil && ph.base {
			out[p] = Read{At: ph.readAt, Sample: ph.prev}
		}
	}
	return out
}

// readThreads reads the threads of pool outside its running queries and
// those of the queries in ran, at most MaxThreads in all; unknown (own
// nil) when they cannot be read. A query that ended since it was listed
// has none. Where own is not nil, the threads outside the queries are not
// listed: they are own, as last read (they did not run).
func readThreads(tl QueryThreadLister, procRoot, pool string, running, ran []string, own map[int]uint64) threadRead {
	tr := threadRead{own: own, ownKept: own != nil, queries: make(map[string]map[int]uint64, len(ran))}
	if own == nil {
		except := make(map[string]bool, len(running))
		for _, q := range running {
			except[q] = true
		}
		tids, _, err := tl.ThreadsExcept(pool, except, MaxThreads)
		if err != nil {
			return threadRead{}
		}
		if tr.own, tr.runnable, err = threadTimes(procRoot, tids); err != nil {
			return threadRead{}
		}
	}
	left := MaxThreads - len(tr.own)
	for _, q := range ran {
		if left <= 0 {
			break
		}
		tids, _, err := tl.Threads(pool+"/"+q, left)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return threadRead{}
		}
		run, runnable, err := threadTimes(procRoot, tids)
		if err != nil {
			return threadRead{}
		}
		tr.queries[q], tr.runnable, left = run, tr.runnable+runnable, left-len(tids)
	}
	return tr
}

// threadsNow takes the threads tr read into the pool's (prevRun): the
// threads outside its queries, those of the queries that ran, and those
// of the queries that did not as last read (they did not run); those of
// the queries that ended (isGone, nil when none did) are forgotten. It
// returns how many threads the pool has and how many of those read ran
// since the last read (ranSince). Where tr kept the threads outside the
// queries as last listed (threadRead.ownKept), only the parts read are
// taken in, in place: a pool of many sleeping queries costs what its
// queries that ran do, not a new map of all its threads at each read.
func (ph *poolHistory) threadsNow(tr threadRead, isGone func(string) bool, intervalUsec int64) (threads, ran int) {
	if !tr.ownKept || ph.prevRun == nil {
		queries := tr.queries
		for q, qrun := range ph.queryRun {
			if _, read := queries[q]; !read && (isGone == nil || !isGone(q)) {
				queries[q] = qrun
			}
		}
		run := maps.Clone(tr.own)
		for _, qrun := range queries {
			maps.Copy(run, qrun)
		}
		ran = ranSince(ph.prevRun, run, intervalUsec)
		ph.prevRun, ph.queryRun, ph.ownRun = run, queries, tr.own
		return len(run), ran
	}
	if isGone != nil {
		for q, qrun := range ph.queryRun {
			if isGone(q) {
				for tid := range qrun {
					delete(ph.prevRun, tid)
				}
				delete(ph.queryRun, q)
			}
		}
	}
	for q, qrun := range tr.queries {
		ran += ranSince(ph.prevRun, qrun, intervalUsec)
		for tid := range ph.queryRun[q] {
			if _, ok := qrun[tid]; !ok {
				delete(ph.prevRun, tid)
			}
		}
		maps.Copy(ph.prevRun, qrun)
		ph.queryRun[q] = qrun
	}
	return len(ph.prevRun), ran
}

// store adds what r read to the history of the due pools at now and
// returns when the next pool is due (next, or sooner).
func (h *Rolling) store(due []duePool, r historyRead, now, next time.Time) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, d := range due {
		ph := h.pools[d.name]
		if ph == nil {
			continue
		}
		seg := ph.last()
		iv := time.Duration(seg.intervalUsec) * time.Microsecond
		cur, ok := r.stats[d.name]
		if !ok {
			// Not read: the next read is a new baseline.
			ph.base, ph.due = false, h.grid(now, iv)
			next = minTime(next, ph.due)
			continue
		}
		isGone := d.isGone
		tr, threadsRead := r.threads[d.name]
		var threads, ran int
		switch {
		case tr.own != nil:
			threads, ran = ph.threadsNow(tr, isGone, seg.intervalUsec)
		case threadsRead:
			ph.prevRun, ph.queryRun, ph.ownRun = nil, nil, nil
		}
		pinned := false
		if ph.base {
			missed := max(int(now.Sub(ph.due)/iv), 0)
			n := missed + 1
			if ph.quiet && d.arrived {
				// A quiet pool to which a query came since the last
				// look: what it ran is the last interval's, the
				// intervals it was not read in were idle.
				seg.n += uint32(missed)
				n = 1
			}
			span := int64(n) * seg.intervalUsec
			p := ph.sample(cur, r.grew[d.name], span, seg.limit.PeriodUsec, h.cfg.CPUs)
			switch {
			case tr.own != nil:
				ph.countThreads(&p, threads, ran, tr.runnable, span)
			case d.keepThreads && r.partial[d.name]:
				p.Threads, p.Ran, p.Runnable = ph.counts[0], ph.counts[1], ph.counts[2]
			}
			ph.counts = [3]int{p.Threads, p.Ran, p.Runnable}
			h.add(seg, p, n)
			pinned = pinnedSample(p, span, seg.limit.PeriodUsec)
			ph.due = ph.due.Add(time.Duration(missed+1) * iv)
		} else {
			// The first read of a segment is its baseline: the
			// segment's intervals start here.
			seg.start, ph.due = now, h.grid(now, iv)
		}
		if !r.partial[d.name] {
			ph.fullAt = now
		}
		ph.keepQueries(r.grew[d.name], d.gone)
		if grew, ran := r.grew[d.name]; ran {
			ph.hot = grew
		} else {
			// The pool ran nothing since its last read, and so
			// neither did a query that came since: it is read with
			// the hot ones at the next read that finds the pool
			// ran, as are those hot now that still run.
			if isGone != nil {
				ph.hot = slices.DeleteFunc(ph.hot, func(q queryRead) bool { return isGone(q.name) })
			}
			for _, q := range d.fresh {
				if _, ok := ph.prevQueries[q]; !ok {
					ph.prevQueries[q] = observe.CPUStat{}
					ph.hot = append(ph.hot, queryRead{name: q})
				}
			}
		}
		ph.quiet = ph.base && cur.CPU.UsageUsec == ph.prev.CPU.UsageUsec
		if !ph.quiet || d.arrived {
			ph.idleSince = now
		}
		if pinned {
			if ph.pinnedReads == 0 {
				ph.pinnedSince = now
			}
			ph.pinnedReads++
		} else {
			ph.pinnedReads = 0
		}
		if !sameList(d.running, ph.running) {
			ph.running = d.running
			if ph.seen != nil {
				for _, q := range d.fresh {
					ph.seen[q] = ph.stamp
				}
				for _, q := range d.gone {
					delete(ph.seen, q)
				}
			}
		}
		ph.prev, ph.base, ph.readAt, ph.ended = cur, true, now, d.ended
		h.trim(ph, now)
		next = minTime(next, h.dueAt(ph, iv, false, len(ph.running)))
	}
	return next
}

// keepQueries makes the query counters read the baseline of the pool's
// next read, in place. A query that runs but whose cgroup was not read
// this time keeps its last counters; those that ended (gone) are
// forgotten.
func (ph *poolHistory) keepQueries(read []queryRead, gone []string) {
	if ph.prevQueries == nil {
		ph.prevQueries = make(map[string]observe.CPUStat, len(read))
	}
	for _, q := range read {
		ph.prevQueries[q.name] = q.st
	}
	for _, q := range gone {
		delete(ph.prevQueries, q)
	}
}

// goneSet says whether a query is one of gone: nil when none is.
func goneSet(gone []string) func(string) bool {
	switch len(gone) {
	case 0:
		return nil
	case 1:
		return func(q string) bool { return q == gone[0] }
	}
	set := make(map[string]bool, len(gone))
	for _, q := range gone {
		set[q] = true
	}
	return func(q string) bool { return set[q] }
}

// sameList reports whether a and b are the very same list.
func sameList(a, b []string) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// countThreads sets p's thread counts from the threads read at its end
// (threadsNow): Ran is the threads whose run time grew by 1% of an
// interval since the last read (ran), and at least the CPUs' worth of the
// usage (no thread runs more than the span), so that threads that
// started and ended between two reads still count; Threads the pool's
// threads, or Ran if more.
func (ph *poolHistory) countThreads(p *Sample, threads, ran, runnable int, spanUsec int64) {
	ran = max(ran, int((p.UsageUsec+uint64(spanUsec)-1)/uint64(spanUsec)))
	p.Ran = min(ran, MaxThreads)
	p.Threads = min(max(threads, p.Ran), MaxThreads)
	p.Runnable = min(runnable, p.Threads)
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// arrived reports whether a query of running did not run at the pool's
// last read.
func (ph *poolHistory) arrived(running []string) bool {
	if sameList(running, ph.running) {
		return false
	}
	ph.makeSeen()
	for _, q := range running {
		if _, ok := ph.seen[q]; !ok {
			return true
		}
	}
	return false
}

// makeSeen makes the set of the queries of the pool's last read, once.
func (ph *poolHistory) makeSeen() {
	if ph.seen == nil {
		ph.seen = make(map[string]uint32, len(ph.running))
		for _, q := range ph.running {
			ph.seen[q] = 0
		}
	}
}

// changes are the queries of running that were not listed at the pool's
// last read (fresh) and those listed then that no longer run (gone). The
// set of the last read's queries is not changed but for the marks (store
// keeps it): a pool of many queries of which a few come and go costs a
// look up for each and no new set.
func (ph *poolHistory) changes(running []string) (fresh, gone []string) {
	if sameList(running, ph.running) {
		return nil, nil
	}
	ph.makeSeen()
	ph.stamp++
	for _, q := range running {
		if _, ok := ph.seen[q]; ok {
			ph.seen[q] = ph.stamp
		} else {
			fresh = append(fresh, q)
		}
	}
	if len(running)-len(fresh) < len(ph.running) {
		for q, at := range ph.seen {
			if at != ph.stamp {
				gone = append(gone, q)
			}
		}
	}
	return fresh, gone
}

// endedSince is what the pool's queries that ended since its last read
// ran since then, µs: what every query that ended since used in all (e
// against the last read's), less what the last read found the gone ones,
// those listed then, had used (a query that came and went between two
// reads ran all it used since the first). known is false when that
// cannot be told: an ended query's usage was not read, or a gone one has
// no counters from the last read.
func (ph *poolHistory) endedSince(e Ended, gone []string) (usec uint64, known bool) {
	if e.Unread != ph.ended.Unread || e.Usec < ph.ended.Usec {
		return 0, false
	}
	if e.Usec == ph.ended.Usec {
		return 0, true // those that ended used nothing since
	}
	var before uint64
	for _, q := range gone {
		st, ok := ph.prevQueries[q]
		if !ok {
			return 0, false
		}
		before += st.UsageUsec
	}
	// A sum below what they had used is an ended query's usage read
	// short: nothing is then counted for them, and the pool's
	// other queries are read (read).
	return (e.Usec - ph.ended.Usec) - min(before, e.Usec-ph.ended.Usec), true
}

func (ph *poolHistory) last() *segment {
	if len(ph.segs) == 0 {
		return nil
	}
	return ph.segs[len(ph.segs)-1]
}

// sample is what the pool's counters and its queries' grew by since the
// last read: throttling at both levels (docs/md, Levels).
//
// A query cgroup first seen counts with all its counters; what one query
// adds is held to what spanUsec can hold (periods of periodUsec, and
// throttled time on cpus CPUs), so that a query whose earlier counters
// were missed cannot make an interval impossible.
func (ph *poolHistory) sample(cur observe.Sample, queries []queryRead, spanUsec, periodUsec int64, cpus int) Sample {
	s := grown(ph.prev, cur)
	for _, q := range queries {
		qd := q.st.Sub(ph.prevQueries[q.name]) // a new query: all it ran
		s.QueryNrThrottled = max(s.QueryNrThrottled, min(qd.NrThrottled, uint64(spanUsec/periodUsec+1)))
		s.QueryThrottledUsec += min(qd.ThrottledUsec, uint64(spanUsec)*uint64(cpus))
	}
	s.QueryThrottledUsec = min(s.QueryThrottledUsec, uint64(spanUsec+periodUsec)*uint64(cpus))
	return s
}

// add appends s, which covers n intervals, to seg: shared evenly among
// them (Spread); idle shares are not stored.
func (h *Rolling) add(seg *segment, s Sample, n int) {
	if idle(s) { // so is each share
		seg.n += uint32(max(n, 1))
		return
	}
	for i := range max(n, 1) {
		if p := share(s, n, i); !idle(p) {
			seg.samples = append(seg.samples, compact(seg.n, h.clamp(seg, p)))
		}
		seg.n++
	}
}

// clamp holds p to what a trace's interval can hold (Trace's
// Validate): a host or VM that stalls books a long throttle, or many
// periods, in one read, which the trace would refuse.
func (h *Rolling) clamp(seg *segment, p Sample) Sample {
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
func idle(p Sample) bool {
	q := p
	q.PressureSomeUsec = nil
	return q == Sample{Threads: -1, Ran: -1, Runnable: -1} && (p.PressureSomeUsec == nil || *p.PressureSomeUsec == 0)
}

func sat32(v uint64) uint32 { return uint32(min(v, math.MaxUint32)) }
func sat16(v uint64) uint16 { return uint16(min(v, math.MaxUint16)) }

func compact(at uint32, p Sample) histSample {
	c := histSample{at: at, usageUsec: sat32(p.UsageUsec), throttledUsec: sat32(p.ThrottledUsec), burstUsec: sat32(p.BurstUsec),
		queryThrUsec: sat32(p.QueryThrottledUsec), pressureUsec: math.MaxUint32,
		nrPeriods: sat16(p.NrPeriods), nrThrottled: sat16(p.NrThrottled), nrBursts: sat16(p.NrBursts), queryNrThrottled: sat16(p.QueryNrThrottled)}
	if p.PressureSomeUsec != nil {
		c.pressureUsec = sat32(min(*p.PressureSomeUsec, math.MaxUint32-1))
	}
	c.threads, c.ran, c.runnable = threadCount(p.Threads), threadCount(p.Ran), threadCount(p.Runnable)
	return c
}

// threadCount stores a thread count (-1 unknown, at most
// MaxThreads); count reads it back.
func threadCount(n int) uint16 {
	if n < 0 {
		return unknownThreads
	}
	return uint16(min(n, MaxThreads))
}

func count(n uint16) int {
	if n == unknownThreads {
		return -1
	}
	return int(n)
}

// trim drops what is older than the window: whole segments that ended
// before it, and the first intervals of the oldest one left.
func (h *Rolling) trim(ph *poolHistory, now time.Time) {
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
func (h *Rolling) traces(pool string, since time.Duration, now time.Time) (ts []*Trace, ok bool) {
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
func (h *Rolling) trace(pool string, seg *segment, from time.Time) *Trace {
	first := uint32(0)
	if from.After(seg.start) {
		first = uint32((from.Sub(seg.start).Microseconds() + seg.intervalUsec - 1) / seg.intervalUsec)
	}
	if first >= seg.n {
		return nil
	}
	n := min(seg.n-first, MaxSamples)
	first = seg.n - n
	t := &Trace{Format: TraceFormat, Version: TraceVersion, Pool: pool, Cgroup: h.cfg.Cgroup,
		CPUs: h.cfg.CPUs, NodeCPUs: seg.nodeCPUs, SliceUsec: h.cfg.SliceUsec, TickUsec: h.cfg.TickUsec,
		Limit: seg.limit, QueryLimit: &seg.query, IntervalUsec: seg.intervalUsec, Samples: make([]Sample, n),
		StartUnixUsec: seg.timeOf(first).UnixMicro()}
	psi := h.cfg.Cgroup == "v2"
	for i := range t.Samples {
		t.Samples[i] = Sample{Threads: -1, Ran: -1, Runnable: -1}
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
		p.Threads, p.Ran, p.Runnable = count(c.threads), count(c.ran), count(c.runnable)
		if c.pressureUsec != math.MaxUint32 {
			v := uint64(c.pressureUsec)
			p.PressureSomeUsec = &v
		} else {
			p.PressureSomeUsec = nil
		}
	}
	return t
}

// replyWait is how long a request for a pool's history waits for the
// reply of its uid being written before it (one per uid at a time)
// before it is refused.
const replyWait = 10 * time.Second

// Reply answers OpHistory for uid: the pool's traces. A reply holds up to
// MaxSamples intervals (about 11 MB of JSON), so only one per uid is
// built and written at a time; release, which the caller calls once the
// reply is sent, lets the uid's next one be. Another uid's reply never
// waits for it.
func (h *Rolling) Reply(uid uint32, req protocol.Request) (reply protocol.AdminReply, release func()) {
	refuse := func(code, format string, args ...any) (protocol.AdminReply, func()) {
		return protocol.AdminReply{Type: protocol.ReplyError, Code: code, Error: fmt.Sprintf(format, args...)}, func() {}
	}
	switch {
	case req.SinceUsec < 0:
		return refuse(protocol.CodeBadRequest, "since %d µs: accepted 0 (the whole window) or more", req.SinceUsec)
	case req.Pool == "":
		return refuse(protocol.CodeBadRequest, "no pool named (accepted: a pool of poolagent pools; advise --all asks for each in turn)")
	}
	release, ok := h.replying.take(uid, replyWait)
	if !ok {
		return refuse(protocol.CodeLimit, "another history reply of uid %d has been written for %s; try again (one per user is written at a time)", uid, replyWait)
	}
	since := time.Duration(min(req.SinceUsec, int64(MaxWindow/time.Microsecond))) * time.Microsecond
	ts, ok := h.traces(req.Pool, since, time.Now())
	if !ok {
		release()
		return refuse(protocol.CodeUnknownPool, "no pool %s in the daemon's history (accepted: a pool of poolagent pools)", Quoted(req.Pool))
	}
	reply = protocol.AdminReply{Type: protocol.ReplyDone}
	for _, t := range ts {
		b, err := json.Marshal(t)
		if err != nil {
			release()
			return refuse(protocol.CodeInternal, "history of pool %s: %v", req.Pool, err)
		}
		reply.Traces = append(reply.Traces, b)
	}
	return reply, release
}
