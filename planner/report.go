package planner

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"text/tabwriter"
)

// NodeOrigin says where each of a node's figures came from, for WriteText:
// "--cpus", or "host: 8 online, cgroup limit 2.5".
type NodeOrigin struct {
	CPUs, Memory string
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
func memoryJSON(c Cgroup) any {
	if c.MemoryBytes >= 0 {
		return c.MemoryBytes
	}
	return "max"
}

// WriteJSON writes d and the model's classifiers as `poolagent plan
// --format json` prints them: one indented object with the node, each
// pool's and query's cgroup limits and the classifiers.
func WriteJSON(w io.Writer, d Desired, classifiers []Classifier) error {
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

// WriteText writes d and the model's classifiers as `poolagent plan`
// prints them: the node, with origin saying where its figures came from,
// then a table of every pool's limits and one of the classifiers.
func WriteText(w io.Writer, d Desired, classifiers []Classifier, origin NodeOrigin) error {
	fmt.Fprintf(w, "node: %s vCPU (%s), memory %d bytes (%s), period %d µs\n\n",
		FormatCPUs(d.Node.CPUs), origin.CPUs, d.Node.MemoryBytes, origin.Memory, d.Node.PeriodUsec)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	sets := slices.ContainsFunc(d.Pools, func(p *PoolState) bool { return !p.Pool.CPU.CPUs.IsEmpty() })
	header := "POOL\tACTIVE\tWEIGHT\tCAP vCPU\tALLOC vCPU\tCPU.MAX\tCPU.WEIGHT\tBURST µs\tQUERY CPU.MAX\tMEMORY.MAX\tQUERY MEMORY.MAX"
	if sets {
		header += "\tCPUS"
	}
	guarantees := slices.ContainsFunc(d.Pools, func(p *PoolState) bool { return p.Pool.MemoryMinBytes > 0 || p.Pool.MemoryLowBytes > 0 })
	if guarantees {
		header += "\tMEMORY.MIN\tMEMORY.LOW"
	}
	tasks := slices.ContainsFunc(d.Pools, func(p *PoolState) bool { return p.Pool.PidsMax > 0 || p.Query.PidsMax > 0 })
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
		capCPUs := FormatCPUs(p.CapCPUs)
		if p.CapByCPUs {
			capCPUs += " (CPUS)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s",
			p.Name, active, p.Weight, capCPUs, FormatCPUs(p.AllocCPUs),
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

// FormatCPUs prints vCPU with up to three decimals: 7, 2.5, 2.333.
func FormatCPUs(v float64) string {
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}
