package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/internal/advise"
	"github.com/poolagent/poolagent/internal/history"
)

// adviseCommand is `poolagent advise`: diagnose a recorded trace and
// advise the pool limit that meets a throttle budget.
func adviseCommand() *cli.Command {
	return &cli.Command{
		Name:  "advise",
		Usage: "diagnose a recorded trace, or the daemon's history, and print the ALTER RESOURCE POOL that meets a throttle budget",
		Description: "Reads a trace of `poolagent record`, or the daemon's history of a pool (--pool) or of every\n" +
			"pool of the node (--all, worst first), says why the pool is throttled (parallelism, bursts\n" +
			"after idle, quota below one slice per CPU, period too long for the latency wanted, demand above\n" +
			"the cap) with the numbers, then replays the trace's demand with the kernel-faithful model under\n" +
			"candidate settings of TOTAL_CPU_LIMIT_PERCENT_PER_NODE, CPU_BURST_PERCENT and CPU_PERIOD_USEC and\n" +
			"prints the smallest change that meets the budget, with the counters before and after and the\n" +
			"model's error for this kind of workload (docs/advise.md). Without a budget flag the budget is\n" +
			"--max-throttled-periods 10%.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "trace", Aliases: []string{"t"}, Usage: "trace `FILE` written by poolagent record"},
			&cli.StringFlag{Name: "pool", Aliases: []string{"p"}, Usage: "advise `POOL` from the daemon's history instead of a trace"},
			&cli.BoolFlag{Name: "all", Usage: "advise every pool of the node from the daemon's history, worst first"},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "with --all: text or json"},
			&cli.StringFlag{Name: "report", Usage: "with --all: also write an HTML page to `FILE`, each pool's intervals measured beside the replay under the advice"},
			&cli.StringFlag{Name: "max-throttled-periods", Usage: "budget: at most `PERCENT` of the active periods throttled, 0..100 (e.g. 10%)"},
			&cli.DurationFlag{Name: "max-delay", Usage: "budget: a runnable thread held at most `DURATION` in one period (e.g. 20ms)"},
			&cli.BoolFlag{Name: "verify", Usage: "run the trace's demand for real under the advised setting (as poolagent compare does; root) and report it against the budget"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "with --verify: no progress lines on stderr"},
		}, historyFlags()...),
		Action: runAdvise,
	}
}

func runAdvise(c *cli.Context) error {
	b, err := adviseBudget(c)
	if err != nil {
		return err
	}
	given := 0
	for _, f := range []string{"trace", "pool", "all"} {
		if c.IsSet(f) {
			given++
		}
	}
	if given != 1 {
		return errors.New("give one of --trace FILE, --pool POOL or --all (accepted: a trace of poolagent record, or the daemon's history of one pool or of all)")
	}
	if c.IsSet("report") && !c.Bool("all") {
		return errors.New("--report writes the page of --all (accepted: --all --report FILE)")
	}
	modelNote(c.App.ErrWriter, c.Command.Name, "/")
	if c.Bool("all") {
		return adviseAll(c, b)
	}
	var t *history.Trace
	if c.IsSet("pool") {
		ts, earlier, err := daemonTraces(c, c.String("pool"))
		if err != nil {
			return err
		}
		t = ts[0]
		fmt.Fprint(c.App.Writer, fromDaemonNote(t, earlier[t.Pool]))
	} else if t, err = readTraceFile(c.String("trace")); err != nil {
		return err
	}
	a, err := advise.Advise(t, b)
	if err != nil {
		return err
	}
	if err := advise.WriteText(c.App.Writer, t, advise.Diagnose(t, b), a); err != nil {
		return err
	}
	if !c.Bool("verify") {
		return nil
	}
	if a.Choice == nil {
		return errors.New("--verify: no setting meets the budget, so there is nothing to verify")
	}
	return verifyAdvice(c, t, b, a.Choice.Limit)
}

// readTraceFile reads and checks the trace at path.
func readTraceFile(path string) (*history.Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--trace: %w", err)
	}
	defer f.Close()
	return history.ParseTrace(path, f)
}

// adviseBudget reads the budget flags; neither given is 10% of periods.
func adviseBudget(c *cli.Context) (advise.Budget, error) {
	b := advise.Budget{MaxThrottledRatio: -1}
	if c.IsSet("max-throttled-periods") {
		s := c.String("max-throttled-periods")
		v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "%"), 64)
		if err != nil || !(v >= 0 && v <= 100) {
			return b, usageErr("--max-throttled-periods %q is not accepted (accepted: a percent 0..100, such as 10%% or 2.5)", s)
		}
		b.MaxThrottledRatio = v / 100
	}
	if c.IsSet("max-delay") {
		d := c.Duration("max-delay")
		if d < time.Millisecond || d > time.Second {
			return b, usageErr("--max-delay %s is not accepted (accepted: 1ms..1s, such as 20ms)", d)
		}
		b.MaxDelayUsec = d.Microseconds()
	}
	if !c.IsSet("max-throttled-periods") && !c.IsSet("max-delay") {
		b.MaxThrottledRatio = 0.1
	}
	return b, nil
}
