package compare

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// SVG geometry of one group's chart, in px: a plot of chartPlotW ×
// chartPlotH with room for the y labels on the left, the legend above and
// the x labels below.
const (
	chartPlotW  = 720
	chartPlotH  = 220
	chartLeft   = 72
	chartRight  = 96 // room for the quota line's label
	chartTop    = 40
	chartBottom = 48
	chartBarMax = 28 // widest bar
)

// Colours of the chart: predicted in blues, measured in oranges, the
// quota in red. The screenshot test looks for the bar colours.
const (
	colourPredictedRan = "#1f4e79"
	colourPredictedThr = "#9ecae1"
	colourMeasuredRan  = "#b35806"
	colourMeasuredThr  = "#fdb863"
	colourQuota        = "#c00000"
	// colourMiss marks a group or a period that misses the target.
	colourMiss = "#d4006a"
)

// WriteHTML renders r as one self-contained HTML page: a one-line verdict
// per group at the top, then per group its counters table and, when r has
// windows, one chart with the kernel model's prediction and the
// measurement side by side in every period (CPU time ran and throttled,
// in ms, against the quota), each period's values on hover. It loads
// nothing from the network.
func WriteHTML(w io.Writer, r *Report) error {
	var b strings.Builder
	esc := html.EscapeString
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	fmt.Fprintf(&b, "<title>poolagent compare: %s</title>\n", esc(r.Scenario))
	b.WriteString(`<style>
body{font:15px/1.45 system-ui,sans-serif;margin:2em;color:#222}
p,ul,table{max-width:1000px}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}
th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
.miss{color:#b00020}.ok{color:#1b5e20}
.missmark{background:` + colourMiss + `;color:#fff;padding:0 5px;border-radius:3px;font-weight:bold}
ul.verdicts{padding-left:1.2em}
svg{display:block;margin:.5em 0;width:100%;height:auto}
svg text{font:12px system-ui,sans-serif;fill:#333}
svg .grid{stroke:#e3e3e3;stroke-width:1}
svg .axis{stroke:#666;stroke-width:1}
svg .hover{fill:transparent}
svg .hover:hover{fill:rgba(0,0,0,.06)}
</style>
</head>
<body>
`)
	fmt.Fprintf(&b, "<h1>poolagent compare: %s</h1>\n", esc(r.Scenario))
	e := r.Env
	if e.Measured {
		fmt.Fprintf(&b, "<p>Measured on Linux %s, cgroup %s, the scenario's %d CPU(s), %d run(s), host load %.2f → %.2f. Kernel model: slice %d µs, tick %d µs (%s).</p>\n",
			esc(e.Kernel), esc(e.Cgroup), e.CPUs, e.Runs, e.Load1Start, e.Load1End, e.SliceUsec, e.TickUsec, esc(e.TickSource))
		fmt.Fprintf(&b, "<p>Target (%s): %s. Diff = kernel model − measured mean, in %% of measured.</p>\n", esc(r.Target.Class), esc(r.Target.Text()))
	} else {
		fmt.Fprintf(&b, "<p>Simulation only, the scenario's %d CPU(s): %s. Kernel model: slice %d µs, tick %d µs (%s).</p>\n",
			e.CPUs, esc(e.Why), e.SliceUsec, e.TickUsec, esc(e.TickSource))
	}
	if e.ModelCaveat != "" {
		fmt.Fprintf(&b, "<p class=\"miss\">Note: %s.</p>\n", esc(e.ModelCaveat))
	}
	if e.Measured {
		sum := r.Summarize()
		class := "ok"
		if !sum.OK {
			class = "miss"
		}
		fmt.Fprintf(&b, "<p class=\"%s\"><b>%s</b></p>\n", class, esc(sum.Line))
	}
	b.WriteString("<p>Predicted is the kernel-faithful model (docs/kernel-model.md), run with the phases of the period timers and the tick measured in each run; the simple model, the book chapter's fixed window (docs/simulator.md), is in the tables only.</p>\n")
	b.WriteString("<ul class=\"verdicts\">\n")
	for _, g := range r.Groups {
		fmt.Fprintf(&b, "<li>%s</li>\n", verdictHTML(r, g))
	}
	b.WriteString("</ul>\n")
	for _, g := range r.Groups {
		writeGroupHTML(&b, r, g)
	}
	writeTasksHTML(&b, r)
	b.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// missMark marks a group that missed its target.
const missMark = "<span class=\"missmark\">✗ missed</span>"

// verdictHTML is the one-line verdict of g: whether the kernel model met
// its target, with the throttled time (or, for a group without a quota of
// its own that never throttled, the CPU time used) measured and predicted.
func verdictHTML(r *Report, g GroupResult) string {
	esc := html.EscapeString
	f := map[string]FieldCompare{}
	for _, fc := range g.Fields {
		f[fc.Field] = fc
	}
	usage, thr, nrThr, periods := f["usage_usec"], f["throttled_usec"], f["nr_throttled"], f["nr_periods"]
	unthrottled := g.QuotaUsec < 0 && nrThr.Measured.Max == 0 && nrThr.Kernel.Max == 0
	var figures string
	switch {
	case unthrottled && r.Env.Measured:
		figures = fmt.Sprintf("no quota of its own; used %s of CPU measured, %s predicted (%s)",
			msText(usage.Measured.Mean), msText(usage.Kernel.Mean), pctText(usage))
	case unthrottled:
		figures = fmt.Sprintf("no quota of its own; predicted to use %s of CPU (not measured)", msText(usage.Kernel.Mean))
	case r.Env.Measured:
		figures = fmt.Sprintf("throttled %s measured, %s predicted (%s); throttled in %s of %s periods measured, %s predicted",
			msText(thr.Measured.Mean), msText(thr.Kernel.Mean), pctText(thr),
			meanText(nrThr.Measured), meanText(periods.Measured), meanText(nrThr.Kernel))
	default:
		figures = fmt.Sprintf("predicted throttled %s in %s of %s periods (not measured)",
			msText(thr.Kernel.Mean), meanText(nrThr.Kernel), meanText(periods.Kernel))
	}
	verdict := ""
	switch {
	case !r.Env.Measured:
	case len(g.Misses) == 0:
		verdict = "<span class=\"ok\">" + esc(groupVerdict(g)) + "</span> — "
	default:
		verdict = missMark + " <span class=\"miss\">" + esc(groupVerdict(g)) + "</span> — "
	}
	if g.Tie != "" && r.Env.Measured {
		verdict += esc(g.Tie) + " — "
	}
	return fmt.Sprintf("<b>%s</b> (cpu.max %s): %s%s", esc(g.Path), esc(g.Limit), verdict, esc(figures))
}

func writeGroupHTML(b *strings.Builder, r *Report, g GroupResult) {
	esc := html.EscapeString
	mark := ""
	if len(g.Misses) > 0 {
		mark = " " + missMark
	}
	fmt.Fprintf(b, "<h2>%s <small>(%s, cpu.max %s)</small>%s</h2>\n", esc(g.Name), esc(g.Path), esc(g.Limit), mark)
	if r.WindowUsec > 0 && len(g.Runs) > 0 {
		writeChart(b, r, g)
	}
	if r.Env.Measured {
		b.WriteString("<table>\n<tr><th>counter</th><th>measured mean</th><th>min</th><th>max</th><th>kernel model</th><th>diff</th><th>simple model</th></tr>\n")
		for _, f := range g.Fields {
			fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%d</td></tr>\n",
				f.Field, meanText(f.Measured), f.Measured.Min, f.Measured.Max, meanText(f.Kernel), esc(diffText(f)), f.Simple)
		}
		b.WriteString("</table>\n")
	} else {
		b.WriteString("<table>\n<tr><th>counter</th><th>kernel model</th><th>simple model</th></tr>\n")
		for _, f := range g.Fields {
			fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td><td>%d</td></tr>\n", f.Field, meanText(f.Kernel), f.Simple)
		}
		b.WriteString("</table>\n")
	}
}

// writeChart draws run 1 of g as one chart: per period a bar of the
// kernel model's prediction beside one of the measurement, each stacked
// from the CPU time the group ran and the time it was throttled (summed
// over CPUs, as cpu.stat counts it), in ms on the y axis, time since the
// run's start in ms on the x axis, and the group's quota as a line.
func writeChart(b *strings.Builder, r *Report, g GroupResult) {
	run := g.Runs[0]
	predicted, measured := run.KernelWindows, run.MeasuredWindows
	n := max(len(predicted), len(measured))
	if n == 0 {
		return
	}
	windowMs, quotaMs := float64(r.WindowUsec)/1000, float64(g.QuotaUsec)/1000
	yMax, steps := axisOf(max(chartTopMs(predicted, measured, quotaMs), 1))
	y := func(ms float64) float64 { return chartTop + chartPlotH - ms/yMax*chartPlotH }
	width, height := chartLeft+chartPlotW+chartRight, chartTop+chartPlotH+chartBottom

	fmt.Fprintf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"%s: CPU time ran and throttled per period, predicted beside measured\">\n",
		width, height, width, height, html.EscapeString(g.Name))
	writeLegend(b, len(measured) > 0, quotaMs > 0)
	// Y axis: grid lines and labels in ms.
	for i := 0; i <= steps; i++ {
		v := yMax * float64(i) / float64(steps)
		fmt.Fprintf(b, "<line class=\"grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/><text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
			chartLeft, y(v), chartLeft+chartPlotW, y(v), chartLeft-6, y(v)+4, numText(v))
	}
	fmt.Fprintf(b, "<text transform=\"translate(14 %d) rotate(-90)\" text-anchor=\"middle\">CPU time per period (ms)</text>\n", chartTop+chartPlotH/2)
	misses := periodMisses(r, g)
	writePeriods(b, n, windowMs, predicted, measured, misses, y)
	fmt.Fprintf(b, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n", chartLeft, chartTop+chartPlotH, chartLeft+chartPlotW, chartTop+chartPlotH)
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">time since the run's start (ms); one slot per %s ms period</text>\n",
		chartLeft+chartPlotW/2, chartTop+chartPlotH+38, numText(windowMs))
	if quotaMs > 0 {
		qy := y(quotaMs)
		fmt.Fprintf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\" stroke-dasharray=\"6 3\"/><text x=\"%d\" y=\"%.1f\">quota %s ms</text>\n",
			chartLeft, qy, chartLeft+chartPlotW, qy, colourQuota, chartLeft+chartPlotW+6, qy+4, numText(quotaMs))
	}
	b.WriteString("</svg>\n")
	note := ""
	if r.Env.Measured && len(measured) == 0 {
		note = " The measurement was not sampled per period: run compare with --timeline."
	}
	if slices.Contains(misses, true) {
		note += fmt.Sprintf(" A %s mark above a period: the predicted throttled time misses the target there (%s).", "<span class=\"missmark\">&nbsp;</span>", html.EscapeString(r.Target.Text()))
	}
	aboveQuota := ""
	if quotaMs > 0 {
		aboveQuota = fmt.Sprintf("A ran bar can rise above the quota line: a period here is a window from the run's start, not the kernel's own period, so it can hold the end of one and the start of the next; "+
			"the kernel hands out quota in slices of %d µs and stops a group only at its next tick (%d µs), so a group can run past its quota by up to a slice or a tick; and cpu.max.burst lets it spend quota saved from earlier periods. ",
			r.Env.SliceUsec, r.Env.TickUsec)
	}
	fmt.Fprintf(b, "<p><small>Run 1; predicted by the kernel-faithful model. Throttled time is summed over the CPUs that waited, as cpu.stat counts it, so a bar can rise above one period; the scenario has %d CPU(s). %s"+
		"Hover over a period for its values.%s</small></p>\n",
		r.Env.CPUs, aboveQuota, note)
}

// chartTopMs is the highest value the chart shows, in ms: the tallest
// bar, or the quota (0 for none) if it is higher.
func chartTopMs(predicted, measured []Window, quotaMs float64) float64 {
	top := max(quotaMs, 0)
	for _, ws := range [][]Window{predicted, measured} {
		for _, w := range ws {
			top = max(top, float64(w.RanUsec+w.ThrottledUsec)/1000)
		}
	}
	return top
}

// writeLegend draws the chart's legend: the predicted bars, the measured
// ones if there are any, and the quota line if there is one.
func writeLegend(b *strings.Builder, measured, quota bool) {
	legend := []struct{ colour, label string }{{colourPredictedRan, "predicted ran"}, {colourPredictedThr, "predicted throttled"}}
	// "predicted" is the kernel-faithful model: the page says so above
	// the charts.
	if measured {
		legend = append(legend, struct{ colour, label string }{colourMeasuredRan, "measured ran"}, struct{ colour, label string }{colourMeasuredThr, "measured throttled"})
	}
	x := float64(chartLeft)
	for _, l := range legend {
		fmt.Fprintf(b, "<rect x=\"%.0f\" y=\"10\" width=\"14\" height=\"14\" fill=\"%s\"/><text x=\"%.0f\" y=\"22\">%s</text>\n", x, l.colour, x+19, l.label)
		x += 19 + 7.5*float64(len(l.label)) + 18
	}
	if quota {
		fmt.Fprintf(b, "<line x1=\"%.0f\" y1=\"17\" x2=\"%.0f\" y2=\"17\" stroke=\"%s\" stroke-width=\"2\" stroke-dasharray=\"6 3\"/><text x=\"%.0f\" y=\"22\">quota</text>\n",
			x, x+22, colourQuota, x+27)
	}
}

// writePeriods draws the chart's n periods, one slot each with its hover
// text, the predicted bar left of the measured one, and a time label
// under every tenth or so.
func writePeriods(b *strings.Builder, n int, windowMs float64, predicted, measured []Window, misses []bool, y func(float64) float64) {
	slot := float64(chartPlotW) / float64(n)
	bar := min(float64(chartBarMax), slot*0.4)
	labelEvery := (n + 9) / 10
	for i := range n {
		x0 := chartLeft + slot*float64(i)
		title := periodTitle(i, windowMs, predicted, measured)
		missed := i < len(misses) && misses[i]
		if missed {
			title += "; throttled time predicted misses the target"
		}
		fmt.Fprintf(b, "<g><title>%s</title>\n", title)
		fmt.Fprintf(b, "<rect class=\"hover\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\"/>\n", x0, chartTop, slot, chartPlotH)
		mid := x0 + slot/2
		if i < len(predicted) {
			writeBar(b, mid-bar-1, bar, predicted[i], y, colourPredictedRan, colourPredictedThr)
		}
		if i < len(measured) {
			writeBar(b, mid+1, bar, measured[i], y, colourMeasuredRan, colourMeasuredThr)
		}
		if missed {
			fmt.Fprintf(b, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"8\" fill=\"%s\"/>\n", x0+2, chartTop-10, slot-4, colourMiss)
		}
		b.WriteString("</g>\n")
		if i%labelEvery == 0 {
			fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x0, chartTop+chartPlotH+16, numText(windowMs*float64(i)))
		}
	}
}

// periodMisses says, per window of run 1, whether the kernel model's
// throttled time misses the target against the measured one: by more than
// the target's percentage of the measured time and the one tick it always
// accepts. Only for a group whose throttled_usec is judged and whose
// measurement was sampled; nil otherwise.
func periodMisses(r *Report, g GroupResult) []bool {
	if !slices.Contains(g.Judged, "throttled_usec") || len(g.Runs) == 0 {
		return nil
	}
	run := g.Runs[0]
	n := min(len(run.KernelWindows), len(run.MeasuredWindows))
	var out []bool
	for i := range n {
		p, m := float64(run.KernelWindows[i].ThrottledUsec), float64(run.MeasuredWindows[i].ThrottledUsec)
		out = append(out, math.Abs(p-m) > max(r.Target.FloorUsec, r.Target.Pct/100*m))
	}
	return out
}

// writeBar draws one stacked bar: ran at the bottom, throttled above.
func writeBar(b *strings.Builder, x, width float64, w Window, y func(float64) float64, ran, thr string) {
	ranMs, thrMs := float64(w.RanUsec)/1000, float64(w.ThrottledUsec)/1000
	fmt.Fprintf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", x, y(ranMs), width, y(0)-y(ranMs), ran)
	fmt.Fprintf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", x, y(ranMs+thrMs), width, y(ranMs)-y(ranMs+thrMs), thr)
}

// periodTitle is the hover text of period i.
func periodTitle(i int, windowMs float64, predicted, measured []Window) string {
	s := fmt.Sprintf("period %d, %s–%s ms", i+1, numText(windowMs*float64(i)), numText(windowMs*float64(i+1)))
	if i < len(predicted) {
		s += fmt.Sprintf("; predicted: ran %s, throttled %s", msText(float64(predicted[i].RanUsec)), msText(float64(predicted[i].ThrottledUsec)))
	}
	if i < len(measured) {
		s += fmt.Sprintf("; measured: ran %s, throttled %s", msText(float64(measured[i].RanUsec)), msText(float64(measured[i].ThrottledUsec)))
	}
	return s
}

// axisOf is the y axis for data up to top: steps of a round size (1, 2,
// 2.5 or 5 times a power of ten) no more than five of which reach top,
// and yMax the first step at or above it. The axis ends near the data:
// 101 ms gives 5 steps of 25 to 125, not 200.
func axisOf(top float64) (yMax float64, steps int) {
	want := top / 5
	p := math.Pow(10, math.Floor(math.Log10(want)))
	step := 10 * p
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*p >= want {
			step = m * p
			break
		}
	}
	steps = int(math.Ceil(top/step - 1e-9))
	return float64(steps) * step, steps
}

// numText renders a number of ms without a needless fraction: "40", "2.5".
func numText(v float64) string {
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
}

func writeTasksHTML(b *strings.Builder, r *Report) {
	esc := html.EscapeString
	b.WriteString("<h2>Tasks</h2>\n<table>\n")
	if r.Env.Measured {
		b.WriteString("<tr><th>task</th><th>group</th><th>arrive</th><th>need</th><th>threads</th><th>pinned to</th><th>done measured</th><th>kernel model</th><th>diff</th><th>simple model</th></tr>\n")
	} else {
		b.WriteString("<tr><th>task</th><th>group</th><th>arrive</th><th>need</th><th>threads</th><th>pinned to</th><th>done kernel model</th><th>simple model</th></tr>\n")
	}
	for _, t := range r.Tasks {
		ms, ks := t.doneSpreads()
		fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%d</td><td>%s</td>", esc(t.Name), esc(t.Group),
			msText(float64(t.ArriveUsec)), msText(float64(t.NeedUsec)), t.Threads, t.cpusText())
		if r.Env.Measured {
			fmt.Fprintf(b, "<td>%s</td><td>%s</td><td>%s</td>", msText(ms.Mean), msText(ks.Mean), signedMs(ks.Mean-ms.Mean))
		} else {
			fmt.Fprintf(b, "<td>%s</td>", msText(ks.Mean))
		}
		fmt.Fprintf(b, "<td>%s</td></tr>\n", msText(float64(t.SimpleDoneUsec)))
	}
	b.WriteString("</table>\n")
}
