package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/daemon"
	"github.com/poolagent/poolagent/internal/fleet"
	"github.com/poolagent/poolagent/internal/state"
	"github.com/poolagent/poolagent/internal/version"
	"github.com/poolagent/poolagent/planner"
)

// fleetFlags are `poolagent daemon`'s fleet mode flags (docs/fleet.md).
func fleetFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "etcd", Usage: "fleet mode: etcd client `ENDPOINTS`, comma-separated (http://10.0.0.1:2379,...); pool limits and definitions are then the cluster's (docs/fleet.md)"},
		&cli.StringFlag{Name: "cluster", Value: "poolagent", Usage: "fleet mode: cluster `NAME`; its keys live under /poolagent/NAME/ in etcd"},
		&cli.StringFlag{Name: "node", Usage: "fleet mode: this node's `NAME` in the cluster (default: the host name)"},
		&cli.DurationFlag{Name: "etcd-ttl", Value: fleet.DefaultTTL, Usage: "fleet mode: session lease `TTL`; a node that dies frees its slots this long after its last renewal"},
		&cli.StringFlag{Name: "etcd-cacert", Usage: "fleet mode: CA certificate `FILE` (PEM) that signed the etcd members' certificates"},
		&cli.StringFlag{Name: "etcd-cert", Usage: "fleet mode: client certificate `FILE` (PEM) for etcd"},
		&cli.StringFlag{Name: "etcd-key", Usage: "fleet mode: client key `FILE` (PEM) for --etcd-cert"},
	}
}

// checkFleetFlags refuses a fleet flag without --etcd (it would be
// ignored), an --etcd that names no endpoint, a client certificate
// without its key or the other way round, and a TTL etcd cannot keep.
func checkFleetFlags(c *cli.Context) error {
	if !c.IsSet("etcd") {
		for _, f := range []string{"cluster", "node", "etcd-ttl", "etcd-cacert", "etcd-cert", "etcd-key"} {
			if c.IsSet(f) {
				return usageErr("--%s is a fleet mode flag and needs --etcd (accepted: --etcd ENDPOINTS with it, or no fleet flag)", f)
			}
		}
		return nil
	}
	if len(etcdEndpoints(c)) == 0 {
		return usageErr("--etcd %q names no endpoint (accepted: comma-separated URLs, such as https://10.0.0.1:2379,https://10.0.0.2:2379)", c.String("etcd"))
	}
	if (c.String("etcd-cert") == "") != (c.String("etcd-key") == "") {
		return usageErr("--etcd-cert %q and --etcd-key %q go together (accepted: both, or neither)", c.String("etcd-cert"), c.String("etcd-key"))
	}
	if ttl := c.Duration("etcd-ttl"); ttl < 2*time.Second {
		return usageErr("--etcd-ttl %s is not accepted (accepted: 2s or more; etcd leases count whole seconds)", ttl)
	}
	return nil
}

// etcdEndpoints are the endpoints --etcd names.
func etcdEndpoints(c *cli.Context) []string {
	var endpoints []string
	for e := range strings.SplitSeq(c.String("etcd"), ",") {
		if e = strings.TrimSpace(e); e != "" {
			endpoints = append(endpoints, e)
		}
	}
	return endpoints
}

// joinFleet makes the daemon a node of the cluster its flags name
// (fleet.Join); reload is called when the cluster's definitions change.
func joinFleet(c *cli.Context, log *slog.Logger, src *daemon.Sources, local *planner.Model, cpus float64, load admission.LoadConfig, reload func()) (*fleet.Backend, *planner.Model, error) {
	tlsCfg, err := fleet.TLSFiles{CA: c.String("etcd-cacert"), Cert: c.String("etcd-cert"), Key: c.String("etcd-key")}.Config()
	if err != nil {
		return nil, nil, fmt.Errorf("--etcd-cacert/--etcd-cert/--etcd-key: %w", err)
	}
	name := c.String("node")
	if name == "" {
		if name, err = os.Hostname(); err != nil {
			return nil, nil, fmt.Errorf("--node not given and the host name cannot be read: %w", err)
		}
	}
	endpoints := etcdEndpoints(c)
	var changes []state.Change
	if src.Store != nil {
		changes = src.Store.Changes()
	}
	b, shared, model, warns, err := fleet.Join(context.Background(), fleet.Config{
		Endpoints: endpoints, TLS: tlsCfg, Cluster: c.String("cluster"), Node: name,
		TTL: c.Duration("etcd-ttl"), Load: load, VCPUs: int(math.Ceil(cpus)), Version: version.Current().Version,
		Definitions: func(fleet.Definitions) { reload() }, Log: log,
	}, local, src.PoolFile, changes)
	if err != nil {
		return nil, nil, fmt.Errorf("--etcd: %w", err)
	}
	for _, w := range warns {
		log.Warn("cluster pool definitions", "warning", w.String())
	}
	log.Info("fleet mode", "cluster", c.String("cluster"), "node", name, "etcd", endpoints, "definitions", shared.Note())
	src.Shared = shared
	return b, model, nil
}
