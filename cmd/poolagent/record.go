package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/history"
	"github.com/poolagent/poolagent/internal/pooltree"
	"github.com/poolagent/poolagent/observe"
)

// recordCommand is `poolagent record`: sample one pool's counters and
// threads on a live host into a trace for `poolagent advise`.
func recordCommand() *cli.Command {
	return &cli.Command{
		Name:  "record",
		Usage: "record a pool's CPU counters and threads, interval by interval, into a trace for poolagent advise",
		Description: "Reads the pool's cpu.stat (v1: and cpuacct usage), cpu.pressure where present and the run\n" +
			"time and state of each of its threads (cgroup.threads or tasks, /proc/TID/schedstat) every\n" +
			"interval, and writes what they grew by as a trace (docs/advise.md). It stops after --for, on\n" +
			"interrupt, when the pool is removed or when its CPU limit changes, and writes the file then,\n" +
			"whole. It only reads.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "pool", Aliases: []string{"p"}, Usage: "the pool to record (its directory below the pool root)", Required: true},
			&cli.DurationFlag{Name: "for", Usage: "record for `DURATION` (e.g. 10m); not with --from-daemon"},
			&cli.BoolFlag{Name: "from-daemon", Usage: "write the daemon's history of the pool (its latest stretch under one limit) instead of recording"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the trace to `FILE`", Required: true},
			&cli.DurationFlag{Name: "interval", Usage: "sample every `INTERVAL`, 1ms..1m (default: the pool's period)"},
			&cli.StringFlag{Name: "root", Usage: "pool root `DIR` (default: as poolagent apply: /sys/fs/cgroup/poolagent on cgroup v2, /sys/fs/cgroup/cpu/poolagent on v1)"},
			&cli.StringFlag{Name: "cpuacct-root", Usage: "cgroup v1: the pool root's `DIR` in the cpuacct hierarchy, for usage (default: found from the mounts)"},
			&cli.Float64Flag{Name: "cpus", Usage: "node vCPUs that TOTAL_CPU_LIMIT_PERCENT_PER_NODE is a percent of (default: read from the host, as poolagent apply)"},
		}, historyFlags()...),
		Action: runRecord,
	}
}

func runRecord(c *cli.Context) error {
	pool, out := c.String("pool"), c.String("output")
	if c.Bool("from-daemon") {
		return recordFromDaemon(c, pool, out)
	}
	if !c.IsSet("for") {
		return errors.New("--for is missing (accepted: how long to record, such as 10m; or --from-daemon to write the daemon's history)")
	}
	tree, err := pooltree.ReaderAt("/", c.String("root"), c.String("cpuacct-root"), "")
	if err != nil {
		return rootFlag(c, err)
	}
	defer tree.Close()
	lim, err := tree.CPULimit(pool)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--pool %s: no such pool below %s (accepted: a pool poolagent apply made; see poolagent stat)", pool, tree.Root())
	}
	if err != nil {
		return fmt.Errorf("--pool %s: %w", pool, err)
	}
	interval := c.Duration("interval")
	if !c.IsSet("interval") {
		interval = time.Duration(lim.PeriodUsec) * time.Microsecond
	}
	if interval < time.Millisecond || interval > time.Minute || interval%time.Microsecond != 0 {
		return usageErr("--interval %s is not accepted (accepted: 1ms..1m in whole µs)", interval)
	}
	total := c.Duration("for")
	n := int(total / interval)
	if n < 1 || n > history.MaxSamples {
		return usageErr("--for %s is not accepted at an interval of %s (accepted: 1 to %d intervals, %s..%s)",
			total, interval, history.MaxSamples, interval, interval*history.MaxSamples)
	}
	ks := observe.ReadKernelSettings("/proc", "/boot", observe.KernelRelease())
	nodeCap, err := cgroupfs.ReadNodeCapacity("/")
	if err != nil {
		return fmt.Errorf("read the host's CPUs: %w", err)
	}
	nodeCPUs := nodeCap.CPUs
	if c.IsSet("cpus") {
		nodeCPUs = c.Float64("cpus")
	}
	t := &history.Trace{Format: history.TraceFormat, Version: history.TraceVersion, Pool: pool, Cgroup: tree.Version(),
		CPUs: nodeCap.OnlineCPUs, NodeCPUs: nodeCPUs, SliceUsec: ks.SliceUsec, TickUsec: ks.TickUsec(), Limit: lim,
		IntervalUsec: interval.Microseconds()}
	if err := t.ValidateHeader(); err != nil {
		return fmt.Errorf("this host cannot be recorded: %w", err)
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	rec, err := history.Record(ctx, tree, "/proc", t, n)
	if err != nil {
		return fmt.Errorf("%w; nothing written", err)
	}
	if len(t.Samples) == 0 {
		return fmt.Errorf("%s before the first interval ended; nothing written", rec.Why)
	}
	if err := writeTraceFile(out, t); err != nil {
		return err
	}
	note := ""
	if rec.Truncated {
		note = fmt.Sprintf(" (threads counted up to %d)", history.MaxThreads)
	}
	if rec.Stalls > 0 {
		note += fmt.Sprintf(" (%d samples read an interval or more late, the host stalled: each shared evenly among the intervals it covers)", rec.Stalls)
	}
	fmt.Fprintf(c.App.ErrWriter, "poolagent record: %s: %d intervals of %s of pool %s written to %s%s\n", rec.Why, len(t.Samples), interval, pool, out, note)
	return nil
}

// writeTraceFile writes the trace to a temporary file beside path and
// renames it, so that path holds a whole trace or nothing new.
func writeTraceFile(path string, t *history.Trace) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	err = errors.Join(history.WriteTrace(tmp, t), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write trace %s: %w", path, err)
	}
	return nil
}
