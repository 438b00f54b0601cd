package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/compare"
	"github.com/poolagent/poolagent/observe"
)

// compareCommand is `poolagent compare`: run a scenario for real under
// poolagent's cgroups and show the kernel's counters beside both models'
// predictions.
func compareCommand() *cli.Command {
	return &cli.Command{
		Name:  "compare",
		Usage: "run a scenario for real and show measured cpu.stat beside the predicted (default: built-in fixed-window pool)",
		Description: "Applies the scenario's pools (docs/scenario.md) under a fresh pool root, starts one CPU-burning\n" +
			"worker per task in its query cgroup at its arrival time, reads cpu.stat of every pool and query,\n" +
			"removes everything again, and prints per group the measured counters, the kernel-faithful\n" +
			"model's (docs/kernel-model.md) and the simple model's predictions and the error. The last line\n" +
			"is the verdict over every group and every counter judged. Needs root and a cpu controller\n" +
			"(cgroup v1 or v2); without them it prints the simulation alone.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "scenario", Aliases: []string{"s"}, Usage: "scenario `FILE` (default: built-in, see internal/compare/default.scn)"},
			&cli.StringFlag{Name: "root", Usage: "pool root `DIR` to create for the run, which must not exist (default: a unique directory below the cpu controller's mount)"},
			&cli.IntFlag{Name: "repeat", Value: 1, Usage: "run the scenario `N` times"},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "output format: text, json, or markdown (the accuracy table's rows, measured runs only)"},
			&cli.StringFlag{Name: "report", Usage: "also write a self-contained HTML report with charts to `FILE`"},
			&cli.StringFlag{Name: "json", Usage: "also write the JSON report to `FILE`"},
			&cli.BoolFlag{Name: "timeline", Usage: "sample cpu.stat every period for the measured timeline (on with --report, whose charts show it)"},
			&cli.IntFlag{Name: "periods", Value: 8, Usage: "periods shown in the text timeline"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress lines on stderr"},
			&cli.BoolFlag{Name: "strict", Usage: fmt.Sprintf("exit with status %d unless the verdict is within target on every group (also when nothing could be measured)", exitMissed)},
		},
		Action: runCompare,
	}
}

func runCompare(c *cli.Context) error {
	format, err := formatOf(c, "text", "json", "markdown")
	if err != nil {
		return err
	}
	if n := c.Int("repeat"); n < 1 {
		return usageErr("--repeat %d is not accepted (accepted: 1 or more)", n)
	}
	if n := c.Int("periods"); n < 0 {
		return usageErr("--periods %d is not accepted (accepted: 0 or more)", n)
	}
	sc, err := readScenario(c, compare.DefaultScenario(), "nothing run")
	if err != nil {
		return err
	}
	layout, err := compare.LayoutOf(sc)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary for the workers: %w", err)
	}
	opt := compare.Options{
		Root:          c.String("root"),
		Repeat:        c.Int("repeat"),
		Timeline:      c.Bool("timeline") || c.String("report") != "",
		Kernel:        observe.ReadKernelSettings("/proc", "/boot", observe.KernelRelease()),
		WorkerCommand: []string{self, compareWorkerName},
	}
	if !c.Bool("quiet") {
		opt.Progress = c.App.ErrWriter
	}

	var report *compare.Report
	if why := cannotMeasure(); why != "" {
		fmt.Fprintf(c.App.ErrWriter, "poolagent compare: %s; showing the simulation alone (run as root on a host with the cpu controller to measure)\n", why)
		report, err = compare.Predict(sc.Name, layout, opt, why)
	} else {
		ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
		defer stop()
		report, err = compare.Measure(ctx, sc.Name, layout, opt)
	}
	if err != nil {
		return err
	}
	if err := writeReportFiles(c, report); err != nil {
		return err
	}
	if err := writeCompare(c, format, report); err != nil {
		return err
	}
	if sum := report.Summarize(); c.Bool("strict") && !sum.OK {
		return cli.Exit("", exitMissed)
	}
	return nil
}

// exitMissed is compare's exit status under --strict when the kernel
// model missed its target on a group, or nothing was measured.
const exitMissed = 3

// cannotMeasure says why this process cannot run a scenario for real, or
// "" when it can.
func cannotMeasure() string {
	if os.Geteuid() != 0 {
		return "not root"
	}
	m, err := cgroupfs.Detect("/")
	if err != nil {
		return err.Error()
	}
	if _, _, err := m.Controller("cpu"); err != nil {
		return fmt.Sprintf("no cgroup cpu controller: %v", err)
	}
	return ""
}
