package advise

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/poolagent/poolagent/internal/cpulimit"

	"github.com/poolagent/poolagent/internal/history"
)

// WriteText writes the diagnosis and the advice for a trace: the pool and
// its limit, the diagnosis lines, the statement to paste, and the
// measured and predicted counters.
func WriteText(w io.Writer, t *history.Trace, d Diagnosis, a *Advice) error {
	var b strings.Builder
	fmt.Fprintf(&b, "pool %s: cpu.max %s (%s%% of %s), %s, cgroup %s; %d intervals of %s (%s)\n",
		t.Pool, limitText(t.Limit), percentText(settingOf(t).CapPercent), count(roundTo(t.NodeCPUs, 3), "vCPU"), count(float64(t.CPUs), "CPU"), t.Cgroup,
		len(t.Samples), msText(t.IntervalUsec), secText(uint64(len(t.Samples))*uint64(t.IntervalUsec)))
	b.WriteString("\ndiagnosis\n")
	for _, l := range d.Lines {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	fmt.Fprintf(&b, "\nadvice for %s\n", a.Budget)
	writeMarginNotes(&b, a)
	writeChoice(&b, a)
	b.WriteString("\n")
	if err := writeOutcomes(&b, a); err != nil {
		return err
	}
	writeHowSure(&b, a)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeMarginNotes says why the margin was widened, if it was: the model
// does not reproduce the measurement, or finds less throttled time.
func writeMarginNotes(b *strings.Builder, a *Advice) {
	if a.Disagrees {
		levels := fmt.Sprintf("query-level throttling, %s of it, is not modelled: the trace does not name the query limit", secText(a.Measured.QueryThrottledUsec))
		if a.QueryLimitKnown {
			levels = fmt.Sprintf("query-level throttling, %s of it, is modelled with the trace's query limit", secText(a.Measured.QueryThrottledUsec))
		}
		fmt.Fprintf(b, "  the model does not reproduce the measurement: %d of %d periods were throttled, over the budget, but the\n"+
			"  replay of the current setting is within it (the demand is rebuilt from usage, throttled time and the threads that ran;\n"+
			"  %s).\n", a.Measured.NrThrottled, a.Measured.NrPeriods, levels)
		if a.Margin > 0 {
			fmt.Fprintf(b, "  The margin is widened to every need x%s, the least at which the replay is over the budget too.\n", percentText(roundTo(a.Margin, 2)))
		}
	}
	if a.Shortfall > 0 && !a.Disagrees {
		fmt.Fprintf(b, "  the replay of the current setting finds %s less throttled time than was measured, more than the model's\n"+
			"  error of %s%% for this workload: the margin is widened to every need x%s.\n", pct(a.Shortfall), percentText(a.Class.ErrorPercent), percentText(roundTo(a.Margin, 2)))
	}
}

// writeChoice writes the advice: the statement to paste, or why there is
// none.
func writeChoice(b *strings.Builder, a *Advice) {
	cur := a.Current.Setting
	switch {
	case a.Choice == nil && a.Disagrees:
		fmt.Fprintf(b, "  no advice: even with every need tripled the replay stays within the budget, so no change can be shown to help;\n  record the pool with poolagent record (it counts the threads that ran) and advise on that\n")
	case a.Choice == nil && a.Stopped:
		fmt.Fprintf(b, "  the search stopped at its work budget (docs/advise.md, Bounds) after %d model runs, before any setting met the budget:\n  advise a shorter stretch of the trace, or one with a longer interval\n", a.Replays)
	case a.Choice == nil:
		fmt.Fprintf(b, "  no setting meets the budget, not even a cap of the whole node (100%%) with any period and burst of the search:\n  the demand needs more than the node within the budget; a looser budget or fewer threads in the pool would\n")
	case a.Choice == &a.Current:
		fmt.Fprintf(b, "  the current setting meets the budget: nothing to change\n")
	default:
		if a.CapRaised {
			fmt.Fprintf(b, "  no period and burst meet the budget at the current cap of %s%%: it takes a cap of %s%%\n",
				percentText(cur.CapPercent), percentText(a.Choice.Setting.CapPercent))
		}
		fmt.Fprintf(b, "  %s\n", a.Choice.Setting.Alter(a.Pool, cur))
		fmt.Fprintf(b, "  (cpu.max %s)\n", limitText(a.Choice.Limit))
		if a.Stopped {
			fmt.Fprintf(b, "  the search stopped at its work budget (docs/advise.md, Bounds): this setting meets the budget, a smaller change may too\n")
		}
	}
}

// writeOutcomes writes the table of counters: measured, predicted now,
// and for advice, predicted under it as reconstructed and with the margin.
func writeOutcomes(b *strings.Builder, a *Advice) error {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  \tperiods\tthrottled\tratio\tthrottled time\tworst delay\tbursts")
	row := func(name string, o Outcome) {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\t%s\t%s\t%d\n", name, o.NrPeriods, o.NrThrottled, pct(o.ThrottledRatio()),
			secText(o.ThrottledUsec), msText(o.MaxDelayUsec), o.NrBursts)
	}
	row("measured", a.Measured)
	row("predicted now", a.Current.Predicted)
	if a.Choice != nil && a.Choice != &a.Current {
		row("predicted advised", a.Choice.Predicted)
		label := fmt.Sprintf("advised, every need +%s%% (the model's error)", percentText(a.Class.ErrorPercent))
		if a.Margin > 0 {
			label = fmt.Sprintf("advised, every need x%s (widened)", percentText(roundTo(a.Margin, 2)))
		}
		row(label, a.Choice.Margin)
	}
	return tw.Flush()
}

// writeHowSure writes how sure the advice is: the workload's class and
// its error, the margin the advice meets, and the replay of the recorded
// limit beside the measurement.
func writeHowSure(b *strings.Builder, a *Advice) {
	fmt.Fprintf(b, "\nhow sure: the workload's class is \"%s\"; the model's error taken for it is %s%% of throttled time:\n"+
		"  the largest error of the class's %d rows in docs/accuracy.md beyond the one scheduler tick each row is allowed,\n"+
		"  and at least the target the rows are held to (its worst row, tick included: %s).\n",
		a.Class.Name, percentText(a.Class.ErrorPercent), a.Class.Rows, a.Class.Worst)
	switch {
	case a.Choice != nil && a.Choice != &a.Current && a.Margin > 0:
		fmt.Fprintf(b, "  The advice meets the budget also with every need x%s (the widened margin).\n", percentText(roundTo(a.Margin, 2)))
	case a.Choice != nil && a.Choice != &a.Current:
		fmt.Fprintf(b, "  The advice meets the budget also with every need raised by %s%% (the model's error).\n", percentText(a.Class.ErrorPercent))
	}
	m, p := a.Measured, a.Current.Predicted
	fmt.Fprintf(b, "  Under the recorded limit the replay predicts %d throttled periods (%s) where %d (%s) were measured;\n"+
		"  it starts each interval's work at once at a period's start, so it errs towards more throttling.\n",
		p.NrThrottled, secText(p.ThrottledUsec), m.NrThrottled, secText(m.ThrottledUsec))
	fmt.Fprintf(b, "  %d model runs.\n", a.Replays)
}

// limitText renders a limit as cpu.max with its burst: "40000 100000",
// "40000 100000, burst 40000".
func limitText(l cpulimit.Limit) string {
	if l.QuotaUsec < 0 {
		return fmt.Sprintf("max %d", l.PeriodUsec)
	}
	if l.BurstUsec > 0 {
		return fmt.Sprintf("%d %d, burst %d", l.QuotaUsec, l.PeriodUsec, l.BurstUsec)
	}
	return fmt.Sprintf("%d %d", l.QuotaUsec, l.PeriodUsec)
}

// count reads like "1 CPU", "8 CPUs", "1.5 vCPUs".
func count(n float64, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return percentText(n) + " " + unit + "s"
}

// WriteVerify writes a verification's outcome: the trace's demand run for
// real under lim, measured beside the kernel model's prediction for the
// same run, and whether the measurement is within the budget.
func WriteVerify(w io.Writer, b Budget, lim cpulimit.Limit, cgroup string, predicted, measured Outcome) error {
	var s strings.Builder
	fmt.Fprintf(&s, "\nverify: the trace's demand run for real under cpu.max %s (cgroup %s)\n\n", limitText(lim), cgroup)
	tw := tabwriter.NewWriter(&s, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  \tperiods\tthrottled\tratio\tthrottled time\tworst delay\tbursts")
	for _, r := range []struct {
		name string
		o    Outcome
	}{{"predicted for the run", predicted}, {"measured", measured}} {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\t%s\t%s\t%d\n", r.name, r.o.NrPeriods, r.o.NrThrottled, pct(r.o.ThrottledRatio()),
			secText(r.o.ThrottledUsec), msText(r.o.MaxDelayUsec), r.o.NrBursts)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	verdict := "met"
	if !b.Meets(measured) {
		verdict = "NOT met"
	}
	fmt.Fprintf(&s, "\n  budget %s: %s (worst delay estimated as a period's throttled time over the CPUs the threads run on)\n", b, verdict)
	_, err := io.WriteString(w, s.String())
	return err
}
