package simulate

import (
	"fmt"
	"math"
	"slices"
	"sync"
)

// Kernel constants of CFS bandwidth control (kernel/sched/fair.c, 6.8),
// in microseconds. They are compile-time constants in the kernel, so they
// are constants here too; only the slice is a sysctl (KernelParams).
const (
	// minCfsRqRuntimeUsec is min_cfs_rq_runtime: a per-CPU runqueue that
	// goes idle keeps this much of its silo and returns the rest.
	minCfsRqRuntimeUsec = 1000
	// slackPeriodUsec is cfs_bandwidth_slack_period: returned runtime is
	// handed to throttled runqueues this long after it came back.
	slackPeriodUsec = 5000
	// minBandwidthExpirationUsec is min_bandwidth_expiration: no slack is
	// handed out when the period ends sooner than this.
	minBandwidthExpirationUsec = 2000
	// unthrottleGrantUsec is the 1 ns beyond its debt that
	// distribute_cfs_runtime gives a throttled runqueue.
	unthrottleGrantUsec = 0.001
	// nice0Weight is the load weight of a nice-0 thread, and of a group
	// whose cpu.weight is 100 (scale_load(sched_prio_to_weight[20])).
	nice0Weight = 1024
	// doneEpsUsec absorbs float rounding when a task's need reaches zero.
	doneEpsUsec = 1e-6
)

// kernelInput is what the engine simulates: groups in a tree, tasks in
// groups. Times are microseconds.
type kernelInput struct {
	ncpu   int
	groups []kernelGroupSpec
	tasks  []kernelTaskSpec
}

// kernelGroupSpec is one cgroup. Parents come before their children.
type kernelGroupSpec struct {
	name   string // Group.Name, for messages
	parent int    // index in kernelInput.groups, -1 for a top-level group
	// quotaUsec is cpu.max's QUOTA; <= 0 means "max" (no limit).
	quotaUsec  float64
	periodUsec float64
	burstUsec  float64
	// weight is cpu.weight (1..10000, 100 = a nice-0 thread).
	weight float64
	// phaseUsec places the period timer: its expiries are at
	// phaseUsec + k*periodUsec.
	phaseUsec float64
}

// kernelTaskSpec is one worker process: threads that together burn
// needUsec of CPU, then exit.
type kernelTaskSpec struct {
	name       string
	group      int
	arriveUsec float64
	needUsec   float64
	threads    int
	cpus       []int // allowed CPUs; nil = all
}

// kernelOutput is the engine's raw result.
type kernelOutput struct {
	groups  []groupAccount
	tasks   []taskAccount
	endUsec float64
}

// groupAccount is one group's counters as the kernel keeps them
// (struct cfs_bandwidth's statistics plus cpuacct usage).
type groupAccount struct {
	usageUsec     float64
	nrPeriods     int64
	nrThrottled   int64
	throttledUsec float64
	nrBursts      int64
	burstUsec     float64
	windows       []windowAccount
}

// windowAccount is a group's activity in one timeline window.
type windowAccount struct {
	ranUsec float64
	// throttledUsec is credited when a runqueue is unthrottled, as the
	// kernel adds to throttled_time, so it is what sampling cpu.stat at
	// the window's edges would show.
	throttledUsec float64
	// throttledCPUs counts the per-CPU runqueues that were throttled at
	// some moment of the window.
	throttledCPUs int
}

// taskAccount is when one task finished.
type taskAccount struct {
	doneUsec float64
}

// rq is a group's runqueue on one CPU (struct cfs_rq's bandwidth part).
type rq struct {
	silo      float64 // runtime_remaining
	throttled bool
	clockOn   bool    // throttled_clock is running
	since     float64 // throttled_clock
	busy      bool    // nr_running > 0, as of the last refresh
	windowHit int     // last window index counted in throttledCPUs, +1

	// CFS wake-up credit (KernelParams.WakeCreditUsec), vruntime µs.
	behind float64 // how far the level's min_vruntime moved on while throttled
	credit float64 // head start left: the group runs alone at its level
	crate  float64 // vruntime µs per µs the group runs at, as shared last
	childV float64 // vruntime µs per µs of the level below the group here
}

// group is one cgroup's state (struct cfs_bandwidth).
type group struct {
	spec       kernelGroupSpec
	limited    bool
	depth      int
	pool       float64 // runtime
	snap       float64 // runtime_snap
	active     bool    // period_active
	idle       bool
	nextExpiry float64
	slackAt    float64 // slack timer expiry; < 0 when not started
	throttled  []int   // throttled_cfs_rq: CPUs in throttle order
	rqs        []rq    // per CPU
	acct       groupAccount
	timed      bool // in engine.timed

	// Scratch counts of computeRates, 0 between calls.
	runnable int // runnable threads below the group, all CPUs
	here     int // runnable threads below the group on the CPU being shared
	seen     int // share's generation that last listed the group
}

// thread is one runnable or waiting thread of a task.
type thread struct {
	task int
	cpu  int
	rate float64 // share of its CPU, as of the last rate computation
}

// task is a worker process in flight.
type task struct {
	spec    kernelTaskSpec
	levels  []int // its group and every ancestor, leaf first
	left    float64
	threads []int // indices in engine.threads; empty before arrival
	arrived bool
	done    bool
	doneAt  float64
}

// engine is the kernel-faithful event loop.
//
// Its cost per event follows what is in flight, not what the run holds:
// it keeps the threads, tasks and timers in flight in lists of their own,
// and remembers what changed since the runqueues were last settled and
// the shares last computed. An instant at which no thread arrived, left,
// moved or was throttled or unthrottled leaves every runqueue's busy
// state, every placement and every share as they were, so settle and
// computeRates skip the work whose result would be the same.
type engine struct {
	p       KernelParams
	ncpu    int
	now     float64
	groups  []group
	tasks   []task
	threads []thread
	window  int // index of the current timeline window
	nextArr int // tasks sorted by arrival: next to arrive
	order   []int
	left    int // tasks not done

	live     []int     // threads of tasks in flight, in index order
	running  []int     // tasks in flight (arrived, not done), in index order
	timed    []int     // groups whose period or slack timer runs, in index order
	busy     [][]int   // per CPU: groups whose runqueue there is busy
	dirty    []bool    // per CPU: its threads or their levels' throttling changed since it was settled
	epoch    int       // counts changes to threads' placement and throttling
	settled  int       // epoch at which idleBalance last found nothing to move, or -1
	shared   int       // epoch for which the rates were computed, or -1
	gen      int       // share's generation counter
	cpu      int       // share: the CPU being shared
	rootV    []float64 // per CPU: vruntime µs per µs of the top level
	credited []int     // runqueues with a wake-up credit left: gi*ncpu+cpu

	// Buffers reused from one event to the next.
	onCPU        [][]int // live threads per CPU, in index order (bucketLive)
	due          []int   // fire: groups or tasks due now
	distributing []int   // distribute: the throttled runqueues' CPUs
	levels       []int   // tick, settleCPU: groups to process on one CPU
	counted      []int   // computeRates: groups with a runnable count
	ths          []int   // computeRates: runnable threads of one CPU
	perCPU       []int   // leastLoaded, idleBalance: counts per CPU
	ents         []entity
	subs         []int // share: threads below each entity, a stack like ents
	// noWindow is what windowOf returns without a timeline: an account
	// nothing reads.
	noWindow windowAccount
}

// entity is what share divides a CPU among: a group or a thread.
type entity struct {
	group  int // -1 for a thread
	thread int
	weight float64
}

// runKernelInput simulates in and hands the counters to read, which
// must not keep the groups' windows: those lists are the engine's, and
// the engine serves the next run. It assumes in and p were validated.
func runKernelInput(in kernelInput, p KernelParams, read func(kernelOutput)) error {
	e := newEngine(in, p)
	defer engines.Put(e)
	limit := e.timeLimit()
	fired := false
	for !e.finished() {
		next := e.nextEvent()
		if next > limit {
			return fmt.Errorf("simulate: kernel model did not finish by %.0f µs: %w", limit, ErrInvalidInput)
		}
		if fired && next <= e.now && !e.endUnresolved() {
			return fmt.Errorf("simulate: kernel model stopped making progress at %.3f µs: %w", e.now, ErrInvalidInput)
		}
		e.advance(next)
		e.fire()
		fired = true
	}
	read(e.output())
	return nil
}

// engines keeps engines between runs, so that one run's lists serve the
// next instead of being allocated again: a replay makes thousands of
// short runs.
var engines = sync.Pool{New: func() any { return new(engine) }}

// endUnresolved finishes, at the next fire, every running task whose
// completion is due sooner than the clock can tell from now: need left
// above doneEpsUsec but below what its threads run in one step of a
// float64 at now (past about 2^31 µs, 36 minutes, a step is 4.8e-7 µs).
// Such a task would keep the next event at now for ever. It reports
// whether there was one.
func (e *engine) endUnresolved() bool {
	found := false
	for _, i := range e.running {
		t := &e.tasks[i]
		if rate := e.taskRate(t); rate > 0 && e.now+t.left/rate <= e.now {
			t.left, found = 0, true
		}
	}
	return found
}

// taskRate is how fast t's need goes down now: the sum of its threads'
// rates, in CPU µs per µs.
func (e *engine) taskRate(t *task) float64 {
	rate := 0.0
	for _, th := range t.threads {
		rate += e.threads[th].rate
	}
	return rate
}

// newEngine is an engine at time 0 of in, from the pool: every field as
// a new engine has it, with the lists of its last run emptied for reuse.
func newEngine(in kernelInput, p KernelParams) *engine {
	e := engines.Get().(*engine)
	old := *e
	*e = engine{p: p, ncpu: in.ncpu, settled: -1, shared: -1,
		threads: old.threads[:0], order: old.order[:0], live: old.live[:0], running: old.running[:0], timed: old.timed[:0],
		due: old.due[:0], levels: old.levels[:0], counted: old.counted[:0], ths: old.ths[:0], perCPU: old.perCPU[:0],
		ents: old.ents[:0], subs: old.subs[:0]}
	e.busy = emptied(old.busy, in.ncpu)
	e.onCPU = emptied(old.onCPU, in.ncpu)
	e.dirty = zeroed(old.dirty, in.ncpu)
	e.rootV = zeroed(old.rootV, in.ncpu)
	e.credited = old.credited[:0]
	e.groups = slices.Grow(old.groups[:0], len(in.groups))[:len(in.groups)]
	for i, s := range in.groups {
		g := &e.groups[i]
		*g = group{spec: s, limited: s.quotaUsec > 0, rqs: zeroed(g.rqs, in.ncpu), slackAt: -1,
			throttled: g.throttled[:0], acct: groupAccount{windows: g.acct.windows[:0]}}
		if s.parent >= 0 {
			g.depth = e.groups[s.parent].depth + 1
		}
		// Writing the limit refilled the pool, and the two expiries
		// before the timer went idle refilled it again, each capped at
		// quota+burst (tg_set_cfs_bandwidth, do_sched_cfs_period_timer).
		g.pool = min(3*s.quotaUsec, s.quotaUsec+s.burstUsec)
		g.snap = g.pool
		g.idle = true
	}
	e.tasks = slices.Grow(old.tasks[:0], len(in.tasks))[:len(in.tasks)]
	for i, s := range in.tasks {
		t := &e.tasks[i]
		*t = task{spec: s, left: s.needUsec, levels: t.levels[:0], threads: t.threads[:0]}
		for g := s.group; g >= 0; g = in.groups[g].parent {
			t.levels = append(t.levels, g)
		}
		e.order = append(e.order, i)
	}
	slices.SortStableFunc(e.order, func(a, b int) int {
		return cmpFloat(e.tasks[a].spec.arriveUsec, e.tasks[b].spec.arriveUsec)
	})
	e.left = len(in.tasks)
	return e
}

// zeroed is s as n zero values, reusing its array when it is long enough.
func zeroed[T any](s []T, n int) []T {
	s = slices.Grow(s[:0], n)[:n]
	clear(s)
	return s
}

// emptied is s as n empty lists, reusing s and each list's array.
func emptied(s [][]int, n int) [][]int {
	s = slices.Grow(s[:0], n)[:n]
	for i := range s {
		s[i] = s[i][:0]
	}
	return s
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// timeLimit bounds the simulated time: every task gets at least
// min(quota)/period of one CPU once it has arrived, so the run ends well
// before the last arrival plus total need divided by the smallest share,
// plus slack for the timers to go idle.
func (e *engine) timeLimit() float64 {
	share, need, last, period := 1.0, 0.0, 0.0, 0.0
	for _, g := range e.groups {
		if g.limited {
			share = min(share, g.spec.quotaUsec/g.spec.periodUsec/float64(e.ncpu))
			period = max(period, g.spec.periodUsec)
		}
	}
	for _, t := range e.tasks {
		need += t.spec.needUsec
		last = max(last, t.spec.arriveUsec)
	}
	return last + 2*need/share + 10*period + 10*float64(e.p.TickUsec) + 1e6
}

func (e *engine) finished() bool {
	return e.left == 0 && len(e.timed) == 0
}

// retime keeps group gi's place in e.timed in step with its timers.
func (e *engine) retime(gi int) {
	g := &e.groups[gi]
	on := g.active || g.slackAt >= 0
	if on == g.timed {
		return
	}
	g.timed = on
	e.timed = setSorted(e.timed, gi, on)
}

// setSorted adds v to or removes it from the ascending list s.
func setSorted(s []int, v int, in bool) []int {
	i, found := slices.BinarySearch(s, v)
	switch {
	case in && !found:
		return slices.Insert(s, i, v)
	case !in && found:
		return slices.Delete(s, i, i+1)
	}
	return s
}

// touch records that a thread arrived on, left or moved to or from cpu,
// or that a runqueue there was throttled or unthrottled.
func (e *engine) touch(cpu int) {
	e.dirty[cpu] = true
	e.epoch++
}

// nextEvent returns the time of the next event after now: an arrival, a
// completion, a tick while a CPU is busy, a timer, or a window edge.
func (e *engine) nextEvent() float64 {
	next := math.Inf(1)
	if e.nextArr < len(e.order) {
		next = max(e.now, e.tasks[e.order[e.nextArr]].spec.arriveUsec)
	}
	busy := false
	for _, i := range e.running {
		t := &e.tasks[i]
		if rate := e.taskRate(t); rate > 0 {
			busy = true
			next = min(next, e.now+t.left/rate)
		}
	}
	if busy {
		next = min(next, e.nextTick())
	}
	for _, k := range e.credited {
		if r := e.creditRQ(k); r.crate > 0 {
			next = min(next, e.now+r.credit/r.crate)
		}
	}
	for _, i := range e.timed {
		g := &e.groups[i]
		if g.active {
			next = min(next, g.nextExpiry)
		}
		if g.slackAt >= 0 {
			next = min(next, g.slackAt)
		}
	}
	if w := float64(e.p.WindowUsec); w > 0 && !math.IsInf(next, 1) {
		next = min(next, float64(e.window+1)*w)
	}
	return next
}

// nextTick is the first scheduler tick after now.
func (e *engine) nextTick() float64 {
	tick, phase := float64(e.p.TickUsec), float64(e.p.TickPhaseUsec)
	k := math.Floor((e.now-phase)/tick) + 1
	return phase + k*tick
}

// onGrid reports whether time t is (within rounding) on the grid
// phaseUsec + k*stepUsec: whether t-phaseUsec is less than 1e-6 above or
// below a multiple of stepUsec (stepUsec >= 1).
//
// It is onGridMod, the same test with the floating-point remainder,
// without math.Mod's cost: for x = t-phaseUsec >= 0 the remainder is
// (floor(x) mod stepUsec) + (x - floor(x)), both parts exact, so it is
// under 1e-6 only when the integer part is 0 and the fraction is, and
// within 1e-6 below stepUsec only when the integer part is stepUsec-1
// and 1 minus the fraction is (stepUsec minus the remainder is then
// exactly 1 minus the fraction). Before the grid's first point, or
// beyond 2^53 µs where floor(x) no longer fits the arithmetic, it asks
// onGridMod.
func onGrid(t float64, phaseUsec, stepUsec int64) bool {
	x := t - float64(phaseUsec)
	if x < 0 || x >= 1<<53 {
		return onGridMod(t, float64(phaseUsec), float64(stepUsec))
	}
	whole := math.Floor(x)
	frac := x - whole
	r := int64(whole) % stepUsec
	return (r == 0 && frac < 1e-6) || (r == stepUsec-1 && 1-frac < 1e-6)
}

// onGridMod is onGrid with math.Mod.
func onGridMod(t, phase, step float64) bool {
	r := math.Mod(t-phase, step)
	if r < 0 {
		r += step
	}
	return r < 1e-6 || step-r < 1e-6
}

// advance runs every CPU at its current rates until time t: threads burn
// their tasks' need, every level's silo and usage are charged.
func (e *engine) advance(t float64) {
	dt := t - e.now
	if dt > 0 {
		for _, i := range e.live {
			th := &e.threads[i]
			if th.rate == 0 {
				continue
			}
			ran := th.rate * dt
			tk := &e.tasks[th.task]
			tk.left -= ran
			for _, gi := range tk.levels {
				g := &e.groups[gi]
				g.acct.usageUsec += ran
				e.windowOf(g).ranUsec += ran
				if g.limited {
					g.rqs[th.cpu].silo -= ran
				}
			}
		}
	}
	if dt > 0 && e.p.WakeCreditUsec > 0 {
		e.advanceCredit(dt)
	}
	e.now = t
	if w := float64(e.p.WindowUsec); w > 0 {
		for e.now >= float64(e.window+1)*w-1e-6 {
			e.window++
		}
	}
}

// windowOf returns g's account for the current window, growing the list.
func (e *engine) windowOf(g *group) *windowAccount {
	if e.p.WindowUsec <= 0 {
		e.noWindow = windowAccount{}
		return &e.noWindow
	}
	for len(g.acct.windows) <= e.window {
		g.acct.windows = append(g.acct.windows, windowAccount{})
	}
	return &g.acct.windows[e.window]
}

// fire handles every event due at now, in the kernel's order within one
// instant: timers (hrtimer softirq), completions, arrivals, then the tick.
// A handler touches only its own group or task, so each kind of event is
// collected first and handled in index order.
func (e *engine) fire() {
	due := e.due[:0]
	for _, i := range e.timed {
		g := &e.groups[i]
		if g.active && g.nextExpiry <= e.now+1e-6 {
			due = append(due, i)
		}
	}
	for _, i := range due {
		e.periodTimer(i)
	}
	due = due[:0]
	for _, i := range e.timed {
		g := &e.groups[i]
		if g.slackAt >= 0 && g.slackAt <= e.now+1e-6 {
			due = append(due, i)
		}
	}
	for _, i := range due {
		e.slackTimer(i)
	}
	due = due[:0]
	for _, i := range e.running {
		if e.tasks[i].left <= doneEpsUsec {
			due = append(due, i)
		}
	}
	for _, i := range due {
		e.complete(i)
	}
	e.due = due[:0]
	for e.nextArr < len(e.order) && e.tasks[e.order[e.nextArr]].spec.arriveUsec <= e.now+1e-6 {
		e.arrive(e.order[e.nextArr])
		e.nextArr++
	}
	if onGrid(e.now, e.p.TickPhaseUsec, e.p.TickUsec) {
		e.tick()
	}
	e.settle()
}

// periodTimer is one expiry of group gi's period timer
// (sched_cfs_period_timer → do_sched_cfs_period_timer).
func (e *engine) periodTimer(gi int) {
	g := &e.groups[gi]
	throttled := len(g.throttled) > 0
	g.acct.nrPeriods++
	e.refill(g)
	if g.idle && !throttled {
		g.active = false // out_deactivate: HRTIMER_NORESTART
		e.retime(gi)
		return
	}
	g.nextExpiry += g.spec.periodUsec
	if !throttled {
		g.idle = true // mark as potentially idle for the upcoming period
		return
	}
	g.acct.nrThrottled++
	for throttled && g.pool > 0 {
		throttled = e.distribute(gi)
	}
	g.idle = false
}

// refill is __refill_cfs_bandwidth_runtime: add a quota, count a burst if
// more than a quota was drawn since the last refill, cap at quota+burst.
func (e *engine) refill(g *group) {
	g.pool += g.spec.quotaUsec
	if d := g.snap - g.pool; d > 1e-6 {
		g.acct.burstUsec += d
		g.acct.nrBursts++
	}
	g.pool = min(g.pool, g.spec.quotaUsec+g.spec.burstUsec)
	g.snap = g.pool
}

// distribute is distribute_cfs_runtime: pay each throttled runqueue's
// debt plus 1 ns, in throttle order, unthrottling those it covers. It
// reports whether a runqueue is still throttled.
func (e *engine) distribute(gi int) bool {
	g := &e.groups[gi]
	still := false
	// unthrottle takes runqueues off g.throttled: walk a copy.
	e.distributing = append(e.distributing[:0], g.throttled...)
	for _, cpu := range e.distributing {
		if g.pool <= 0 {
			return true
		}
		r := &g.rqs[cpu]
		amount := min(-r.silo+unthrottleGrantUsec, g.pool)
		g.pool -= amount
		r.silo += amount
		if r.silo > 0 {
			e.unthrottle(gi, cpu)
		} else {
			still = true
		}
	}
	return still
}

// slackTimer is do_sched_cfs_slack_timer.
func (e *engine) slackTimer(gi int) {
	g := &e.groups[gi]
	g.slackAt = -1
	e.retime(gi)
	if e.refreshWithin(g, minBandwidthExpirationUsec) {
		return
	}
	if g.pool > float64(e.p.SliceUsec) {
		e.distribute(gi)
	}
}

// refreshWithin is runtime_refresh_within: is the next period expiry
// closer than d?
func (e *engine) refreshWithin(g *group, d float64) bool {
	return !g.active || g.nextExpiry-e.now < d
}

// assign is __assign_cfs_rq_runtime with the slice as target: top the
// silo up to +slice from the pool, starting the period timer. It reports
// whether the silo is now positive.
func (e *engine) assign(gi, cpu int, target float64) bool {
	g := &e.groups[gi]
	r := &g.rqs[cpu]
	e.startTimer(gi)
	if g.pool > 0 {
		amount := min(g.pool, target-r.silo)
		g.pool -= amount
		r.silo += amount
		g.idle = false
	}
	return r.silo > 0
}

// startTimer is start_cfs_bandwidth: an inactive timer restarts at the
// next boundary of its own phase (hrtimer_forward_now).
func (e *engine) startTimer(gi int) {
	g := &e.groups[gi]
	if g.active {
		return
	}
	g.active = true
	e.retime(gi)
	period, phase := g.spec.periodUsec, g.spec.phaseUsec
	k := math.Floor((e.now-phase)/period) + 1
	g.nextExpiry = phase + k*period
}

// throttle is throttle_cfs_rq: the runqueue leaves the CPU until the pool
// pays its debt. throttled_clock runs only if it has tasks.
func (e *engine) throttle(gi, cpu int) {
	g := &e.groups[gi]
	r := &g.rqs[cpu]
	r.throttled = true
	r.clockOn = r.busy
	r.since = e.now
	r.behind = 0
	e.dropCredit(gi, cpu)
	g.throttled = append(g.throttled, cpu)
	e.markThrottledWindow(g, r)
	e.touch(cpu)
}

// unthrottle is unthrottle_cfs_rq: add the runqueue's throttled time.
func (e *engine) unthrottle(gi, cpu int) {
	g := &e.groups[gi]
	r := &g.rqs[cpu]
	r.throttled = false
	if r.busy && r.behind > 0 {
		r.credit = r.behind
		e.credited = append(e.credited, gi*e.ncpu+cpu)
	}
	r.behind = 0
	if r.clockOn {
		d := e.now - r.since
		g.acct.throttledUsec += d
		e.windowOf(g).throttledUsec += d
		r.clockOn = false
	}
	g.throttled = slices.DeleteFunc(g.throttled, func(c int) bool { return c == cpu })
	e.touch(cpu)
}

func (e *engine) markThrottledWindow(g *group, r *rq) {
	if e.p.WindowUsec <= 0 || r.windowHit == e.window+1 {
		return
	}
	r.windowHit = e.window + 1
	e.windowOf(g).throttledCPUs++
}

// returnSlack is __return_cfs_rq_runtime: a runqueue that went idle keeps
// min_cfs_rq_runtime and gives the rest back, arming the slack timer when
// others are throttled.
func (e *engine) returnSlack(gi, cpu int) {
	g := &e.groups[gi]
	r := &g.rqs[cpu]
	slack := r.silo - minCfsRqRuntimeUsec
	if slack <= 0 {
		return
	}
	g.pool += slack
	r.silo -= slack
	if g.pool > float64(e.p.SliceUsec) && len(g.throttled) > 0 {
		e.startSlack(gi)
	}
}

// startSlack is start_cfs_slack_bandwidth.
func (e *engine) startSlack(gi int) {
	g := &e.groups[gi]
	if e.refreshWithin(g, slackPeriodUsec+minBandwidthExpirationUsec) || g.slackAt >= 0 {
		return
	}
	g.slackAt = e.now + slackPeriodUsec
	e.retime(gi)
}

// arrive starts task ti's threads, each on the allowed CPU with the
// fewest runnable threads.
func (e *engine) arrive(ti int) {
	t := &e.tasks[ti]
	t.arrived = true
	if t.spec.needUsec <= doneEpsUsec {
		t.done, t.doneAt = true, e.now
		e.left--
		return
	}
	e.running = setSorted(e.running, ti, true)
	for range t.spec.threads {
		cpu := e.leastLoaded(t.spec.cpus)
		e.threads = append(e.threads, thread{task: ti, cpu: cpu})
		t.threads = append(t.threads, len(e.threads)-1)
		e.live = append(e.live, len(e.threads)-1)
		e.touch(cpu)
	}
}

// leastLoaded picks among allowed (nil = all) the CPU with the fewest
// threads that can run, then the fewest threads, then the lowest number.
func (e *engine) leastLoaded(allowed []int) int {
	counts := e.zeroPerCPU(2 * e.ncpu) // per CPU: threads that can run, all threads
	for _, i := range e.live {
		cpu := e.threads[i].cpu
		counts[2*cpu+1]++
		if !e.blocked(i) {
			counts[2*cpu]++
		}
	}
	best, bestRun, bestAll := -1, 0, 0
	for cpu := range e.ncpu {
		if allowed != nil && !slices.Contains(allowed, cpu) {
			continue
		}
		run, all := counts[2*cpu], counts[2*cpu+1]
		if best < 0 || run < bestRun || (run == bestRun && all < bestAll) {
			best, bestRun, bestAll = cpu, run, all
		}
	}
	return best
}

// complete ends task ti: its threads leave the CPU. On the way out each
// level is charged one last time and, if its silo is spent and the pool
// is dry, throttled (put_prev_entity → check_cfs_rq_runtime), even when
// the runqueue is left empty. The process still has a little work to do
// after its need (waking its main thread to report, going to sleep or
// exiting): on its first thread's CPU that work is enqueued when the
// throttle happens, so the lowest level throttled there counts throttled
// time until it is unthrottled, as if a task were waiting.
func (e *engine) complete(ti int) {
	t := &e.tasks[ti]
	t.done, t.doneAt, t.left = true, e.now, 0
	e.left--
	e.running = setSorted(e.running, ti, false)
	e.live = slices.DeleteFunc(e.live, func(i int) bool { return e.threads[i].task == ti })
	for _, thi := range t.threads {
		e.touch(e.threads[thi].cpu)
	}
	tail := true
	for k, thi := range t.threads {
		th := &e.threads[thi]
		th.rate = 0
		if e.blockedOn(t, th.cpu) {
			continue
		}
		for _, gi := range t.levels {
			g := &e.groups[gi]
			r := &g.rqs[th.cpu]
			if !g.limited || r.throttled || r.silo > 0 {
				continue
			}
			if !e.assign(gi, th.cpu, float64(e.p.SliceUsec)) {
				e.setBusy(gi, th.cpu, e.busyOn(gi, th.cpu) || (k == 0 && tail))
				tail = false
				e.throttle(gi, th.cpu)
			}
		}
	}
}

// tick is the scheduler tick on every busy CPU: each level on the path of
// a running thread is charged (already done by advance) and, if its silo
// is spent, refilled from the pool or throttled. The CPUs' ticks fire at
// the same moment but their handlers race for the group's lock; the model
// rotates which CPU goes first from one tick to the next, so no CPU is
// always first to the last of the pool.
//
// Only a level whose silo is spent does anything at a tick, and what one
// level does changes no other level's silo or throttling on that CPU, so
// only those levels are listed and ordered.
func (e *engine) tick() {
	first := int(math.Round((e.now-float64(e.p.TickPhaseUsec))/float64(e.p.TickUsec))) % e.ncpu
	e.bucketLive()
	for i := range e.ncpu {
		cpu := (first + i) % e.ncpu
		levels := e.levels[:0]
		for _, i := range e.onCPU[cpu] {
			th := &e.threads[i]
			if th.rate == 0 {
				continue
			}
			for _, gi := range e.tasks[th.task].levels {
				g := &e.groups[gi]
				r := &g.rqs[cpu]
				if !g.limited || r.throttled || r.silo > 0 {
					continue
				}
				if !slices.Contains(levels, gi) {
					levels = append(levels, gi)
				}
			}
		}
		e.levels = levels[:0]
		if len(levels) == 0 {
			continue
		}
		slices.SortStableFunc(levels, func(a, b int) int { return e.groups[b].depth - e.groups[a].depth })
		for _, gi := range levels {
			g := &e.groups[gi]
			r := &g.rqs[cpu]
			if !g.limited || r.throttled || r.silo > 0 {
				continue
			}
			if !e.assign(gi, cpu, float64(e.p.SliceUsec)) {
				e.throttle(gi, cpu)
			}
		}
	}
}

// bucketLive fills e.onCPU with the live threads of every CPU, in index
// order.
func (e *engine) bucketLive() {
	for cpu := range e.onCPU {
		e.onCPU[cpu] = e.onCPU[cpu][:0]
	}
	for _, i := range e.live {
		cpu := e.threads[i].cpu
		e.onCPU[cpu] = append(e.onCPU[cpu], i)
	}
}

// blockedOn reports whether task t cannot run on cpu because a level of
// its hierarchy is throttled there.
func (e *engine) blockedOn(t *task, cpu int) bool {
	for _, gi := range t.levels {
		if e.groups[gi].rqs[cpu].throttled {
			return true
		}
	}
	return false
}

func (e *engine) blocked(thi int) bool {
	th := &e.threads[thi]
	return e.blockedOn(&e.tasks[th.task], th.cpu)
}

// busyOn reports whether group gi's runqueue on cpu has an entity
// enqueued: a live thread below it none of whose levels strictly below gi
// is throttled on that CPU.
func (e *engine) busyOn(gi, cpu int) bool {
	for _, i := range e.live {
		th := &e.threads[i]
		t := &e.tasks[th.task]
		if th.cpu != cpu {
			continue
		}
		for _, lv := range t.levels {
			if lv == gi {
				return true
			}
			if e.groups[lv].rqs[cpu].throttled {
				break
			}
		}
	}
	return false
}

// settle brings runqueues in line with what changed at this instant: a
// runqueue that became busy is checked like check_enqueue_throttle does,
// one that went idle returns its slack; an idle CPU pulls a thread; then
// the CPU shares are recomputed.
func (e *engine) settle() {
	for {
		changed := false
		for cpu := range e.ncpu {
			if e.settleCPU(cpu) {
				changed = true
			}
		}
		if e.idleBalance() {
			changed = true
		}
		if !changed {
			break
		}
	}
	e.computeRates()
}

// settleCPU processes busy transitions of every runqueue on cpu, deepest
// groups first (then in index order). It reports whether anything
// changed.
//
// A CPU that was not touched since it was last settled has nothing to
// process: one pass leaves every runqueue's busy state true to its
// threads, since what a runqueue does changes the busy state only of its
// ancestors, which come later in the pass. On a touched CPU only the
// runqueues that are busy or lie on a live thread's path can change.
func (e *engine) settleCPU(cpu int) bool {
	if !e.dirty[cpu] {
		return false
	}
	e.dirty[cpu] = false
	order := append(e.levels[:0], e.busy[cpu]...)
	for _, i := range e.live {
		if e.threads[i].cpu != cpu {
			continue
		}
		for _, gi := range e.tasks[e.threads[i].task].levels {
			if !slices.Contains(order, gi) {
				order = append(order, gi)
			}
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		if d := e.groups[b].depth - e.groups[a].depth; d != 0 {
			return d
		}
		return a - b
	})
	e.levels = order[:0]
	changed := false
	for _, gi := range order {
		g := &e.groups[gi]
		r := &g.rqs[cpu]
		busy := e.busyOn(gi, cpu)
		if busy == r.busy {
			continue
		}
		e.setBusy(gi, cpu, busy)
		changed = true
		if !g.limited {
			continue
		}
		if !busy {
			e.returnSlack(gi, cpu)
			continue
		}
		// check_enqueue_throttle: account_cfs_rq_runtime(cfs_rq, 0).
		if r.throttled || r.silo > 0 {
			continue
		}
		if !e.assign(gi, cpu, float64(e.p.SliceUsec)) {
			e.throttle(gi, cpu)
		}
	}
	return changed
}

// zeroPerCPU returns e.perCPU as n zeros.
func (e *engine) zeroPerCPU(n int) []int {
	e.perCPU = slices.Grow(e.perCPU[:0], n)[:n]
	clear(e.perCPU)
	return e.perCPU
}

// setBusy sets whether group gi's runqueue on cpu is busy, keeping
// e.busy in step.
func (e *engine) setBusy(gi, cpu int, busy bool) {
	r := &e.groups[gi].rqs[cpu]
	if r.busy == busy {
		return
	}
	r.busy = busy
	if busy {
		e.busy[cpu] = append(e.busy[cpu], gi)
		return
	}
	e.dropCredit(gi, cpu)
	e.busy[cpu] = slices.DeleteFunc(e.busy[cpu], func(g int) bool { return g == gi })
}

// idleBalance lets a CPU with nothing to run pull one runnable thread
// from a CPU that has two or more, never into or out of a throttled
// hierarchy (throttled_lb_pair). It reports whether a thread moved. When
// nothing was touched since it last found nothing to move, it finds
// nothing again.
func (e *engine) idleBalance() bool {
	if e.settled == e.epoch {
		return false
	}
	running := e.zeroPerCPU(e.ncpu)
	for _, i := range e.live {
		if !e.blocked(i) {
			running[e.threads[i].cpu]++
		}
	}
	for dst := range e.ncpu {
		if running[dst] > 0 {
			continue
		}
		for _, i := range e.live {
			th := &e.threads[i]
			t := &e.tasks[th.task]
			if running[th.cpu] < 2 || e.blocked(i) || e.blockedOn(t, dst) {
				continue
			}
			if t.spec.cpus != nil && !slices.Contains(t.spec.cpus, dst) {
				continue
			}
			e.touch(th.cpu)
			e.touch(dst)
			th.cpu = dst
			return true
		}
	}
	e.settled = e.epoch
	return false
}

// computeRates shares every CPU among its runnable threads by
// hierarchical weight: at each level a group gets its cpu.weight scaled
// by the part of its runnable threads that are on this CPU
// (calc_group_shares), a thread gets a nice-0 weight. The shares depend
// only on which threads can run where, so when nothing was touched since
// they were computed they stay as they are.
func (e *engine) computeRates() {
	if e.shared == e.epoch {
		return
	}
	e.shared = e.epoch
	if e.p.WakeCreditUsec > 0 {
		clear(e.rootV)
		for gi := range e.groups {
			for cpu := range e.groups[gi].rqs {
				e.groups[gi].rqs[cpu].childV = 0
			}
		}
		for _, k := range e.credited {
			e.creditRQ(k).crate = 0 // until share finds it runnable
		}
	}
	counted := e.counted[:0]
	for _, i := range e.live {
		th := &e.threads[i]
		th.rate = 0
		if e.blocked(i) {
			continue
		}
		for _, gi := range e.tasks[th.task].levels {
			if e.groups[gi].runnable == 0 {
				counted = append(counted, gi)
			}
			e.groups[gi].runnable++
		}
	}
	e.bucketLive()
	ths := e.ths
	for cpu := range e.ncpu {
		ths = ths[:0]
		for _, i := range e.onCPU[cpu] {
			if !e.blocked(i) {
				ths = append(ths, i)
			}
		}
		if len(ths) == 0 {
			continue
		}
		for _, i := range ths {
			for _, gi := range e.tasks[e.threads[i].task].levels {
				e.groups[gi].here++
			}
		}
		e.cpu = cpu
		e.share(ths, -1, 1)
		for _, i := range ths {
			for _, gi := range e.tasks[e.threads[i].task].levels {
				e.groups[gi].here = 0
			}
		}
	}
	for _, gi := range counted {
		e.groups[gi].runnable = 0
	}
	e.counted, e.ths = counted[:0], ths[:0]
}

// share splits fraction of a CPU among the entities below parent (-1 is
// the root): threads directly in parent and child groups with runnable
// threads. Its entities and their threads are kept on the stacks e.ents
// and e.subs above those of the callers.
func (e *engine) share(ths []int, parent int, fraction float64) {
	base := len(e.ents)
	e.gen++
	gen := e.gen
	for _, i := range ths {
		levels := e.tasks[e.threads[i].task].levels
		child := childOf(levels, parent)
		if child < 0 {
			e.ents = append(e.ents, entity{group: -1, thread: i, weight: nice0Weight})
			continue
		}
		g := &e.groups[child]
		if g.seen == gen {
			continue
		}
		g.seen = gen
		w := g.spec.weight * nice0Weight / 100
		w *= float64(g.here) / float64(g.runnable)
		e.ents = append(e.ents, entity{group: child, weight: w})
	}
	end := len(e.ents)
	if e.p.WakeCreditUsec > 0 {
		e.creditLevel(e.ents[base:end], parent, fraction)
	}
	total := 0.0
	for _, en := range e.ents[base:end] {
		total += en.weight
	}
	for k := base; k < end; k++ {
		en := e.ents[k]
		f := fraction * en.weight / total
		if en.group < 0 {
			e.threads[en.thread].rate = f
			continue
		}
		from := len(e.subs)
		for _, i := range ths {
			if slices.Contains(e.tasks[e.threads[i].task].levels, en.group) {
				e.subs = append(e.subs, i)
			}
		}
		e.share(e.subs[from:], en.group, f)
		e.subs = e.subs[:from]
	}
	e.ents = e.ents[:base]
}

// creditLevel applies CFS's wake-up credit to ents, the entities of one
// level on e.cpu (place_entity before 6.6): while a group there holds a
// credit, only the groups holding one run at that level. A credit held
// by the only entity of its level lapses: min_vruntime follows that
// entity, so nothing is left to catch up with. It records how fast the
// level's vruntime moves, the same for every entity that runs there.
func (e *engine) creditLevel(ents []entity, parent int, fraction float64) {
	held := false
	for _, en := range ents {
		if en.group >= 0 && e.groups[en.group].rqs[e.cpu].credit > 0 {
			held = true
		}
	}
	if held && len(ents) == 1 {
		e.dropCredit(ents[0].group, e.cpu)
		held = false
	}
	total := 0.0
	for k := range ents {
		if held && (ents[k].group < 0 || e.groups[ents[k].group].rqs[e.cpu].credit == 0) {
			ents[k].weight = 0
		}
		total += ents[k].weight
	}
	v := fraction * nice0Weight / total
	if parent < 0 {
		e.rootV[e.cpu] = v
	} else {
		e.groups[parent].rqs[e.cpu].childV = v
	}
	for _, en := range ents {
		if en.group >= 0 && en.weight > 0 {
			e.groups[en.group].rqs[e.cpu].crate = v
		}
	}
}

// advanceCredit moves the CFS wake-up credit on by dt: a throttled
// runqueue falls behind its level's min_vruntime, up to the credit; a
// credited one catches up at the vruntime rate it runs at.
func (e *engine) advanceCredit(dt float64) {
	limit := float64(e.p.WakeCreditUsec)
	for _, gi := range e.timed { // a throttled group's timer runs
		g := &e.groups[gi]
		for _, cpu := range g.throttled {
			v := e.rootV[cpu]
			if g.spec.parent >= 0 {
				v = e.groups[g.spec.parent].rqs[cpu].childV
			}
			g.rqs[cpu].behind = min(limit, g.rqs[cpu].behind+dt*v)
		}
	}
	kept := e.credited[:0]
	for _, k := range e.credited {
		r := e.creditRQ(k)
		r.credit -= dt * r.crate
		if r.credit > 1e-6 {
			kept = append(kept, k)
			continue
		}
		r.credit = 0
		e.touch(k % e.ncpu)
	}
	e.credited = kept
}

// creditRQ is the runqueue of an e.credited entry.
func (e *engine) creditRQ(k int) *rq {
	return &e.groups[k/e.ncpu].rqs[k%e.ncpu]
}

// dropCredit ends group gi's credit on cpu: it was throttled or went
// idle, and comes back placed anew.
func (e *engine) dropCredit(gi, cpu int) {
	r := &e.groups[gi].rqs[cpu]
	if r.credit == 0 {
		return
	}
	r.credit = 0
	e.credited = slices.DeleteFunc(e.credited, func(k int) bool { return k == gi*e.ncpu+cpu })
	e.touch(cpu)
}

// childOf returns the level directly below parent on a leaf-first path,
// or -1 when the path ends at parent (the thread sits in parent itself).
func childOf(levels []int, parent int) int {
	if parent < 0 {
		return levels[len(levels)-1]
	}
	i := slices.Index(levels, parent)
	if i <= 0 {
		return -1
	}
	return levels[i-1]
}

func (e *engine) output() kernelOutput {
	out := kernelOutput{endUsec: e.now}
	for i := range e.groups {
		out.groups = append(out.groups, e.groups[i].acct)
	}
	for i := range e.tasks {
		t := &e.tasks[i]
		out.tasks = append(out.tasks, taskAccount{doneUsec: t.doneAt})
	}
	return out
}
