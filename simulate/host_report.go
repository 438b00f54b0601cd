package simulate

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/observe"
)

// WriteText writes run, the outcome of s, for a terminal: every group's
// cpu.stat, then per group a table and a timeline in the chapter's style
// of its first periods (at most periods of them; the run needs a trace of
// TimelineTicks(s.Host, periods) ticks for full timelines), then every
// task's result. Times are printed with units (40ms), counters in
// microseconds as cpu.stat has them.
func WriteText(w io.Writer, s *Scenario, run HostRun, periods int) error {
	bw := bufio.NewWriter(w)
	h := s.Host
	paths := groupPaths(h)
	tick := func(n int) string { return FormatUsec(int64(n) * h.TickUsec) }

	fmt.Fprintf(bw, "scenario: %s\n", s.Name)
	fmt.Fprintf(bw, "node: %d CPUs, tick %s, all tasks done at %s\n", h.CPUs, FormatUsec(h.TickUsec), tick(run.Ticks))

	fmt.Fprintf(bw, "\ncpu.stat per group (usec)\n")
	names := padRight(append([]string{"group"}, paths...))
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\tcpu.max\tburst\tweight\tusage_usec\tnr_periods\tnr_throttled\tthrottled_usec\tnr_bursts\tburst_usec\t\n", names[0])
	for i, g := range h.Groups {
		st := run.Groups[i].Stat
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", names[i+1], cpuMax(g, "/"), FormatUsec(g.BurstUsec), g.EffectiveWeight(),
			st.UsageUsec, st.NrPeriods, st.NrThrottled, st.ThrottledUsec, st.NrBursts, st.BurstUsec)
	}
	tw.Flush()

	for i, g := range h.Groups {
		rows := run.Groups[i].Periods
		shown := min(periods, len(rows))
		fmt.Fprintf(bw, "\ngroup %s: periods 1-%d of %d\n", paths[i], shown, len(rows))
		if shown == 0 {
			continue
		}
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "period\tstart\tused\tthrottled\tcarried\texhausted after\t\n")
		for n, p := range rows[:shown] {
			exhausted := "-"
			if p.Exhausted >= 0 {
				exhausted = tick(p.Exhausted - p.Start)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t\n", n+1, tick(p.Start), tick(p.Used), tick(p.Stalled), tick(p.Carried), exhausted)
		}
		tw.Flush()
		if i == 0 {
			fmt.Fprintf(bw, "  used is CPU time summed over the CPUs the group ran on and throttled the wall time it waited\n"+
				"  for its next quota, so together they can exceed the period; the kernel's throttled_usec sums\n"+
				"  the wait per CPU and can exceed it alone (docs/simulator.md)\n")
		}

		periodTicks := int(g.PeriodUsec / h.TickUsec)
		bucket := ticksPerMark(periodTicks)
		fmt.Fprintf(bw, "\n  cpu.max = %s   %c ran   %c throttled   %c waiting for a CPU   1 mark = %s\n",
			cpuMax(g, " / "), markRan, markThrottled, markWaiting, tick(bucket))
		if g.Parent != "" {
			fmt.Fprintf(bw, "  %c also when an ancestor's quota is spent: then this group's own throttled column stays 0\n", markThrottled)
		}
		labels := make([]string, shown)
		width := 0
		for n := range labels {
			labels[n] = tick(n * periodTicks)
			width = max(width, len(labels[n]))
		}
		for n, label := range labels {
			line := timelineLine(run.Groups[i].Trace, n*periodTicks, (n+1)*periodTicks, bucket)
			fmt.Fprintln(bw, strings.TrimRight(fmt.Sprintf("  %*s  %s", width, label, line), " "))
		}
	}

	fmt.Fprintf(bw, "\ntasks\n")
	taskNames, taskGroups := []string{"task"}, []string{"group"}
	for _, t := range run.Tasks {
		taskNames, taskGroups = append(taskNames, t.Name), append(taskGroups, t.Group)
	}
	taskNames, taskGroups = padRight(taskNames), padRight(taskGroups)
	tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\t%s\tthreads\tarrive\tneed\tdone\tlatency\tthrottled\t\n", taskNames[0], taskGroups[0])
	for i, t := range run.Tasks {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", taskNames[i+1], taskGroups[i+1], t.Threads, tick(t.Arrive),
			FormatUsec(h.Tasks[i].NeedUsec), tick(t.Done), tick(t.Latency), tick(t.Throttled))
	}
	tw.Flush()
	return bw.Flush()
}

// groupPaths names each group by its path from the node, "pool/query".
func groupPaths(h Host) []string {
	paths := make([]string, len(h.Groups))
	index := make(map[string]int, len(h.Groups))
	for i, g := range h.Groups {
		index[g.Name] = i
		paths[i] = g.Name
		if g.Parent != "" {
			paths[i] = paths[index[g.Parent]] + "/" + g.Name
		}
	}
	return paths
}

// cpuMax is the group's limit as QUOTA sep PERIOD with units:
// "40ms/100ms" or "max/100ms".
func cpuMax(g Group, sep string) string {
	quota := "max"
	if g.QuotaUsec != cpulimit.Max {
		quota = FormatUsec(g.QuotaUsec)
	}
	return quota + sep + FormatUsec(g.PeriodUsec)
}

// padRight pads every cell to the widest, so that a right-aligned table
// column reads left-aligned.
func padRight(cells []string) []string {
	width := 0
	for _, c := range cells {
		width = max(width, utf8.RuneCountInString(c))
	}
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = c + strings.Repeat(" ", width-utf8.RuneCountInString(c))
	}
	return out
}

// jsonRun is the JSON shape of a run, documented in docs/simulator.md.
type jsonRun struct {
	Scenario string      `json:"scenario"`
	CPUs     int         `json:"cpus"`
	TickUsec int64       `json:"tick_usec"`
	EndUsec  int64       `json:"end_usec"`
	Groups   []jsonGroup `json:"groups"`
	Tasks    []jsonTask  `json:"tasks"`
}

type jsonGroup struct {
	Name       string          `json:"name"`
	Path       string          `json:"path"`
	Parent     string          `json:"parent"`
	QuotaUsec  *int64          `json:"quota_usec"`
	PeriodUsec int64           `json:"period_usec"`
	BurstUsec  int64           `json:"burst_usec"`
	Weight     int64           `json:"weight"`
	CPUStat    observe.CPUStat `json:"cpu_stat"`
	Periods    []jsonPeriod    `json:"periods"`
}

type jsonPeriod struct {
	StartUsec     int64  `json:"start_usec"`
	UsedUsec      int64  `json:"used_usec"`
	ThrottledUsec int64  `json:"throttled_usec"`
	CarriedUsec   int64  `json:"carried_usec"`
	ExhaustedUsec *int64 `json:"exhausted_usec"`
}

type jsonTask struct {
	Name          string `json:"name"`
	Group         string `json:"group"`
	Threads       int    `json:"threads"`
	ArriveUsec    int64  `json:"arrive_usec"`
	NeedUsec      int64  `json:"need_usec"`
	DoneUsec      int64  `json:"done_usec"`
	LatencyUsec   int64  `json:"latency_usec"`
	ThrottledUsec int64  `json:"throttled_usec"`
}

// WriteJSON writes run, the outcome of s, as one indented JSON object with
// every period of every group, all times in microseconds (shape in
// docs/simulator.md).
func WriteJSON(w io.Writer, s *Scenario, run HostRun) error {
	h := s.Host
	usec := func(n int) int64 { return int64(n) * h.TickUsec }
	paths := groupPaths(h)
	out := jsonRun{Scenario: s.Name, CPUs: h.CPUs, TickUsec: h.TickUsec, EndUsec: usec(run.Ticks),
		Groups: make([]jsonGroup, len(h.Groups)), Tasks: make([]jsonTask, len(run.Tasks))}
	for i, g := range h.Groups {
		jg := jsonGroup{Name: g.Name, Path: paths[i], Parent: g.Parent, PeriodUsec: g.PeriodUsec, BurstUsec: g.BurstUsec,
			Weight: g.EffectiveWeight(), CPUStat: run.Groups[i].Stat, Periods: make([]jsonPeriod, len(run.Groups[i].Periods))}
		if g.QuotaUsec != cpulimit.Max {
			jg.QuotaUsec = &g.QuotaUsec
		}
		for n, p := range run.Groups[i].Periods {
			jp := jsonPeriod{StartUsec: usec(p.Start), UsedUsec: usec(p.Used), ThrottledUsec: usec(p.Stalled), CarriedUsec: usec(p.Carried)}
			if p.Exhausted >= 0 {
				e := usec(p.Exhausted)
				jp.ExhaustedUsec = &e
			}
			jg.Periods[n] = jp
		}
		out.Groups[i] = jg
	}
	for i, t := range run.Tasks {
		out.Tasks[i] = jsonTask{Name: t.Name, Group: t.Group, Threads: t.Threads, ArriveUsec: usec(t.Arrive),
			NeedUsec: h.Tasks[i].NeedUsec, DoneUsec: usec(t.Done), LatencyUsec: usec(t.Latency), ThrottledUsec: usec(t.Throttled)}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
