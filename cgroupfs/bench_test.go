package cgroupfs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/cpulimit"
	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/planner"
)

// hundredPools plans 99 pools beside default, each capped at 1..99% of a
// 10 vCPU node with queries at half of it and a 10% burst: every pool
// cgroup gets a quota, a burst and (on v2) subtree_control.
func hundredPools(b *testing.B) planner.Desired {
	b.Helper()
	var ddl strings.Builder
	for i := 1; i < 100; i++ {
		fmt.Fprintf(&ddl, "CREATE RESOURCE POOL p%02d WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=%d, QUERY_CPU_LIMIT_PERCENT_PER_NODE=50, RESOURCES_WEIGHT=%d, CPU_BURST_PERCENT=10);\n", i, i, i)
	}
	m, _, err := planner.Load("hundred.sql", []byte(ddl.String()))
	if err != nil {
		b.Fatal(err)
	}
	d, err := planner.Plan(m, planner.Node{CPUs: 10, MemoryBytes: 16 << 30, PeriodUsec: cpulimit.DefaultPeriodUsec}, planner.Activity{})
	if err != nil {
		b.Fatal(err)
	}
	if len(d.Pools) != 100 {
		b.Fatalf("%d pools planned, want 100", len(d.Pools))
	}
	return d
}

// BenchmarkKernelApply100 applies 100 pools on the real kernel: from an
// empty pool root (plan, mkdirs and writes), then again with nothing to
// change (the read and diff alone). writes/op is what each apply wrote.
func BenchmarkKernelApply100(b *testing.B) {
	h := kerneltest.Require(b, need)
	root := h.NewRoot(b, need)
	d := hundredPools(b)
	open := func(b *testing.B, dir string) *cgroupfs.Tree {
		tr, err := cgroupfs.Open(h.Mounts, dir, cgroupfs.Options{})
		if err != nil {
			b.Fatal(err)
		}
		return tr
	}
	b.Run("empty", func(b *testing.B) {
		writes := 0
		for i := range b.N {
			tr := open(b, filepath.Join(root.Path, fmt.Sprint(i)))
			res, err := tr.Reconcile(d)
			if err != nil {
				b.Fatal(err)
			}
			writes += res.Writes
			b.StopTimer()
			tr.Close()
			for _, dir := range append([]string{root.Path}, root.Twins...) {
				rmTree(b, filepath.Join(dir, fmt.Sprint(i)))
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(writes)/float64(b.N), "writes/op")
	})
	b.Run("noop", func(b *testing.B) {
		tr := open(b, filepath.Join(root.Path, "noop"))
		defer tr.Close()
		if _, err := tr.Reconcile(d); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		writes := 0
		for range b.N {
			res, err := tr.Reconcile(d)
			if err != nil {
				b.Fatal(err)
			}
			writes += res.Writes
		}
		b.ReportMetric(float64(writes)/float64(b.N), "writes/op")
	})
}

// rmTree removes an emptied benchmark tree, children first.
func rmTree(b *testing.B, dir string) {
	var dirs []string
	filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			dirs = append(dirs, p)
		}
		return err
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Remove(dirs[i]); err != nil {
			b.Fatal(err)
		}
	}
}
