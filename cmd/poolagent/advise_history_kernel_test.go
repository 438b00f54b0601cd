package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/poolagent/poolagent/advise"
	"github.com/poolagent/poolagent/internal/kerneltest"
)

// TestKernelAdviseFromHistory is advice after the fact, on the real
// kernel: a pool's bursts run as queries through the daemon, each query
// limited like its pool (so the kernel may throttle at either level); the
// daemon's history shows the throttling of the query cgroups, `advise
// --pool` reads it from the daemon and prints a change, `poolagent sql`
// applies it, and the same bursts, read from the history again, are
// within the budget. The history counts the threads that ran in each
// interval, so the advice keeps the bursts' width.
func TestKernelAdviseFromHistory(t *testing.T) {
	need := kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1, kerneltest.V2}, Controllers: []string{"cpuacct"}}
	host := kerneltest.Require(t, need)
	root := host.NewRoot(t, need)
	root.Favour(t)
	userDatabase(t)
	loopbackUp(t)

	dir, err := os.MkdirTemp("", "poolagent-history-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket, pools := filepath.Join(dir, "agent.sock"), filepath.Join(dir, "pools.sql")
	const poolFile = "CREATE RESOURCE POOL app WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 20);\n" +
		"GRANT USE ON RESOURCE POOL app TO 'all-users@well-known';\n"
	if err := os.WriteFile(pools, []byte(poolFile), 0o644); err != nil {
		t.Fatal(err)
	}
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "notify"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()
	a := startAgent(t, notify, "--pools", pools, "--root", root.Path, "--state-dir", filepath.Join(dir, "state"), "--create-state-dir",
		"--socket", socket, "--cpus", "2", "--memory", "1073741824", "--history-window", "10m")
	defer a.stop(t, notify)

	const budget = 0.1
	burn, gap := historyWorkload(t)
	loops := shellLoops(t, burn)
	before := runHistoryBursts(t, socket, loops, burn, gap, filepath.Join(dir, "before.json"))
	m := advise.Measured(before)
	if m.QueryNrThrottled == 0 || m.QueryThrottledUsec == 0 {
		t.Errorf("the history shows no throttling of the query cgroups: %+v", m)
	}
	if r := m.ThrottledRatio(); r <= budget {
		t.Fatalf("the workload was throttled in %.0f%% of periods, not over the budget of %.0f%%: the test proves nothing (a loaded host?)", r*100, budget*100)
	}
	out := slowOutput(t, "advise", "--socket", socket, "--pool", "app", "--since", "2m", "--max-throttled-periods", "10%")
	t.Logf("advise --pool app:\n%s", out)
	if !strings.Contains(out, "in query cgroups held by their own limit") {
		t.Errorf("advise --pool does not name the query-level throttling")
	}
	var alter string
	for _, l := range strings.Split(out, "\n") {
		if s := strings.TrimSpace(l); strings.HasPrefix(s, "ALTER RESOURCE POOL app SET (") {
			alter = s
		}
	}
	if alter == "" {
		t.Fatalf("advise --pool printed no ALTER RESOURCE POOL app for a pool over its budget")
	}
	if out := output(t, "sql", "--socket", socket, "-e", alter); !strings.HasPrefix(out, "change 1 applied") {
		t.Fatalf("sql %s: %q", alter, out)
	}
	all := slowOutput(t, "advise", "--socket", socket, "--all", "--since", "2m")
	if !strings.Contains(all, "app: ") {
		t.Errorf("advise --all does not list pool app:\n%s", all)
	}

	after := runHistoryBursts(t, socket, loops, burn, gap, filepath.Join(dir, "after.json"))
	if r := advise.Measured(after).ThrottledRatio(); r > budget {
		t.Errorf("after %s the history shows %.0f%% of periods throttled, over the budget of %.0f%%", alter, r*100, budget*100)
	}
	t.Logf("throttled periods in the history: %.0f%% before, %.0f%% after %s",
		advise.Measured(before).ThrottledRatio()*100, advise.Measured(after).ThrottledRatio()*100, alter)
}

// burnScript is a shell command of two processes that each count to N:
// a fixed amount of CPU work that starts in a few hundred µs, so that a
// query's start-up costs next to nothing even under its limit.
const burnScript = `i=0; while [ $i -lt $1 ]; do i=$((i+1)); done & j=0; while [ $j -lt $1 ]; do j=$((j+1)); done; wait`

// shellLoops is the N at which one of burnScript's loops burns about d of
// CPU on this host, measured outside any pool.
func shellLoops(t *testing.T, d time.Duration) int {
	t.Helper()
	const probe = 200_000
	c := exec.Command("/bin/sh", "-c", `i=0; while [ $i -lt $1 ]; do i=$((i+1)); done`, "sh", strconv.Itoa(probe))
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	used := c.ProcessState.UserTime() + c.ProcessState.SystemTime()
	n := int(float64(probe) * float64(d) / float64(max(used, time.Millisecond)))
	t.Logf("a shell loop of %d burns %s here: %d burn %s", probe, used, n, d)
	return n
}

// The workload of TestKernelAdviseFromHistory: every gap a query of two
// processes burning burn each, 8 times. On a host the burns are short
// (30 ms, 500 ms apart), bursts the history's demand reconstruction
// (without thread counts) follows closely; where a shell's start costs
// more than 3 ms of CPU (the test VM's emulated CPUs: tens of ms) they are
// 100 ms, 1 s apart, so that the work, not the shells' start, is what the
// pool's limit sees.
const historyBursts = 8

// historyWorkload is the burn and gap for this host.
func historyWorkload(t *testing.T) (burn, gap time.Duration) {
	t.Helper()
	c := exec.Command("/bin/sh", "-c", "true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	start := c.ProcessState.UserTime() + c.ProcessState.SystemTime()
	t.Logf("a shell's start costs %s of CPU here", start)
	if start > 3*time.Millisecond {
		return 100 * time.Millisecond, time.Second
	}
	return 30 * time.Millisecond, 500 * time.Millisecond
}

// runHistoryBursts runs the bursts as queries of pool app through the
// daemon at socket (burnScript with loops, started with `poolagent run`), then writes the daemon's history of the pool since the bursts
// began with `poolagent record --from-daemon` to trace and returns it.
func runHistoryBursts(t *testing.T, socket string, loops int, burn, gap time.Duration, trace string) *advise.Trace {
	t.Helper()
	time.Sleep(300 * time.Millisecond) // an idle interval first
	start := time.Now()
	errs := make(chan error, historyBursts)
	for k := range historyBursts {
		time.Sleep(time.Until(start.Add(time.Duration(k) * gap)))
		q := poolagent("run", "--socket", socket, "--pool", "app", "--", "/bin/sh", "-c", burnScript, "sh", strconv.Itoa(loops))
		if err := q.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Process.Kill() })
		go func() { errs <- q.Wait() }()
	}
	for range historyBursts {
		if err := within(t, "a burst's query to end", errs); err != nil {
			t.Fatalf("a burst's query: %v", err)
		}
	}
	time.Sleep(300 * time.Millisecond) // the last intervals sampled
	since := time.Since(start) + 200*time.Millisecond
	output(t, "record", "--from-daemon", "--socket", socket, "--pool", "app", "--since", since.Round(time.Millisecond).String(), "-o", trace)
	f, err := os.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := advise.ParseTrace(trace, f)
	if err != nil {
		t.Fatal(err)
	}
	m := advise.Measured(tr)
	t.Logf("%s: %d intervals, %d of %d periods throttled (%d at the query level), %d µs throttled (%d in queries), usage %d µs (want about %d)",
		filepath.Base(trace), len(tr.Samples), m.NrThrottled, m.NrPeriods, m.QueryNrThrottled, m.ThrottledUsec, m.QueryThrottledUsec,
		m.UsageUsec, 2*historyBursts*burn.Microseconds())
	return tr
}

// slowOutput is output for a command that runs the model, which the test
// VM's emulated CPUs run many times slower: it may take up to 5 minutes.
func slowOutput(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := poolagentContext(ctx, args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("poolagent %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return string(out)
}
