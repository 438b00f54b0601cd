package advise

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"sync"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/simulate"

	"github.com/poolagent/poolagent/internal/history"
)

// Outcome is a pool's counters over a whole trace, measured or predicted,
// and its worst period.
type Outcome struct {
	UsageUsec     uint64
	NrPeriods     uint64
	NrThrottled   uint64
	ThrottledUsec uint64
	NrBursts      uint64
	BurstUsec     uint64
	// QueryNrThrottled and QueryThrottledUsec are the part of
	// NrThrottled and ThrottledUsec measured at the query level (a
	// query's own limit); the replay models the pool level alone, so a
	// prediction has none.
	QueryNrThrottled   uint64
	QueryThrottledUsec uint64
	// MaxDelayUsec is the longest a runnable thread was held in one period:
	// the worst period's throttled time divided by the runqueues throttled
	// in it.
	MaxDelayUsec int64
}

// ThrottledRatio is NrThrottled/NrPeriods, the share of active periods
// with throttling, as `poolagent stat` shows it; 0 without periods.
func (o Outcome) ThrottledRatio() float64 {
	if o.NrPeriods == 0 {
		return 0
	}
	return float64(o.NrThrottled) / float64(o.NrPeriods)
}

// replayPool is the name the pool has in a replay: the counters do not
// depend on it.
const replayPool = "pool"

// Replay predicts the pool's counters under lim for the trace's demand
// with the kernel-faithful model (docs/kernel-model.md), every slot's
// need multiplied by scale (1 for the demand as reconstructed, more to
// leave room for the model's error). The trace's period phase is not
// known, so periods start with the samples; the model runs one period
// boundary 1 µs before each sample boundary so that a period's throttled
// time, booked at its end, falls into that period.
//
// Work separated by at least two idle periods is replayed in separate
// runs: by then the period timer has stopped and the pool is full again
// (rules 5 and 6), the state a run starts from. A run whose work outlasts
// the gap is merged with the next.
func Replay(t *history.Trace, slots []Slot, lim cpulimit.Limit, scale float64) (Outcome, error) {
	return (&replayer{}).replay(t, slots, lim, scale)
}

// replayer replays a trace's runs, each distinct run once: the model is
// deterministic, so a run whose work, limit and margin are those of one
// already replayed (a workload that repeats itself) takes its outcome.
// work counts the model's work of the runs it did replay (replayWork).
type replayer struct {
	// mu guards runs and work: runs are replayed in parallel (prefetch).
	mu   sync.Mutex
	runs map[string]ranRun
	work int64
	// timeline, when not nil, gathers the replay's CPU time ran and
	// throttled (both levels) per sample interval of the trace.
	timeline []Bin
}

// Bin is CPU time in one stretch of a trace, µs: what ran and what was
// throttled, at both levels.
type Bin struct {
	RanUsec, ThrottledUsec uint64
}

// ReplayTimeline is Replay that also returns the replay's CPU time ran and
// throttled per sample interval of the trace.
func ReplayTimeline(t *history.Trace, slots []Slot, lim cpulimit.Limit, scale float64) (Outcome, []Bin, error) {
	r := &replayer{timeline: make([]Bin, len(t.Samples))}
	o, err := r.replay(t, slots, lim, scale)
	return o, r.timeline, err
}

// addTimeline adds a run's windows (one period each, from shift) to the
// intervals they fall in.
func (r *replayer) addTimeline(t *history.Trace, run simulate.KernelRun, lim cpulimit.Limit, shift int64) {
	if r.timeline == nil {
		return
	}
	for gi, g := range run.Groups {
		for w, win := range g.Windows {
			i := (shift + int64(w)*lim.PeriodUsec) / t.IntervalUsec
			if i < 0 || i >= int64(len(r.timeline)) {
				continue
			}
			if gi == 0 {
				r.timeline[i].RanUsec += win.RanUsec
			}
			r.timeline[i].ThrottledUsec += win.ThrottledUsec
		}
	}
}

// runKey is what a run's outcome depends on: the limit, the margin and
// the slots relative to the run's start.
func runKey(slots []Slot, lim cpulimit.Limit, scale float64, shift int64) string {
	b := make([]byte, 0, 32+24*len(slots))
	b = strconv.AppendInt(b, lim.QuotaUsec, 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, lim.PeriodUsec, 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, lim.BurstUsec, 10)
	b = append(b, '/')
	b = strconv.AppendFloat(b, scale, 'g', -1, 64)
	for _, s := range slots {
		b = append(b, ' ')
		b = strconv.AppendInt(b, s.StartUsec-shift, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, s.NeedUsec, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(s.Threads), 10)
	}
	return string(b)
}

func (r *replayer) replay(t *history.Trace, slots []Slot, lim cpulimit.Limit, scale float64) (Outcome, error) {
	if lim.QuotaUsec < 0 {
		var o Outcome
		for _, s := range slots {
			o.UsageUsec += uint64(math.Round(float64(s.NeedUsec) * scale))
		}
		return o, nil
	}
	rs := replaySet{t: t, slots: slots, lim: lim, scale: scale}
	step := lcm(lim.PeriodUsec, t.TickUsec)
	gap := 2 * lim.PeriodUsec
	// The runs as the gaps part them are replayed first, in parallel,
	// those not replayed before; the pass below takes their outcomes and
	// replays again, merged, only a run whose work outlasted its gap.
	if err := r.prefetch(rs, runsOf(t, slots, gap), step); err != nil {
		return Outcome{}, err
	}
	var out Outcome
	for first := 0; first < len(slots); {
		last := first
		for {
			for last+1 < len(slots) && slots[last+1].StartUsec-slots[last].StartUsec < gap+t.IntervalUsec {
				last++
			}
			shift := slots[first].StartUsec / step * step
			ran, err := r.run(rs, first, last, shift)
			if err != nil {
				return Outcome{}, err
			}
			if last+1 < len(slots) && shift+ran.endUsec > slots[last+1].StartUsec {
				last++ // the work outlasted the gap: replay with the next
				continue
			}
			out.plus(ran.outcome)
			if ran.run != nil {
				r.addTimeline(t, *ran.run, lim, shift)
			}
			break
		}
		first = last + 1
	}
	return out, nil
}

// runsOf parts slots into runs, [first, last] index pairs: slots less
// than gap plus an interval apart are one run.
func runsOf(t *history.Trace, slots []Slot, gap int64) [][2]int {
	var runs [][2]int
	for first := 0; first < len(slots); {
		last := first
		for last+1 < len(slots) && slots[last+1].StartUsec-slots[last].StartUsec < gap+t.IntervalUsec {
			last++
		}
		runs = append(runs, [2]int{first, last})
		first = last + 1
	}
	return runs
}

// prefetch replays the runs of rs (runsOf) that are not in the cache,
// each distinct one once, as stretches of one kernel model of them all,
// checked once (replaySet.model), on up to GOMAXPROCS goroutines, each
// taking every n-th run.
func (r *replayer) prefetch(rs replaySet, runs [][2]int, step int64) error {
	type job struct {
		first, last int
		from        int // the run's first task in the model
		shift       int64
		key         string
	}
	var jobs []job
	var todo [][2]int
	seen := map[string]bool{}
	tasks := 0
	for _, run := range runs {
		shift := rs.slots[run[0]].StartUsec / step * step
		key := runKey(rs.slots[run[0]:run[1]+1], rs.lim, rs.scale, shift)
		if _, ok := r.cached(key); ok || seen[key] {
			continue
		}
		seen[key] = true
		jobs = append(jobs, job{first: run[0], last: run[1], from: tasks, shift: shift, key: key})
		todo = append(todo, run)
		tasks += run[1] - run[0] + 1
	}
	if len(jobs) == 0 {
		return nil
	}
	m, err := rs.model(todo)
	if err != nil {
		return err
	}
	n := min(runtime.GOMAXPROCS(0), len(jobs))
	errs := make([]error, n)
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for k := w; k < len(jobs) && errs[w] == nil; k += n {
				j := jobs[k]
				var ran ranRun
				if ran, errs[w] = r.ranOf(rs, m, j.from, j.from+j.last-j.first+1, j.shift); errs[w] == nil {
					r.keep(rs, j.key, ran, rs.slots[j.first:j.last+1])
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ranRun is what a replayer keeps of one model run: when its last timer
// stopped, what it adds to the outcome, and only when a timeline is
// gathered the run itself (its windows are most of its memory, and a
// search keeps tens of thousands of runs).
type ranRun struct {
	endUsec int64
	outcome Outcome
	run     *simulate.KernelRun
}

// plus adds the counters of c to o and takes the worse delay.
func (o *Outcome) plus(c Outcome) {
	o.UsageUsec += c.UsageUsec
	o.NrPeriods += c.NrPeriods
	o.NrThrottled += c.NrThrottled
	o.ThrottledUsec += c.ThrottledUsec
	o.NrBursts += c.NrBursts
	o.BurstUsec += c.BurstUsec
	o.QueryNrThrottled += c.QueryNrThrottled
	o.QueryThrottledUsec += c.QueryThrottledUsec
	o.MaxDelayUsec = max(o.MaxDelayUsec, c.MaxDelayUsec)
}

// outcomeOf is the pool's outcome of one model run: the pool's counters,
// its queries' throttling, and the worst period's delay.
func outcomeOf(run simulate.KernelRun) Outcome {
	var o Outcome
	g := run.Groups[0]
	st := g.Stat
	o.UsageUsec += st.UsageUsec
	o.NrPeriods += st.NrPeriods
	o.NrThrottled += st.NrThrottled
	o.ThrottledUsec += st.ThrottledUsec
	o.NrBursts += st.NrBursts
	o.BurstUsec += st.BurstUsec
	// A period throttled at the query level alone counts too (either
	// level, as Measured counts it); windows are the periods.
	either := make([]bool, len(g.Windows))
	for _, q := range run.Groups[1:] {
		o.ThrottledUsec += q.Stat.ThrottledUsec
		o.QueryThrottledUsec += q.Stat.ThrottledUsec
		for i, w := range q.Windows {
			if w.ThrottledCPUs > 0 && i < len(either) && g.Windows[i].ThrottledCPUs == 0 && !either[i] {
				either[i] = true
				o.NrThrottled++
				o.QueryNrThrottled++
			}
		}
	}
	for i, w := range g.Windows {
		cpus, usec := w.ThrottledCPUs, w.ThrottledUsec
		for _, q := range run.Groups[1:] {
			if i < len(q.Windows) {
				cpus += q.Windows[i].ThrottledCPUs
				usec += q.Windows[i].ThrottledUsec
			}
		}
		if cpus > 0 {
			o.MaxDelayUsec = max(o.MaxDelayUsec, int64(usec)/int64(cpus))
		}
	}
	return o
}

// queryLimitFor is the limit of the replay's query cgroups under pool
// limit lim: the trace's query template scaled as the pool's quota is, and
// without burst: a query cgroup is made as its query starts, its burst
// written before its quota, so the kernel refills it once (one quota) and
// the burst has had no idle periods to build up. nil when the trace has
// no query limit or either is unlimited.
func queryLimitFor(t *history.Trace, lim cpulimit.Limit) *cpulimit.Limit {
	q := t.QueryLimit
	if q == nil || q.QuotaUsec < 0 || t.Limit.QuotaUsec <= 0 || lim.QuotaUsec < 0 {
		return nil
	}
	quota := int64(math.Round(float64(lim.QuotaUsec) * float64(q.QuotaUsec) / float64(t.Limit.QuotaUsec)))
	return &cpulimit.Limit{QuotaUsec: max(quota, cpulimit.MinQuotaUsec), PeriodUsec: lim.PeriodUsec}
}

// replaySet is one replay's demand and setting: the slots, the limit
// and the margin.
type replaySet struct {
	t     *history.Trace
	slots []Slot
	lim   cpulimit.Limit
	scale float64
}

// model is the kernel model of the runs of rs, [first, last] slot index
// pairs (replayHost), checked once: each run is a stretch of its tasks,
// from the sum of the earlier runs' lengths.
func (rs replaySet) model(runs [][2]int) (*simulate.KernelModel, error) {
	m, err := simulate.NewKernelModel(replayHost(rs, runs))
	if err != nil {
		return nil, fmt.Errorf("replay under cpu.max %s: %w", limitText(rs.lim), err)
	}
	return m, nil
}

// run is the kernel-model run of rs.slots[first:last+1], shifted by shift
// µs (a multiple of the period and the tick, which keeps every phase), or
// the outcome of the same run replayed before. It may be called from
// several goroutines.
func (r *replayer) run(rs replaySet, first, last int, shift int64) (ranRun, error) {
	slots := rs.slots[first : last+1]
	key := runKey(slots, rs.lim, rs.scale, shift)
	if ran, ok := r.cached(key); ok {
		return ran, nil
	}
	m, err := rs.model([][2]int{{first, last}})
	if err != nil {
		return ranRun{}, err
	}
	ran, err := r.ranOf(rs, m, 0, len(slots), shift)
	if err != nil {
		return ranRun{}, err
	}
	r.keep(rs, key, ran, slots)
	return ran, nil
}

// ranOf runs the tasks [from, to) of m, shifted by shift µs, and keeps
// what the replayer needs of the run.
func (r *replayer) ranOf(rs replaySet, m *simulate.KernelModel, from, to int, shift int64) (ranRun, error) {
	run, err := m.RunTasks(from, to, shift)
	if err != nil {
		return ranRun{}, fmt.Errorf("replay under cpu.max %s: %w", limitText(rs.lim), err)
	}
	ran := ranRun{endUsec: run.EndUsec, outcome: outcomeOf(run)}
	if r.timeline != nil {
		ran.run = &run
	}
	return ran, nil
}

// cached is the run of key replayed before, if any.
func (r *replayer) cached(key string) (ranRun, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ran, ok := r.runs[key]
	return ran, ok
}

// keep stores ran, the run of slots of rs under key, counting its work
// (replayWork) once.
func (r *replayer) keep(rs replaySet, key string, ran ranRun, slots []Slot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runs == nil {
		r.runs = map[string]ranRun{}
	}
	if _, ok := r.runs[key]; !ok {
		r.runs[key] = ran
		r.work += replayWork(rs.t, slots, rs.lim.PeriodUsec)
	}
}

// replayHost is the demand of the runs of rs, [first, last] slot index
// pairs, as one host for the kernel model: the pool under rs.lim, a task
// per slot arriving at its start with its need times rs.scale, and with
// a query limit each stretch of work in consecutive intervals one query,
// in a query cgroup of its own made as it starts (a run's first slot
// follows an idle gap, so it starts one).
func replayHost(rs replaySet, runs [][2]int) (simulate.Host, simulate.KernelParams) {
	t, slots, lim := rs.t, rs.slots, rs.lim
	p := simulate.DefaultKernelParams()
	p.SliceUsec, p.TickUsec = t.SliceUsec, t.TickUsec
	p.WindowUsec = lim.PeriodUsec
	p.PeriodPhaseUsec = map[string]int64{replayPool: lim.PeriodUsec - 1}
	h := simulate.Host{CPUs: t.CPUs, TickUsec: 1, Groups: []simulate.Group{{
		Name: replayPool, Limit: lim}}}
	ql := queryLimitFor(t, lim)
	group := replayPool
	for _, run := range runs {
		for i := run[0]; i <= run[1]; i++ {
			s := slots[i]
			if ql != nil && (i == run[0] || s.StartUsec-slots[i-1].StartUsec > t.IntervalUsec) {
				group = "q" + strconv.Itoa(len(h.Groups))
				h.Groups = append(h.Groups, simulate.Group{Name: group, Parent: replayPool, Limit: *ql})
				// Writing its limit starts its period timer: its periods
				// run from its start.
				p.PeriodPhaseUsec[group] = s.StartUsec % lim.PeriodUsec
			}
			h.Tasks = append(h.Tasks, simulate.HostTask{Name: "s" + strconv.Itoa(i), Group: group,
				ArriveUsec: s.StartUsec, NeedUsec: int64(math.Round(float64(s.NeedUsec) * rs.scale)), Threads: s.Threads})
		}
	}
	return h, p
}

// replayWork estimates what one replay of slots under a limit of period
// periodUsec costs the model: it steps at every tick, period timer and
// arrival while work is runnable, and each step visits the running
// threads. The work of a slot is taken to last its interval (a backlog
// moved earlier lasts as long as the work it was moved from).
func replayWork(t *history.Trace, slots []Slot, periodUsec int64) int64 {
	step := min(t.TickUsec, periodUsec)
	steps := t.IntervalUsec/step + 2
	var w int64
	for _, s := range slots {
		w += steps * int64(s.Threads+1)
	}
	return w
}

func lcm(a, b int64) int64 {
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return a / x * b
}
