package advise

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/poolagent/poolagent/internal/accuracy"
	"github.com/poolagent/poolagent/internal/cpulimit"

	"github.com/poolagent/poolagent/internal/history"
)

// Budget is how much throttling a pool may show over a trace.
type Budget struct {
	// MaxThrottledRatio is the largest share of active periods that may be
	// throttled (nr_throttled/nr_periods), 0..1; negative: no such limit.
	MaxThrottledRatio float64
	// MaxDelayUsec is the longest a runnable thread may be held in one
	// period; 0: no such limit.
	MaxDelayUsec int64
}

// Meets reports whether o is within the budget.
func (b Budget) Meets(o Outcome) bool {
	if b.MaxThrottledRatio >= 0 && o.ThrottledRatio() > b.MaxThrottledRatio+1e-9 {
		return false
	}
	return b.MaxDelayUsec <= 0 || o.MaxDelayUsec <= b.MaxDelayUsec
}

// String reads like "at most 10% of periods throttled and at most 20 ms
// of delay per period".
func (b Budget) String() string {
	var parts []string
	if b.MaxThrottledRatio >= 0 {
		parts = append(parts, fmt.Sprintf("at most %s%% of periods throttled", percentText(roundTo(b.MaxThrottledRatio*100, 2))))
	}
	if b.MaxDelayUsec > 0 {
		parts = append(parts, fmt.Sprintf("at most %s of delay per period", msText(b.MaxDelayUsec)))
	}
	return strings.Join(parts, " and ")
}

// Class is the workload class of docs/accuracy.md a replay falls into,
// with the kernel model's measured error for it (package accuracy).
type Class struct {
	// Name says what the class is.
	Name accuracy.Class
	// ErrorPercent is the model's largest measured error on throttled
	// time for the class, in percent of the measured value.
	ErrorPercent float64
	// Rows is how many rows of docs/accuracy.md the class has.
	Rows int
	// Worst names the class's worst row and its error, the scheduler
	// tick every row is allowed included: ErrorPercent is that error
	// without the tick, and at least the target the rows are held to.
	Worst string
}

// classFor is the class of the trace's demand under lim, with its
// measured error. A live pool's threads are not pinned: one thread at a
// time is on one CPU, several are placed by the kernel, and the quota
// decides between the two classes of those (below one CPU, or one CPU and
// more). Two pools taking turns on one CPU (accuracy.SharedCPU) cannot be
// told from one pool's recording and is not chosen; nor is work ending as
// the quota runs out (accuracy.QuotaEdge), whose one throttle more or less
// the margin itself guards against: raised needs move the work off the
// edge.
func classFor(t *history.Trace, slots []Slot, lim cpulimit.Limit) (Class, error) {
	w := accuracy.Work{QuotaCPUs: -1}
	for _, s := range slots {
		w.Threads = max(w.Threads, min(s.Threads, t.CPUs))
	}
	if lim.QuotaUsec >= 0 {
		w.QuotaCPUs = float64(lim.QuotaUsec) / float64(lim.PeriodUsec)
	}
	e, err := accuracy.ErrorOf(accuracy.Classify(w))
	if err != nil {
		return Class{}, err
	}
	return Class{Name: e.Class, ErrorPercent: e.Percent, Rows: e.Rows, Worst: e.Worst}, nil
}

// The search grid. Periods are only ever shortened: a longer period
// lengthens every wait, and what it would absorb a burst allowance absorbs
// without that cost.
var (
	burstGrid  = []float64{0, 10, 25, 50, 75, 100}
	periodGrid = []int64{500_000, 200_000, 100_000, 50_000, 20_000, 10_000, 5_000}
)

// Candidate is one setting with its predicted counters.
type Candidate struct {
	Setting Setting
	Limit   cpulimit.Limit
	// Predicted are the counters the model predicts for the demand.
	Predicted Outcome
	// Class is the workload class of the demand under Limit.
	Class Class
	// Margin are the counters it predicts with every need raised by the
	// class's error.
	Margin Outcome
	// Meets is whether both are within the budget.
	Meets bool
}

// Advice is the outcome of [Advise].
type Advice struct {
	Pool   string
	Budget Budget
	// Class is the workload class of the advised setting (of the
	// recorded one when there is no advice) and the margin it took.
	Class Class
	// Measured are the recorded counters.
	Measured Outcome
	// Current is the recorded limit, predicted.
	Current Candidate
	// Choice is the advised setting: Current when it meets the budget
	// already; nil when no setting up to the whole node does.
	Choice *Candidate
	// Disagrees is set when the measured counters are over the budget
	// and the replay of the recorded setting is within it: the model does
	// not reproduce what was measured. The search then takes, as its
	// margin, the smallest of disagreeScales at which the replay of the
	// recorded setting is over the budget too (Margin), or, when none
	// is, gives no advice (Choice nil).
	Disagrees bool
	// QueryLimitKnown is whether the trace names its query cgroups'
	// limit, so that the replay models throttling at both levels.
	QueryLimitKnown bool
	// Shortfall is how much less throttled time the replay of the
	// recorded setting found than was measured, as a share of the
	// measurement, when that is more than the class's error (0
	// otherwise): the margin is then every need x(1+Shortfall), at most
	// x3.
	Shortfall float64
	// Margin is the factor every need was raised by in the margin runs
	// when Disagrees or Shortfall; 0 otherwise (the class's error is the
	// margin).
	Margin float64
	// CapRaised is set when no period and burst meet the budget at the
	// current cap, so Choice raises it.
	CapRaised bool
	// Replays counts the model runs the search made (a candidate runs
	// with the margin, then, when that meets the budget, as
	// reconstructed).
	Replays int
	// Work is the model's work the search spent, in thread-steps
	// (docs/advise.md, Bounds).
	Work int64
	// Stopped is set when the search spent its work budget
	// (MaxSearchWork) before it was done: Choice is then the best setting
	// found so far, or nil, and may not be the smallest.
	Stopped bool
}

// MaxSearchWork bounds the model's work in one search, in thread-steps
// (replayWork) of the runs it replays (a run replayed before costs
// nothing). A trace whose replay at the current setting alone takes more
// than a quarter of it is refused (TraceTooLongError); a search that has
// spent it stops with what it found (Advice.Stopped), after finishing the
// candidate under way (two replays, at most half of it more).
const MaxSearchWork = 10_000_000

// errBudget ends a search that has spent MaxSearchWork.
var errBudget = errors.New("the search spent its work budget")

// TraceTooLongError is a trace whose replay alone would spend more than
// a quarter of MaxSearchWork.
type TraceTooLongError struct {
	Pool string
	// Work is one replay's work in thread-steps.
	Work int64
	// Max is the search's budget.
	Max int64
}

func (e *TraceTooLongError) Error() string {
	return fmt.Sprintf("pool %s: replaying this trace once takes about %d thread-steps of the model, more than a quarter of the %d a search may spend (accepted: a trace of fewer intervals with work, fewer threads, or a longer interval; docs/advise.md, Bounds)",
		e.Pool, e.Work, e.Max)
}

// Advise searches the smallest change of the trace's pool limit that
// meets b, replaying the trace's demand (see [Demand]) with the
// kernel-faithful model. Smallest means, in this order: no higher cap if
// a setting at the current cap meets b; the current period if one with
// it does; the smallest burst. Cap raises are searched in whole percents
// of the node (bisection, throttling taken to fall as the cap rises);
// periods come from periodGrid (only shorter ones than the current),
// bursts from burstGrid. A candidate meets b only when its prediction
// does both as reconstructed and with every need raised by the model's
// measured error for the workload's class under that setting (classFor):
// the margin follows the class.
func Advise(t *history.Trace, b Budget) (*Advice, error) {
	return adviseWithin(t, b, MaxSearchWork)
}

// adviseWithin is Advise with a work budget of maxWork thread-steps.
func adviseWithin(t *history.Trace, b Budget, maxWork int64) (*Advice, error) {
	s := &searcher{t: t, b: b, slots: Demand(t), maxWork: maxWork}
	if w := replayWork(t, s.slots, t.Limit.PeriodUsec); w > maxWork/4 {
		return nil, &TraceTooLongError{Pool: t.Pool, Work: w, Max: maxWork}
	}
	a := &Advice{Pool: t.Pool, Budget: b, Measured: Measured(t), QueryLimitKnown: t.QueryLimit != nil}
	if err := s.current(a); err != nil {
		return nil, err
	}
	if a.Disagrees && s.margin == 0 {
		// Even the widest margin does not reproduce the measurement.
		a.Replays, a.Class = s.replays, a.Current.Class
		return a, nil
	}
	defer func() {
		a.Replays, a.Work, a.Margin = s.replays, s.rep.work, s.margin
		a.Class = a.Current.Class
		if a.Choice != nil {
			a.Class = a.Choice.Class
		}
	}()
	if a.Current.Meets || t.Limit.QuotaUsec < 0 {
		a.Choice = &a.Current
		return a, nil
	}
	err := s.search(a)
	if errors.Is(err, errBudget) {
		a.Stopped = true
		return a, nil
	}
	return a, err
}

// current predicts the recorded setting into a.Current and sets the
// search's margin: the class's error, widened when the replay finds less
// throttled time than was measured (a.Shortfall) or when it does not
// reproduce a measurement over the budget at all (a.Disagrees).
func (s *searcher) current(a *Advice) error {
	t, cur := s.t, settingOf(s.t)
	current, err := s.evalLimit(cur, t.Limit)
	if err != nil {
		return err
	}
	a.Current = current
	// A replay that finds less throttled time than was measured, by
	// more than the class's error, is less sure than that error says:
	// the margin widens to the shortfall (at most every need x3).
	if m := a.Measured.ThrottledUsec; m > 0 && t.Limit.QuotaUsec >= 0 {
		if under := 1 - float64(current.Predicted.ThrottledUsec)/float64(m); under*100 > current.Class.ErrorPercent {
			a.Shortfall, s.margin = under, 1+min(under, 2)
			if a.Current, err = s.evalLimit(cur, t.Limit); err != nil {
				return err
			}
		}
	}
	if s.b.Meets(a.Measured) || !a.Current.Meets || t.Limit.QuotaUsec < 0 {
		return nil
	}
	// The model does not reproduce the measured throttling: widen the
	// margin until it does, or give no advice (margin 0).
	a.Disagrees, s.margin = true, 0
	for _, scale := range disagreeScales {
		o, err := s.rep.replay(t, s.slots, t.Limit, scale)
		if err != nil {
			return err
		}
		s.replays++
		if !s.b.Meets(o) {
			s.margin = scale
			break
		}
	}
	if s.margin == 0 {
		return nil
	}
	a.Current, err = s.evalLimit(cur, t.Limit)
	return err
}

// search finds a.Choice for a recorded setting over the budget: a burst,
// then a shorter period, at the current cap; else the smallest cap. An
// errBudget means it stopped with the best found so far.
func (s *searcher) search(a *Advice) error {
	cur := a.Current.Setting
	periods := periodsFrom(cur.PeriodUsec)
	for _, p := range periods {
		c, ok, err := s.smallestBurst(Setting{CapPercent: cur.CapPercent, PeriodUsec: p}, cur)
		if err != nil {
			return err
		}
		if ok {
			a.Choice = &c
			return nil
		}
	}
	// Nothing at the current cap: raise it. Only a delay budget gains
	// from a shorter period at a higher cap.
	a.CapRaised = true
	if s.b.MaxDelayUsec <= 0 {
		periods = periods[:1]
	}
	for _, p := range periods {
		c, ok, err := s.smallestCap(cur.CapPercent, p, cur)
		if ok && (a.Choice == nil || c.Setting.CapPercent < a.Choice.Setting.CapPercent) {
			a.Choice = &c
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// periodsFrom is the current period, then the grid's shorter ones.
func periodsFrom(cur int64) []int64 {
	ps := []int64{cur}
	for _, p := range periodGrid {
		if p < cur {
			ps = append(ps, p)
		}
	}
	return ps
}

type searcher struct {
	t       *history.Trace
	b       Budget
	slots   []Slot
	replays int
	// rep replays, each distinct run once; its work is the model's work
	// spent so far, and a search stops once it reaches maxWork.
	rep     replayer
	maxWork int64
	// margin, when not 0, replaces the class's error as the factor the
	// margin runs raise every need by (Advice.Disagrees).
	margin float64
}

// disagreeScales are the factors tried when the model does not reproduce
// the measurement: needs raised by 50%, doubled, tripled.
var disagreeScales = []float64{1.5, 2, 3}

// eval predicts setting st.
func (s *searcher) eval(st Setting) (Candidate, error) {
	lim, err := st.Limit(s.t.NodeCPUs)
	if err != nil {
		return Candidate{}, err
	}
	return s.evalLimit(st, lim)
}

// evalLimit predicts setting st, whose limit is lim: as reconstructed
// and with the margin.
func (s *searcher) evalLimit(st Setting, lim cpulimit.Limit) (Candidate, error) {
	c, err := s.marginOf(st, lim)
	if err != nil {
		return Candidate{}, err
	}
	return s.predict(c)
}

// marginOf is the candidate st with its class and its margin run alone:
// the run with more need, which fails the budget first.
func (s *searcher) marginOf(st Setting, lim cpulimit.Limit) (Candidate, error) {
	c := Candidate{Setting: st, Limit: lim}
	if s.rep.work >= s.maxWork {
		return Candidate{}, errBudget
	}
	var err error
	if c.Class, err = classFor(s.t, s.slots, lim); err != nil {
		return Candidate{}, err
	}
	scale := 1 + c.Class.ErrorPercent/100
	if s.margin > 0 {
		scale = s.margin
	}
	if c.Margin, err = s.rep.replay(s.t, s.slots, lim, scale); err != nil {
		return Candidate{}, err
	}
	s.replays++
	return c, nil
}

// predict completes c, whose margin run is done, with the run as
// reconstructed.
func (s *searcher) predict(c Candidate) (Candidate, error) {
	var err error
	if c.Predicted, err = s.rep.replay(s.t, s.slots, c.Limit, 1); err != nil {
		return Candidate{}, err
	}
	s.replays++
	c.Meets = s.b.Meets(c.Predicted) && s.b.Meets(c.Margin)
	return c, nil
}

// try is eval for a search candidate: one that fails the budget with the
// margin is not run as reconstructed (Predicted is then not set).
func (s *searcher) try(st Setting) (Candidate, error) {
	lim, err := st.Limit(s.t.NodeCPUs)
	if err != nil {
		return Candidate{}, err
	}
	c, err := s.marginOf(st, lim)
	if err != nil || !s.b.Meets(c.Margin) {
		return c, err
	}
	return s.predict(c)
}

// smallestBurst tries the grid's bursts in ascending order at st's cap and
// period, and returns the first that meets the budget. The recorded
// setting cur is not tried again. (Throttling need not fall as the burst
// rises: a larger burst may lengthen the worst period's delay.)
func (s *searcher) smallestBurst(st Setting, cur Setting) (Candidate, bool, error) {
	for _, burst := range burstGrid {
		st.BurstPercent = burst
		if st == cur {
			continue
		}
		c, err := s.try(st)
		if err != nil {
			return Candidate{}, false, err
		}
		if c.Meets {
			return c, true, nil
		}
	}
	return Candidate{}, false, nil
}

// smallestCap bisects the whole percents above from up to 100 for the
// smallest cap at which some grid burst meets the budget with period p.
func (s *searcher) smallestCap(from float64, p int64, cur Setting) (Candidate, bool, error) {
	lo, hi := int(math.Floor(from)), 100 // lo fails (or is the current cap), hi is tried first
	if hi <= lo {
		return Candidate{}, false, nil
	}
	best, ok, err := s.smallestBurst(Setting{CapPercent: float64(hi), PeriodUsec: p}, cur)
	if err != nil || !ok {
		return Candidate{}, false, err
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		c, ok, err := s.smallestBurst(Setting{CapPercent: float64(mid), PeriodUsec: p}, cur)
		if err != nil {
			return best, true, err // the best so far meets the budget
		}
		if ok {
			hi, best = mid, c
		} else {
			lo = mid
		}
	}
	return best, true, nil
}

// Measured is the trace's own counters, summed over its samples, with
// throttling at either level (docs/advise.md, Levels): a period counts
// as throttled when the pool or one of its queries was ([Sample.
// NrThrottledEither]), throttled time is both levels' summed. The
// worst delay is estimated per sample as its throttled time over the CPUs
// its threads ran on (the kernel does not say how many runqueues were
// throttled), with the throttled time booked at the sample's end counted
// for the threads of the sample before.
func Measured(t *history.Trace) Outcome {
	var o Outcome
	for i, s := range t.Samples {
		o.UsageUsec += s.UsageUsec
		o.NrPeriods += s.NrPeriods
		o.NrThrottled += s.NrThrottledEither()
		o.ThrottledUsec += s.ThrottledEitherUsec()
		o.QueryNrThrottled += s.QueryNrThrottled
		o.QueryThrottledUsec += s.QueryThrottledUsec
		o.NrBursts += s.NrBursts
		o.BurstUsec += s.BurstUsec
		if s.ThrottledEitherUsec() == 0 {
			continue
		}
		cpus := threadsOf(t, s)
		if i > 0 {
			cpus = max(cpus, threadsOf(t, t.Samples[i-1]))
		}
		cpus = min(cpus, t.CPUs)
		o.MaxDelayUsec = max(o.MaxDelayUsec, int64(s.ThrottledEitherUsec())/int64(cpus))
	}
	return o
}

// msText renders µs as milliseconds: "40 ms", "2.5 ms".
func msText(usec int64) string {
	return strconv.FormatFloat(roundTo(float64(usec)/1000, 1), 'f', -1, 64) + " ms"
}
