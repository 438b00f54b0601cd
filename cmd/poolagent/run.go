package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"text/tabwriter"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/daemon"
)

// Exit statuses of `poolagent run` for its own failures, in the range
// `env` and `timeout` use; the command's own status passes through.
const (
	exitRefused     = 125 // not admitted, or poolagent failed
	exitNotFound    = 127 // no such command
	exitCannotStart = 126 // the command could not be started
)

// runCommand is `poolagent run`: run a command as a query in a pool.
func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run a command as a query in a resource pool, admitted by the poolagent daemon",
		ArgsUsage: "-- CMD [ARGS...]",
		Description: "Asks the daemon to admit a query: in the pool named by --pool if the caller may use it,\n" +
			"else where the classifiers put the caller, else default. While the query waits in the\n" +
			"pool's queue a terminal shows its position and the time waited; a signal (Ctrl-C) leaves\n" +
			"the queue. Once admitted, CMD runs as the calling user in its own query cgroup\n" +
			"<root>/<pool>/<query> with the pool's per-query limits, signals are passed to it, and\n" +
			"poolagent exits with CMD's status (128+N when signal N ended it) after CMD and every\n" +
			"process it started have exited. POOLAGENT_CPU_LIMIT in CMD's environment is its CPU cap\n" +
			"in vCPUs. When poolagent itself fails or the query is refused (YDB's message), it exits\n" +
			"125; 126 when CMD cannot be started, 127 when it is not found. See docs/admission.md.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "pool", Aliases: []string{"p"}, Usage: "run in pool `NAME` (default: classify)"},
			&cli.StringFlag{Name: "stats", Usage: "after CMD, print the query's statistics to stderr as `FORMAT` text or json"},
			&cli.StringFlag{Name: "socket", Value: daemon.DefaultSocket, Usage: "the daemon's socket `PATH`"},
		},
		Action: runRun,
	}
}

func runRun(c *cli.Context) error {
	format := c.String("stats")
	if format != "" && format != "text" && format != "json" {
		return cli.Exit(fmt.Sprintf("poolagent: --stats %q is not accepted (accepted: text, json)", format), exitRefused)
	}
	args := c.Args().Slice()
	if len(args) == 0 {
		return cli.Exit("poolagent: run: no command given (usage: poolagent run [--pool P] -- CMD [ARGS...])", exitRefused)
	}
	_, err := exec.LookPath(args[0])
	if err != nil {
		code := exitNotFound
		if !errors.Is(err, exec.ErrNotFound) {
			code = exitCannotStart
		}
		return cli.Exit("poolagent: "+err.Error(), code)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)
	opts := daemon.RunOptions{
		Socket: c.String("socket"), Pool: c.String("pool"), Args: args, Env: os.Environ(),
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Signals: sigs,
	}
	if isTerminal(os.Stderr) {
		opts.Progress = os.Stderr
	}
	res, err := daemon.Run(opts)
	if err != nil {
		code := exitRefused
		if res.Ran || errors.Is(err, daemon.ErrLeftQueue) {
			code = res.ExitCode
		}
		return cli.Exit("poolagent: "+err.Error(), code)
	}
	if format != "" {
		if res.Stats == nil {
			fmt.Fprintln(c.App.ErrWriter, "poolagent: no statistics: the daemon went away while the query ran")
		} else if err := writeRunStats(c.App.ErrWriter, *res.Stats, format); err != nil {
			return cli.Exit("poolagent: "+err.Error(), exitRefused)
		}
	}
	if res.ExitCode != 0 {
		return cli.Exit("", res.ExitCode)
	}
	return nil
}

// writeRunStats prints a query's statistics: YDB's names first, then the
// query cgroup's cpu.stat counters.
func writeRunStats(w io.Writer, s daemon.Stats, format string) error {
	if format == "json" {
		return json.NewEncoder(w).Encode(s)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "ResourcePoolId\t%s\n", s.ResourcePoolID)
	fmt.Fprintf(tw, "QueuedTimeUs\t%d\n", s.QueuedTimeUs)
	fmt.Fprintf(tw, "TotalDurationUs\t%d\n", s.TotalDurationUs)
	fmt.Fprintf(tw, "usage_usec\t%d\n", s.UsageUsec)
	fmt.Fprintf(tw, "nr_periods\t%d\n", s.NrPeriods)
	fmt.Fprintf(tw, "nr_throttled\t%d\n", s.NrThrottled)
	fmt.Fprintf(tw, "throttled_usec\t%d\n", s.ThrottledUsec)
	return tw.Flush()
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
