package main

import (
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/daemon"
	"github.com/poolagent/poolagent/internal/history"
	"github.com/poolagent/poolagent/internal/pooltree"
	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// checkDaemonFlags refuses the daemon's numeric flags outside their
// accepted ranges and fleet flags that cannot work, before anything is
// read or written.
func checkDaemonFlags(c *cli.Context) error {
	if err := checkFleetFlags(c); err != nil {
		return err
	}
	for _, f := range []string{"max-conns-per-user", "max-unstarted-per-user"} {
		if n := c.Int(f); n < 1 || n > 1<<20 {
			return usageErr("--%s %d is not accepted (accepted: 1..%d)", f, n, 1<<20)
		}
	}
	if w := c.Duration("history-window"); w < 0 || w > history.MaxWindow {
		return usageErr("--history-window %s is not accepted (accepted: 0 for none, up to %s)", w, history.MaxWindow)
	}
	if iv := c.Duration("history-interval"); iv != 0 && (iv < history.MinInterval || iv > time.Minute) {
		return usageErr("--history-interval %s is not accepted (accepted: %s..1m)", iv, history.MinInterval)
	}
	for _, f := range []string{"load-sample", "load-refresh"} {
		if d := c.Duration(f); d < 10*time.Millisecond {
			return usageErr("--%s %s is not accepted (accepted: 10ms or more, such as 1s)", f, d)
		}
	}
	return nil
}

// daemonLogger is the daemon's log on stderr at --log-level, in the
// journal's format when systemd connected stderr to it.
func daemonLogger(c *cli.Context) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return nil, usageErr("--log-level %q is not accepted (accepted: debug, info, warn, error)", c.String("log-level"))
	}
	return newLogger(c.App.ErrWriter, level, os.Getenv("JOURNAL_STREAM")), nil
}

// daemonConfig is the daemon's configuration from its flags; the pool
// history is kept only with a --history-window.
func daemonConfig(c *cli.Context, log *slog.Logger, activated *net.UnixListener, node planner.Node, cg *pooltree.Handle) daemon.Config {
	cfg := daemon.Config{
		Socket:         c.String("socket"),
		Listener:       activated,
		LoadSample:     c.Duration("load-sample"),
		Load:           admission.LoadConfig{RefreshInterval: c.Duration("load-refresh")},
		Log:            log,
		MayLeave:       c.StringSlice("may-leave"),
		Reconcile:      c.Duration("reconcile"),
		MetricsPerUser: c.Bool("metrics-per-user"),
		Limits:         daemon.Limits{ConnsPerUID: c.Int("max-conns-per-user"), NotStartedPerUID: c.Int("max-unstarted-per-user")},
	}
	if w := c.Duration("history-window"); w > 0 {
		ks := observe.ReadKernelSettings("/proc", "/boot", observe.KernelRelease())
		cfg.History = history.Config{Window: w, Interval: c.Duration("history-interval"), Cgroup: cg.Reader().Version(), CPUs: node.OnlineCPUs().Count(),
			SliceUsec: ks.SliceUsec, TickUsec: ks.TickUsec()}
	}
	return cfg
}
