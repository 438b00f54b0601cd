package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/advise"
	"github.com/poolagent/poolagent/internal/history"
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
	// How much the workload was throttled is timing: judged only while the
	// machine gives the test its CPU (kerneltest.Root.Retry).
	var before *history.Trace
	var since func() time.Duration
	root.Retry(t, 3, func(n int) string {
		before, since = runHistoryBursts(t, socket, burn, gap, filepath.Join(dir, fmt.Sprintf("before-%d.json", n)))
		m := advise.Measured(before)
		if m.QueryNrThrottled == 0 || m.QueryThrottledUsec == 0 {
			return fmt.Sprintf("the history shows no throttling of the query cgroups: %+v", m)
		}
		if r := m.ThrottledRatio(); r <= budget {
			return fmt.Sprintf("the workload was throttled in %.0f%% of periods, not over the budget of %.0f%%: the test would prove nothing", r*100, budget*100)
		}
		return ""
	})
	if t.Failed() {
		return
	}
	// The advice is of the bursts alone (their queries' start is before).
	out := slowOutput(t, "advise", "--socket", socket, "--pool", "app", "--since", since().String(), "--max-throttled-periods", "10%")
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
	all := slowOutput(t, "advise", "--socket", socket, "--all", "--since", since().String())
	if !strings.Contains(all, "app: ") {
		t.Errorf("advise --all does not list pool app:\n%s", all)
	}

	root.Retry(t, 3, func(n int) string {
		after, _ := runHistoryBursts(t, socket, burn, gap, filepath.Join(dir, fmt.Sprintf("after-%d.json", n)))
		if r := advise.Measured(after).ThrottledRatio(); r > budget {
			return fmt.Sprintf("after %s the history shows %.0f%% of periods throttled, over the budget of %.0f%%", alter, r*100, budget*100)
		}
		t.Logf("throttled periods in the history: %.0f%% before, %.0f%% after %s",
			advise.Measured(before).ThrottledRatio()*100, advise.Measured(after).ThrottledRatio()*100, alter)
		return ""
	})
}

// The workload of TestKernelAdviseFromHistory: every gap a query of two
// threads that burn burn of CPU time each, 8 times. The queries are
// burners (kerneltest.Burner) started with `poolagent run` before the
// bursts, so each burst is the same work at once whatever a process's
// start costs here, and the work is CPU time however slowly the host
// runs it. On a host the burns are short (60 ms, 500 ms apart); where a
// shell's start costs more than 3 ms of CPU (the test VM's emulated
// CPUs) they are 100 ms, 1 s apart, so that the daemon's reads, which
// come late there, still see each burst's periods.
//
// A burst is 2 × burn against a quota of 40 ms per 100 ms period, at
// both the pool's level and its query's, whose period timers run at
// phases of their own. Which level runs out first is the kernel's race;
// a burst of only 60 ms ended while the pool held the query back in
// most bursts (1 or 2 of 8 throttled at the query level, and sometimes
// none); one of 120 ms outlasts the pool's refill and meets the
// query's own limit again and again (14 to 21 query-level throttled
// periods in each of 5 runs).
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
	return 60 * time.Millisecond, 500 * time.Millisecond
}

// runHistoryBursts starts the bursts' queries in pool app through the
// daemon at socket, runs them every gap, then writes the daemon's
// history of the pool since the bursts began with `poolagent record
// --from-daemon` to trace and returns it, and since: how long ago the
// bursts began (from an idle interval before them), for --since.
func runHistoryBursts(t *testing.T, socket string, burn, gap time.Duration, trace string) (tr *history.Trace, since func() time.Duration) {
	t.Helper()
	// The burners start through this binary as poolagent run, which
	// execs env, which execs this binary as the burner.
	t.Setenv(envAsMain, "1")
	via := []string{os.Args[0], "run", "--socket", socket, "--pool", "app", "--", "env", "-u", envAsMain}
	queries := make([]*kerneltest.Burner, historyBursts)
	for k := range queries {
		queries[k] = kerneltest.StartBurnerVia(t, kerneltest.Burn{For: burn, Clock: kerneltest.CPUTime, Threads: 2}, via...)
	}
	time.Sleep(500 * time.Millisecond) // idle intervals first
	start := time.Now()
	since = func() time.Duration { return (time.Since(start) + 200*time.Millisecond).Round(time.Millisecond) }
	for k, q := range queries {
		time.Sleep(time.Until(start.Add(time.Duration(k) * gap)))
		if err := q.Go(); err != nil {
			t.Fatal(err)
		}
	}
	var used time.Duration
	for _, q := range queries {
		cpu, err := q.Wait()
		if err != nil {
			t.Fatalf("a burst's query: %v", err)
		}
		used += cpu
	}
	time.Sleep(300 * time.Millisecond) // the last intervals sampled
	output(t, "record", "--from-daemon", "--socket", socket, "--pool", "app", "--since", since().String(), "-o", trace)
	f, err := os.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err = history.ParseTrace(trace, f)
	if err != nil {
		t.Fatal(err)
	}
	m := advise.Measured(tr)
	t.Logf("%s: %d intervals, %d of %d periods throttled (%d at the query level), %d µs throttled (%d in queries), usage %d µs (the burns %d µs, the queries' processes %d µs in all)",
		filepath.Base(trace), len(tr.Samples), m.NrThrottled, m.NrPeriods, m.QueryNrThrottled, m.ThrottledUsec, m.QueryThrottledUsec,
		m.UsageUsec, 2*historyBursts*burn.Microseconds(), used.Microseconds())
	return tr, since
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
