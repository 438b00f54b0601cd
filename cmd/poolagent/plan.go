package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
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
		return writePlanJSON(c.App.Writer, d, m.Classifiers())
	}
	return writePlanText(c.App.Writer, d, m.Classifiers(), origin)
}

// nodeOrigin says where each node figure came from, for the text output.
type nodeOrigin struct {
	cpus, memory string
}

// memoryFlag is --memory of plan, apply and daemon: the node's memory as
// parseBytes reads it.
func memoryFlag() cli.Flag {
	return &cli.StringFlag{Name: "memory", Usage: "node memory `SIZE`: plain bytes, or with an IEC suffix for powers of 1024 (16GiB, 16Gi) or an SI one for powers of 1000 (16GB) (default: read from the host)"}
}

// planNode builds the node from --cpus, --memory and --period, reading
// the host's /proc and /sys below hostRoot for what they leave out.
func planNode(c *cli.Context, hostRoot string) (planner.Node, nodeOrigin, error) {
	period := c.Duration("period")
	if period < time.Millisecond || period > time.Second || period%time.Microsecond != 0 {
		return planner.Node{}, nodeOrigin{}, usageErr("--period %s is not accepted (accepted: 1ms..1s in whole µs)", period)
	}
	node := planner.Node{PeriodUsec: int64(period / time.Microsecond)}
	origin := nodeOrigin{cpus: "--cpus", memory: "--memory"}
	if c.IsSet("cpus") {
		node.CPUs = c.Float64("cpus")
		if !(node.CPUs > 0) || math.IsInf(node.CPUs, 0) {
			return planner.Node{}, nodeOrigin{}, usageErr("--cpus %v is not accepted (accepted: vCPUs > 0, such as 10 or 1.5)", node.CPUs)
		}
	}
	if c.IsSet("memory") {
		var err error
		if node.MemoryBytes, err = parseBytes(c.String("memory")); err != nil {
			return planner.Node{}, nodeOrigin{}, fmt.Errorf("--memory %w", err)
		}
	}
	if c.IsSet("cpus") && c.IsSet("memory") {
		return node, origin, nil
	}
	host, err := cgroupfs.ReadNodeCapacity(hostRoot)
	if err != nil {
		return planner.Node{}, nodeOrigin{}, fmt.Errorf("read the host (give --cpus and --memory instead): %w", err)
	}
	if !c.IsSet("cpus") {
		node.CPUs, node.Online = host.CPUs, host.Online
		origin.cpus = fmt.Sprintf("host: %d online", host.OnlineCPUs)
		if host.CgroupCPUs > 0 {
			origin.cpus += ", cgroup limit " + formatCPUs(host.CgroupCPUs)
		}
	}
	if !c.IsSet("memory") {
		node.MemoryBytes = host.MemoryBytes
		origin.memory = fmt.Sprintf("host: MemTotal %d", host.MemTotalBytes)
		if host.CgroupMemoryBytes > 0 {
			origin.memory += fmt.Sprintf(", cgroup limit %d", host.CgroupMemoryBytes)
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

// planJSON is the JSON contract of `poolagent plan --format json`; later
// tools rely on its field names.
type planJSON struct {
	Node struct {
		CPUs        float64 `json:"cpus"`
		MemoryBytes int64   `json:"memory_bytes"`
		PeriodUsec  int64   `json:"period_usec"`
	} `json:"node"`
	Pools       []poolJSON       `json:"pools"`
	Classifiers []classifierJSON `json:"classifiers"`
}

type poolJSON struct {
	Name            string  `json:"name"`
	Active          bool    `json:"active"`
	Weight          int64   `json:"weight"`
	CapCPUs         float64 `json:"cap_cpus"`
	AllocCPUs       float64 `json:"alloc_cpus"`
	CPUMax          string  `json:"cpu_max"`
	CPUWeight       int64   `json:"cpu_weight"`
	CPUIdle         bool    `json:"cpu_idle,omitempty"`
	CPUs            string  `json:"cpus,omitempty"`
	CapByCPUs       bool    `json:"cap_by_cpus,omitempty"`
	CPUMaxBurstUsec int64   `json:"cpu_max_burst_usec"`
	MemoryMax       any     `json:"memory_max"` // bytes, or "max"
	QueryCPUMax     string  `json:"query_cpu_max"`
	QueryMemoryMax  any     `json:"query_memory_max"`         // bytes, or "max"
	MemoryMin       int64   `json:"memory_min,omitempty"`     // bytes; absent without a guarantee
	MemoryLow       int64   `json:"memory_low,omitempty"`     // bytes; absent without a guarantee
	PidsMax         int64   `json:"pids_max,omitempty"`       // tasks; absent without a limit
	QueryPidsMax    int64   `json:"query_pids_max,omitempty"` // tasks; absent without a limit
}

type classifierJSON struct {
	Name         string `json:"name"`
	Rank         int64  `json:"rank"`
	MemberName   string `json:"member_name"`
	HasAppName   string `json:"has_app_name,omitempty"`
	ResourcePool string `json:"resource_pool"`
	Action       string `json:"action,omitempty"`
}

// memoryJSON is a memory.max value for JSON: a number of bytes, or "max".
func memoryJSON(c planner.Cgroup) any {
	if c.MemoryBytes >= 0 {
		return c.MemoryBytes
	}
	return "max"
}

func writePlanJSON(w io.Writer, d planner.Desired, classifiers []planner.Classifier) error {
	var out planJSON
	out.Node.CPUs, out.Node.MemoryBytes, out.Node.PeriodUsec = d.Node.CPUs, d.Node.MemoryBytes, d.Node.PeriodUsec
	out.Pools = make([]poolJSON, 0, len(d.Pools))
	for _, p := range d.Pools {
		out.Pools = append(out.Pools, poolJSON{
			Name: p.Name, Active: p.Active, Weight: p.Weight, CapCPUs: p.CapCPUs, AllocCPUs: p.AllocCPUs,
			CPUMax: p.Pool.CPU.CPUMax(), CPUWeight: p.Pool.CPU.Weight, CPUIdle: p.Pool.CPU.Idle,
			CPUs: p.Pool.CPU.CPUs.String(), CapByCPUs: p.CapByCPUs, CPUMaxBurstUsec: p.Pool.CPU.BurstUsec,
			MemoryMax: memoryJSON(p.Pool), QueryCPUMax: p.Query.CPU.CPUMax(), QueryMemoryMax: memoryJSON(p.Query),
			MemoryMin: p.Pool.MemoryMinBytes, MemoryLow: p.Pool.MemoryLowBytes,
			PidsMax: max(p.Pool.PidsMax, 0), QueryPidsMax: max(p.Query.PidsMax, 0),
		})
	}
	out.Classifiers = make([]classifierJSON, 0, len(classifiers))
	for _, c := range classifiers {
		out.Classifiers = append(out.Classifiers, classifierJSON{Name: c.Name, Rank: c.Rank, MemberName: c.MemberName,
			HasAppName: c.AppName, ResourcePool: c.ResourcePool, Action: c.Action})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func writePlanText(w io.Writer, d planner.Desired, classifiers []planner.Classifier, origin nodeOrigin) error {
	fmt.Fprintf(w, "node: %s vCPU (%s), memory %d bytes (%s), period %d µs\n\n",
		formatCPUs(d.Node.CPUs), origin.cpus, d.Node.MemoryBytes, origin.memory, d.Node.PeriodUsec)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	sets := slices.ContainsFunc(d.Pools, func(p planner.PoolState) bool { return !p.Pool.CPU.CPUs.IsEmpty() })
	header := "POOL\tACTIVE\tWEIGHT\tCAP vCPU\tALLOC vCPU\tCPU.MAX\tCPU.WEIGHT\tBURST µs\tQUERY CPU.MAX\tMEMORY.MAX\tQUERY MEMORY.MAX"
	if sets {
		header += "\tCPUS"
	}
	guarantees := slices.ContainsFunc(d.Pools, func(p planner.PoolState) bool { return p.Pool.MemoryMinBytes > 0 || p.Pool.MemoryLowBytes > 0 })
	if guarantees {
		header += "\tMEMORY.MIN\tMEMORY.LOW"
	}
	tasks := slices.ContainsFunc(d.Pools, func(p planner.PoolState) bool { return p.Pool.PidsMax > 0 || p.Query.PidsMax > 0 })
	if tasks {
		header += "\tPIDS.MAX\tQUERY PIDS.MAX"
	}
	fmt.Fprintln(tw, header)
	for _, p := range d.Pools {
		active := "no"
		if p.Active {
			active = "yes"
		}
		weight := strconv.FormatInt(p.Pool.CPU.Weight, 10)
		if p.Pool.CPU.Idle {
			weight = "idle"
		}
		capCPUs := formatCPUs(p.CapCPUs)
		if p.CapByCPUs {
			capCPUs += " (CPUS)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s",
			p.Name, active, p.Weight, capCPUs, formatCPUs(p.AllocCPUs),
			p.Pool.CPU.CPUMax(), weight, p.Pool.CPU.BurstUsec, p.Query.CPU.CPUMax(),
			p.Pool.MemoryMax(), p.Query.MemoryMax())
		if sets {
			fmt.Fprintf(tw, "\t%s", cmp.Or(p.Pool.CPU.CPUs.String(), "(all)"))
		}
		if guarantees {
			fmt.Fprintf(tw, "\t%d\t%d", p.Pool.MemoryMinBytes, p.Pool.MemoryLowBytes)
		}
		if tasks {
			fmt.Fprintf(tw, "\t%s\t%s", p.Pool.PidsMaxValue(), p.Query.PidsMaxValue())
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(classifiers) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLASSIFIER\tRANK\tMEMBER_NAME\tHAS_APP_NAME\tRESOURCE_POOL\tACTION")
	for _, c := range classifiers {
		member, app := c.MemberName, c.AppName
		if member == "" {
			member = "(everyone)"
		}
		if app == "" {
			app = "(any)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", c.Name, c.Rank, member, app, c.ResourcePool, c.Action)
	}
	return tw.Flush()
}

// formatCPUs prints vCPU with up to three decimals: 7, 2.5, 2.333.
func formatCPUs(v float64) string {
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}
