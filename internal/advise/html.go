package advise

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"

	"github.com/poolagent/poolagent/internal/history"
)

// SVG geometry of a pool's chart, px, and its colours: measured in
// oranges, the replay under the advice in blues, the quota lines in red
// (the current one) and green (the advised one). The screenshot test
// looks for these colours.
const (
	htmlPlotW, htmlPlotH = 960, 220
	htmlLeft, htmlRight  = 72, 120
	htmlTop, htmlBottom  = 40, 48
	htmlMaxBars          = 240

	colourMeasuredRan  = "#b35806"
	colourMeasuredThr  = "#fdb863"
	colourAdvisedRan   = "#1f4e79"
	colourAdvisedThr   = "#9ecae1"
	colourQuotaNow     = "#c00000"
	colourQuotaAdvised = "#1b7837"
)

// WriteNodeHTML renders a node-wide report as one self-contained page:
// the pools worst first, each with its one-line diagnosis and ALTER, its
// counters measured and predicted, and a chart of its CPU time ran and
// throttled per interval, measured beside the replay under the advice,
// against the quota now and advised. It loads nothing from the network.
func WriteNodeHTML(w io.Writer, pools []PoolAdvice, b Budget) error {
	var s strings.Builder
	esc := html.EscapeString
	s.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>poolagent advise --all</title>\n")
	s.WriteString(`<style>
body{font:15px/1.45 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}
th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}
.over{color:#b00020}.ok{color:#1b5e20}
code{background:#f5f5f5;padding:1px 4px}
svg{display:block;margin:.5em 0;width:100%;height:auto}
svg text{font:12px system-ui,sans-serif;fill:#333}
svg .grid{stroke:#e3e3e3;stroke-width:1}
</style>
</head>
<body>
`)
	fmt.Fprintf(&s, "<h1>poolagent advise --all</h1>\n<p>%d pools, worst first; budget: %s.</p>\n<ul>\n", len(pools), esc(b.String()))
	for _, p := range pools {
		class := "ok"
		if p.OverBudget(b) {
			class = "over"
		}
		m := Measured(p.Trace)
		fmt.Fprintf(&s, "<li class=\"%s\"><a href=\"#pool-%s\">%s</a>: %s of periods throttled, worst delay %s: %s</li>\n",
			class, esc(p.Trace.Pool), esc(p.Trace.Pool), pct(m.ThrottledRatio()), msText(m.MaxDelayUsec), esc(p.summary()))
	}
	s.WriteString("</ul>\n")
	for _, p := range pools {
		if err := writePoolHTML(&s, p, b); err != nil {
			return err
		}
	}
	s.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(w, s.String())
	return err
}

func writePoolHTML(s *strings.Builder, p PoolAdvice, b Budget) error {
	esc := html.EscapeString
	t := p.Trace
	fmt.Fprintf(s, "<h2 id=\"pool-%s\">%s</h2>\n<p>cpu.max %s, %d intervals of %s.</p>\n", esc(t.Pool), esc(t.Pool),
		esc(limitText(t.Limit)), len(t.Samples), esc(msText(t.IntervalUsec)))
	for _, l := range p.Diagnosis.Lines {
		fmt.Fprintf(s, "<p>%s</p>\n", esc(l))
	}
	if alter := p.alter(b); alter != "" {
		fmt.Fprintf(s, "<p><code>%s</code></p>\n", esc(alter))
	}
	a := p.Advice
	if a == nil {
		return nil
	}
	s.WriteString("<table>\n<tr><th></th><th>periods</th><th>throttled</th><th>ratio</th><th>throttled time</th><th>worst delay</th></tr>\n")
	row := func(name string, o Outcome) {
		fmt.Fprintf(s, "<tr><td>%s</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td></tr>\n", esc(name), o.NrPeriods, o.NrThrottled,
			pct(o.ThrottledRatio()), secText(o.ThrottledUsec), msText(o.MaxDelayUsec))
	}
	row("measured", a.Measured)
	row("predicted now", a.Current.Predicted)
	advised := a.Current
	if a.Choice != nil {
		advised = *a.Choice
		if a.Choice != &a.Current {
			row("predicted advised", a.Choice.Predicted)
		}
	}
	s.WriteString("</table>\n")
	_, timeline, err := ReplayTimeline(t, Demand(t), advised.Limit, 1)
	if err != nil {
		return err
	}
	writeNodeChart(s, t, timeline, advised.Limit.QuotaUsec)
	return nil
}

// writeNodeChart draws the trace's intervals (at most htmlMaxBars bars,
// intervals summed into each) as stacked bars, measured left of the
// replay, with the quota per bar now and advised.
func writeNodeChart(s *strings.Builder, t *history.Trace, replay []Bin, advisedQuota int64) {
	n := len(t.Samples)
	per := (n + htmlMaxBars - 1) / htmlMaxBars
	bars := (n + per - 1) / per
	measured, predicted := make([]Bin, bars), make([]Bin, bars)
	for i, smp := range t.Samples {
		measured[i/per].RanUsec += smp.UsageUsec
		measured[i/per].ThrottledUsec += smp.ThrottledEitherUsec()
		predicted[i/per].RanUsec += replay[i].RanUsec
		predicted[i/per].ThrottledUsec += replay[i].ThrottledUsec
	}
	binUsec := float64(per) * float64(t.IntervalUsec)
	quota := func(q int64) float64 { return float64(q) * binUsec / float64(t.Limit.PeriodUsec) / 1000 }
	top := 1.0
	for i := range bars {
		top = max(top, float64(measured[i].RanUsec+measured[i].ThrottledUsec)/1000, float64(predicted[i].RanUsec+predicted[i].ThrottledUsec)/1000)
	}
	if t.Limit.QuotaUsec > 0 {
		top = max(top, quota(t.Limit.QuotaUsec))
	}
	if advisedQuota > 0 {
		top = max(top, quota(advisedQuota))
	}
	yMax := niceCeil(top)
	y := func(ms float64) float64 { return htmlTop + htmlPlotH - ms/yMax*htmlPlotH }
	width, height := htmlLeft+htmlPlotW+htmlRight, htmlTop+htmlPlotH+htmlBottom
	fmt.Fprintf(s, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"%s: CPU time per interval, measured beside the replay under the advice\">\n",
		width, height, width, height, html.EscapeString(t.Pool))
	x := float64(htmlLeft)
	for _, l := range []struct{ colour, label string }{{colourMeasuredRan, "measured ran"}, {colourMeasuredThr, "measured throttled"},
		{colourAdvisedRan, "advised ran (replay)"}, {colourAdvisedThr, "advised throttled (replay)"}} {
		fmt.Fprintf(s, "<rect x=\"%.0f\" y=\"10\" width=\"14\" height=\"14\" fill=\"%s\"/><text x=\"%.0f\" y=\"22\">%s</text>\n", x, l.colour, x+19, l.label)
		x += 19 + 7.5*float64(len(l.label)) + 18
	}
	for i := 0; i <= 4; i++ {
		v := yMax * float64(i) / 4
		fmt.Fprintf(s, "<line class=\"grid\" x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/><text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
			htmlLeft, y(v), htmlLeft+htmlPlotW, y(v), htmlLeft-6, y(v)+4, percentText(roundTo(v, 1)))
	}
	fmt.Fprintf(s, "<text transform=\"translate(14 %d) rotate(-90)\" text-anchor=\"middle\">CPU time per bar (ms)</text>\n", htmlTop+htmlPlotH/2)
	slot := float64(htmlPlotW) / float64(bars)
	w := max(min(14, slot*0.4), 0.5)
	stack := func(x float64, bin Bin, ran, thr string) {
		r, th := float64(bin.RanUsec)/1000, float64(bin.ThrottledUsec)/1000
		fmt.Fprintf(s, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", x, y(r), w, y(0)-y(r), ran)
		fmt.Fprintf(s, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", x, y(r+th), w, y(r)-y(r+th), thr)
	}
	for i := range bars {
		mid := htmlLeft + slot*(float64(i)+0.5)
		fmt.Fprintf(s, "<g><title>%s from %s: measured ran %s, throttled %s; advised ran %s, throttled %s</title>\n", msText(int64(binUsec)),
			secText(uint64(float64(i)*binUsec)), msText(int64(measured[i].RanUsec)), msText(int64(measured[i].ThrottledUsec)),
			msText(int64(predicted[i].RanUsec)), msText(int64(predicted[i].ThrottledUsec)))
		stack(mid-w-0.5, measured[i], colourMeasuredRan, colourMeasuredThr)
		stack(mid+0.5, predicted[i], colourAdvisedRan, colourAdvisedThr)
		s.WriteString("</g>\n")
	}
	line := func(q int64, colour, label string, dy float64) {
		if q <= 0 {
			return
		}
		qy := y(quota(q))
		fmt.Fprintf(s, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\" stroke-dasharray=\"6 3\"/><text x=\"%d\" y=\"%.1f\">%s</text>\n",
			htmlLeft, qy, htmlLeft+htmlPlotW, qy, colour, htmlLeft+htmlPlotW+6, qy+dy, label)
	}
	// The labels go apart: now below its line, advised above.
	line(t.Limit.QuotaUsec, colourQuotaNow, "quota now", 12)
	if advisedQuota != t.Limit.QuotaUsec {
		line(advisedQuota, colourQuotaAdvised, "quota advised", -4)
	}
	fmt.Fprintf(s, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">time (s); one bar per %s</text>\n</svg>\n",
		htmlLeft+htmlPlotW/2, htmlTop+htmlPlotH+38, msText(int64(binUsec)))
	s.WriteString("<p><small>Throttled time is summed over the runqueues that waited, at the pool's and its queries' level, so a bar can rise above its interval. Hover over a bar for its values.</small></p>\n")
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
