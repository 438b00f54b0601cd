package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/pooltree"
	"github.com/poolagent/poolagent/observe"
)

// statCommand is `poolagent stat`: the kernel's CPU counters of every pool
// and query cgroup, once or as deltas per interval.
func statCommand() *cli.Command {
	return &cli.Command{
		Name:  "stat",
		Usage: "show the kernel's CPU and memory counters of every pool and query: usage, periods, throttling, bursts, memory, OOM kills, PSI",
		Description: "Reads cpu.stat (cgroup v2; v1: cpu.stat and cpuacct), cpu.stat.local and cpu.pressure of\n" +
			"the pool root and every cgroup below it (pools, and queries under them; \".\" is the root\n" +
			"itself). The cgroup version is told by the files in the root. With --watch it prints, each\n" +
			"interval, what the counters grew by in that interval, until interrupted or --count\n" +
			"intervals. PSI_SOME10 and PSI_FULL10 are cpu.pressure's own 10 s averages, in percent;\n" +
			"PSI_SOME_S and PSI_FULL_S its totals in seconds (with --watch, what they grew by): time in\n" +
			"which some (full: all) of the group's runnable threads waited for a CPU, throttling included.\n" +
			"Memory (where the memory controller is there; v1: in the pool root's memory twin):\n" +
			"MEM_MIB and PEAK_MIB are memory.current and memory.peak (v1: usage_in_bytes,\n" +
			"max_usage_in_bytes), MAX_MIB and HIGH_MIB the hard and soft limits, MEM_HIGH, MEM_MAX, OOM and\n" +
			"OOM_KILLS the memory.events counts (v1: MEM_MAX is failcnt, OOM_KILLS oom_control's oom_kill),\n" +
			"MEM_SOME_S and MEM_FULL_S memory.pressure's totals in seconds.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "root", Usage: "pool root `DIR` (default: as poolagent apply: /sys/fs/cgroup/poolagent on cgroup v2, /sys/fs/cgroup/cpu/poolagent on v1)"},
			&cli.StringFlag{Name: "cpuacct-root", Usage: "cgroup v1: the pool root's `DIR` in the cpuacct hierarchy, for usage (default: found from the mounts)"},
			&cli.StringFlag{Name: "memory-root", Usage: "cgroup v1: the pool root's `DIR` in the memory hierarchy, for memory (default: found from the mounts)"},
			&cli.DurationFlag{Name: "watch", Aliases: []string{"w"}, Usage: "print the deltas every `INTERVAL` (e.g. 1s) instead of the totals once"},
			&cli.IntFlag{Name: "count", Aliases: []string{"c"}, Usage: "with --watch: stop after `N` intervals (default: until interrupted)"},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "text (a table) or json (--watch: one JSON object per line)"},
			&cli.BoolFlag{Name: "wide", Usage: "every column (the default table fits 120 columns: " + strings.Join(statNarrow, ", ") + ")"},
		},
		Action: runStat,
	}
}

func runStat(c *cli.Context) error {
	format, err := formatOf(c, "text", "json")
	if err != nil {
		return err
	}
	watch, count := c.Duration("watch"), c.Int("count")
	if watch < 0 || (c.IsSet("watch") && watch < 10*time.Millisecond) {
		return usageErr("--watch %s is not accepted (accepted: an interval of 10ms or more, such as 1s)", watch)
	}
	if count < 0 || (c.IsSet("count") && !c.IsSet("watch")) {
		return usageErr("--count %d is not accepted (accepted: N >= 0 together with --watch)", count)
	}
	tree, err := pooltree.ReaderAt("/", c.String("root"), c.String("cpuacct-root"), c.String("memory-root"))
	if err != nil {
		return rootFlag(c, err)
	}
	defer tree.Close()
	w := c.App.Writer
	if watch == 0 {
		samples, err := tree.ReadAll()
		if err != nil {
			return err
		}
		if format == "json" {
			return writeStatJSON(w, statJSON{Root: tree.Root(), Version: tree.Version(), Groups: samples}, false)
		}
		fmt.Fprintf(w, "pool root %s (cgroup %s)\n", tree.Root(), tree.Version())
		return writeStatTable(w, samples, 0, c.Bool("wide"))
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ticker := time.NewTicker(watch)
	defer ticker.Stop()
	next := func() (time.Time, bool) {
		select {
		case <-ctx.Done():
			return time.Time{}, false
		case now := <-ticker.C:
			return now, true
		}
	}
	return watchStat(w, tree, format, c.Bool("wide"), count, time.Now(), next)
}

// statJSON is `poolagent stat --format json` without --watch.
type statJSON struct {
	Root    string           `json:"root"`
	Version string           `json:"version"`
	Groups  []observe.Sample `json:"groups"`
}

// statIntervalJSON is one line of `poolagent stat --watch --format json`:
// what each group's counters grew by in the interval. In Pressure the
// totals are what they grew by too, while the averages are cpu.pressure's
// as read at the interval's end (they are the kernel's own moving
// averages).
type statIntervalJSON struct {
	Interval int              `json:"interval"`
	Seconds  float64          `json:"seconds"`
	Groups   []observe.Sample `json:"groups"`
}

// watchStat prints, at each time next returns, the deltas since the
// previous one (since start for the first), until next returns false or
// count intervals (0: no limit) have been printed. The times next returns
// measure the intervals.
func watchStat(w io.Writer, tree *cgroupfs.Reader, format string, wide bool, count int, start time.Time, next func() (time.Time, bool)) error {
	prev, err := readByGroup(tree)
	if err != nil {
		return err
	}
	last := start
	if format == "text" {
		fmt.Fprintf(w, "pool root %s (cgroup %s): deltas per interval\n", tree.Root(), tree.Version())
	}
	for n := 1; count == 0 || n <= count; n++ {
		now, ok := next()
		if !ok {
			return nil
		}
		cur, err := readByGroup(tree)
		if err != nil {
			return err
		}
		deltas := make([]observe.Sample, 0, len(cur.order))
		for _, g := range cur.order {
			deltas = append(deltas, cur.samples[g].Sub(prev.samples[g]))
		}
		elapsed := now.Sub(last)
		if format == "json" {
			if err := writeStatJSON(w, statIntervalJSON{Interval: n, Seconds: elapsed.Seconds(), Groups: deltas}, true); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(w, "\ninterval %d: %.3fs\n", n, elapsed.Seconds())
			if err := writeStatTable(w, deltas, elapsed, wide); err != nil {
				return err
			}
		}
		prev, last = cur, now
	}
	return nil
}

// samplesByGroup is one read of the tree, in Groups order.
type samplesByGroup struct {
	order   []string
	samples map[string]observe.Sample
}

func readByGroup(tree *cgroupfs.Reader) (samplesByGroup, error) {
	all, err := tree.ReadAll()
	if err != nil {
		return samplesByGroup{}, err
	}
	s := samplesByGroup{samples: make(map[string]observe.Sample, len(all))}
	for _, x := range all {
		s.order = append(s.order, x.Group)
		s.samples[x.Group] = x
	}
	return s, nil
}

// statNarrow are the columns `poolagent stat` shows without --wide, so
// the table fits 120 columns: CPU use, throttling, the CPU pressure's 10 s
// average, memory use and its limit, and OOM kills.
var statNarrow = []string{"GROUP", "CPUS", "USAGE_S", "PERIODS", "THROTTLED", "RATIO", "THROTTLED_S", "BURST_S",
	"PSI_SOME10", "MEM_MIB", "MAX_MIB", "OOM_KILLS"}

// writeStatTable prints samples as a table: every column when wide, the
// statNarrow ones otherwise. With a non-zero interval the samples are
// deltas and a CPUS column shows the CPUs' worth of usage in the
// interval.
func writeStatTable(w io.Writer, samples []observe.Sample, interval time.Duration, wide bool) error {
	header := []string{"GROUP", "CPUS", "USAGE_S", "PERIODS", "THROTTLED", "RATIO", "THROTTLED_S", "BURSTS", "BURST_S",
		"PSI_SOME10", "PSI_FULL10", "PSI_SOME_S", "PSI_FULL_S",
		"MEM_MIB", "PEAK_MIB", "MAX_MIB", "HIGH_MIB", "MEM_HIGH", "MEM_MAX", "OOM", "OOM_KILLS", "MEM_SOME_S", "MEM_FULL_S"}
	keep := func(col string) bool {
		return (col != "CPUS" || interval > 0) && (wide || slices.Contains(statNarrow, col))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(cells []string) {
		var out []string
		for i, c := range cells {
			if keep(header[i]) {
				out = append(out, c)
			}
		}
		fmt.Fprintln(tw, strings.Join(out, "\t"))
	}
	line(header)
	for _, s := range samples {
		st := s.CPU
		usage, cpus := "-", "-"
		if s.UsageKnown {
			usage = statSeconds(st.UsageUsec)
			if interval > 0 {
				cpus = strconv.FormatFloat(float64(st.UsageUsec)/float64(interval.Microseconds()), 'f', 2, 64)
			}
		}
		ratio := "-"
		if st.NrPeriods > 0 {
			ratio = strconv.FormatFloat(st.ThrottledRatio(), 'f', 2, 64)
		}
		some, full, someS, fullS := "-", "-", "-", "-"
		if p := s.Pressure; p != nil {
			some, someS = strconv.FormatFloat(p.Some.Avg10Percent, 'f', 2, 64), statSeconds(p.Some.TotalUsec)
			if p.Full != nil {
				full, fullS = strconv.FormatFloat(p.Full.Avg10Percent, 'f', 2, 64), statSeconds(p.Full.TotalUsec)
			}
		}
		cells := []string{s.Group, cpus, usage, strconv.FormatUint(st.NrPeriods, 10), strconv.FormatUint(st.NrThrottled, 10), ratio,
			statSeconds(st.ThrottledUsec), strconv.FormatUint(st.NrBursts, 10), statSeconds(st.BurstUsec), some, full, someS, fullS}
		line(append(cells, memoryColumns(s.Memory)...))
	}
	return tw.Flush()
}

// memoryColumns are the memory columns of a row: usage, peak, memory.max
// and memory.high in MiB ("max" for none), the high, max, oom and
// oom_kill events, and memory.pressure's totals in seconds; "-" where
// the group has no such figure.
func memoryColumns(m *observe.Memory) []string {
	if m == nil {
		return strings.Split(strings.Repeat("-\t", 9)+"-", "\t")
	}
	mib := func(b uint64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) }
	limit := func(b int64) string {
		if b < 0 {
			return "max"
		}
		return mib(uint64(b))
	}
	peak, someS, fullS := "-", "-", "-"
	if m.PeakBytes != nil {
		peak = mib(*m.PeakBytes)
	}
	if p := m.Pressure; p != nil {
		someS = statSeconds(p.Some.TotalUsec)
		if p.Full != nil {
			fullS = statSeconds(p.Full.TotalUsec)
		}
	}
	e := m.Events
	count := func(n uint64) string { return strconv.FormatUint(n, 10) }
	return []string{mib(m.CurrentBytes), peak, limit(m.LimitBytes), limit(m.HighBytes),
		count(e.High), count(e.Max), count(e.OOM), count(e.OOMKill), someS, fullS}
}

// statSeconds formats microseconds as seconds with millisecond precision.
func statSeconds(usec uint64) string {
	return strconv.FormatFloat(float64(usec)/1e6, 'f', 3, 64)
}

// writeStatJSON writes v as JSON: indented, or on one line for --watch.
func writeStatJSON(w io.Writer, v any, oneLine bool) error {
	var b []byte
	var err error
	if oneLine {
		b, err = json.Marshal(v)
	} else {
		b, err = json.MarshalIndent(v, "", "  ")
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
