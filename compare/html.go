package compare

import (
	"fmt"
	"html"
	"io"
	"strings"
)

// SVG geometry of one group's chart, in px.
const (
	svgBarWidth = 14 // one period
	svgBarGap   = 4
	svgLaneH    = 60 // height of a full window (all CPUs busy)
	svgLeft     = 78 // room for lane labels
	svgTop      = 8
)

// WriteHTML renders r as one self-contained HTML page: the counters table
// of every group and, when r has windows, an inline SVG chart per group
// with periods on the x axis and, per period, the time the group ran
// (dark) and was throttled (light), kernel model above measured. It loads
// nothing from the network.
func WriteHTML(w io.Writer, r *Report) error {
	var b strings.Builder
	esc := html.EscapeString
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	fmt.Fprintf(&b, "<title>poolagent compare: %s</title>\n", esc(r.Scenario))
	b.WriteString(`<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}
th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
.miss{color:#b00020}.ok{color:#1b5e20}
.ran{fill:#1f4e79}.thr{fill:#9ecae1}.axis{stroke:#999;stroke-width:1}
svg text{font:11px system-ui,sans-serif;fill:#444}
</style>
</head>
<body>
`)
	fmt.Fprintf(&b, "<h1>poolagent compare: %s</h1>\n", esc(r.Scenario))
	e := r.Env
	if e.Measured {
		fmt.Fprintf(&b, "<p>Measured on Linux %s, cgroup %s, %d CPU(s), %d run(s), load %.2f → %.2f. Kernel model: slice %d µs, tick %d µs (%s).</p>\n",
			esc(e.Kernel), esc(e.Cgroup), e.CPUs, e.Runs, e.Load1Start, e.Load1End, e.SliceUsec, e.TickUsec, esc(e.TickSource))
		fmt.Fprintf(&b, "<p>Target (%s): %s.</p>\n", esc(r.Target.Class), esc(r.Target.Text()))
	} else {
		fmt.Fprintf(&b, "<p>Simulation only, %d CPU(s): %s. Kernel model: slice %d µs, tick %d µs (%s).</p>\n",
			e.CPUs, esc(e.Why), e.SliceUsec, e.TickUsec, esc(e.TickSource))
	}
	for _, g := range r.Groups {
		writeGroupHTML(&b, r, g)
	}
	writeTasksHTML(&b, r)
	b.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeGroupHTML(b *strings.Builder, r *Report, g GroupResult) {
	esc := html.EscapeString
	fmt.Fprintf(b, "<h2>%s <small>(%s, cpu.max %s)</small></h2>\n", esc(g.Name), esc(g.Path), esc(g.Limit))
	if r.Env.Measured {
		b.WriteString("<table>\n<tr><th>counter</th><th>measured mean</th><th>min</th><th>max</th><th>kernel model</th><th>diff</th><th>simple model</th></tr>\n")
		for _, f := range g.Fields {
			fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%d</td></tr>\n",
				f.Field, meanText(f.Measured), f.Measured.Min, f.Measured.Max, meanText(f.Kernel), esc(diffText(f)), f.Simple)
		}
		b.WriteString("</table>\n")
		if len(g.Misses) == 0 {
			b.WriteString("<p class=\"ok\">Kernel model within target.</p>\n")
		} else {
			fmt.Fprintf(b, "<p class=\"miss\">Kernel model missed: %s.</p>\n", esc(strings.Join(g.Misses, "; ")))
		}
	} else {
		b.WriteString("<table>\n<tr><th>counter</th><th>kernel model</th><th>simple model</th></tr>\n")
		for _, f := range g.Fields {
			fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td><td>%d</td></tr>\n", f.Field, meanText(f.Kernel), f.Simple)
		}
		b.WriteString("</table>\n")
	}
	if r.WindowUsec > 0 && len(g.Runs) > 0 {
		writeChart(b, r, g)
	}
}

// writeChart draws run 1 of g: one lane per source, one bar per period.
func writeChart(b *strings.Builder, r *Report, g GroupResult) {
	run := g.Runs[0]
	type lane struct {
		label string
		ws    []Window
	}
	lanes := []lane{{"kernel", run.KernelWindows}}
	if r.Env.Measured && len(run.MeasuredWindows) > 0 {
		lanes = append(lanes, lane{"measured", run.MeasuredWindows})
	}
	n := 0
	for _, l := range lanes {
		n = max(n, len(l.ws))
	}
	width := svgLeft + n*(svgBarWidth+svgBarGap) + 10
	laneStep := svgLaneH + 24
	height := svgTop + len(lanes)*laneStep + 14
	fmt.Fprintf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"%s: ran and throttled per period\">\n",
		width, height, html.EscapeString(g.Name))
	capacity := float64(r.WindowUsec) * float64(max(r.Env.CPUs, 1))
	for li, l := range lanes {
		base := svgTop + li*laneStep + svgLaneH
		fmt.Fprintf(b, "<text x=\"0\" y=\"%d\">%s</text>\n", base-svgLaneH/2, l.label)
		fmt.Fprintf(b, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n", svgLeft-2, base, width-10, base)
		for i, w := range l.ws {
			x := svgLeft + i*(svgBarWidth+svgBarGap)
			ranH := barHeight(w.RanUsec, capacity)
			thrH := min(barHeight(w.ThrottledUsec, capacity), svgLaneH-ranH)
			fmt.Fprintf(b, "<rect class=\"ran\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"><title>period %d: ran %s</title></rect>\n",
				x, base-ranH, svgBarWidth, ranH, i, msText(float64(w.RanUsec)))
			fmt.Fprintf(b, "<rect class=\"thr\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"><title>period %d: throttled %s</title></rect>\n",
				x, base-ranH-thrH, svgBarWidth, thrH, i, msText(float64(w.ThrottledUsec)))
		}
	}
	axisY := svgTop + len(lanes)*laneStep + 8
	for i := 0; i < n; i += 5 {
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\">%d</text>\n", svgLeft+i*(svgBarWidth+svgBarGap), axisY, i)
	}
	b.WriteString("</svg>\n")
	fmt.Fprintf(b, "<p><small>Periods of %s on the x axis (run 1); dark: CPU time the group ran, light: throttled time summed over CPUs; full height = %d CPU(s) for the whole period.</small></p>\n",
		msText(float64(r.WindowUsec)), r.Env.CPUs)
}

// barHeight scales usec of capacity to the lane height, at least 1 px for
// any non-zero time.
func barHeight(usec uint64, capacity float64) int {
	if usec == 0 {
		return 0
	}
	return min(svgLaneH, max(1, int(float64(usec)/capacity*svgLaneH+0.5)))
}

func writeTasksHTML(b *strings.Builder, r *Report) {
	esc := html.EscapeString
	b.WriteString("<h2>Tasks</h2>\n<table>\n")
	if r.Env.Measured {
		b.WriteString("<tr><th>task</th><th>group</th><th>arrive</th><th>need</th><th>threads</th><th>cpus</th><th>done measured</th><th>kernel model</th><th>diff</th><th>simple model</th></tr>\n")
	} else {
		b.WriteString("<tr><th>task</th><th>group</th><th>arrive</th><th>need</th><th>threads</th><th>cpus</th><th>done kernel model</th><th>simple model</th></tr>\n")
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
