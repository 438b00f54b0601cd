package daemon

import (
	"context"
	"net"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/internal/peer"
	"github.com/poolagent/poolagent/internal/pidfd"
	"github.com/poolagent/poolagent/internal/pooltree"
	"github.com/poolagent/poolagent/internal/tell"
	"github.com/poolagent/poolagent/planner"
)

// What telling OOM kills costs the daemon per query, before (as it was:
// no descriptor with the request, the query's CPU read at its end) and
// after, interleaved in one run, as ratios. Nothing is watched on the
// start path; for an in-place query the daemon takes a path handle of
// the client's stderr (tell.Open) and holds two descriptors (that handle,
// a pidfd) while the command runs, watched by the runtime's poller; the
// end reads the query's and its pool's memory.

// BenchmarkQueryMemoryStart: the in-place request as the daemon receives
// it over a Unix socket pair, alone and followed by the path handle of a
// process's stderr; and the descriptors and memory an in-place query's
// watch holds while its command runs (fds/query, bytes/query).
func BenchmarkQueryMemoryStart(b *testing.B) {
	sleeper := exec.Command("/bin/sleep", "60")
	if err := sleeper.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	pfd, err := unix.PidfdOpen(sleeper.Process.Pid, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(pfd)
	client := peer.Process{FD: pfd, PID: sleeper.Process.Pid}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(pair[0])
	f := os.NewFile(uintptr(pair[1]), "daemon end")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	r := newFDReader(c.(*net.UnixConn))
	msg := []byte(`{"op":"exec","pool":"olap","app":"true"}` + "\n")
	buf := make([]byte, 512)
	var before, after time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := unix.Write(pair[0], msg); err != nil {
			b.Fatal(err)
		}
		r.Read(buf)
		t1 := time.Now()
		if _, err := unix.Write(pair[0], msg); err != nil {
			b.Fatal(err)
		}
		r.Read(buf)
		handle, err := tell.Open("/proc", client)
		if err != nil {
			b.Fatal(err)
		}
		unix.Close(handle)
		t2 := time.Now()
		before, after = before+t1.Sub(t0), after+t2.Sub(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(before.Nanoseconds())/n, "ns/request-before")
	b.ReportMetric(float64(after.Nanoseconds())/n, "ns/request-after")
	b.ReportMetric(float64(after)/float64(before), "after/before")

	// The watch of 100 running in-place commands: a pidfd each, polled by
	// the runtime, and the handle of each client's stderr.
	const queries = 100
	fdsBefore, memBefore := openFDs(b), inUse()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, queries)
	for range queries {
		w, err := pidfd.Watch(pfd)
		if err != nil {
			b.Fatal(err)
		}
		stderr, err := tell.Open("/proc", client)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			pidfd.Await(ctx, w)
			w.Close()
			unix.Close(stderr)
			done <- struct{}{}
		}()
	}
	time.Sleep(100 * time.Millisecond) // every watch parked in the poller
	b.ReportMetric(float64(openFDs(b)-fdsBefore)/queries, "fds/query")
	b.ReportMetric(float64(inUse()-memBefore)/queries, "bytes/query")
	cancel()
	for range queries {
		<-done
	}
}

// openFDs counts this process's open descriptors.
func openFDs(b *testing.B) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		b.Fatal(err)
	}
	return len(ents)
}

// inUse is the Go memory in use: heap and goroutine stacks.
func inUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}

// BenchmarkQueryMemoryEnd: what the end of a query reads, before (its CPU
// accounting) and after (its CPU accounting and memory, and its pool's
// memory, the OOM baseline), on a real query cgroup of a pool with a
// memory limit (cgroup v2 with the memory controller: the VM).
func BenchmarkQueryMemoryEnd(b *testing.B) {
	h := kerneltest.Require(b, memoryNeed)
	root := h.NewRoot(b, memoryNeed)
	cg, err := pooltree.Open(h.Mounts, root.Path, cgroupfs.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer cg.Close()
	m, _, err := planner.Load("bench.sql", []byte(olapPool(2, 5, ", TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE=10, QUERY_MEMORY_LIMIT_PERCENT_PER_NODE=5")))
	if err != nil {
		b.Fatal(err)
	}
	d, err := planner.Plan(m, planner.Node{CPUs: 2, MemoryBytes: 1 << 30, PeriodUsec: 100000}, planner.Activity{})
	if err != nil {
		b.Fatal(err)
	}
	if err := cg.Apply(d); err != nil {
		b.Fatal(err)
	}
	sleeper := exec.Command("/bin/sleep", "60")
	if err := sleeper.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		sleeper.Process.Kill()
		sleeper.Wait()
		cg.RemoveQuery("olap", "q1")
	}()
	ps, _ := d.Pool("olap")
	if err := cg.PlaceQuery(ps, "q1", sleeper.Process.Pid); err != nil {
		b.Fatal(err)
	}
	r := cg.Reader()
	var before, after time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := r.CPUStat("olap/q1"); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		s, err := cg.QueryStat("olap", "q1")
		if err != nil || s.Memory == nil {
			b.Fatalf("query memory %v, %v", s.Memory, err)
		}
		if _, err := cg.PoolMemory("olap"); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		before, after = before+t1.Sub(t0), after+t2.Sub(t1)
	}
	n := float64(b.N)
	b.ReportMetric(float64(before.Nanoseconds())/n, "ns/end-before")
	b.ReportMetric(float64(after.Nanoseconds())/n, "ns/end-after")
	b.ReportMetric(float64(after)/float64(before), "after/before")
}
