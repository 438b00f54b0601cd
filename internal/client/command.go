package client

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/internal/suggest"
	"github.com/poolagent/poolagent/internal/version"
	"golang.org/x/sys/unix"
)

// Exit statuses of the run command for its own failures, in the range
// `env` and `timeout` use; the command's own status passes through.
const (
	ExitRefused     = 125 // not admitted, a usage error, or the client failed
	ExitCannotStart = 126 // the command could not be started
	ExitNotFound    = 127 // no such command
)

// RunSummary is the run command's one-line summary, RunArgsUsage its
// arguments and RunHelp its description: `poolagent help run` and
// `poolagent-run --help` both show them.
const (
	RunSummary   = "run a command as a query in a resource pool, admitted by the poolagent daemon"
	RunArgsUsage = "[--pool NAME] [--stats text|json] [--socket PATH] -- CMD [ARGS...]"
	RunHelp      = "Asks the daemon to admit a query: in the pool named by --pool if the caller may use it,\n" +
		"else where the classifiers put the caller, else default. While the query waits in the\n" +
		"pool's queue a terminal shows its position and the time waited; a signal (Ctrl-C) leaves\n" +
		"the queue. Once admitted, CMD runs as the calling user in its own query cgroup\n" +
		"<root>/<pool>/<query> with the pool's per-query limits; POOLAGENT_CPU_LIMIT in CMD's\n" +
		"environment is its CPU cap in vCPUs. The query holds its slot until CMD and every process\n" +
		"it started have exited. When the client itself fails or the query is refused (YDB's\n" +
		"message), it exits 125; 126 when CMD cannot be started, 127 when it is not found.\n" +
		"\n" +
		"Without --stats the query runs in place: the daemon moves the client process itself into\n" +
		"the query cgroup and the client becomes CMD (execve), so nothing of poolagent stays\n" +
		"running, signals reach CMD directly, and the exit status is CMD's own (a shell sees\n" +
		"128+N when signal N ended it); the client returns when CMD exits, while processes CMD left\n" +
		"behind keep the slot. With --stats the client stays CMD's parent: it starts CMD through a\n" +
		"gate shell, passes signals on, waits for CMD and every process it started, then prints\n" +
		"the statistics and exits with CMD's status (128+N for signal N); this costs a shell, a\n" +
		"running client and two more round trips to the daemon. `poolagent run` and the slim\n" +
		"`poolagent-run` behave alike; poolagent-run starts faster. When the kernel's OOM killer\n" +
		"ends a process of the query at the query's or its pool's memory limit, a line on standard\n" +
		"error says so and names the limit (in place, the daemon writes it there when the query\n" +
		"ends). See docs/admission.md.\n" +
		"\n" +
		"In a systemd service (INVOCATION_ID set and the client in a cgroup ending in .service) the\n" +
		"client runs as with --stats, printing no statistics, so the unit stays whole: it remains\n" +
		"the unit's main process, the daemon passes the signals systemd sends it to every process\n" +
		"of the query and kills them if the client is killed, and the client ends by the signal\n" +
		"that ended CMD. See docs/operate.md, \"Services and timers in a pool\".\n" +
		"\n" +
		"Options:\n" +
		"   --pool NAME, -p NAME  run in pool NAME (default: classify)\n" +
		"   --stats FORMAT        after CMD, print the query's statistics to stderr as FORMAT text or json\n" +
		"                         (the client stays CMD's parent: see above)\n" +
		"   --socket PATH         the daemon's socket PATH (default: " + protocol.DefaultSocket + ")\n" +
		"   --version             print the version and exit\n" +
		"   --help, -h            show this help"
)

// runFlags are the run command's flags as typed, for its errors.
var runFlags = []string{"--pool/-p", "--stats", "--socket", "--version", "--help/-h"}

// flagError says what was wrong with a flag in one line, with the flags
// accepted and the nearest one: the flag package's own messages name the
// flag with one dash and nothing else.
func flagError(err error) string {
	msg := err.Error()
	accepted := "accepted: " + strings.Join(runFlags, ", ")
	var names []string
	for _, f := range runFlags {
		for _, n := range strings.Split(f, "/") {
			names = append(names, strings.TrimLeft(n, "-"))
		}
	}
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		hint := ""
		if n := suggest.Nearest(name, names); n != "" {
			hint = "; did you mean --" + n + "?"
		}
		return fmt.Sprintf("unknown flag %s%s (%s)", dashed(name), hint, accepted)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return fmt.Sprintf("%s needs a value (%s)", dashed(strings.TrimLeft(name, "-")), accepted)
	}
	return msg
}

// dashed writes a flag name as typed: --pool, -p.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// HandedOver is the argv[0] with which the poolagent binary starts
// poolagent-run for `poolagent run` (package internal/handover): given it,
// poolagent-run speaks as `poolagent run`.
const HandedOver = "poolagent run"

// RunCommand is the whole run command: it parses args (the arguments
// after the program's name: flags, then "--" and the command), runs the
// command as a query and returns the exit status. name is the command as
// typed ("poolagent run" or "poolagent-run"); messages start with its
// first word, usage errors with the whole name.
func RunCommand(name string, args []string, stdin, stdout, stderr *os.File) int {
	prog, _, _ := strings.Cut(name, " ")
	a, code, done := parseRunArgs(name, args, stdout, stderr)
	if done {
		return code
	}
	path, err := exec.LookPath(a.command[0])
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		if errors.Is(err, exec.ErrNotFound) {
			return ExitNotFound
		}
		return ExitCannotStart
	}
	opts := RunOptions{
		Socket: a.socket, Pool: a.pool, Args: a.command, App: AppName(path), Env: os.Environ(),
		Stdin: stdin, Stdout: stdout, Stderr: stderr, Name: prog,
	}
	if isTerminal(stderr) {
		opts.Progress = stderr
	}
	opts.Unit = inService()
	if a.stats == "" && !opts.Unit {
		return execInPlace(path, opts)
	}
	return runWithStats(opts, a.stats)
}

// runArgs are the run command's arguments: its flags and the command.
type runArgs struct {
	pool, stats, socket string
	command             []string // the command and its arguments, never empty
}

// parseRunArgs parses the run command's arguments. done says the command
// ends here with the exit status code: it printed its help or version,
// or refused the arguments with a message on stderr.
func parseRunArgs(name string, args []string, stdout, stderr io.Writer) (a runArgs, code int, done bool) {
	prog, _, _ := strings.Cut(name, " ")
	usageErr := func(format string, v ...any) (runArgs, int, bool) {
		fmt.Fprintf(stderr, "%s: %s (usage: %s [--pool P] -- CMD [ARGS...])\n",
			strings.ReplaceAll(name, " ", ": "), fmt.Sprintf(format, v...), name)
		return runArgs{}, ExitRefused, true
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&a.pool, "pool", "", "")
	fs.StringVar(&a.pool, "p", "", "")
	fs.StringVar(&a.stats, "stats", "", "")
	fs.StringVar(&a.socket, "socket", protocol.DefaultSocket, "")
	showVersion := fs.Bool("version", false, "")
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(stdout, "Usage: %s %s\n\n%s.\n\n%s\n", name, RunArgsUsage, RunSummary, RunHelp)
		return runArgs{}, 0, true
	case err != nil:
		return usageErr("%s", flagError(err))
	case *showVersion:
		fmt.Fprintf(stdout, "%s version %s\n", prog, version.Current())
		return runArgs{}, 0, true
	}
	if a.stats != "" && a.stats != "text" && a.stats != "json" {
		fmt.Fprintf(stderr, "%s: --stats %q is not accepted (accepted: text, json)\n", prog, a.stats)
		return runArgs{}, ExitRefused, true
	}
	if a.command = fs.Args(); len(a.command) == 0 {
		return usageErr("no command given")
	}
	return a, 0, false
}

// execInPlace runs the query without --stats and returns the exit status.
// Nothing is left to do after the command: it runs in place of this
// process, and Exec returns only if it did not start. Exec catches
// signals itself, and only if the query must wait.
func execInPlace(path string, opts RunOptions) int {
	res, err := Exec(path, opts)
	var execErr *exec.Error
	switch {
	case errors.As(err, &execErr):
		fmt.Fprintf(opts.Stderr, "%s: %v\n", opts.Name, err)
		if errors.Is(err, syscall.ENOENT) {
			return ExitNotFound
		}
		return ExitCannotStart
	case err != nil:
		fmt.Fprintf(opts.Stderr, "%s: %s\n", opts.Name, describe(err))
		if errors.Is(err, ErrLeftQueue) {
			return res.ExitCode
		}
		return ExitRefused
	}
	return res.ExitCode
}

// runWithStats runs the query with --stats, or in a service: the client
// stays the command's parent, passes signals on, and prints the query's
// statistics as format after it (none when format is empty). It returns
// the exit status; in a service (opts.Unit) it ends by the signal that
// ended the command, or its wait in the queue, instead.
func runWithStats(opts RunOptions, format string) int {
	prog, stderr := opts.Name, opts.Stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, QueueSignals...)
	defer signal.Stop(sigs)
	opts.Signals = sigs
	res, err := Run(opts)
	if opts.Unit {
		defer exitBy(res.Signal)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s\n", prog, describe(err))
		if res.Ran || errors.Is(err, ErrLeftQueue) {
			return res.ExitCode
		}
		return ExitRefused
	}
	if res.Stats != nil && res.Stats.OOM != nil {
		fmt.Fprintln(stderr, res.Stats.OOM.Message("poolagent", res.Query, res.Pool))
	}
	if res.Stats != nil && res.Stats.Fork != nil {
		fmt.Fprintln(stderr, res.Stats.Fork.Message("poolagent", res.Query, res.Pool))
	}
	switch {
	case format == "":
	case res.Stats == nil:
		fmt.Fprintf(stderr, "%s: no statistics: the daemon went away while the query ran\n", prog)
	default:
		if err := WriteStats(stderr, *res.Stats, format); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", prog, err)
			return ExitRefused
		}
	}
	return res.ExitCode
}

// describe is err as the command prints it: a refusal as confined gets
// the daemon's option that lets queries leave a cgroup's limits, which the
// daemon's message does not name.
func describe(err error) string {
	var refused *RefusedError
	if errors.As(err, &refused) && refused.Code == protocol.CodeConfined {
		return err.Error() + "; an administrator may let queries leave that cgroup's limits: poolagent daemon --may-leave CGROUP"
	}
	return err.Error()
}

// WriteStats prints a query's statistics as format "text" (a table: YDB's
// names first, then the query cgroup's cpu.stat counters in µs, its peak
// memory in bytes and its memory events) or "json" (one Stats object).
func WriteStats(w io.Writer, s protocol.Stats, format string) error {
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
	fmt.Fprintf(tw, "peak_memory_bytes\t%d\n", s.PeakMemoryBytes)
	fmt.Fprintf(tw, "memory_high_events\t%d\n", s.MemoryHighEvents)
	fmt.Fprintf(tw, "memory_max_events\t%d\n", s.MemoryMaxEvents)
	fmt.Fprintf(tw, "oom_kills\t%d\n", s.OOMKills)
	if s.OOM != nil {
		fmt.Fprintf(tw, "oom_limit\t%s %d bytes (%s=%d)\n", s.OOM.Limit, s.OOM.LimitBytes, s.OOM.Parameter, s.OOM.Percent)
	}
	fmt.Fprintf(tw, "forks_refused\t%d\n", s.ForksRefused)
	if s.Fork != nil {
		fmt.Fprintf(tw, "fork_limit\t%s (QUERY_PIDS_LIMIT=%d, TOTAL_PIDS_LIMIT=%d; 0: none)\n", s.Fork.Limit, s.Fork.QueryLimit, s.Fork.PoolLimit)
	}
	return tw.Flush()
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
