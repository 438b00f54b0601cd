package daemon

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/poolagent/poolagent/client"
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
