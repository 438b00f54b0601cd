package pooltree

import (
	"fmt"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// BenchmarkKernelPoolStats is one read of ten pools' counters on the real
// kernel, as the throttling prediction makes each second: "full" is
// PoolStats (CPU, pressure and, on v2 where the pools have memory
// limits, memory: eleven files a pool), "cpu" is PoolCPUStats (cpu.stat
// alone on v2; with cpuacct's usage on v1, where the host's memory
// hierarchy is never used). Compare the two as a ratio within one run.
func BenchmarkKernelPoolStats(b *testing.B) {
	k := kerneltest.Require(b, bothModes)
	root := k.NewRoot(b, bothModes)
	h, err := Open(k.Mounts, root.Path, cgroupfs.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	mem := ""
	if k.Mode == kerneltest.V2 {
		mem = ", TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE=10, TOTAL_MEMORY_HIGH_PERCENT_PER_NODE=5"
	}
	var ddl strings.Builder
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("p%d", i))
		fmt.Fprintf(&ddl, "CREATE RESOURCE POOL p%d WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=10%s);\n", i, mem)
	}
	m, _, err := planner.Load("ten.sql", []byte(ddl.String()))
	if err != nil {
		b.Fatal(err)
	}
	d, err := planner.Plan(m, planner.Node{CPUs: 2, MemoryBytes: 1 << 30, PeriodUsec: cpulimit.DefaultPeriodUsec}, planner.Activity{})
	if err != nil {
		b.Fatal(err)
	}
	if err := h.Apply(d); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		read func([]string) (map[string]observe.Sample, error)
	}{{"full", h.PoolStats}, {"cpu", h.PoolCPUStats}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if st, err := bc.read(names); err != nil || len(st) != len(names) {
					b.Fatalf("%d pools read, %v; want %d", len(st), err, len(names))
				}
			}
		})
	}
}
