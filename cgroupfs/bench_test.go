package cgroupfs_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/cpulimit"
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
		reconcileAgain(b, tr, d)
	})
	// The periodic whole-tree comparison at scale: nothing to change,
	// with 1,000 query cgroups, 10 in each pool, kept as the daemon keeps
	// its running queries'.
	b.Run("noop-1000-queries", func(b *testing.B) {
		dir := filepath.Join(root.Path, "queries")
		tr := open(b, dir)
		defer tr.Close()
		if _, err := tr.Reconcile(d); err != nil {
			b.Fatal(err)
		}
		keep := map[string]bool{}
		for _, p := range d.Pools {
			for i := range 10 {
				keep[fmt.Sprintf("%s/q%d", p.Name, i)] = true
			}
		}
		for q := range keep {
			for _, hier := range append([]string{root.Path}, root.Twins...) {
				if err := os.Mkdir(filepath.Join(hier, "queries", q), 0o755); err != nil {
					b.Fatal(err)
				}
			}
		}
		tr.Keep(keep)
		if _, err := tr.Reconcile(d); err != nil {
			b.Fatal(err)
		}
		reconcileAgain(b, tr, d)
	})
}

// reconcileAgain times b.N reconciliations of tr to d, which it already
// reached, and reports what each wrote.
func reconcileAgain(b *testing.B, tr *cgroupfs.Tree, d planner.Desired) {
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

// BenchmarkKernelPlaceQuery is what placing a process costs the daemon
// on the real kernel, beside the floor a query cgroup kept ready would
// leave: "place" is Tree.PlaceQuery (the pool's values read, the query
// cgroup made with its limits in every hierarchy, the pid written);
// "procs" is only the pid's writes into a cgroup that exists. The
// process is moved back and the query cgroup removed outside the timing.
func BenchmarkKernelPlaceQuery(b *testing.B) {
	h := kerneltest.Require(b, need)
	root := h.NewRoot(b, need)
	m, _, err := planner.Load("p.sql", []byte("CREATE RESOURCE POOL p WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=50, QUERY_CPU_LIMIT_PERCENT_PER_NODE=25);"))
	if err != nil {
		b.Fatal(err)
	}
	d, err := planner.Plan(m, planner.Node{CPUs: 2, MemoryBytes: 1 << 30, PeriodUsec: cpulimit.DefaultPeriodUsec}, planner.Activity{})
	if err != nil {
		b.Fatal(err)
	}
	tr, err := cgroupfs.Open(h.Mounts, root.Path, cgroupfs.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := tr.Reconcile(d); err != nil {
		b.Fatal(err)
	}
	ps, _ := d.Pool("p")
	cmd := exec.Command("sleep", "100")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	pid := cmd.Process.Pid
	twin := h.Mounts.Twin("cpuacct", root.Path)
	if twin == root.Path {
		twin = "" // one hierarchy (v2)
	}
	// back moves the process to the test's pool root again.
	back := func() {
		for _, dir := range []string{root.Path, twin} {
			if dir != "" {
				if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("place", func(b *testing.B) {
		for i := range b.N {
			q := fmt.Sprintf("q%d", i)
			if err := tr.PlaceQuery(ps, q, pid); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			back()
			if err := tr.RemoveQuery("p", q); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("procs", func(b *testing.B) {
		var dirs []string
		for _, dir := range []string{root.Path, twin} {
			if dir != "" {
				dir = filepath.Join(dir, "p", "ready")
				if err := os.Mkdir(dir, 0o755); err != nil {
					b.Fatal(err)
				}
				dirs = append(dirs, dir)
			}
		}
		defer tr.RemoveQuery("p", "ready")
		for range b.N {
			for _, dir := range dirs {
				if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			back()
			b.StartTimer()
		}
	})
}
