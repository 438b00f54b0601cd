package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/planner"
)

// planCommand is `poolagent plan`: the cgroup limits a pool file gives on
// a node, without writing anything.
func planCommand() *cli.Command {
	return &cli.Command{
		Name:  "plan",
		Usage: "show the cgroup limits (cpu.max, cpu.weight, burst, memory.max) a pool file gives on a node",
		Description: "Applies the pool file (docs/pools.md) and divides the node's vCPUs among the active\n" +
			"pools by weighted max-min fairness. Without --cpus or --memory the figure is read from\n" +
			"this host: online CPUs and MemTotal, lowered to this process's own cgroup limits.\n" +
			"By default every pool with RESOURCES_WEIGHT >= 0 counts as active.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "pools", Aliases: []string{"p"}, Usage: "pool `FILE` (YDB DDL)", Required: true},
			&cli.Float64Flag{Name: "cpus", Usage: "node vCPUs, fractional allowed; a pool's CPUS may then name CPUs 0..N-1, N rounded up (default: read from the host, with its online CPUs)"},
			memoryFlag(),
			&cli.DurationFlag{Name: "period", Value: cpulimit.DefaultPeriodUsec * time.Microsecond, Usage: "CPU bandwidth period for pools without CPU_PERIOD_USEC, 1ms..1s"},
			&cli.StringFlag{Name: "active", Usage: "comma-separated `POOLS` with running queries (default: every pool with weight >= 0)"},
			&cli.StringFlag{Name: "demand", Usage: "observed demand, `POOL=VCPU`[,POOL=VCPU…]: a pool using less than its share is held to it"},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "output format: text or json"},
			&cli.StringFlag{Name: "host-root", Value: "/", Usage: "read the host's /proc and /sys below `DIR` (a copy of another host's; --root is the pool root in every other command)"},
		},
		Action: runPlan,
	}
}

func runPlan(c *cli.Context) error {
	format, err := formatOf(c, "text", "json")
	if err != nil {
		return err
	}
	node, origin, err := planNode(c, c.String("host-root"))
	if err != nil {
		return err
	}
	act, err := planActivity(c)
	if err != nil {
		return err
	}
	m, err := loadPools(c, c.String("pools"), "nothing planned")
	if err != nil {
		return err
	}
	d, err := planner.Plan(m, node, act)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	if format == "json" {
		return planner.WriteJSON(c.App.Writer, d, m.Classifiers())
	}
	return planner.WriteText(c.App.Writer, d, m.Classifiers(), origin)
}

// memoryFlag is --memory of plan, apply and daemon: the node's memory as
// parseBytes reads it.
func memoryFlag() cli.Flag {
	return &cli.StringFlag{Name: "memory", Usage: "node memory `SIZE`: plain bytes, or with an IEC suffix for powers of 1024 (16GiB, 16Gi) or an SI one for powers of 1000 (16GB) (default: read from the host)"}
}

// planNode builds the node from --cpus, --memory and --period, reading
// the host's /proc and /sys below hostRoot for what they leave out.
func planNode(c *cli.Context, hostRoot string) (planner.Node, planner.NodeOrigin, error) {
	period := c.Duration("period")
	if period < time.Millisecond || period > time.Second || period%time.Microsecond != 0 {
		return planner.Node{}, planner.NodeOrigin{}, usageErr("--period %s is not accepted (accepted: 1ms..1s in whole µs)", period)
	}
	node := planner.Node{PeriodUsec: int64(period / time.Microsecond)}
	origin := planner.NodeOrigin{CPUs: "--cpus", Memory: "--memory"}
	if c.IsSet("cpus") {
		node.CPUs = c.Float64("cpus")
		if !(node.CPUs > 0) || math.IsInf(node.CPUs, 0) {
			return planner.Node{}, planner.NodeOrigin{}, usageErr("--cpus %v is not accepted (accepted: vCPUs > 0, such as 10 or 1.5)", node.CPUs)
		}
	}
	if c.IsSet("memory") {
		var err error
		if node.MemoryBytes, err = parseBytes(c.String("memory")); err != nil {
			return planner.Node{}, planner.NodeOrigin{}, fmt.Errorf("--memory %w", err)
		}
	}
	if c.IsSet("cpus") && c.IsSet("memory") {
		return node, origin, nil
	}
	host, err := cgroupfs.ReadNodeCapacity(hostRoot)
	if err != nil {
		return planner.Node{}, planner.NodeOrigin{}, fmt.Errorf("read the host (give --cpus and --memory instead): %w", err)
	}
	if !c.IsSet("cpus") {
		node.CPUs, node.Online = host.CPUs, host.Online
		origin.CPUs = fmt.Sprintf("host: %d online", host.OnlineCPUs)
		if host.CgroupCPUs > 0 {
			origin.CPUs += ", cgroup limit " + planner.FormatCPUs(host.CgroupCPUs)
		}
	}
	if !c.IsSet("memory") {
		node.MemoryBytes = host.MemoryBytes
		origin.Memory = fmt.Sprintf("host: MemTotal %d", host.MemTotalBytes)
		if host.CgroupMemoryBytes > 0 {
			origin.Memory += fmt.Sprintf(", cgroup limit %d", host.CgroupMemoryBytes)
		}
	}
	return node, origin, nil
}

// planActivity reads --active and --demand.
func planActivity(c *cli.Context) (planner.Activity, error) {
	var act planner.Activity
	if c.IsSet("active") {
		act.Active = []string{}
		for name := range strings.SplitSeq(c.String("active"), ",") {
			if name = strings.TrimSpace(name); name != "" {
				act.Active = append(act.Active, name)
			}
		}
	}
	if !c.IsSet("demand") {
		return act, nil
	}
	act.DemandCPUs = map[string]float64{}
	for item := range strings.SplitSeq(c.String("demand"), ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, v, ok := strings.Cut(item, "=")
		cpus, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if !ok || err != nil || !(cpus >= 0) || math.IsInf(cpus, 0) {
			return act, usageErr("--demand %q is not accepted (accepted: POOL=VCPU with VCPU >= 0, comma-separated)", item)
		}
		act.DemandCPUs[strings.TrimSpace(name)] = cpus
	}
	return act, nil
}
