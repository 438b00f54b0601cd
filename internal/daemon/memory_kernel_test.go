package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/observe"
)

// Real-kernel tests of memory: only in the cgroup v2 VM, never in the
// host's memory hierarchy (kerneltest refuses v1 memory).

// envTestAlloc, set to "MIB" or "MIB,HOLD", makes this test binary a
// command that allocates and touches MIB MiB, in 4 MiB steps, then
// holds it for the duration HOLD and exits 0.
const envTestAlloc = "POOLAGENT_TEST_ALLOC"

// memoryNeed is what the memory tests need: cgroup v2 with the memory
// controller.
var memoryNeed = kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V2}, Controllers: []string{"memory"}}

func allocMain(spec string) int {
	mib, hold, _ := strings.Cut(spec, ",")
	n, err := strconv.Atoi(mib)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var held [][]byte
	for i := 0; i < n; i += 4 {
		b := make([]byte, 4<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		held = append(held, b)
	}
	if d, err := time.ParseDuration(hold); err == nil {
		time.Sleep(d)
	}
	fmt.Println("allocated", len(held)*4, "MiB")
	return 0
}

// allocCommand is the command line that runs this binary as an
// allocating command (spec as envTestAlloc).
func allocCommand(t *testing.T, spec string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"/bin/sh", "-c", envTestAlloc + "=" + spec + ` exec "$0"`, exe}
}

// memoryRun runs allocCommand(spec) as `poolagent-run` in pool olap: in
// place, or with stats (the client stays the command's parent).
func memoryRun(t *testing.T, socket, spec, stats string) *execProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, stdinW, stdoutR, stderrR := spawnClient(t, exe, clientSpec{Socket: socket, Pool: "olap", Argv: allocCommand(t, spec), Exec: true, Stats: stats}, nil, 2)
	c := &execProc{proc: p, stdout: stdoutR, release: stdinW, stderr: captureAll(stderrR)}
	go io.Copy(io.Discard, stdoutR)
	t.Cleanup(func() {
		stdinW.Close()
		p.Kill()
		c.wait()
	})
	return c
}

// oomLine is the line of the client's stderr that tells an OOM kill.
func oomLine(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "was killed by the kernel's OOM killer") {
			return l
		}
	}
	return ""
}

// TestKernelQueryOOM: a query allocating past its memory.max is killed,
// and its client says so, naming the query's limit, in place and with
// --stats; the statistics count the kill and a peak near the limit.
func TestKernelQueryOOM(t *testing.T) {
	// 5% of the test node's 1 GiB: 51.2 MiB per query.
	pools := olapPool(2, 5, ", QUERY_MEMORY_LIMIT_PERCENT_PER_NODE=5")
	d, cg := kernelDaemon(t, memoryNeed, Config{}, pools, rootIdentity)
	left := queriesLeft(t, cg)
	for _, stats := range []string{"", "json"} {
		t.Run("stats="+stats, func(t *testing.T) {
			c := memoryRun(t, d.socket, "200", stats)
			st, stderr := c.wait()
			line := oomLine(stderr)
			t.Logf("status %d, stderr:\n%s", status(st), stderr)
			if status(st) != 137 {
				t.Errorf("status %d, want 137 (SIGKILL)", status(st))
			}
			want := "poolagent: query q"
			if !strings.HasPrefix(line, want) || !strings.Contains(line, " in pool olap was killed by the kernel's OOM killer: the query's memory limit 51.2 MiB (QUERY_MEMORY_LIMIT_PERCENT_PER_NODE=5 of 1 GiB) was reached") {
				t.Errorf("OOM line %q, want the query's limit named", line)
			}
			if stats == "json" {
				var s protocol.Stats
				if err := jsonLine(stderr, &s); err != nil {
					t.Fatal(err)
				}
				if s.OOMKills != 1 || s.OOM == nil || s.OOM.Limit != protocol.OOMLimitQuery || s.PeakMemoryBytes < 40<<20 || s.PeakMemoryBytes > 53687091+1<<20 {
					t.Errorf("stats %+v (oom %+v): want one kill at the query's limit and a peak near 51.2 MiB (the kernel may charge a few pages past the limit before it kills)", s, s.OOM)
				}
			}
			waitFor(t, "the query to end", func() bool { return d.pool(t, "olap").Running == 0 && left() == 0 })
		})
	}
	// The pool's memory.events count its queries' kills: the metrics and
	// poolagent stat's reader show them, with the pool's usage and peak.
	if m := metricsPool(t, d, "olap").Memory; m == nil || m.Events.OOMKill != 2 || m.PeakBytes == nil || *m.PeakBytes < 40<<20 || m.LimitBytes != -1 {
		t.Errorf("metrics of pool olap: memory %+v, want 2 OOM kills, a peak of 40 MiB or more and no pool limit", m)
	}
	samples, err := cg.Reader().ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		if s.Group == "olap" && (s.Memory == nil || s.Memory.Events.OOMKill != 2) {
			t.Errorf("stat of pool olap: memory %+v, want 2 OOM kills", s.Memory)
		}
	}
}

// TestKernelPoolOOM: two queries that together pass their pool's
// memory.max: the kernel kills one, whose client names the pool's limit;
// a client whose command was not killed says nothing of it.
func TestKernelPoolOOM(t *testing.T) {
	// 10% of 1 GiB: 102.4 MiB for the pool, two queries of 80 MiB.
	pools := olapPool(2, 5, ", TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE=10")
	d, cg := kernelDaemon(t, memoryNeed, Config{}, pools, rootIdentity)
	left := queriesLeft(t, cg)
	a := memoryRun(t, d.socket, "80,3s", "text")
	waitFor(t, "the first query to run", func() bool { return d.pool(t, "olap").Running == 1 })
	time.Sleep(500 * time.Millisecond) // it holds its 80 MiB
	b := memoryRun(t, d.socket, "80,3s", "text")
	killed := 0
	for _, c := range []*execProc{a, b} {
		st, stderr := c.wait()
		line := oomLine(stderr)
		t.Logf("status %d, stderr:\n%s", status(st), stderr)
		if status(st) == 137 {
			killed++
			if !strings.Contains(line, " in pool olap was killed by the kernel's OOM killer: the pool's memory limit 102.4 MiB (TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE=10 of 1 GiB) was reached") {
				t.Errorf("OOM line %q, want the pool's limit named", line)
			}
		} else if line != "" {
			t.Errorf("status %d, yet told %q", status(st), line)
		}
	}
	if killed == 0 {
		t.Error("no query was killed at the pool's limit")
	}
	waitFor(t, "the queries to end", func() bool { return d.pool(t, "olap").Running == 0 && left() == 0 })
}

// TestKernelKillIsNotOOM: a query's command killed with SIGKILL by
// someone else is not told as an OOM kill, though it ran under a memory
// limit.
func TestKernelKillIsNotOOM(t *testing.T) {
	pools := olapPool(2, 5, ", QUERY_MEMORY_LIMIT_PERCENT_PER_NODE=5")
	d, cg := kernelDaemon(t, memoryNeed, Config{}, pools, rootIdentity)
	left := queriesLeft(t, cg)
	for _, stats := range []string{"", "json"} {
		t.Run("stats="+stats, func(t *testing.T) {
			c := memoryRun(t, d.socket, "8,1h", stats)
			var tids []int
			waitFor(t, "the command to hold its memory", func() bool {
				qs, _ := cg.Queries()
				for _, q := range qs {
					if m, err := cg.Reader().Memory(q.Pool + "/" + q.Name); err == nil && m != nil && m.CurrentBytes >= 8<<20 {
						tids, _, _ = cg.Reader().Threads(q.Pool+"/"+q.Name, 1000)
					}
				}
				return len(tids) > 0
			})
			for _, tid := range tids {
				syscall.Kill(tid, syscall.SIGKILL)
			}
			st, stderr := c.wait()
			t.Logf("status %d, stderr:\n%s", status(st), stderr)
			if status(st) != 137 || oomLine(stderr) != "" {
				t.Errorf("status %d, told %q; want 137 and no OOM line", status(st), oomLine(stderr))
			}
			if stats == "json" {
				var s protocol.Stats
				if err := jsonLine(stderr, &s); err != nil {
					t.Fatal(err)
				}
				if s.OOMKills != 0 || s.OOM != nil || s.PeakMemoryBytes < 8<<20 {
					t.Errorf("stats %+v: want no OOM kill and a peak of 8 MiB or more", s)
				}
			}
			waitFor(t, "the query to end", func() bool { return d.pool(t, "olap").Running == 0 && left() == 0 })
		})
	}
}

// jsonLine decodes the line of text that is a JSON object into v.
func jsonLine(text string, v any) error {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "{") {
			return json.Unmarshal([]byte(l), v)
		}
	}
	return fmt.Errorf("no JSON line in %q", text)
}

// TestKernelMemoryHigh: a query past its soft limit (memory.high) is
// slowed by reclaim, which memory.events' high counts, and completes; no
// OOM kill, nothing told.
func TestKernelMemoryHigh(t *testing.T) {
	// Soft 3% (30.7 MiB), hard 20% (204.8 MiB) of the test node's 1 GiB:
	// a command of 40 MiB goes past the first and stays under the second.
	pools := olapPool(2, 5, ", QUERY_MEMORY_HIGH_PERCENT_PER_NODE=3, QUERY_MEMORY_LIMIT_PERCENT_PER_NODE=20")
	d, cg := kernelDaemon(t, memoryNeed, Config{}, pools, rootIdentity)
	left := queriesLeft(t, cg)
	c := memoryRun(t, d.socket, "40", "json")
	st, stderr := c.wait()
	t.Logf("status %d, stderr:\n%s", status(st), stderr)
	var s protocol.Stats
	if err := jsonLine(stderr, &s); err != nil {
		t.Fatal(err)
	}
	if status(st) != 0 || oomLine(stderr) != "" || s.OOMKills != 0 || s.MemoryHighEvents == 0 {
		t.Errorf("status %d, stats %+v: want 0, no OOM kill and memory.high events", status(st), s)
	}
	waitFor(t, "the query to end", func() bool { return d.pool(t, "olap").Running == 0 && left() == 0 })
}

// TestKernelLowerLimitBelowUsage: a pool's memory limit lowered below
// what its running query uses is not written: no OOM kill, the old limit
// kept, the pending state reported; once the query is gone and usage
// has fallen, the reconcile writes the new limit.
func TestKernelLowerLimitBelowUsage(t *testing.T) {
	// 50% of the test node's 1 GiB, then 5%: 51.2 MiB, under the
	// query's 100 MiB.
	d, cg := kernelDaemon(t, memoryNeed, Config{Reconcile: 50 * time.Millisecond}, olapPool(2, 5, ", TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE=50"), rootIdentity)
	c := memoryRun(t, d.socket, "100,10m", "")
	poolMemory := func() *observe.Memory {
		m, err := cg.PoolMemory("olap")
		if err != nil || m == nil {
			t.Fatalf("pool olap's memory: %v, %v", m, err)
		}
		return m
	}
	for deadline := time.Now().Add(2 * time.Minute); poolMemory().CurrentBytes < 100<<20; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the query did not reach 100 MiB: %d bytes", poolMemory().CurrentBytes)
		}
	}
	d.srv.changes.set(policyOf(t, olapPool(2, 5, ", TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE=5")))
	waitFor(t, "the lowered limit to be pending", func() bool { return len(cg.Pending()) == 1 })
	if path := cg.Pending()[0].Path; path != "olap" {
		t.Errorf("pending limit of %q, want the pool olap's", path)
	}
	p := cg.Pending()[0].String()
	pendingLine := func(p string) bool {
		return strings.HasPrefix(p, "pending: usage ") && strings.Contains(p, " above new limit 53686272 of ")
	}
	if !pendingLine(p) {
		t.Errorf("pending %q, want the usage above the new limit 53686272 (51.2 MiB in pages)", p)
	}
	if m := poolMemory(); m.LimitBytes != 512<<20 || m.Events.OOMKill != 0 || d.pool(t, "olap").Running != 1 {
		t.Fatalf("while pending: limit %d, OOM kills %d, running %d; want the old limit 512 MiB, no kill, the query running", m.LimitBytes, m.Events.OOMKill, d.pool(t, "olap").Running)
	}
	t.Logf("%s", p)
	if n := pendingMetric(t, d.srv, "olap"); n != 1 {
		t.Errorf("poolagent_pool_limit_pending{pool=olap,file=memory.max} = %d while pending, want 1", n)
	}
	if r, err := ask(d.socket, protocol.Request{Op: protocol.OpPools}, 5*time.Second); err != nil {
		t.Error(err)
	} else if i := slices.IndexFunc(r.Pools, func(p protocol.Pool) bool { return p.Name == "olap" }); i < 0 || len(r.Pools[i].Pending) != 1 || !pendingLine(r.Pools[i].Pending[0]) {
		// The usage in the line is the one read at the last reconcile:
		// the query still allocates, so it may have grown since.
		t.Errorf("poolagent pools: %+v, want olap's row with one pending line like %q", r.Pools, p)
	}
	qs, err := cg.Queries()
	if err != nil || len(qs) != 1 {
		t.Fatalf("queries %v, %v", qs, err)
	}
	if err := cg.KillQuery(qs[0].Pool, qs[0].Name); err != nil {
		t.Fatal(err)
	}
	c.wait()
	waitFor(t, "the new limit to be written", func() bool { return poolMemory().LimitBytes == 53686272 && len(cg.Pending()) == 0 })
	if n := pendingMetric(t, d.srv, "olap"); n != 0 {
		t.Errorf("poolagent_pool_limit_pending{pool=olap,file=memory.max} = %d once written, want none", n)
	}
	if m := poolMemory(); m.Events.OOMKill != 0 {
		t.Errorf("OOM kills %d, want none", m.Events.OOMKill)
	}
}

// pendingMetric is the pending memory.max limits the metrics show for
// pool (poolagent_pool_limit_pending).
func pendingMetric(t *testing.T, srv *Server, pool string) int {
	t.Helper()
	snap, err := srv.MetricsSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range snap.Pools {
		if p.Name == pool {
			return p.LimitsPending["memory.max"]
		}
	}
	t.Fatalf("no pool %s in the metrics", pool)
	return 0
}
