package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

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
			&cli.BoolFlag{Name: "wide", Usage: "every column (the default table fits 120 columns: " + strings.Join(observe.NarrowColumns, ", ") + ")"},
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
		return observe.WriteTable(w, samples, 0, c.Bool("wide"))
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
