package cgroupfs

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/planner"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/cgroupfs/golden")

// cg builds a desired cgroup as the planner does: quota and memory -1 =
// unlimited (memory 0 is taken as -1); weight 0 = leave weight and shares
// unset.
func cg(quota int64, period, burst, weight uint64, memory int64) planner.Cgroup {
	if memory == 0 {
		memory = -1
	}
	return planner.Cgroup{
		CPU:         cpulimit.Limit{QuotaUsec: quota, PeriodUsec: int64(period), BurstUsec: int64(burst), Weight: int64(weight)},
		MemoryBytes: memory,
	}
}

// fresh is a cgroup as the kernel creates it: a desired state with it
// writes nothing.
var fresh = cg(-1, 100000, 0, 0, 0)

// seedDesired is the guide's olap example on a 10 vCPU node, with a
// second pool etl and a burst, as the planner produces it.
func seedDesired() planner.Desired {
	return planner.Desired{
		Node: planner.Node{CPUs: 10, PeriodUsec: 100000},
		Pools: []*planner.PoolState{
			{Name: "default", Pool: cg(-1, 100000, 0, 100, 0), Query: cg(-1, 100000, 0, 0, 0)},
			{Name: "etl", Pool: cg(200000, 100000, 50000, 50, 0), Query: cg(100000, 100000, 0, 0, 0)},
			{Name: "olap", Pool: cg(700000, 100000, 0, 100, 0), Query: cg(350000, 100000, 0, 0, 0)},
		},
	}
}

func modes(t *testing.T, f func(t *testing.T, v2 bool)) {
	t.Run("v1", func(t *testing.T) { f(t, false) })
	t.Run("v2", func(t *testing.T) { f(t, true) })
}

func modeName(v2 bool) string {
	if v2 {
		return "v2"
	}
	return "v1"
}

// golden compares got with testdata/cgroupfs/golden/name, rewriting it
// under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("../testdata/cgroupfs/golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update to accept):\n--- got\n%s--- want\n%s", p, got, want)
	}
}

// planText renders changes with the world's temporary directory replaced.
func planText(w *world, c Changes) string {
	s := c.String()
	for _, m := range append([]string{w.mounts.Unified}, w.mounts.V1[HierCPU], w.mounts.V1[HierCPUAcct], w.mounts.V1[HierMemory]) {
		if m != "" {
			s = strings.ReplaceAll(s, filepath.Dir(m), "<mounts>")
		}
	}
	return s
}

func TestApplyFromEmptyThenNoop(t *testing.T) {
	modes(t, func(t *testing.T, v2 bool) {
		w := newWorld(t, v2)
		tr := w.tree("poolagent", nil)
		p, err := tr.Changes(seedDesired())
		if err != nil {
			t.Fatal(err)
		}
		golden(t, "plan-empty-"+modeName(v2)+".txt", planText(w, p))
		res, err := tr.Apply(p)
		if err != nil {
			t.Fatal(err)
		}
		if res.Writes != p.Writes() {
			t.Errorf("apply made %d writes, the plan said %d", res.Writes, p.Writes())
		}
		again, err := tr.Changes(seedDesired())
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Ops) != 0 {
			t.Errorf("second plan is not empty:\n%s", again)
		}
		golden(t, "tree-seed-"+modeName(v2)+".txt", w.snapshot("poolagent"))
		if !v2 {
			if _, err := os.Stat(filepath.Join(w.mounts.V1[HierMemory], "poolagent")); !os.IsNotExist(err) {
				t.Error("without a memory limit the v1 memory hierarchy was touched")
			}
		}
	})
}

// changedDesired drops etl, tightens olap, loosens default's queries and
// adds adhoc: every kind of change at once.
func changedDesired() planner.Desired {
	return planner.Desired{
		Node: planner.Node{CPUs: 10, PeriodUsec: 100000},
		Pools: []*planner.PoolState{
			{Name: "default", Pool: cg(-1, 100000, 0, 100, 0), Query: cg(-1, 100000, 0, 0, 0)},
			{Name: "adhoc", Pool: cg(100000, 100000, 20000, 20, 0), Query: cg(50000, 100000, 0, 0, 0)},
			{Name: "olap", Pool: cg(300000, 100000, 0, 200, 0), Query: cg(150000, 100000, 0, 0, 0)},
		},
	}
}

// populate applies seedDesired and places pretend processes: two busy
// queries in etl (one with a nested cgroup), one stray process directly in
// etl, a busy and an empty query in olap.
func populate(t *testing.T, w *world, tr *Tree) {
	t.Helper()
	if _, err := tr.Reconcile(seedDesired()); err != nil {
		t.Fatal(err)
	}
	d := seedDesired()
	for i, q := range []struct {
		pool  planner.PoolState
		query string
		pid   int
	}{{*d.Pools[1], "q1", 101}, {*d.Pools[1], "q2", 102}, {*d.Pools[2], "q3", 103}} {
		for _, h := range []string{HierUnified, HierCPU, HierCPUAcct} {
			if m := w.hierMount(h); m != "" {
				w.spawn(m, q.pid)
			}
		}
		if err := tr.PlaceQuery(q.pool, q.query, q.pid); err != nil {
			t.Fatalf("place %d: %v", i, err)
		}
	}
	for _, h := range hiersOf(t, tr, false) {
		w.spawn(w.hierMount(h), 1)
	}
	if err := tr.PlaceQuery(*d.Pools[2], "idle", 1); err != nil {
		t.Fatal(err)
	}
	// pid 1 leaves: idle is an empty, stale query cgroup now.
	for _, h := range hiersOf(t, tr, false) {
		root := tr.Root(h)
		w.must(os.WriteFile(filepath.Join(root, "olap/idle", fileProcs), nil, 0o644))
		w.must(os.Mkdir(filepath.Join(root, "etl/q2/worker"), 0o755))
		w.mkcg(filepath.Join(root, "etl/q2/worker"))
		w.spawn(filepath.Join(root, "etl/q2/worker"), 104)
		w.spawn(filepath.Join(root, "etl"), 105)
	}
}

func (w *world) hierMount(h string) string {
	if h == HierUnified {
		return w.mounts.Unified
	}
	return w.mounts.V1[h]
}

func TestApplyChanges(t *testing.T) {
	modes(t, func(t *testing.T, v2 bool) {
		w := newWorld(t, v2)
		tr := w.tree("poolagent", nil)
		populate(t, w, tr)
		p, err := tr.Changes(changedDesired())
		if err != nil {
			t.Fatal(err)
		}
		golden(t, "plan-change-"+modeName(v2)+".txt", planText(w, p))
		if _, err := tr.Apply(p); err != nil {
			t.Fatal(err)
		}
		again, err := tr.Changes(changedDesired())
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Ops) != 0 {
			t.Errorf("second plan is not empty:\n%s", again)
		}
		for _, h := range hiersOf(t, tr, false) {
			root := tr.Root(h)
			for _, want := range []struct {
				cg   string
				pids string
			}{{"default/etl", "105"}, {"default/etl.q1", "101"}, {"default/etl.q2", "102\n104"}, {"olap/q3", "103"}} {
				if got := w.read(filepath.Join(root, want.cg, fileProcs)); got != want.pids {
					t.Errorf("%s: %s holds %q, want %q", h, want.cg, got, want.pids)
				}
			}
			for _, gone := range []string{"etl", "olap/idle"} {
				if _, err := os.Stat(filepath.Join(root, gone)); !os.IsNotExist(err) {
					t.Errorf("%s: %s still exists", h, gone)
				}
			}
		}
		golden(t, "tree-change-"+modeName(v2)+".txt", w.snapshot("poolagent"))
	})
}

// TestFaultInjection fails write N of the change apply for every N, then
// checks that a clean apply converges to the tree a direct apply makes.
func TestFaultInjection(t *testing.T) {
	modes(t, func(t *testing.T, v2 bool) {
		direct := newWorld(t, v2)
		dt := direct.tree("poolagent", nil)
		populate(t, direct, dt)
		p, err := dt.Changes(changedDesired())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dt.Apply(p); err != nil {
			t.Fatal(err)
		}
		want := direct.snapshot("poolagent")
		total := p.Writes()
		for n := 1; n <= total; n++ {
			w := newWorld(t, v2)
			counter := &faultCounter{}
			tr := w.tree("poolagent", func(f FS) FS { return faultFS{FS: f, c: counter} })
			populate(t, w, tr)
			counter.n, counter.failAt = 0, n
			_, err := tr.Reconcile(changedDesired())
			var ae *ApplyError
			if !errors.As(err, &ae) || !errors.Is(err, unix.EIO) {
				t.Fatalf("fault at write %d of %d: err = %v, want an *ApplyError wrapping EIO", n, total, err)
			}
			if len(ae.NotDone) == 0 || ae.NotDone[0].String() != ae.Failed.String() {
				t.Fatalf("fault at write %d: not-done list does not start with the failed op", n)
			}
			if !strings.Contains(err.Error(), "not done: "+ae.Failed.String()) {
				t.Fatalf("fault at write %d: message does not list the failed op:\n%v", n, err)
			}
			counter.failAt = 0
			if _, err := tr.Reconcile(changedDesired()); err != nil {
				t.Fatalf("after a fault at write %d: %v", n, err)
			}
			if got := w.snapshot("poolagent"); got != want {
				t.Fatalf("after a fault at write %d of %d the tree differs from a direct apply:\n--- got\n%s--- want\n%s", n, total, got, want)
			}
			if again, _ := tr.Changes(changedDesired()); len(again.Ops) != 0 {
				t.Fatalf("after a fault at write %d: third plan not empty:\n%s", n, again)
			}
		}
	})
}

func TestBurstOrder(t *testing.T) {
	modes(t, func(t *testing.T, v2 bool) {
		burstFile, quotaFile := fileCFSBurst, fileCFSQuota
		if v2 {
			burstFile, quotaFile = fileCPUMaxBurst, fileCPUMax
		}
		tests := []struct {
			name      string
			from, to  planner.Cgroup
			wantOrder []string // files of "olap" in the order written
		}{
			{"burst grows above the old quota: refused, then written after it",
				cg(20000, 100000, 10000, 0, 0), cg(80000, 100000, 60000, 0, 0), []string{quotaFile, burstFile}},
			{"burst shrinks before the quota does",
				cg(80000, 100000, 60000, 0, 0), cg(20000, 100000, 10000, 0, 0), []string{burstFile, quotaFile}},
			{"burst grows within the old quota: written first",
				cg(80000, 100000, 10000, 0, 0), cg(90000, 100000, 60000, 0, 0), []string{burstFile, quotaFile}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				w := newWorld(t, v2)
				tr := w.tree("poolagent", nil)
				d := planner.Desired{Pools: []*planner.PoolState{{Name: "default", Pool: fresh, Query: fresh}, {Name: "olap", Pool: tt.from, Query: fresh}}}
				if _, err := tr.Reconcile(d); err != nil {
					t.Fatal(err)
				}
				d.Pools[1].Pool = tt.to
				res, err := tr.Reconcile(d)
				if err != nil {
					t.Fatal(err)
				}
				var order []string
				for _, o := range res.Done {
					if o.Path == "olap" {
						order = append(order, o.File)
					}
				}
				if strings.Join(order, " ") != strings.Join(tt.wantOrder, " ") {
					t.Errorf("written %v, want %v", order, tt.wantOrder)
				}
			})
		}
	})
}

// TestV1BandwidthOrder changes quota and period of a pool and its query
// together; the emulated v1 kernel refuses any intermediate state with a
// child above its parent, so every order must be right.
func TestV1BandwidthOrder(t *testing.T) {
	tests := []struct {
		name                 string
		rootQuota            int64 // the pool root's own cfs_quota_us (period 100000)
		pool0, q0, pool1, q1 planner.Cgroup
		wantPoolOps          string
	}{
		{"tighten both, period shrinks: quota first", -1,
			cg(400000, 200000, 0, 0, 0), cg(200000, 200000, 0, 0, 0),
			cg(50000, 100000, 0, 0, 0), cg(20000, 100000, 0, 0, 0),
			"cpu.cfs_quota_us=50000 cpu.cfs_period_us=100000"},
		{"loosen both, period grows: quota first", -1,
			cg(50000, 100000, 0, 0, 0), cg(20000, 100000, 0, 0, 0),
			cg(800000, 200000, 0, 0, 0), cg(400000, 200000, 0, 0, 0),
			"cpu.cfs_quota_us=800000 cpu.cfs_period_us=200000"},
		{"quota first would dip below the query: period first", -1,
			cg(100000, 100000, 0, 0, 0), cg(50000, 100000, 0, 0, 0),
			cg(40000, 50000, 0, 0, 0), cg(40000, 50000, 0, 0, 0),
			"cpu.cfs_period_us=50000 cpu.cfs_quota_us=40000"},
		{"limited pool root, same ratio, longer period: through unlimited", 50000,
			cg(50000, 100000, 0, 0, 0), cg(50000, 100000, 0, 0, 0),
			cg(100000, 200000, 0, 0, 0), cg(100000, 200000, 0, 0, 0),
			"cpu.cfs_quota_us=-1 cpu.cfs_period_us=200000 cpu.cfs_quota_us=100000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, false)
			tr := w.tree("poolagent", nil)
			d := planner.Desired{Pools: []*planner.PoolState{{Name: "default", Pool: fresh, Query: fresh}, {Name: "olap", Pool: tt.pool0, Query: tt.q0}}}
			if _, err := tr.Reconcile(d); err != nil {
				t.Fatal(err)
			}
			if tt.rootQuota > 0 {
				root := filepath.Join(w.mounts.V1[HierCPU], "poolagent")
				if _, err := w.kernelWrite(root, fileCFSQuota, "50000"); err != nil {
					t.Fatal(err)
				}
				w.must(os.WriteFile(filepath.Join(root, fileCFSQuota), []byte("50000\n"), 0o644))
			}
			w.spawn(w.mounts.V1[HierCPU], 7)
			w.spawn(w.mounts.V1[HierCPUAcct], 7)
			if err := tr.PlaceQuery(*d.Pools[1], "q", 7); err != nil {
				t.Fatal(err)
			}
			d.Pools[1].Pool, d.Pools[1].Query = tt.pool1, tt.q1
			res, err := tr.Reconcile(d)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range res.Done {
				if o.Path == "olap" && o.Hier == HierCPU {
					got = append(got, o.File+"="+o.Value)
				}
			}
			if strings.Join(got, " ") != tt.wantPoolOps {
				t.Errorf("olap writes %v, want %s", got, tt.wantPoolOps)
			}
			if again, _ := tr.Changes(d); len(again.Ops) != 0 {
				t.Errorf("second plan not empty:\n%s", again)
			}
		})
	}
}

func TestPlanRefusesInvalid(t *testing.T) {
	pool := func(name string, p, q planner.Cgroup) planner.Desired {
		return planner.Desired{Pools: []*planner.PoolState{{Name: "default", Pool: fresh, Query: fresh}, {Name: name, Pool: p, Query: q}}}
	}
	ok := cg(100000, 100000, 0, 100, 0)
	tests := []struct {
		name string
		d    planner.Desired
		only string // "v1" or "v2": only that backend refuses it; "none": valid
		want string
	}{
		{"dot-dot name", pool("..", ok, ok), "", "relative directory"},
		{"name with a slash", pool("a/../../etc", ok, ok), "", "contains '/'"},
		{"empty name", pool("", ok, ok), "", "empty name"},
		{"hidden name", pool(".x", ok, ok), "", "starts with '.'"},
		{"interface-file name", pool("cgroup.procs", ok, ok), "", "prefix of cgroup interface files"},
		{"v1 file name", pool("tasks", ok, ok), "", "v1 interface file"},
		{"quota below 1 ms", pool("olap", cg(500, 100000, 0, 100, 0), ok), "", "at least 1000"},
		{"period above 1 s", pool("olap", cg(100000, 2000000, 0, 100, 0), ok), "", "period 2000000"},
		{"burst above quota", pool("olap", cg(100000, 100000, 200000, 100, 0), ok), "", "burst 200000"},
		{"weight out of range", pool("olap", cg(100000, 100000, 0, 20000, 0), ok), "", "cpu.weight 20000"},
		{"v1 query above pool", pool("olap", cg(100000, 100000, 0, 100, 0), cg(200000, 100000, 0, 100, 0)), "v1", "above the pool's"},
		{"v1 unlimited query below a limited pool is fine", pool("olap", cg(100000, 100000, 0, 100, 0), cg(-1, 100000, 0, 0, 0)), "none", ""},
		{"no default pool", planner.Desired{Pools: []*planner.PoolState{{Name: "olap", Pool: fresh, Query: fresh}}}, "", "no \"default\" pool"},
		{"duplicate pool", planner.Desired{Pools: []*planner.PoolState{{Name: "default", Pool: fresh, Query: fresh}, {Name: "default", Pool: fresh, Query: fresh}}}, "", "appears twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			modes(t, func(t *testing.T, v2 bool) {
				w := newWorld(t, v2)
				tr := w.tree("poolagent", nil)
				_, err := tr.Changes(tt.d)
				if tt.only != "" && tt.only != modeName(v2) || tt.only == "none" {
					if err != nil {
						t.Fatalf("%s refused it: %v", modeName(v2), err)
					}
					return
				}
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want ErrInvalid mentioning %q", err, tt.want)
				}
				if _, err := os.Stat(tr.Root(tr.order[0])); !os.IsNotExist(err) {
					t.Errorf("something was written: %s exists", tr.Root(tr.order[0]))
				}
			})
		})
	}
}

func TestMissingController(t *testing.T) {
	t.Run("v2 parent without cpu", func(t *testing.T) {
		w := newWorld(t, true)
		w.must(os.WriteFile(filepath.Join(w.mounts.Unified, fileSubtreeControl), []byte("memory\n"), 0o644))
		_, err := w.tree("poolagent", nil).Changes(seedDesired())
		if !errors.Is(err, ErrNoController) || !strings.Contains(err.Error(), `"+cpu"`) {
			t.Fatalf("err = %v, want ErrNoController with a +cpu hint", err)
		}
	})
	t.Run("v2 memory limit without memory", func(t *testing.T) {
		w := newWorld(t, true)
		w.must(os.WriteFile(filepath.Join(w.mounts.Unified, fileSubtreeControl), []byte("cpu\n"), 0o644))
		d := seedDesired()
		d.Pools[1].Query = cg(100000, 100000, 0, 0, 1<<30)
		_, err := w.tree("poolagent", nil).Changes(d)
		if !errors.Is(err, ErrNoController) || !strings.Contains(err.Error(), "memory") {
			t.Fatalf("err = %v, want ErrNoController for memory", err)
		}
	})
	t.Run("v1 memory limit without a memory hierarchy", func(t *testing.T) {
		w := newWorld(t, false)
		delete(w.mounts.V1, HierMemory)
		d := seedDesired()
		d.Pools[1].Query = cg(100000, 100000, 0, 0, 1<<30)
		_, err := w.tree("poolagent", nil).Changes(d)
		if !errors.Is(err, ErrNoController) {
			t.Fatalf("err = %v, want ErrNoController", err)
		}
	})
	t.Run("no cpu controller at all", func(t *testing.T) {
		_, err := Open(Mounts{Mode: Unified, Unified: "/x", UnifiedControllers: []string{"memory"}}, "/x/poolagent", Options{})
		if !errors.Is(err, ErrNoController) {
			t.Fatalf("err = %v, want ErrNoController", err)
		}
	})
}

func TestOpenRefusesBadRoot(t *testing.T) {
	m := Mounts{Mode: Hybrid, V1: map[string]string{"cpu": "/sys/fs/cgroup/cpu"}}
	for _, root := range []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu/", "/sys/fs/cgroup/memory/poolagent", "/sys/fs/cgroup/cpu/../memory/x", "poolagent"} {
		if _, err := Open(m, root, Options{}); !errors.Is(err, ErrBadRoot) {
			t.Errorf("Open(%q): err = %v, want ErrBadRoot", root, err)
		}
	}
}

// TestMissingRootParent: on v1 the pool root's parent must exist in the
// twin hierarchies too; poolagent creates only the root itself.
func TestMissingRootParent(t *testing.T) {
	w := newWorld(t, false)
	w.must(os.Mkdir(filepath.Join(w.mounts.V1[HierCPU], "a"), 0o755))
	w.mkcg(filepath.Join(w.mounts.V1[HierCPU], "a"))
	tr := w.tree("a/poolagent", nil)
	_, err := tr.Changes(seedDesired())
	if !errors.Is(err, ErrBadRoot) || !strings.Contains(err.Error(), "cpuacct") {
		t.Fatalf("err = %v, want ErrBadRoot naming the cpuacct hierarchy", err)
	}
	if _, err := os.Stat(filepath.Join(w.mounts.V1[HierCPU], "a/poolagent")); !os.IsNotExist(err) {
		t.Error("something was written")
	}
}

func TestMemoryLimits(t *testing.T) {
	modes(t, func(t *testing.T, v2 bool) {
		w := newWorld(t, v2)
		tr := w.tree("poolagent", nil)
		d := seedDesired()
		// not a page multiple: the kernel rounds it down, and the second
		// apply must not see a difference
		d.Pools[2].Query = cg(350000, 100000, 0, 0, 1<<30+100)
		d.Pools[2].Pool = cg(700000, 100000, 0, 100, -1)
		if _, err := tr.Reconcile(d); err != nil {
			t.Fatal(err)
		}
		for _, h := range hiersOf(t, tr, true) {
			w.spawn(w.hierMount(h), 9)
		}
		if err := tr.PlaceQuery(*d.Pools[2], "q", 9); err != nil {
			t.Fatal(err)
		}
		file, mem := fileMemoryMax, w.mounts.Unified
		if !v2 {
			file, mem = fileMemLimit, w.mounts.V1[HierMemory]
		}
		if got := w.read(filepath.Join(mem, "poolagent/olap/q", file)); got != "1073741824" {
			t.Errorf("query memory limit reads %q", got)
		}
		if again, _ := tr.Changes(d); len(again.Ops) != 0 {
			t.Errorf("second plan not empty:\n%s", again)
		}
	})
}

// TestSoftMemoryLimits: the soft limits go to memory.high (v1
// memory.soft_limit_in_bytes) of the pool and of its queries, a second
// apply writes nothing, and a soft limit dropped (0) goes back to none.
func TestSoftMemoryLimits(t *testing.T) {
	modes(t, func(t *testing.T, v2 bool) {
		w := newWorld(t, v2)
		tr := w.tree("poolagent", nil)
		d := seedDesired()
		d.Pools[2].Pool = cg(700000, 100000, 0, 100, 2<<30)
		d.Pools[2].Pool.MemoryHighBytes = 1<<30 + 100 // rounded down to a page
		d.Pools[2].Query = cg(350000, 100000, 0, 0, 1<<30)
		d.Pools[2].Query.MemoryHighBytes = 512 << 20
		if _, err := tr.Reconcile(d); err != nil {
			t.Fatal(err)
		}
		for _, h := range hiersOf(t, tr, true) {
			w.spawn(w.hierMount(h), 9)
		}
		if err := tr.PlaceQuery(*d.Pools[2], "q", 9); err != nil {
			t.Fatal(err)
		}
		file, mem, none := fileMemoryHigh, w.mounts.Unified, "max"
		if !v2 {
			file, mem, none = fileMemSoftLimit, w.mounts.V1[HierMemory], "9223372036854771712"
		}
		for cgroup, want := range map[string]string{"olap": "1073741824", "olap/q": "536870912", "default": none} {
			if got := w.read(filepath.Join(mem, "poolagent", cgroup, file)); got != want {
				t.Errorf("%s %s reads %q, want %q", cgroup, file, got, want)
			}
		}
		if again, _ := tr.Changes(d); len(again.Ops) != 0 {
			t.Errorf("second plan not empty:\n%s", again)
		}
		d.Pools[2].Pool.MemoryHighBytes = 0
		if _, err := tr.Reconcile(d); err != nil {
			t.Fatal(err)
		}
		if got := w.read(filepath.Join(mem, "poolagent/olap", file)); got != none {
			t.Errorf("olap %s after the soft limit was dropped: %q, want %q", file, got, none)
		}
	})
}

// TestMemoryGuarantees: on v2 the guarantees go to the pool's memory.min
// and memory.low, each query claims "max" of them, the pool root gets
// their sum, a second apply writes nothing and guarantees dropped go back
// to 0; v1, without guarantees, refuses them by name.
func TestMemoryGuarantees(t *testing.T) {
	modes(t, func(t *testing.T, v2 bool) {
		w := newWorld(t, v2)
		tr := w.tree("poolagent", nil)
		d := seedDesired()
		d.Pools[2].Pool.MemoryMinBytes, d.Pools[2].Pool.MemoryLowBytes = 100<<20, 200<<20+100 // rounded down to a page
		d.Pools[2].Query.MemoryMinBytes, d.Pools[2].Query.MemoryLowBytes = -1, -1
		d.Pools[1].Pool.MemoryLowBytes, d.Pools[1].Query.MemoryLowBytes = 50<<20, -1
		_, err := tr.Reconcile(d)
		if !v2 {
			if !errors.Is(err, ErrNoController) || !strings.Contains(err.Error(), "TOTAL_MEMORY_LOW_PERCENT_PER_NODE") {
				t.Fatalf("v1: err = %v, want ErrNoController naming the parameters", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		w.spawn(w.mounts.Unified, 9)
		if err := tr.PlaceQuery(*d.Pools[2], "q", 9); err != nil {
			t.Fatal(err)
		}
		u := filepath.Join(w.mounts.Unified, "poolagent")
		for file, want := range map[string]string{
			"olap/memory.min": "104857600", "olap/memory.low": "209715200", "olap/q/memory.min": "max", "olap/q/memory.low": "max",
			"memory.min": "104857600", "memory.low": "262144000", "default/memory.low": "0",
		} {
			if got := w.read(filepath.Join(u, file)); got != want {
				t.Errorf("%s reads %q, want %q", file, got, want)
			}
		}
		if again, _ := tr.Changes(d); len(again.Ops) != 0 {
			t.Errorf("second plan not empty:\n%s", again)
		}
		d = seedDesired()
		if _, err := tr.Reconcile(d); err != nil {
			t.Fatal(err)
		}
		for _, file := range []string{"olap/memory.min", "olap/memory.low", "olap/q/memory.low", "memory.min", "memory.low"} {
			if got := w.read(filepath.Join(u, file)); got != "0" {
				t.Errorf("%s after the guarantees were dropped: %q, want 0", file, got)
			}
		}
	})
}

// TestBurstPendingWhenQuotaFails: a burst refused before its quota, whose
// quota write then fails, is reported as not done.
func TestBurstPendingWhenQuotaFails(t *testing.T) {
	modes(t, func(t *testing.T, v2 bool) {
		w := newWorld(t, v2)
		counter := &faultCounter{}
		tr := w.tree("poolagent", func(f FS) FS { return faultFS{FS: f, c: counter} })
		d := planner.Desired{Pools: []*planner.PoolState{{Name: "default", Pool: fresh, Query: fresh}, {Name: "olap", Pool: cg(20000, 100000, 10000, 0, 0), Query: fresh}}}
		if _, err := tr.Reconcile(d); err != nil {
			t.Fatal(err)
		}
		d.Pools[1].Pool = cg(80000, 100000, 60000, 0, 0)
		// write 1: the burst, refused by the kernel; write 2: the quota
		counter.n, counter.failAt = 0, 2
		_, err := tr.Reconcile(d)
		var ae *ApplyError
		if !errors.As(err, &ae) {
			t.Fatalf("err = %v, want *ApplyError", err)
		}
		var files []string
		for _, o := range ae.NotDone {
			files = append(files, o.File)
		}
		if len(ae.Done) != 0 || len(files) != 2 || !strings.Contains(files[1], "burst") {
			t.Fatalf("done %v, not done %v; want nothing done, then the quota and the burst not done", ae.Done, files)
		}
		counter.failAt = 0
		if _, err := tr.Reconcile(d); err != nil {
			t.Fatal(err)
		}
		if again, _ := tr.Changes(d); len(again.Ops) != 0 {
			t.Errorf("not converged:\n%s", again)
		}
	})
}

// hiersOf is tr's hierarchies in use, failing t when they cannot be read.
func hiersOf(t testing.TB, tr *Tree, memory bool) []string {
	t.Helper()
	hiers, err := tr.hiers(uses{memory: memory})
	if err != nil {
		t.Fatal(err)
	}
	return hiers
}

// TestFavourAndRemoveAll: the root verbs compare uses write the largest
// weight at the root and remove the whole tree, children first.
func TestFavourAndRemoveAll(t *testing.T) {
	modes(t, func(t *testing.T, v2 bool) {
		w := newWorld(t, v2)
		tr := w.tree("poolagent", nil)
		if _, err := tr.Reconcile(seedDesired()); err != nil {
			t.Fatal(err)
		}
		if err := tr.FavourRoot(); err != nil {
			t.Fatal(err)
		}
		file, want := filepath.Join(tr.Root(HierCPU), fileShares), "262144"
		if v2 {
			file, want = filepath.Join(tr.Root(HierUnified), fileCPUWeight), "10000"
		}
		if got := w.read(file); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
		for _, h := range hiersOf(t, tr, false) {
			w.must(os.Mkdir(filepath.Join(tr.Root(h), "olap", "q1"), 0o755))
			w.mkcg(filepath.Join(tr.Root(h), "olap", "q1"))
		}
		if err := tr.RemoveAll(); err != nil {
			t.Fatal(err)
		}
		for _, h := range tr.order {
			if _, err := os.Stat(tr.Root(h)); !os.IsNotExist(err) {
				t.Errorf("%s root %s still there: %v", h, tr.Root(h), err)
			}
		}
		if err := tr.RemoveAll(); err != nil {
			t.Errorf("RemoveAll of a removed tree: %v", err)
		}
	})
}

// TestIdleNeedsKernelFile: an idle pool is refused before anything is
// written where the kernel has no cpu.idle, and planned (cpu.idle "1",
// no weight) where it has.
func TestIdleNeedsKernelFile(t *testing.T) {
	idle := func() planner.Desired {
		d := seedDesired()
		d.Pools[1].Pool.CPU.Weight, d.Pools[1].Pool.CPU.Idle = 0, true
		return d
	}
	w := newWorld(t, false)
	tr := w.tree("poolagent", nil)
	_, err := tr.Changes(idle())
	if !errors.Is(err, ErrNoController) || !strings.Contains(err.Error(), "cpu.idle") || !strings.Contains(err.Error(), "CPU_IDLE=-1") {
		t.Fatalf("err = %v, want ErrNoController naming cpu.idle and CPU_IDLE=-1", err)
	}
	w.must(os.WriteFile(filepath.Join(w.mounts.V1[HierCPU], fileCPUIdle), []byte("0\n"), 0o644))
	ch, err := tr.Changes(idle())
	if err != nil {
		t.Fatal(err)
	}
	var wrote []string
	for _, op := range ch.Ops {
		if op.Path == "etl" && op.Kind == OpWrite {
			wrote = append(wrote, op.File+"="+op.Value)
		}
	}
	if !slices.Contains(wrote, "cpu.idle=1") || slices.ContainsFunc(wrote, func(s string) bool { return strings.HasPrefix(s, "cpu.shares=") }) {
		t.Errorf("etl writes %v, want cpu.idle=1 and no cpu.shares", wrote)
	}
}

// TestLowerMemoryLimitBelowUsage: a memory limit lowered below what the
// pool uses is held back, pending, with the usage and both limits; it is
// written once usage falls below it, or at once when forced.
func TestLowerMemoryLimitBelowUsage(t *testing.T) {
	modes(t, func(t *testing.T, v2 bool) {
		w := newWorld(t, v2)
		tr := w.tree("poolagent", nil)
		d := seedDesired()
		d.Pools[2].Pool.MemoryBytes = 1 << 30
		if _, err := tr.Reconcile(d); err != nil {
			t.Fatal(err)
		}
		mem, limit, usage := w.mounts.Unified, fileMemoryMax, fileMemoryCurrent
		if !v2 {
			mem, limit, usage = w.mounts.V1[HierMemory], fileMemLimit, fileMemUsage
		}
		olap := filepath.Join(mem, "poolagent/olap")
		w.must(os.WriteFile(filepath.Join(olap, usage), []byte("629145600\n"), 0o644))
		d.Pools[2].Pool.MemoryBytes = 512 << 20
		c, err := tr.Changes(d)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("pending: usage 629145600 above new limit 536870912 of %s; %s kept at 1073741824 until usage falls below it", filepath.Join(olap, limit), limit)
		if len(c.Ops) != 0 || len(c.Pending) != 1 || !strings.Contains(c.String(), want) {
			t.Fatalf("changes:\n%s\nwant no op and %q", c, want)
		}
		res, err := tr.Reconcile(d)
		if err != nil || res.Writes != 0 || len(res.Pending) != 1 || w.read(filepath.Join(olap, limit)) != "1073741824" {
			t.Fatalf("reconcile below usage: %+v, %v; limit %s", res, err, w.read(filepath.Join(olap, limit)))
		}
		tr.Force(true)
		if c, _ := tr.Changes(d); len(c.Ops) != 1 || len(c.Pending) != 0 {
			t.Errorf("forced changes:\n%s\nwant the write", c)
		}
		tr.Force(false)
		w.must(os.WriteFile(filepath.Join(olap, usage), []byte("104857600\n"), 0o644))
		if res, err := tr.Reconcile(d); err != nil || len(res.Pending) != 0 || w.read(filepath.Join(olap, limit)) != "536870912" {
			t.Errorf("reconcile once usage fell: %+v, %v; limit %s", res, err, w.read(filepath.Join(olap, limit)))
		}
	})
}
