package daemon

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/client"
	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/internal/pooltree"
	"github.com/poolagent/poolagent/planner"
)

// envTestGOMAXPROCS, set in this test binary's environment, makes it a Go
// program that reports what it can see of its CPU limit: first
// "limit $POOLAGENT_CPU_LIMIT", then "gomaxprocs N" at start and whenever
// runtime.GOMAXPROCS(0) changes, until its standard input closes.
const envTestGOMAXPROCS = "POOLAGENT_TEST_GOMAXPROCS"

// gomaxprocsMain is the program envTestGOMAXPROCS starts. It is this test
// binary, built by the same toolchain as poolagent (Go ≥ 1.25), whose
// runtime sets GOMAXPROCS from the cpu.max (v2) or cpu.cfs_quota_us and
// cpu.cfs_period_us (v1) of the cgroup it started in: ceil(quota/period),
// at least 2, at most the CPUs it may run on. The runtime's sysmon reads
// the limit again at most once a second while the program runs, so the
// loop wakes every 10 ms to keep sysmon awake (it sleeps until the next
// timer when every P is idle).
func gomaxprocsMain() int {
	fmt.Printf("limit %s\n", os.Getenv(client.EnvCPULimit))
	closed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(closed)
	}()
	last := 0
	deadline := time.After(2 * time.Minute)
	for {
		if n := runtime.GOMAXPROCS(0); n != last {
			fmt.Printf("gomaxprocs %d\n", n)
			last = n
		}
		select {
		case <-closed:
			return 0
		case <-deadline:
			fmt.Fprintln(os.Stderr, "gomaxprocs: stdin still open after 2 minutes")
			return 1
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// goProgram is gomaxprocsMain running as a query, with what it printed so
// far.
type goProgram struct {
	release *os.File
	done    chan struct{}
	res     client.Result
	err     error

	mu         sync.Mutex
	limit      string
	gomaxprocs int
	changedAt  time.Time
}

func (g *goProgram) seen() (limit string, gomaxprocs int, at time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.limit, g.gomaxprocs, g.changedAt
}

// startGoProgram runs gomaxprocsMain in pool through the daemon.
func startGoProgram(t *testing.T, socket, pool string) *goProgram {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// A GOMAXPROCS in the environment would turn the runtime's own
	// sizing off.
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "GOMAXPROCS=") && !strings.HasPrefix(e, envTestGOMAXPROCS+"=") {
			env = append(env, e)
		}
	}
	g := &goProgram{release: stdinW, done: make(chan struct{})}
	signals := make(chan os.Signal, 1)
	go func() {
		defer close(g.done)
		defer stdinR.Close()
		defer stdoutW.Close()
		g.res, g.err = client.Run(client.RunOptions{
			Socket: socket, Pool: pool, Args: []string{exe}, Env: append(env, envTestGOMAXPROCS+"=1"),
			Stdin: stdinR, Stdout: stdoutW, Stderr: os.Stderr, Signals: signals,
		})
	}()
	go func() {
		defer stdoutR.Close()
		sc := bufio.NewScanner(stdoutR)
		for sc.Scan() {
			key, val, _ := strings.Cut(sc.Text(), " ")
			g.mu.Lock()
			switch key {
			case "limit":
				g.limit = val
			case "gomaxprocs":
				g.gomaxprocs, _ = strconv.Atoi(val)
				g.changedAt = time.Now()
			}
			g.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		stdinW.Close()
		select {
		case signals <- syscall.SIGTERM:
		default:
		}
		<-g.done
	})
	return g
}

// TestKernelQueryCPULimitVisible: a Go program run as a query in a pool
// without QUERY_CPU_LIMIT_PERCENT_PER_NODE sees its pool's allocation. On
// a node of N CPUs, pools a and b are each capped at 75% with equal
// weights: a alone is allocated 0.75·N, with b running N/2. The query
// cgroup's quota follows (re-planned while the query runs), the program's
// POOLAGENT_CPU_LIMIT is the allocation it started with, and the Go
// runtime's GOMAXPROCS follows the quota within its periodic re-read:
// min(N, max(2, ceil(allocation))). With N = 4 (the VM with
// POOLAGENT_VM_CPUS=4) that is 3, then 2 while b runs, then 3 again; with
// N = 2 the runtime's floor of 2 hides the change, and the quota and the
// variable carry the test.
func TestKernelQueryCPULimitVisible(t *testing.T) {
	h := kerneltest.Require(t, bothModes)
	root := h.NewRoot(t, bothModes)
	cg, err := pooltree.Open(h.Mounts, root.Path, cgroupfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cg.Close() })
	m, _, err := planner.Load("test.sql", []byte(`
CREATE RESOURCE POOL a WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=75, RESOURCES_WEIGHT=100);
CREATE RESOURCE POOL b WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=75, RESOURCES_WEIGHT=100);
`))
	if err != nil {
		t.Fatal(err)
	}
	n := observeCPUs(t)
	node := planner.Node{CPUs: float64(n), MemoryBytes: 1 << 30, PeriodUsec: 100000}
	cfg := Config{Load: admission.LoadConfig{RefreshInterval: time.Hour}}
	d := startDaemon(t, cfg, Policy{Model: m, Node: node}, cg, rootIdentity)
	t.Logf("%d CPUs online, GOMAXPROCS of this test %d", n, runtime.GOMAXPROCS(0))

	alone, shared := 0.75*float64(n), float64(n)/2
	wantProcs := func(alloc float64) int { return min(n, max(2, int(math.Ceil(alloc)))) }
	// The runtime re-reads the limit about once a second; the VM's
	// emulated CPUs are slow, so allow far more.
	const follow = 30 * time.Second

	g := startGoProgram(t, d.socket, "a")
	var query string
	waitFor(t, "the program to start", func() bool {
		limit, procs, _ := g.seen()
		if qs, _ := cg.Queries(); len(qs) == 1 {
			query = qs[0].Name
		}
		return limit != "" && procs > 0 && query != ""
	})
	quotaOf := func() int64 { return poolQuotaUsec(t, cg, "a/"+query) }
	limit, _, _ := g.seen()
	if want := strconv.FormatFloat(alone, 'f', -1, 64); limit != want {
		t.Errorf("POOLAGENT_CPU_LIMIT=%q, want %s (a's allocation alone)", limit, want)
	}
	check := func(what string, alloc float64) {
		t.Helper()
		wantQuota := int64(math.Round(alloc * 100000))
		waitFor(t, fmt.Sprintf("%s: query quota %d µs", what, wantQuota), func() bool { return quotaOf() == wantQuota })
		changed := time.Now()
		want := wantProcs(alloc)
		deadline := changed.Add(follow)
		for {
			_, procs, at := g.seen()
			if procs == want {
				lag := "already"
				if at.After(changed) {
					lag = at.Sub(changed).Round(time.Millisecond).String() + " after the quota"
				}
				t.Logf("%s: allocation %v vCPU, query quota %d µs, GOMAXPROCS %d (%s)", what, alloc, wantQuota, procs, lag)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: GOMAXPROCS %d, want %d (quota %d µs over 100000) within %v", what, procs, want, wantQuota, follow)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	check("a alone", alone)
	qb := startInProc(t, d.socket, "b")
	waitFor(t, "b's query to start", qb.isStarted)
	check("a beside b", shared)
	qb.release.Close()
	<-qb.done
	check("a alone again", alone)
	g.release.Close()
	<-g.done
	if g.err != nil || g.res.ExitCode != 0 {
		t.Fatalf("program: exit %d, %v", g.res.ExitCode, g.err)
	}
}
