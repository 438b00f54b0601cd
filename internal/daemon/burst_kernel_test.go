package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/pooltree"
	"github.com/poolagent/poolagent/planner"
)

// burstPools is pool olap with total percent of the node's 2 vCPU, of
// which a query may use 25%; each may burst by half its quota. more adds
// parameters.
func burstPools(total int, more string) string {
	return fmt.Sprintf("CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=%d, QUERY_CPU_LIMIT_PERCENT_PER_NODE=25, CPU_BURST_PERCENT=50%s);\n", total, more)
}

// TestKernelBurstOnNewQuery: in a pool with CPU_BURST_PERCENT, the query
// cgroup the daemon makes when a query starts has the plan's burst
// (cpu.max.burst, v1 cpu.cfs_burst_us) from its start, and so has the
// pool's cgroup. The burst is written into a new cgroup whose quota is
// still unlimited, before the quota: with the node's period (v1: one
// quota write), and with a period of 1 s (v1: the period first, then the
// quota, since the quota at the old period would exceed the pool's).
// When the plan then lifts the quota of a running query's cgroup, its
// burst grows above the quota it has: the kernel refuses that burst
// until the quota is written, and the burst ends as the plan's.
func TestKernelBurstOnNewQuery(t *testing.T) {
	for _, tc := range []struct{ name, more string }{
		{"node period", ""},
		{"1 s period", ", CPU_PERIOD_USEC=1000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, cg, root := kernelDaemonRoot(t, bothModes, Config{}, burstPools(50, tc.more), rootIdentity)
			c := startInProc(t, d.socket, "olap")
			waitFor(t, "the query to start", c.isStarted)
			checkBursts(t, d, cg, root.Path, 1)
			endInProc(t, c)
		})
	}
	t.Run("quota lifted after the start", func(t *testing.T) {
		cfg := Config{Load: admission.LoadConfig{RefreshInterval: time.Hour}}
		// Two pools whose caps add up to more than the node: the plan
		// shares the node by demand.
		pools := burstPools(75, ", RESOURCES_WEIGHT=100") + "CREATE RESOURCE POOL etl WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=75, RESOURCES_WEIGHT=100);"
		d, cg, root := kernelDaemonRoot(t, bothModes, cfg, pools, rootIdentity)
		c1 := startInProc(t, d.socket, "olap")
		waitFor(t, "the first query to start", c1.isStarted)
		// A load refresh measures the idle query and holds the pool to
		d.srv.rp.mu.Lock()
		d.srv.rp.lastPoolStats = nil
		d.srv.rp.mu.Unlock()
		now := time.Now()
		d.srv.rp.observeDemand(now)
		time.Sleep(200 * time.Millisecond)
		d.srv.rp.observeDemand(now.Add(200 * time.Millisecond))
		d.srv.rp.request()
		// its demand (under the 1.5 vCPU cap; the VM's slow emulation
		// may count more than the 1 ms minimum), which shrinks every
		// burst.
		// The query cgroups are written after their pool: wait for both.
		var held planner.PoolState
		waitFor(t, "olap held to its idle demand", func() bool {
			held = olapState(d)
			q := held.Pool.CPU.QuotaUsec
			return q < 150000 && poolQuotaUsec(t, cg, "olap") == q && queryBurstsAre(t, cg, root.Path, held.Query.CPU.BurstUsec)
		})
		t.Logf("olap held to a quota of %d µs, its queries to %d µs", held.Pool.CPU.QuotaUsec, held.Query.CPU.QuotaUsec)
		checkBursts(t, d, cg, root.Path, 1)
		// The second query forgets the demand: the plan lifts the pool's
		// and both queries' quotas and bursts.
		c2 := startInProc(t, d.socket, "olap")
		waitFor(t, "the second query to start", c2.isStarted)
		waitFor(t, "olap at its cap again", func() bool { return poolQuotaUsec(t, cg, "olap") == 150000 })
		checkBursts(t, d, cg, root.Path, 2)
		if lifted := olapState(d).Query.CPU.BurstUsec; lifted > held.Query.CPU.QuotaUsec {
			t.Logf("the first query's burst grew to %d µs, above its held quota of %d µs: written again after the quota", lifted, held.Query.CPU.QuotaUsec)
		}
		endInProc(t, c1)
		endInProc(t, c2)
	})
}

// checkBursts compares the burst of pool olap's cgroup and of each of its
// n query cgroups below root with the plan's. The daemon writes a plan's
// cgroups after it takes the plan, and a replan may come while the test
// reads: the files are read again until they hold the plan they were
// read with, for up to 10 s, and the last difference fails the test.
func checkBursts(t *testing.T, d *testDaemon, cg *pooltree.Handle, root string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		said, diffs := readBursts(t, d, cg, root, n)
		if len(diffs) == 0 {
			for _, s := range said {
				t.Log(s)
			}
			return
		}
		if time.Now().After(deadline) {
			for _, s := range diffs {
				t.Error(s)
			}
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// readBursts reads the plan of pool olap and the bursts of its cgroup and
// its n query cgroups below root: what matches the plan, and what does
// not.
func readBursts(t *testing.T, d *testDaemon, cg *pooltree.Handle, root string, n int) (said, diffs []string) {
	t.Helper()
	file := burstFile(cg)
	readBurst := func(cgroup string) int64 {
		t.Helper()
		name := filepath.Join(root, cgroup, file)
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return v
	}
	ps := olapState(d)
	poolWant, queryWant := ps.Pool.CPU.BurstUsec, ps.Query.CPU.BurstUsec
	if poolWant <= 0 || queryWant <= 0 {
		t.Fatalf("plan of olap: pool burst %d µs, query burst %d µs; want both set by CPU_BURST_PERCENT=50", poolWant, queryWant)
	}
	if got := readBurst("olap"); got != poolWant {
		diffs = append(diffs, fmt.Sprintf("pool cgroup's %s is %d, want the plan's %d", file, got, poolWant))
	} else {
		said = append(said, fmt.Sprintf("pool olap: %s %d µs, as planned", file, got))
	}
	qs, err := cg.Queries()
	if err != nil || len(qs) != n {
		t.Fatalf("query cgroups %v (%v), want %d", qs, err, n)
	}
	for _, q := range qs {
		if got := readBurst(filepath.Join(q.Pool, q.Name)); got != queryWant {
			diffs = append(diffs, fmt.Sprintf("query cgroup %s/%s: %s is %d, want the plan's %d", q.Pool, q.Name, file, got, queryWant))
		} else {
			said = append(said, fmt.Sprintf("query %s: %s %d µs, as planned", q.Name, file, got))
		}
	}
	return said, diffs
}

// olapState is pool olap's state in the plan last applied.
func olapState(d *testDaemon) planner.PoolState {
	for _, p := range d.srv.rp.desired().Pools {
		if p.Name == "olap" {
			return *p
		}
	}
	return planner.PoolState{}
}

// endInProc ends the command of c and waits for its query to end.
func endInProc(t *testing.T, c *inProcClient) {
	t.Helper()
	c.release.Close()
	<-c.done
	if c.err != nil {
		t.Fatalf("query: %v", c.err)
	}
}

// queryBurstsAre reports whether every query cgroup of olap holds the
// burst want.
func queryBurstsAre(t *testing.T, cg *pooltree.Handle, root string, want int64) bool {
	t.Helper()
	file := burstFile(cg)
	qs, err := cg.Queries()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		b, err := os.ReadFile(filepath.Join(root, q.Pool, q.Name, file))
		if err != nil || strings.TrimSpace(string(b)) != strconv.FormatInt(want, 10) {
			return false
		}
	}
	return true
}

// burstFile is the file of a cgroup's burst under cg's hierarchy, in
// microseconds on both.
func burstFile(cg *pooltree.Handle) string {
	if cg.Reader().V2() {
		return "cpu.max.burst"
	}
	return "cpu.cfs_burst_us"
}
