package cgroupfs

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/planner"
)

// withCPUs is seedDesired with etl (pool and queries) on cpus ("" = none).
func withCPUs(t *testing.T, cpus string) planner.Desired {
	t.Helper()
	set, err := cpulimit.ParseCPUSet(cpus)
	if err != nil {
		t.Fatal(err)
	}
	d := seedDesired()
	d.Pools[1].Pool.CPU.CPUs, d.Pools[1].Query.CPU.CPUs = set, set
	return d
}

// reconcile applies d and checks that a second apply makes no write.
func reconcile(t *testing.T, tr *Tree, d planner.Desired) Result {
	t.Helper()
	res, err := tr.Reconcile(d)
	if err != nil {
		t.Fatal(err)
	}
	again, err := tr.Changes(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Ops) != 0 {
		t.Errorf("re-apply is not a no-op:\n%s", again)
	}
	return res
}

// TestCPUSetV2: the pool root enables cpuset for the pools only, a pool's
// CPUS becomes its cpuset.cpus (its queries inherit it and get no cpuset
// files), a change is one write, and CPUS=-1 writes every CPU of the
// root's parent (a populated cgroup's list may not become empty), also
// once no pool has CPUS.
func TestCPUSetV2(t *testing.T) {
	w := newWorld(t, true)
	w.addCPUSet()
	tr := w.tree("poolagent", nil)
	root := filepath.Join(w.mounts.Unified, "poolagent")
	reconcile(t, tr, withCPUs(t, "0-1"))
	if got := w.read(filepath.Join(root, fileSubtreeControl)); got != "cpu cpuset" {
		t.Errorf("root subtree_control %q, want cpu cpuset", got)
	}
	if etl, def := w.read(filepath.Join(root, "etl", fileCPUSetCPUs)), w.read(filepath.Join(root, "default", fileCPUSetCPUs)); etl != "0-1" || def != "" {
		t.Errorf("cpuset.cpus etl %q default %q, want 0-1 and empty", etl, def)
	}
	w.spawn(w.mounts.Unified, 100)
	d := withCPUs(t, "0-1")
	if err := tr.PlaceQuery(*d.Pools[1], "q1", 100); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "etl", "q1", fileCPUSetCPUs)); !os.IsNotExist(err) {
		t.Errorf("query cgroup has cpuset files (%v); it should inherit its pool's", err)
	}
	if res := reconcile(t, tr, withCPUs(t, "2-3")); res.Writes != 1 {
		t.Errorf("moving etl to 2-3 made %d writes, want 1: %v", res.Writes, res.Done)
	}
	reconcile(t, tr, withCPUs(t, ""))
	if got := w.read(filepath.Join(root, "etl", fileCPUSetCPUs)); got != "0-3" {
		t.Errorf("etl cpuset.cpus %q after CPUS=-1, want 0-3, every CPU of the root's parent", got)
	}
	reconcile(t, tr, seedDesired())
}

// TestCPUSetV1: the cpuset twin is kept in step: the root copies its
// parent's CPUs and memory nodes, every pool and query gets both before a
// process enters, a move to other CPUs with a query running passes the
// kernel's subset rules, and CPUS=-1 gives the pool the root's CPUs.
func TestCPUSetV1(t *testing.T) {
	w := newWorld(t, false)
	w.addCPUSet()
	tr := w.tree("poolagent", nil)
	set := w.mounts.V1[HierCPUSet]
	root := filepath.Join(set, "poolagent")
	cpus := func(cg string) string { return w.read(filepath.Join(root, cg, fileCPUSetCPUs)) }
	reconcile(t, tr, withCPUs(t, "0-1"))
	for cg, want := range map[string]string{".": "0-3", "default": "0-3", "etl": "0-1", "olap": "0-3"} {
		if got, mems := cpus(cg), w.read(filepath.Join(root, cg, fileCPUSetMems)); got != want || mems != "0" {
			t.Errorf("%s: cpuset.cpus %q mems %q, want %q and 0", cg, got, mems, want)
		}
	}
	for _, m := range []string{w.mounts.V1[HierCPU], w.mounts.V1[HierCPUAcct], set} {
		w.spawn(m, 100)
	}
	if err := tr.PlaceQuery(*withCPUs(t, "0-1").Pools[1], "q1", 100); err != nil {
		t.Fatal(err)
	}
	if got, procs := cpus("etl/q1"), w.read(filepath.Join(root, "etl/q1", fileProcs)); got != "0-1" || procs != "100" {
		t.Errorf("query twin: cpuset.cpus %q procs %q, want 0-1 and 100", got, procs)
	}
	reconcile(t, tr, withCPUs(t, "2-3"))
	if e, q := cpus("etl"), cpus("etl/q1"); e != "2-3" || q != "2-3" {
		t.Errorf("after the move: etl %q, query %q; want 2-3 both", e, q)
	}
	reconcile(t, tr, withCPUs(t, ""))
	if e, q := cpus("etl"), cpus("etl/q1"); e != "0-3" || q != "0-3" {
		t.Errorf("after CPUS=-1: etl %q, query %q; want the root's 0-3", e, q)
	}
}

// TestCPUSetV1Join: a query running before any pool had CPUS is brought
// into the cpuset twin when CPU sets come into use, and a tree without
// CPUS leaves the cpuset hierarchy alone.
func TestCPUSetV1Join(t *testing.T) {
	w := newWorld(t, false)
	w.addCPUSet()
	tr := w.tree("poolagent", nil)
	reconcile(t, tr, seedDesired())
	root := filepath.Join(w.mounts.V1[HierCPUSet], "poolagent")
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("cpuset root made without CPUS (%v)", err)
	}
	for _, m := range []string{w.mounts.V1[HierCPU], w.mounts.V1[HierCPUAcct], w.mounts.V1[HierCPUSet]} {
		w.spawn(m, 100)
	}
	if err := tr.PlaceQuery(*seedDesired().Pools[2], "q0", 100); err != nil {
		t.Fatal(err)
	}
	c, err := tr.Changes(withCPUs(t, "1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c.String(), "move pids [100] into "+filepath.Join(root, "olap/q0")) {
		t.Errorf("changes do not bring pid 100 into olap/q0's twin:\n%s", c)
	}
	reconcile(t, tr, withCPUs(t, "1"))
	if got := w.read(filepath.Join(root, "olap/q0", fileProcs)); got != "100" {
		t.Errorf("olap/q0 twin procs %q, want 100", got)
	}
}

// TestCPUSetRefused: CPUS without a cpuset controller, or naming CPUs the
// pool root's parent does not have, is refused before anything is
// written; without CPUS such a host works as before.
func TestCPUSetRefused(t *testing.T) {
	modes(t, func(t *testing.T, v2 bool) {
		w := newWorld(t, v2)
		tr := w.tree("poolagent", nil)
		_, err := tr.Changes(withCPUs(t, "0"))
		want := "no v1 cpuset hierarchy"
		if v2 {
			want = `enable it with "+cpuset"`
		}
		if !errors.Is(err, ErrNoController) || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want ErrNoController with %q", err, want)
		}
		reconcile(t, tr, seedDesired())

		w2 := newWorld(t, v2)
		w2.addCPUSet()
		_, err = w2.tree("poolagent", nil).Changes(withCPUs(t, "2-5"))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `CPUS='2-5': CPUs 4-5 are not among the CPUs of`) {
			t.Errorf("err = %v, want ErrInvalid naming CPUs 4-5", err)
		}
		d := withCPUs(t, "1")
		d.Pools[1].Query.CPU.CPUs = cpulimit.CPUSet{}
		if _, err := w2.tree("poolagent", nil).Changes(d); !errors.Is(err, ErrInvalid) {
			t.Errorf("query CPUs unlike the pool's: err = %v, want ErrInvalid", err)
		}
		for _, m := range append(slices.Collect(maps.Values(w2.mounts.V1)), w2.mounts.Unified) {
			if _, err := os.Stat(filepath.Join(m, "poolagent")); m != "" && !os.IsNotExist(err) {
				t.Errorf("a refused change made %s/poolagent (%v)", m, err)
			}
		}
	})
}

// TestCPUSetFaults: whichever write of a change with CPU sets fails (a
// cgroup made but not yet given its CPUs or memory nodes, a pool half way
// to its new CPUs with a query running), the next apply reaches the tree
// a direct apply makes.
func TestCPUSetFaults(t *testing.T) {
	modes(t, func(t *testing.T, v2 bool) {
		start := func(wrap func(FS) FS) (*world, *Tree) {
			w := newWorld(t, v2)
			w.addCPUSet()
			tr := w.tree("poolagent", wrap)
			reconcile(t, tr, withCPUs(t, "0-1"))
			for _, m := range append(slices.Collect(maps.Values(w.mounts.V1)), w.mounts.Unified) {
				if m != "" {
					w.spawn(m, 100)
				}
			}
			if err := tr.PlaceQuery(*withCPUs(t, "0-1").Pools[1], "q1", 100); err != nil {
				t.Fatal(err)
			}
			return w, tr
		}
		to := withCPUs(t, "2-3")
		to.Pools = append(to.Pools, &planner.PoolState{Name: "web", Pool: to.Pools[1].Pool, Query: to.Pools[1].Query})
		direct, dt := start(nil)
		c, err := dt.Changes(to)
		if err != nil {
			t.Fatal(err)
		}
		reconcile(t, dt, to)
		want := direct.snapshot("poolagent")
		for n := 1; n <= c.Writes(); n++ {
			counter := &faultCounter{}
			w, tr := start(func(f FS) FS { return faultFS{FS: f, c: counter} })
			counter.n, counter.failAt = 0, n
			if _, err := tr.Reconcile(to); err == nil {
				t.Fatalf("fault at write %d of %d: no error", n, c.Writes())
			}
			counter.failAt = 0
			reconcile(t, tr, to)
			if got := w.snapshot("poolagent"); got != want {
				t.Fatalf("after a fault at write %d of %d:\n--- got\n%s--- want\n%s", n, c.Writes(), got, want)
			}
		}
	})
}
