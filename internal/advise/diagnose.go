package advise

import (
	"fmt"
	"math"

	"github.com/poolagent/poolagent/internal/history"
)

// Mechanism is a reason a pool is throttled (docs/advise.md).
type Mechanism string

// The mechanisms the diagnosis names.
const (
	// AboveCap: the pool wants more than its cap, period after period.
	AboveCap Mechanism = "demand above the cap"
	// Parallelism: several threads spend the quota early in the period
	// and wait out the rest.
	Parallelism Mechanism = "parallelism"
	// BurstAfterIdle: work arriving after idle periods needs more than
	// one quota, and the unused quota of the idle periods is gone.
	BurstAfterIdle Mechanism = "bursts after idle"
	// SmallQuota: the quota is less than one slice for each CPU the
	// threads run on, so some runqueues get none.
	SmallQuota Mechanism = "quota below one slice per CPU"
	// LongPeriod: a thread that is throttled waits longer than the delay
	// wanted, however little it needs.
	LongPeriod Mechanism = "period too long for the latency wanted"
)

// Diagnosis says what a trace shows: the mechanisms behind its
// throttling, first the one that matters most, and sentences with the
// numbers.
type Diagnosis struct {
	Mechanisms []Mechanism
	Lines      []string
}

// idleShare is how little of a quota an interval may use and still count
// as idle; aboveCapShare how much of the quota a pool must use on average
// for throttling to be demand above the cap.
const (
	idleShare     = 0.1
	aboveCapShare = 0.8
)

// Diagnose reads the trace's counters the way the seed chapter does: the
// average against the quota, the share of periods throttled, and the
// mechanism that explains the difference. b adds the latency wanted.
func Diagnose(t *history.Trace, b Budget) Diagnosis {
	var d Diagnosis
	say := func(format string, args ...any) { d.Lines = append(d.Lines, fmt.Sprintf(format, args...)) }
	m := Measured(t)
	lim := t.Limit
	if lim.QuotaUsec < 0 {
		say("the pool has no CPU limit (cpu.max \"max\"): nothing throttles it")
		return d
	}
	dur := float64(len(t.Samples)) * float64(t.IntervalUsec)
	use := float64(m.UsageUsec) / (dur * lim.VCPU())
	quotaText := fmt.Sprintf("the %s quota", msText(lim.QuotaUsec))
	if m.NrThrottled == 0 && m.ThrottledUsec == 0 {
		say("average use %s of %s per %s period, and no period throttled", pct(use), quotaText, msText(lim.PeriodUsec))
		return d
	}
	say("average use %s of %s per %s period, yet %s of periods throttled (%d of %d), %s throttled in all",
		pct(use), quotaText, msText(lim.PeriodUsec), pct(m.ThrottledRatio()), m.NrThrottled, m.NrPeriods, secText(m.ThrottledUsec))
	if m.QueryThrottledUsec > 0 || m.QueryNrThrottled > 0 {
		say("of which %s in query cgroups held by their own limit, in %d periods: the pool's own cpu.stat does not show it",
			secText(m.QueryThrottledUsec), m.QueryNrThrottled)
	}

	quotaPerInterval := float64(lim.QuotaUsec) * float64(t.IntervalUsec) / float64(lim.PeriodUsec)
	idle := func(i int) bool { return i >= 0 && float64(t.Samples[i].UsageUsec) < idleShare*quotaPerInterval }
	throttled := func(i int) bool { return i >= 0 && i < len(t.Samples) && t.Samples[i].Throttled() }
	par, episodes, afterIdle := 1, 0, 0
	for i := range t.Samples {
		if !throttled(i) {
			continue
		}
		par = max(par, threadsOf(t, t.Samples[i]))
		if i > 0 {
			par = max(par, threadsOf(t, t.Samples[i-1]))
		}
		if !throttled(i - 1) {
			episodes++
			if idle(i-1) || (idle(i-2) && !throttled(i-2)) {
				afterIdle++
			}
		}
	}
	cpus := min(par, t.CPUs)
	exhaust := lim.QuotaUsec / int64(cpus)

	if use >= aboveCapShare {
		d.Mechanisms = append(d.Mechanisms, AboveCap)
		say("the pool used %s of its cap on average: its demand is above the cap, and only a higher cap removes the throttling (%s)", pct(use), AboveCap)
	}
	if cpus >= 2 && exhaust <= lim.PeriodUsec/2 {
		d.Mechanisms = append(d.Mechanisms, Parallelism)
		who := fmt.Sprintf("%d threads", par)
		if par > cpus {
			who += fmt.Sprintf(" on %d CPUs", cpus)
		}
		say("%s spend %s in the first %s of each %s period and wait out the remaining %s (%s)",
			who, quotaText, msText(exhaust), msText(lim.PeriodUsec), msText(lim.PeriodUsec-exhaust), Parallelism)
	}
	if use < aboveCapShare && afterIdle*2 >= episodes {
		d.Mechanisms = append(d.Mechanisms, BurstAfterIdle)
		say("%d of %d throttled stretches start after an idle interval: the work that arrives needs more than one quota at once, and the quota the idle periods left unused is gone (%s)",
			afterIdle, episodes, BurstAfterIdle)
	}
	if lim.QuotaUsec < t.SliceUsec*int64(cpus) {
		d.Mechanisms = append(d.Mechanisms, SmallQuota)
		say("%s is less than one %s slice for each of the %d CPUs the threads run on: runqueues draw quota a slice at a time, so some get none while quota sits unused on others (%s)",
			quotaText, msText(t.SliceUsec), cpus, SmallQuota)
	}
	if b.MaxDelayUsec > 0 && m.MaxDelayUsec > b.MaxDelayUsec && lim.PeriodUsec-exhaust > b.MaxDelayUsec {
		d.Mechanisms = append(d.Mechanisms, LongPeriod)
		say("a thread throttled %s into a %s period waits up to %s, more than the %s wanted: a shorter period gives the same share in shorter waits (%s)",
			msText(exhaust), msText(lim.PeriodUsec), msText(lim.PeriodUsec-exhaust), msText(b.MaxDelayUsec), LongPeriod)
	}
	if psi, ok := pressure(t); ok {
		say("threads waited for a CPU %s of the time (cpu.pressure some)", pct(psi/dur))
	}
	return d
}

// pressure sums the trace's PSI "some" time, if every sample has it.
func pressure(t *history.Trace) (float64, bool) {
	var sum float64
	for _, s := range t.Samples {
		if s.PressureSomeUsec == nil {
			return 0, false
		}
		sum += float64(*s.PressureSomeUsec)
	}
	return sum, true
}

// pct renders a share as a whole percent, or with one decimal below 10%.
func pct(v float64) string {
	p := v * 100
	if p < 10 && p != math.Trunc(p) {
		return fmt.Sprintf("%.1f%%", p)
	}
	return fmt.Sprintf("%.0f%%", p)
}

// secText renders µs as seconds with millisecond precision: "0.312 s".
func secText(usec uint64) string { return fmt.Sprintf("%.3f s", float64(usec)/1e6) }
