package pooltree

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/planner"
)

func TestMain(m *testing.M) { kerneltest.Main(m) }

var bothModes = kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1, kerneltest.V2}, Controllers: []string{"cpuacct"}}

// TestKernelQueryCgroup goes through a query cgroup's life on the real
// kernel: the pool applied, two processes placed in its query cgroup, the
// query listed and populated, its CPU accounting read, the notice that it
// may have emptied once both processes exited (cgroup v2: the kernel's
// cgroup.events; v1: the exit of one process, then of the next), and the
// cgroup removed.
func TestKernelQueryCgroup(t *testing.T) {
	h, k, _ := openTestRoot(t)
	unlimited := planner.Cgroup{CPU: cpulimit.Unlimited(cpulimit.DefaultPeriodUsec), MemoryBytes: -1}
	olap := &planner.PoolState{Name: "olap",
		Pool:  planner.Cgroup{CPU: cpulimit.Limit{QuotaUsec: 200000, PeriodUsec: 100000, Weight: 100}, MemoryBytes: -1},
		Query: planner.Cgroup{CPU: cpulimit.Limit{QuotaUsec: 100000, PeriodUsec: 100000, Weight: 100}, MemoryBytes: -1}}
	d := planner.Desired{Pools: []*planner.PoolState{{Name: planner.DefaultPool, Pool: unlimited, Query: unlimited}, olap}}
	if err := h.Apply(d); err != nil {
		t.Fatal(err)
	}

	// Two processes, each held until its stdin closes.
	var ends []func() error
	for range 2 {
		held := exec.Command("cat")
		stdin, err := held.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := held.Start(); err != nil {
			t.Fatal(err)
		}
		end := func() error { stdin.Close(); return held.Wait() }
		t.Cleanup(func() { end() })
		ends = append(ends, end)
		t.Cleanup(func() { h.RemoveQuery("olap", "q1") })
		if len(ends) == 1 {
			if err := h.PlaceQuery(*olap, "q1", held.Process.Pid); err != nil {
				t.Fatal(err)
			}
		} else if err := h.MoveToQuery(*olap, "q1", held.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	const query = "q1"
	if qs, err := h.Queries(); err != nil || !slices.Equal(qs, []QueryKey{{"olap", query}}) {
		t.Errorf("Queries = %v, %v; want [[olap %s]]", qs, err, query)
	}
	if busy, err := h.Populated("olap", query); err != nil || !busy {
		t.Errorf("Populated with the process inside = %v, %v; want true", busy, err)
	}
	if _, err := h.QueryStat("olap", query); err != nil {
		t.Errorf("QueryStat: %v", err)
	}
	if stats, err := h.PoolStats([]string{"olap", "gone"}); err != nil || len(stats) != 1 {
		t.Errorf("PoolStats(olap, gone) = %v, %v; want olap only", stats, err)
	}
	if stats, err := h.PoolCPUStats([]string{"olap", "gone"}); err != nil || len(stats) != 1 || stats["olap"].Group != "olap" || !stats["olap"].UsageKnown && k.Mode == kerneltest.V2 {
		t.Errorf("PoolCPUStats(olap, gone) = %+v, %v; want olap only, with its usage on v2", stats, err)
	}

	wake := make(chan struct{}, 1)
	stop, err := h.NotifyEmpty("olap", query, wake)
	if err != nil {
		t.Fatalf("NotifyEmpty on cgroup %s: %v", k.Mode, err)
	}
	defer stop()
	// The kernel delays a notice that comes within 10 ms of the file's
	// last one (CGROUP_FILE_NOTIFY_MIN_INTV), so on v2 the notice of the
	// placement may still arrive: let it, and drop it.
	drain := func() {
		time.Sleep(100 * time.Millisecond)
		select {
		case <-wake:
		default:
		}
	}
	drain()
	if err := ends[0](); err != nil {
		t.Fatalf("first query process: %v", err)
	}
	drain() // v1 says "look" when the first exits
	if busy, err := h.Populated("olap", query); err != nil || !busy {
		t.Errorf("with the second process inside = %v, %v; want populated", busy, err)
	}
	if err := ends[1](); err != nil {
		t.Fatalf("second query process: %v", err)
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("no notice within 10 s of the query's last process exiting")
	}
	if busy, err := h.Populated("olap", query); err != nil || busy {
		t.Errorf("after the processes exited: populated %v, %v; want empty", busy, err)
	}
	if err := h.RemoveQuery("olap", query); err != nil {
		t.Fatal(err)
	}
	if qs, err := h.Queries(); err != nil || len(qs) != 0 {
		t.Errorf("Queries after RemoveQuery = %v, %v; want none", qs, err)
	}
	if busy, err := h.Populated("olap", query); err != nil || busy {
		t.Errorf("Populated of a removed query = %v, %v; want false, nil", busy, err)
	}
}

// TestKernelRootRemoved: a pool root removed from under an open handle
// (its pools empty, so the kernel allows it) is reported gone, and stays
// gone once a cgroup is made again at its path, which the handle's
// descriptors do not reach.
func TestKernelRootRemoved(t *testing.T) {
	h, _, root := openTestRoot(t)
	unlimited := planner.Cgroup{CPU: cpulimit.Unlimited(cpulimit.DefaultPeriodUsec), MemoryBytes: -1}
	if err := h.Apply(planner.Desired{Pools: []*planner.PoolState{{Name: planner.DefaultPool, Pool: unlimited, Query: unlimited}}}); err != nil {
		t.Fatal(err)
	}
	if err := h.RootInPlace(); err != nil {
		t.Fatalf("RootInPlace after apply: %v", err)
	}
	root.Remove(t)
	if err := h.RootInPlace(); !errors.Is(err, cgroupfs.ErrRootGone) {
		t.Fatalf("RootInPlace with the root removed: %v, want ErrRootGone", err)
	}
	for _, dir := range append([]string{root.Path}, root.Twins...) {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	err := h.RootInPlace()
	if !errors.Is(err, cgroupfs.ErrRootGone) {
		t.Fatalf("RootInPlace with a cgroup made again at the root's path: %v, want ErrRootGone", err)
	}
	t.Logf("reported: %v", err)
}

// openTestRoot opens a handle on a new test root of the test's own,
// closed when the test ends, on host k.
func openTestRoot(t *testing.T) (*Handle, kerneltest.Host, kerneltest.Root) {
	t.Helper()
	k := kerneltest.Require(t, bothModes)
	root := k.NewRoot(t, bothModes)
	h, err := Open(k.Mounts, root.Path, cgroupfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h, k, root
}

// TestKernelApplyChangedPools: once a plan is applied, an Apply whose plan
// changes one pool's cgroups (a query start holding p3 to its demand)
// writes that pool and leaves the others unread: a limit another writer
// changed in p5 meanwhile stays as it was made, until Repair, which reads
// the whole tree, writes it back.
func TestKernelApplyChangedPools(t *testing.T) {
	h, k, root := openTestRoot(t)
	m := startModel(t)
	plan := func(active ...string) planner.Desired {
		d, err := planner.Plan(m, twoCPUs, planner.Activity{Active: append([]string{}, active...), DemandCPUs: map[string]float64{"p3": 0.01}})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if err := h.Apply(plan()); err != nil {
		t.Fatal(err)
	}
	file, drift := "cpu.cfs_quota_us", "50000"
	if k.Mode == kerneltest.V2 {
		file, drift = "cpu.max", "50000 100000"
	}
	quota := func(pool string) string {
		b, err := os.ReadFile(filepath.Join(root.Path, pool, file))
		if err != nil {
			t.Fatal(err)
		}
		q, _, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
		return q
	}
	if err := os.WriteFile(filepath.Join(root.Path, "p5", file), []byte(drift), 0o644); err != nil {
		t.Fatal(err)
	}
	started := plan("p3")
	if err := h.Apply(started); err != nil {
		t.Fatal(err)
	}
	if got := quota("p3"); got != "1000" {
		t.Errorf("p3's quota after its start: %s, want 1000 (held to its demand)", got)
	}
	if got := quota("p5"); got != "50000" {
		t.Errorf("p5's quota after an Apply that changed p3 alone: %s, want 50000 (left as another writer made it)", got)
	}
	if writes, err := h.Repair(started, true); err != nil || writes == 0 {
		t.Fatalf("Repair: %d writes, %v; want p5's", writes, err)
	}
	if got := quota("p5"); got != "120000" {
		t.Errorf("p5's quota after Repair: %s, want 120000 (its cap, 60%% of two CPUs)", got)
	}
}

// TestKernelRepairQueries: a Repair that leaves out the query cgroups'
// values (queries false) neither reads nor writes those of a query cgroup
// the handle made for the plan in force, so another writer's change to
// one stays until a Repair that reads them writes it back; a Repair of a
// plan other than the one applied reads them either way.
func TestKernelRepairQueries(t *testing.T) {
	h, k, root := openTestRoot(t)
	m := startModel(t)
	plan := func(demand map[string]float64, active ...string) planner.Desired {
		d, err := planner.Plan(m, twoCPUs, planner.Activity{Active: active, DemandCPUs: demand})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	poolOf := func(d planner.Desired, name string) *planner.PoolState {
		for _, p := range d.Pools {
			if p.Name == name {
				return p
			}
		}
		t.Fatalf("no pool %s in the plan", name)
		return nil
	}
	d := plan(nil, "p3")
	if err := h.Apply(d); err != nil {
		t.Fatal(err)
	}
	if err := h.MakeQuery(*poolOf(d, "p3"), "q1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.RemoveQuery("p3", "q1") })
	file, drift := "cpu.cfs_quota_us", "5000"
	if k.Mode == kerneltest.V2 {
		file, drift = "cpu.max", "5000 100000"
	}
	q1 := filepath.Join(root.Path, "p3", "q1", file)
	quota := func() string {
		b, err := os.ReadFile(q1)
		if err != nil {
			t.Fatal(err)
		}
		q, _, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
		return q
	}
	want := func(d planner.Desired) string {
		return strconv.FormatInt(poolOf(d, "p3").Query.CPU.QuotaUsec, 10)
	}
	if got := quota(); got != want(d) {
		t.Fatalf("q1's quota as made: %s, want %s", got, want(d))
	}
	if err := os.WriteFile(q1, []byte(drift), 0o644); err != nil {
		t.Fatal(err)
	}
	if writes, err := h.Repair(d, false); err != nil || writes != 0 {
		t.Errorf("Repair leaving out the queries: %d writes, %v; want none", writes, err)
	}
	if got := quota(); got != "5000" {
		t.Errorf("q1's quota after a Repair leaving out the queries: %s, want 5000 (another writer's, not read)", got)
	}
	if writes, err := h.Repair(d, true); err != nil || writes == 0 {
		t.Errorf("Repair: %d writes, %v; want q1's", writes, err)
	}
	if got := quota(); got != want(d) {
		t.Errorf("q1's quota after Repair: %s, want %s", got, want(d))
	}
	if err := os.WriteFile(q1, []byte(drift), 0o644); err != nil {
		t.Fatal(err)
	}
	// p3 held to its demand: a plan whose query template differs.
	other := plan(map[string]float64{"p3": 0.01}, "p3")
	if want(other) == want(d) {
		t.Fatalf("p3's query quota is %s in both plans", want(d))
	}
	if writes, err := h.Repair(other, false); err != nil || writes == 0 {
		t.Errorf("Repair of a plan not applied, leaving out the queries: %d writes, %v; want q1's among them", writes, err)
	}
	if got := quota(); got != want(other) {
		t.Errorf("q1's quota after a Repair of a plan not applied: %s, want %s", got, want(other))
	}
}
