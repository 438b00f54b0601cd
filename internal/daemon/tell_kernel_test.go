package daemon

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/internal/tell"
)

// msgNotTold is the daemon's record of a query's end (an OOM kill,
// refused forks) its client's stderr was not told of.
const msgNotTold = "query's end not told on the client's stderr"

// TestKernelOOMToldOnStuckFile: 200 in-place queries, each killed at its
// memory limit, whose stderr is a file on a FUSE filesystem that never
// answers a write; then 50 whose stderr is a file on it that never
// answers a flush (what a close asks) of the daemon's. The daemon asks no
// flush, and its threads stay within threadSlack of idle: the message is
// written by tellers of the user's, at most tell.PerUID of them caught at
// once, and the rest are in the daemon's log. A kill -9
// of the daemon then releases its socket at once (no thread of it is
// caught in the kernel), and a new daemon serves on it.
func TestKernelOOMToldOnStuckFile(t *testing.T) {
	h := kerneltest.Require(t, memoryNeed)
	root := h.NewRoot(t, memoryNeed)
	stuck := kerneltest.MountStuckFS(t)
	// 1% of the test node's 1 GiB: 10.24 MiB per query (small, so that
	// 200 kills take little time under emulation); 4 at once.
	pools := olapPool(4, 200, ", QUERY_MEMORY_LIMIT_PERCENT_PER_NODE=1")
	d := startDaemonProc(t, daemonSpec{Pools: pools, Root: root.Path, RootUsers: true})
	stuck.StallFlushesOf(d.cmd.Process.Pid)
	// Should the daemon be caught in a write after all, the test fails
	// rather than hangs: the filesystem is aborted before the daemon is
	// stopped.
	t.Cleanup(stuck.Abort)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := os.OpenFile(stuck.File, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	// run runs one in-place query of the allocating command, with
	// stderr as its standard error, and returns its exit status.
	run := func(stderr *os.File, spec string) int {
		b, _ := json.Marshal(clientSpec{Socket: d.socket, Pool: "olap", Argv: allocCommand(t, spec), Exec: true})
		p, err := os.StartProcess(exe, []string{exe}, &os.ProcAttr{
			Env:   append(os.Environ(), envTestClient+"="+string(b)),
			Files: []*os.File{devNull, devNull, stderr},
		})
		if err != nil {
			t.Error(err)
			return -1
		}
		st, err := p.Wait()
		if err != nil {
			t.Error(err)
			return -1
		}
		return status(st)
	}
	// Idle: after a few queries that end well, the runtime's threads are
	// those a daemon keeps.
	plain, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	for range 4 {
		if st := run(plain, "0"); st != 0 {
			b, _ := os.ReadFile(plain.Name())
			t.Fatalf("a query within its limit: status %d, stderr %q\n%s", st, b, d.tail())
		}
	}
	idle := d.threads(t)

	const n = 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	killed := 0
	jobs := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for range jobs {
				if run(stderr, "64") == 137 {
					mu.Lock()
					killed++
					mu.Unlock()
				}
			}
		})
	}
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	waitFor(t, "the queries to end", func() bool { return poolRow(t, d.answers(t), "olap").RunningQueries == 0 })
	// Every kill is told or logged as not told; the last ones are
	// decided once their command has exited, which the daemon learns
	// a moment later.
	notTold := d.logged(msgNotTold)
	for deadline := time.Now().Add(10 * time.Second); notTold+tell.PerUID < killed && time.Now().Before(deadline); notTold = d.logged(msgNotTold) {
		time.Sleep(10 * time.Millisecond)
	}
	// The close: queries whose stderr the daemon could never close.
	flushFile, err := os.OpenFile(stuck.FlushFile, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer flushFile.Close()
	const closes = 50
	for range closes {
		if st := run(flushFile, "0"); st != 0 {
			t.Fatalf("a query within its limit, its stderr on the flush-stalling file: status %d\n%s", st, d.tail())
		}
	}
	waitFor(t, "the queries to end", func() bool { return poolRow(t, d.answers(t), "olap").RunningQueries == 0 })
	threads, tellers := d.threads(t), d.tellers(t)
	t.Logf("%d of %d queries killed at their memory limit; %d writes reached the stuck file, %d kills not told; %d flushes of the daemon's after %d queries on the other file; daemon threads %d idle, %d after; %d tellers caught",
		killed, n, stuck.Writes(), notTold, stuck.StalledFlushes(), closes, idle, threads, tellers)
	if f := stuck.StalledFlushes(); f > 0 {
		t.Errorf("the daemon closed the user's file %d times, each close a thread of it caught in the filesystem's flush", f)
	}
	if killed != n {
		t.Errorf("%d of %d queries were killed at their limit", killed, n)
	}
	if notTold+tell.PerUID < killed {
		t.Errorf("%d kills not told in the daemon's log, want all but the %d the tellers took", notTold, tell.PerUID)
	}
	if stuck.Writes() == 0 {
		t.Error("no write of the message reached the stuck file")
	}
	if tellers > tell.PerUID {
		t.Errorf("%d tellers caught, over %d", tellers, tell.PerUID)
	}
	if threads > idle+threadSlack {
		t.Errorf("daemon threads %d after %d OOM-told queries on a stuck file, %d idle: a thread is caught in a write", threads, n, idle)
	}

	// kill -9: the socket is released as the daemon dies.
	d.cmd.Process.Kill()
	killedAt := time.Now()
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the daemon has not finished dying 10 s after kill -9: a thread of it is caught in the kernel")
	}
	var released time.Duration
	for {
		c, err := net.Dial("unix", d.socket)
		if err == nil {
			c.Close()
		} else if errors.Is(err, syscall.ECONNREFUSED) {
			released = time.Since(killedAt)
			break
		}
		if time.Since(killedAt) > 10*time.Second {
			t.Fatalf("the socket still accepts 10 s after kill -9: the daemon did not finish dying")
		}
		time.Sleep(10 * time.Millisecond)
	}
	d2 := startDaemonProc(t, daemonSpec{Pools: pools, Root: root.Path, RootUsers: true, Socket: d.socket})
	bound := time.Since(killedAt)
	if st := run(plain, "0"); st != 0 {
		b, _ := os.ReadFile(plain.Name())
		t.Errorf("a query on the new daemon: status %d, stderr %q\n%s", st, b, d2.tail())
	}
	t.Logf("after kill -9: socket released in %v, a new daemon served on it %v after the kill", released, bound)
	d.waitErr = nil // killed on purpose
}

// tellers counts the daemon's children that are tellers.
func (d *daemonProc) tellers(t *testing.T) int {
	t.Helper()
	pid := d.cmd.Process.Pid
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/children")
		for _, child := range strings.Fields(string(b)) {
			if cmd, _ := os.ReadFile("/proc/" + child + "/cmdline"); strings.HasPrefix(string(cmd), "poolagent-tell\x00") {
				n++
			}
		}
	}
	return n
}
