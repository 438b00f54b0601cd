package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/client"
	"github.com/poolagent/poolagent/planner"
)

// TestKernelDriftRepaired: a pool cgroup removed behind the daemon's back
// (another writer on the same pool root) is made again, on SIGHUP (Reload)
// although the plan did not change, and by the periodic reconcile; the
// repair is counted, and queries to the pool run again.
func TestKernelDriftRepaired(t *testing.T) {
	pools := "CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=50);"
	run := func(t *testing.T, d *testDaemon) error {
		res, err := client.Run(client.RunOptions{Socket: d.socket, Pool: "olap", Args: []string{"/bin/sh", "-c", "exit 0"},
			Env: os.Environ(), Stdout: os.Stdout, Stderr: os.Stderr})
		if err == nil && res.ExitCode != 0 {
			t.Fatalf("query exited %d", res.ExitCode)
		}
		return err
	}
	drift := func(t *testing.T, d *testDaemon, root string) {
		if err := run(t, d); err != nil {
			t.Fatalf("query before the drift: %v", err)
		}
		if err := os.Remove(filepath.Join(root, "olap")); err != nil {
			t.Fatal(err)
		}
		err := run(t, d)
		t.Logf("query with the pool cgroup gone: %v", err)
		if err == nil {
			t.Fatal("a query ran in a pool whose cgroup is gone")
		}
	}
	repaired := func(t *testing.T, d *testDaemon, root string) {
		if _, err := os.Stat(filepath.Join(root, "olap")); err != nil {
			t.Fatalf("pool cgroup not made again: %v", err)
		}
		if n := d.srv.rp.repairs.Load(); n == 0 {
			t.Error("the repair was not counted")
		}
		if err := run(t, d); err != nil {
			t.Fatalf("query after the repair: %v", err)
		}
	}

	t.Run("on SIGHUP", func(t *testing.T) {
		d, cg := kernelDaemon(t, bothModes, Config{Reconcile: time.Hour}, pools, rootIdentity)
		file := filepath.Join(t.TempDir(), "pools.sql")
		if err := os.WriteFile(file, []byte(pools), 0o644); err != nil {
			t.Fatal(err)
		}
		d.srv.Operate(Sources{PoolFile: file})
		root := cg.Reader().Root()
		drift(t, d, root)
		if _, err := d.srv.Reload(); err != nil {
			t.Fatalf("reload: %v", err)
		}
		repaired(t, d, root)
	})
	t.Run("periodically", func(t *testing.T) {
		d, cg := kernelDaemon(t, bothModes, Config{Reconcile: 50 * time.Millisecond}, pools, rootIdentity)
		root := cg.Reader().Root()
		if err := run(t, d); err != nil {
			t.Fatalf("query before the drift: %v", err)
		}
		if err := os.Remove(filepath.Join(root, "olap")); err != nil {
			t.Fatal(err)
		}
		// The cgroup is there from the repair's mkdir on, the count once
		// its last write is done.
		waitFor(t, "the periodic reconcile to make the pool cgroup again and count it", func() bool {
			_, err := os.Stat(filepath.Join(root, "olap"))
			return err == nil && d.srv.rp.repairs.Load() > 0
		})
		repaired(t, d, root)
	})
}

// TestKernelDriftRepairedValues: values of a pool cgroup changed behind
// the daemon's back (memory.high, memory.max and cpu.max written by
// another writer) are written back as planned by the periodic reconcile,
// which counts and logs the writes. cgroup v2 only: v1 memory cgroups are
// never tested (kerneltest.Need).
func TestKernelDriftRepairedValues(t *testing.T) {
	const every = 200 * time.Millisecond
	var log lockedBuffer
	cfg := Config{Reconcile: every, Log: slog.New(slog.NewTextHandler(&log, nil))}
	// 20% of the node's memory at most, 10% before reclaim slows it;
	// 1 vCPU of the node's 2.
	pools := "CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=50, TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE=20, TOTAL_MEMORY_HIGH_PERCENT_PER_NODE=10);"
	d, cg := kernelDaemon(t, memoryNeed, cfg, pools, rootIdentity)
	dir := filepath.Join(cg.Reader().Root(), "olap")
	var plan planner.Cgroup
	for _, p := range d.srv.rp.desired().Pools {
		if p.Name == "olap" {
			plan = p.Pool
		}
	}
	page := int64(os.Getpagesize())
	want := map[string]string{
		"cpu.max":     plan.CPU.CPUMax(),
		"memory.max":  strconv.FormatInt(plan.MemoryBytes/page*page, 10),
		"memory.high": strconv.FormatInt(plan.MemoryHighBytes/page*page, 10),
	}
	if plan.CPU.QuotaUsec <= 0 || plan.MemoryBytes <= 0 || plan.MemoryHighBytes <= 0 {
		t.Fatalf("plan of olap %+v: want a CPU quota, memory.max and memory.high", plan)
	}
	read := func(file string) string {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Errorf("read %s: %v", file, err)
		}
		return strings.TrimSpace(string(b))
	}
	asPlanned := func() bool {
		for file, v := range want {
			if read(file) != v {
				return false
			}
		}
		return true
	}
	if !asPlanned() {
		t.Fatalf("pool cgroup before the drift: cpu.max %q, memory.max %q, memory.high %q; want %v",
			read("cpu.max"), read("memory.max"), read("memory.high"), want)
	}
	repairs := d.srv.rp.repairs.Load()
	drift := map[string]string{
		"cpu.max":     "max 100000",
		"memory.max":  "max",
		"memory.high": strconv.FormatInt(plan.MemoryHighBytes/page*page/2, 10),
	}
	for file, v := range drift {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Now()
	for file, v := range drift {
		if got := read(file); got == want[file] {
			t.Fatalf("%s is %q after writing %q: the drift did not take", file, got, v)
		}
	}
	waitFor(t, "the periodic reconcile to write the pool's values back", asPlanned)
	t.Logf("repaired %v after %v (reconcile every %v)", want, time.Since(at).Round(time.Millisecond), every)
	waitFor(t, "the repair to be counted", func() bool { return d.srv.rp.repairs.Load()-repairs >= uint64(len(drift)) })
	if n := d.srv.rp.repairs.Load() - repairs; n != uint64(len(drift)) {
		t.Errorf("%d repair writes counted, want %d: one per file changed", n, len(drift))
	}
	// One reconcile may have come between the outside writes: the
	// logged repairs add up to the three. The daemon counts a repair
	// before it logs it, so the log is waited for too.
	logged := func() int {
		n := 0
		for _, m := range regexp.MustCompile(`msg="pool tree had drifted from the plan; repaired" writes=(\d+)`).FindAllStringSubmatch(log.String(), -1) {
			w, _ := strconv.Atoi(m[1])
			n += w
		}
		return n
	}
	waitFor(t, "the repair to be logged", func() bool { return logged() >= len(drift) })
	if n := logged(); n != len(drift) {
		t.Errorf("the log tells of %d repair writes, want %d; log:\n%s", n, len(drift), log.String())
	}
}
