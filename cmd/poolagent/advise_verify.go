package main

import (
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/internal/advise"
	"github.com/poolagent/poolagent/internal/compare"
	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/internal/history"
	"github.com/poolagent/poolagent/observe"
)

// verifyAdvice runs the trace's demand for real under lim with compare's
// machinery and prints the measurement against the budget; it fails when
// the budget is not met.
func verifyAdvice(c *cli.Context, t *history.Trace, b advise.Budget, lim cpulimit.Limit) error {
	if why := cannotMeasure(); why != "" {
		return fmt.Errorf("--verify runs the demand for real and cannot here: %s (accepted: root on a host with the cgroup cpu controller)", why)
	}
	sc, err := advise.VerifyScenario(t, lim)
	if err != nil {
		return fmt.Errorf("--verify: %w", err)
	}
	layout, err := compare.LayoutOf(sc)
	if err != nil {
		return fmt.Errorf("--verify: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary for the workers: %w", err)
	}
	opt := compare.Options{Repeat: 1, Timeline: true, Kernel: observe.ReadKernelSettings("/proc", "/boot", observe.KernelRelease()),
		WorkerCommand: []string{self, compareWorkerName}}
	if !c.Bool("quiet") {
		opt.Progress = c.App.ErrWriter
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	report, err := compare.Measure(ctx, sc.Name, layout, opt)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(report.Groups, func(g compare.GroupResult) bool { return g.Name == t.Pool })
	if i < 0 || len(report.Groups[i].Runs) == 0 {
		return fmt.Errorf("--verify: the run reported no pool %s", t.Pool)
	}
	run := report.Groups[i].Runs[0]
	throttled := func(ws []compare.Window) []uint64 {
		var v []uint64
		for _, w := range ws {
			v = append(v, w.ThrottledUsec)
		}
		return v
	}
	predicted := advise.ReplayOutcome(sc, run.Kernel, throttled(run.KernelWindows))
	measured := advise.ReplayOutcome(sc, run.Measured, throttled(run.MeasuredWindows))
	if err := advise.WriteVerify(c.App.Writer, b, lim, report.Env.Cgroup, predicted, measured); err != nil {
		return err
	}
	if !b.Meets(measured) {
		return fmt.Errorf("--verify: measured %d of %d periods throttled, worst delay %s: outside the budget of %s", measured.NrThrottled, measured.NrPeriods, time.Duration(measured.MaxDelayUsec)*time.Microsecond, b)
	}
	return nil
}
