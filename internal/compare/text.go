package compare

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// timelineCell is the width of one period in the terminal timeline.
const timelineCell = 10

// WriteText renders r for a terminal: per group the counters measured,
// predicted by both models and the difference; per task the completion
// times; then, when r has windows, a timeline of the first periods in the
// chapter's style (■ ran, · throttled), kernel model above measured; and
// last the verdict over every group (Report.Summarize).
func WriteText(w io.Writer, r *Report, periods int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %s\n", r.Scenario)
	e := r.Env
	if e.Measured {
		fmt.Fprintf(&b, "measured on Linux %s, cgroup %s, scenario's CPUs: %d, %d run(s), host load %.2f → %.2f\n", e.Kernel, e.Cgroup, e.CPUs, e.Runs, e.Load1Start, e.Load1End)
	} else {
		fmt.Fprintf(&b, "simulation only, scenario's CPUs: %d: %s\n", e.CPUs, e.Why)
	}
	fmt.Fprintf(&b, "kernel model: slice %dµs, tick %dµs (%s)\n", e.SliceUsec, e.TickUsec, e.TickSource)
	if e.ModelCaveat != "" {
		fmt.Fprintf(&b, "note: %s\n", e.ModelCaveat)
	}
	if e.Measured {
		t := r.Target
		fmt.Fprintf(&b, "target (%s): %s\n", t.Class, t.Text())
		b.WriteString("diff = kernel model − measured mean (in % of measured): + means the model predicts more;\n" +
			"nr_periods, nr_bursts and burst_usec are shown, not judged\n")
	}
	for _, g := range r.Groups {
		b.WriteString("\n")
		writeGroup(&b, r, g)
	}
	b.WriteString("\n")
	writeTasks(&b, r)
	if r.WindowUsec > 0 && periods > 0 {
		b.WriteString("\n")
		writeTimeline(&b, r, periods)
	}
	b.WriteString("\n" + r.Summarize().Line + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeGroup(b *strings.Builder, r *Report, g GroupResult) {
	fmt.Fprintf(b, "group %s (%s) cpu.max %s", g.Name, g.Path, g.Limit)
	if g.Class != "" {
		fmt.Fprintf(b, ", workload class: %s", g.Class)
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	if r.Env.Measured {
		fmt.Fprintln(tw, "  counter\tmeasured mean [min..max]\tkernel model\tdiff\tsimple model")
	} else {
		fmt.Fprintln(tw, "  counter\tkernel model\tsimple model")
	}
	for _, f := range g.Fields {
		if !r.Env.Measured {
			fmt.Fprintf(tw, "  %s\t%s\t%d\n", f.Field, meanText(f.Kernel), f.Simple)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s [%d..%d]\t%s\t%s\t%d\n", f.Field, meanText(f.Measured), f.Measured.Min, f.Measured.Max,
			meanText(f.Kernel), diffText(f), f.Simple)
	}
	tw.Flush()
	if r.Env.Measured {
		fmt.Fprintf(b, "  %s\n", groupVerdict(g))
	}
	if g.Tie != "" && r.Env.Measured {
		fmt.Fprintf(b, "  %s\n", g.Tie)
	}
}

// groupVerdict says how the kernel model fared on g, naming each counter
// judged: "kernel model within target on usage_usec, nr_throttled,
// throttled_usec", or which it missed and which it met.
func groupVerdict(g GroupResult) string {
	var met []string
	for _, name := range g.Judged {
		missed := false
		for _, m := range g.Misses {
			missed = missed || strings.HasPrefix(m, name+" ")
		}
		if !missed {
			met = append(met, name)
		}
	}
	var s string
	switch {
	case len(g.Misses) == 0:
		s = "kernel model within target on " + strings.Join(met, ", ")
	case len(g.OutsideSpread) == 0:
		s = "kernel model missed the target, within the measured runs' range [min..max]: " + strings.Join(g.Misses, "; ")
	default:
		s = "kernel model missed: " + strings.Join(g.Misses, "; ")
	}
	if len(g.Misses) > 0 && len(met) > 0 {
		s += "; within target on " + strings.Join(met, ", ")
	}
	if g.Tie != "" {
		s += " (nr_throttled and throttled_usec not judged: below)"
	}
	return s
}

// meanText renders a mean without decimals when it is whole.
func meanText(s Spread) string {
	if s.Mean == float64(int64(s.Mean)) {
		return fmt.Sprintf("%d", int64(s.Mean))
	}
	return fmt.Sprintf("%.1f", s.Mean)
}

func diffText(f FieldCompare) string {
	d := fmt.Sprintf("%+.0f", f.Diff)
	if f.Diff != float64(int64(f.Diff)) && f.Diff > -10 && f.Diff < 10 {
		d = fmt.Sprintf("%+.1f", f.Diff)
	}
	if f.DiffPct == nil {
		return d
	}
	return fmt.Sprintf("%s (%+.1f%%)", d, *f.DiffPct)
}

func writeTasks(b *strings.Builder, r *Report) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	if r.Env.Measured {
		fmt.Fprintln(tw, "task\tgroup\tarrive\tneed\tthreads\tpinned to\tdone measured [min..max]\tkernel model\tdiff\tsimple model")
	} else {
		fmt.Fprintln(tw, "task\tgroup\tarrive\tneed\tthreads\tpinned to\tdone kernel model\tsimple model")
	}
	for _, t := range r.Tasks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t", t.Name, t.Group, msText(float64(t.ArriveUsec)), msText(float64(t.NeedUsec)), t.Threads, t.cpusText())
		ms, ks := t.doneSpreads()
		if r.Env.Measured {
			fmt.Fprintf(tw, "%s [%s..%s]\t%s\t%s\t", msText(ms.Mean), msText(float64(ms.Min)), msText(float64(ms.Max)),
				msText(ks.Mean), signedMs(ks.Mean-ms.Mean))
		} else {
			fmt.Fprintf(tw, "%s\t", msText(ks.Mean))
		}
		fmt.Fprintf(tw, "%s\n", msText(float64(t.SimpleDoneUsec)))
	}
	tw.Flush()
	if wideSpread(r) {
		b.WriteString("A task's measured done time varies from run to run with where the run starts in its groups'\n" +
			"periods (the period timers' phase) and with other load on the host; each run's kernel model\n" +
			"uses that run's measured phases, so its own spread follows.\n")
	}
}

// wideSpread says whether a task's measured done time spread over more
// than a scheduler tick across the runs.
func wideSpread(r *Report) bool {
	if !r.Env.Measured || r.Env.Runs < 2 {
		return false
	}
	for _, t := range r.Tasks {
		if ms, _ := t.doneSpreads(); int64(ms.Max-ms.Min) > r.Env.TickUsec {
			return true
		}
	}
	return false
}

// msText renders microseconds as milliseconds with one decimal.
func msText(usec float64) string { return fmt.Sprintf("%.1fms", usec/1000) }

func signedMs(usec float64) string { return fmt.Sprintf("%+.1fms", usec/1000) }

// writeTimeline draws the first periods of run 1 of every group.
func writeTimeline(b *strings.Builder, r *Report, periods int) {
	fmt.Fprintf(b, "timeline of run 1, one cell per %s period: ■ ran, · throttled (summed over CPUs, share of the scenario's %d CPU(s)), blank idle;\n"+
		"one mark = %s, less than half a mark is not drawn\n",
		msText(float64(r.WindowUsec)), r.Env.CPUs, msText(float64(r.WindowUsec)*float64(max(r.Env.CPUs, 1))/timelineCell))
	width := 0
	for _, g := range r.Groups {
		width = max(width, len(g.Name))
	}
	for _, g := range r.Groups {
		if len(g.Runs) == 0 {
			continue
		}
		run := g.Runs[0]
		fmt.Fprintf(b, "%-*s  kernel    %s\n", width, g.Name, cells(run.KernelWindows, periods, r.WindowUsec, r.Env.CPUs))
		if r.Env.Measured {
			measured := "(not sampled: run with --timeline)"
			if len(run.MeasuredWindows) > 0 {
				measured = cells(run.MeasuredWindows, periods, r.WindowUsec, r.Env.CPUs)
			}
			fmt.Fprintf(b, "%-*s  measured  %s\n", width, "", measured)
		}
	}
}

// cells renders windows as |■■····  | cells of timelineCell characters.
func cells(ws []Window, periods int, windowUsec int64, cpus int) string {
	var b strings.Builder
	b.WriteString("|")
	for i := range min(periods, len(ws)) {
		ran, thr := cellCounts(ws[i], windowUsec, cpus, timelineCell)
		b.WriteString(strings.Repeat("■", ran))
		b.WriteString(strings.Repeat("·", thr))
		b.WriteString(strings.Repeat(" ", timelineCell-ran-thr))
		b.WriteString("|")
	}
	return b.String()
}

// cellCounts converts a window into how many of width characters show run
// time and throttled time: each is its share of the window's capacity
// (windowUsec × cpus), rounded to the nearest character (so a sliver, say
// a worker's start before its arrival, is not drawn as a full mark), and
// the two never exceed width.
func cellCounts(w Window, windowUsec int64, cpus, width int) (ran, throttled int) {
	capacity := float64(windowUsec) * float64(max(cpus, 1))
	scale := func(usec uint64) int { return int(float64(usec)/capacity*float64(width) + 0.5) }
	ran = min(scale(w.RanUsec), width)
	throttled = min(scale(w.ThrottledUsec), width-ran)
	return ran, throttled
}
