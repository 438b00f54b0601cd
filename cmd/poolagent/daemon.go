package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/internal/daemon"
	"github.com/poolagent/poolagent/internal/peer"
	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/internal/service"
	"github.com/poolagent/poolagent/observe"
)

// daemonCommand is `poolagent daemon`: the admission service.
func daemonCommand() *cli.Command {
	return &cli.Command{
		Name:  "daemon",
		Usage: "admit queries into pools: serve `poolagent run` on a Unix socket and keep the pools' cgroups planned",
		Description: "Applies the pool file to the cgroup tree (as poolagent apply, but with no pool active),\n" +
			"then listens on the socket, open to every local user; a caller is identified by the\n" +
			"kernel's peer credentials. Each query is classified, admitted, queued or rejected by\n" +
			"its pool's CONCURRENT_QUERY_LIMIT, QUEUE_SIZE, QUERY_CANCEL_AFTER_SECONDS and\n" +
			"DATABASE_LOAD_CPU_THRESHOLD, runs in its own cgroup <root>/<pool>/<query>, and holds\n" +
			"its slot until that cgroup is empty. When the set of pools with running queries\n" +
			"changes, and at every load refresh with the observed demand, the pools' CPU shares\n" +
			"are re-planned (weighted max-min) and only changed files are written. Runs until\n" +
			"SIGINT or SIGTERM; SIGHUP re-reads the pool file and the changes in --state-dir (an\n" +
			"invalid file is refused and the running pools kept). Under systemd (Type=notify,\n" +
			"--delegated) it reports readiness and status and pings the watchdog.\n" +
			"See docs/admission.md and docs/operate.md.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "pools", Aliases: []string{"p"}, Usage: "pool `FILE` (YDB DDL)", Required: true},
			&cli.StringFlag{Name: "root", Usage: "pool root `DIR` (default: as poolagent apply: /sys/fs/cgroup/poolagent on cgroup v2, /sys/fs/cgroup/cpu/poolagent on v1)"},
			&cli.BoolFlag{Name: "delegated", Usage: "keep the pools in a scope systemd delegates beside the daemon's unit (poolagent.service -> poolagent-pools.scope/pools, Delegate=yes), created once with systemd-run and adopted on restart (instead of --root)"},
			&cli.StringFlag{Name: "state-dir", Usage: "`DIR` keeping run-time changes (poolagent sql) across restarts; without it they are refused. It must exist (systemd's StateDirectory= makes it) unless --create-state-dir"},
			&cli.BoolFlag{Name: "create-state-dir", Usage: "make --state-dir (mode 0700) if it does not exist, instead of refusing to start"},
			&cli.StringFlag{Name: "metrics-listen", Usage: "serve Prometheus metrics at http://`ADDR`/metrics, such as 127.0.0.1:9561 (default: off)"},
			&cli.BoolFlag{Name: "metrics-per-user", Usage: "also export each user's running and queued queries per pool, with a user label (one series per user and pool; docs/metrics.md)"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "`LEVEL` of the log on stderr: debug (every admission decision), info (every apply), warn or error"},
			&cli.StringFlag{Name: "socket", Value: protocol.DefaultSocket, Usage: "Unix socket `PATH` to listen on"},
			&cli.StringFlag{Name: "admin-group", Usage: "Unix `GROUP` whose members administer pools besides root"},
			&cli.DurationFlag{Name: "reconcile", Value: daemon.DefaultReconcile, Usage: "`INTERVAL` between comparisons of the pool tree with the plan, also made on SIGHUP: what another writer changed is rewritten, logged and counted (poolagent_tree_repair_writes_total)"},
			&cli.StringSliceFlag{Name: "may-leave", Usage: "let queries move processes out of the CPU and memory limits of `CGROUP` and the cgroups below it (as /proc/PID/cgroup names it, such as /user.slice; repeatable); a process held by any other limit its query would leave is refused"},
			&cli.IntFlag{Name: "max-conns-per-user", Value: daemon.DefaultLimits.ConnsPerUID, Usage: "`N` connections one uid may hold open to the daemon at once (each queued or running query holds one; docs/security.md)"},
			&cli.IntFlag{Name: "max-unstarted-per-user", Value: daemon.DefaultLimits.NotStartedPerUID, Usage: "`N` queries of one uid that may be admitted and not yet started at once (docs/security.md)"},
			&cli.Float64Flag{Name: "cpus", Usage: "node vCPUs, fractional allowed; a pool's CPUS may then name CPUs 0..N-1, N rounded up (default: read from the host, with its online CPUs)"},
			memoryFlag(),
			&cli.DurationFlag{Name: "period", Value: cpulimit.DefaultPeriodUsec * time.Microsecond, Usage: "CPU bandwidth period for pools without CPU_PERIOD_USEC, 1ms..1s"},
			&cli.DurationFlag{Name: "load-sample", Value: admission.DefaultSampleInterval, Usage: "host CPU load sampling `INTERVAL`"},
			&cli.DurationFlag{Name: "history-window", Value: time.Hour, Usage: "keep each pool's CPU counters for this `DURATION`, per period (at least 100ms), for poolagent advise --pool; 0: none (docs/advise.md)"},
			&cli.DurationFlag{Name: "history-interval", Usage: "sample each pool's counters for the history every `INTERVAL` at least, 100ms..1m (default: the pool's period, at least 100ms); longer costs less CPU"},
			&cli.DurationFlag{Name: "load-refresh", Value: admission.DefaultRefreshInterval, Usage: "`INTERVAL` between load refreshes: moving average taken, reservations dropped, pools re-planned with observed demand"},
		}, fleetFlags()...),
		Action: runDaemon,
	}
}

func runDaemon(c *cli.Context) error {
	if err := checkDaemonFlags(c); err != nil {
		return err
	}
	if err := needRoot("daemon", "it writes the pool cgroups and moves every user's queries into them"); err != nil {
		return err
	}
	node, err := applyNode(c)
	if err != nil {
		return err
	}
	log, err := daemonLogger(c)
	if err != nil {
		return err
	}
	src := daemon.Sources{PoolFile: c.String("pools")}
	if dir := c.String("state-dir"); dir != "" {
		store, err := openStateDir(dir, c.Bool("create-state-dir"))
		if err != nil {
			return err
		}
		defer store.Close()
		src.Store = store
	}
	model, err := loadSources(src, log)
	if err != nil {
		return err
	}
	warnAdminGroup(c.String("admin-group"), log)
	cg, root, err := openPoolRoot(c, log)
	if err != nil {
		return err
	}
	defer cg.Close()
	// The root is this daemon's while it runs: another daemon or
	// `poolagent apply` on it is refused, naming this one.
	release, err := cg.Own()
	if err != nil {
		return rootFlag(c, err)
	}
	defer release()
	load, err := observe.NewLoadSampler("/proc")
	if err != nil {
		return err
	}
	activated, err := activatedSocket(c.String("socket"))
	if err != nil {
		return err
	}
	cfg := daemonConfig(c, log, activated, node, cg)
	fleetReload := reloader{log: log}
	if c.String("etcd") != "" {
		backend, shared, err := joinFleet(c, log, &src, model, node.CPUs, cfg.Load, fleetReload.reload)
		if err != nil {
			return err
		}
		defer backend.Close()
		cfg.Admission, cfg.Cluster, model = backend, clusterView{backend}, shared
	}
	srv, err := daemon.New(cfg, daemon.Policy{Model: model, Node: node, AdminGroup: c.String("admin-group")}, cg, peer.NewUserCache(peer.SystemUsers{}, time.Second), load)
	if err != nil {
		return err
	}
	srv.Operate(src)
	fleetReload.serve(srv)
	log.Info("serving", "socket", cfg.Socket, "root", root, "pools", c.String("pools"), "cpus", node.CPUs)
	err = service.Run(c.Context, srv, service.Options{Log: log, MetricsListen: c.String("metrics-listen")})
	if errors.Is(err, daemon.ErrNotSocket) {
		return fmt.Errorf("--socket: %w", err)
	}
	return err
}
