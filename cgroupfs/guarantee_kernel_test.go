package cgroupfs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// guaranteeNeed: memory guarantees are cgroup v2's (v1 has none, and its
// memory hierarchy on the host is not ours to use).
var guaranteeNeed = kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V2}, Controllers: []string{"memory"}}

// The guarantee test's sizes: the working set the guaranteed pool reads
// into the page cache, its pool's memory.low, the file the other pool
// reads, and the free memory that pool leaves before it reads it.
const (
	workingSetBytes = 32 << 20
	guaranteeBytes  = 64 << 20
	streamBytes     = 160 << 20
	headroomBytes   = 64 << 20
)

// TestKernelMemoryGuarantee: a query of pool olap, whose memory.low is
// above its working set, reads a file into the page cache, then a query
// of pool default, without a guarantee, reads another as large; both end
// (their cgroups, charged with the pages, stay). Then a query of pool etl
// takes all but 64 MiB of the machine's available memory in tmpfs pages
// (which nothing can reclaim: the VM has no swap) and reads a 160 MiB
// file, so that etl asks for more than the machine has and the kernel
// must reclaim page cache. olap's pages are the oldest, the first an LRU
// would take: olap keeps at least 90% of them, default, under the same
// pressure, less than half of its own (else the pressure proved nothing).
// The claim of olap's query cgroup ("max") is what shares the pool's
// guarantee with it, as this VM mounts cgroup2 without
// memory_recursiveprot; the pool root's memory.low, the sum of its
// pools', is what lets the pool's reach it.
func TestKernelMemoryGuarantee(t *testing.T) {
	kerneltest.Require(t, guaranteeNeed)
	if total := memInfo(t, "MemTotal"); total > 4<<30 {
		t.Skipf("this test fills the machine's memory: it runs in the test VM (1 GiB), not on a machine with %d MiB", total>>20)
	}
	k := newKernelFor(t, guaranteeNeed, cgroupfs.Options{})
	fs := kerneltest.MountCacheFS(t, map[string]int64{"olap": workingSetBytes, "default": workingSetBytes, "stream": streamBytes})
	shmDir := t.TempDir()
	if err := unix.Mount("poolagent-test", shmDir, "tmpfs", 0, "size=100%"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(shmDir, unix.MNT_DETACH) })
	avail := memInfo(t, "MemAvailable")
	d := seed()
	def, etl, olap := d.Pools[0], d.Pools[1], d.Pools[2]
	olap.Pool.MemoryLowBytes, olap.Query.MemoryLowBytes = guaranteeBytes, -1
	if _, err := k.tree.Reconcile(d); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"olap/memory.low": fmt.Sprint(guaranteeBytes), "memory.low": fmt.Sprint(guaranteeBytes), "default/memory.low": "0"} {
		if got := k.read(t, ".", file); got != want {
			t.Fatalf("%s = %q, want %q", file, got, want)
		}
	}
	before := map[string]int64{}
	for _, ps := range []*planner.PoolState{olap, def} {
		runQuery(t, k, *ps, "reader", "cat "+fs.Path(ps.Name)+" >/dev/null")
		if before[ps.Name] = fileBytes(t, k, ps.Name); before[ps.Name] < workingSetBytes*9/10 {
			t.Fatalf("pool %s holds %d bytes of file pages after reading %d: the file was not cached", ps.Name, before[ps.Name], workingSetBytes)
		}
	}
	shm := (avail - 2*workingSetBytes - headroomBytes) >> 20
	runQuery(t, k, *etl, "fill", fmt.Sprintf("fallocate -l %dm %s", shm, filepath.Join(shmDir, "shm")))
	runQuery(t, k, *etl, "stream", "dd if="+fs.Path("stream")+" of=/dev/null bs=1M 2>/dev/null")
	after := map[string]int64{}
	for _, name := range []string{"olap", "default"} {
		after[name] = fileBytes(t, k, name)
		t.Logf("pool %s: %d MiB of file pages before etl held %d MiB in tmpfs and read %d MiB (%d MiB available at the start), %d MiB after; memory.events: %s",
			name, before[name]>>20, shm, streamBytes>>20, avail>>20, after[name]>>20, strings.Join(strings.Fields(k.read(t, name, "memory.events")), " "))
	}
	if after["olap"] < before["olap"]*9/10 {
		t.Errorf("with memory.low %d, olap kept %d of its %d bytes of file pages; want at least 90%%", guaranteeBytes, after["olap"], before["olap"])
	}
	if after["default"] > before["default"]/2 {
		t.Errorf("without a guarantee, default kept %d of its %d bytes of file pages: the pressure did not reclaim them, so the test cannot tell the guarantee's effect", after["default"], before["default"])
	}
}

// runQuery runs script in a new query cgroup of pool until it ends; the
// cgroup stays, with what its pages are charged.
func runQuery(t *testing.T, k *kernel, ps planner.PoolState, query, script string) {
	t.Helper()
	if err := k.tree.MakeQuery(ps, query); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cmd := startIn(t, filepath.Join(k.root.Path, ps.Name, query), script)
	defer func() { t.Logf("query %s/%s ran %v", ps.Name, query, time.Since(start)) }()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("query %s/%s: %s: %v", ps.Name, query, script, err)
	}
}

// fileBytes is the file pages charged to cgroup cg and below it
// (memory.stat file).
func fileBytes(t *testing.T, k *kernel, cg string) int64 {
	t.Helper()
	st, err := observe.ParseMemoryStat([]byte(k.read(t, cg, "memory.stat")))
	if err != nil {
		t.Fatal(err)
	}
	return int64(st.FileBytes)
}

// memInfo is /proc/meminfo's field in bytes.
func memInfo(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	var kib int64
	for _, line := range strings.Split(string(b), "\n") {
		if _, err := fmt.Sscanf(line, field+": %d kB", &kib); err == nil {
			return kib << 10
		}
	}
	t.Fatalf("no %s in /proc/meminfo", field)
	return 0
}
