package observe

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// NarrowColumns are the columns WriteTable shows when not wide (`poolagent
// stat` without --wide), so the table fits 120 columns: CPU use,
// throttling, the CPU pressure's 10 s average, memory use and its limit,
// and OOM kills.
var NarrowColumns = []string{"GROUP", "CPUS", "USAGE_S", "PERIODS", "THROTTLED", "RATIO", "THROTTLED_S", "BURST_S",
	"PSI_SOME10", "MEM_MIB", "MAX_MIB", "OOM_KILLS"}

// WriteTable prints samples as `poolagent stat` shows them, a table of
// one row per group: every column when wide, the NarrowColumns otherwise.
// With a non-zero interval the samples are deltas and a CPUS column shows
// the CPUs' worth of usage in the interval.
func WriteTable(w io.Writer, samples []Sample, interval time.Duration, wide bool) error {
	header := []string{"GROUP", "CPUS", "USAGE_S", "PERIODS", "THROTTLED", "RATIO", "THROTTLED_S", "BURSTS", "BURST_S",
		"PSI_SOME10", "PSI_FULL10", "PSI_SOME_S", "PSI_FULL_S",
		"MEM_MIB", "PEAK_MIB", "MAX_MIB", "HIGH_MIB", "MEM_HIGH", "MEM_MAX", "OOM", "OOM_KILLS", "MEM_SOME_S", "MEM_FULL_S"}
	keep := func(col string) bool {
		return (col != "CPUS" || interval > 0) && (wide || slices.Contains(NarrowColumns, col))
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
			usage = seconds(st.UsageUsec)
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
			some, someS = strconv.FormatFloat(p.Some.Avg10Percent, 'f', 2, 64), seconds(p.Some.TotalUsec)
			if p.Full != nil {
				full, fullS = strconv.FormatFloat(p.Full.Avg10Percent, 'f', 2, 64), seconds(p.Full.TotalUsec)
			}
		}
		cells := []string{s.Group, cpus, usage, strconv.FormatUint(st.NrPeriods, 10), strconv.FormatUint(st.NrThrottled, 10), ratio,
			seconds(st.ThrottledUsec), strconv.FormatUint(st.NrBursts, 10), seconds(st.BurstUsec), some, full, someS, fullS}
		line(append(cells, memoryColumns(s.Memory)...))
	}
	return tw.Flush()
}

// memoryColumns are the memory columns of a row: usage, peak, memory.max
// and memory.high in MiB ("max" for none), the high, max, oom and
// oom_kill events, and memory.pressure's totals in seconds; "-" where
// the group has no such figure.
func memoryColumns(m *Memory) []string {
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
		someS = seconds(p.Some.TotalUsec)
		if p.Full != nil {
			fullS = seconds(p.Full.TotalUsec)
		}
	}
	e := m.Events
	count := func(n uint64) string { return strconv.FormatUint(n, 10) }
	return []string{mib(m.CurrentBytes), peak, limit(m.LimitBytes), limit(m.HighBytes),
		count(e.High), count(e.Max), count(e.OOM), count(e.OOMKill), someS, fullS}
}

// seconds formats microseconds as seconds with millisecond precision.
func seconds(usec uint64) string {
	return strconv.FormatFloat(float64(usec)/1e6, 'f', 3, 64)
}
