package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/advise"
	"github.com/poolagent/poolagent/internal/history"
	"github.com/poolagent/poolagent/internal/kerneltest"
)

// adviseBursts is the workload of TestKernelAdvise: every burstGap, two
// single-thread processes in the pool each burn 25 ms of CPU at once,
// 50 ms in all, against a quota of 40 ms per 100 ms period. The gap is not
// a whole number of periods, so the bursts meet the period timer at
// different phases.
const (
	adviseBursts   = 8
	adviseBurstGap = 430 * time.Millisecond
	adviseBurn     = 25 * time.Millisecond
)

// TestKernelAdvise is the advisor's promise on the real kernel: a pool
// throttled over its budget is recorded with `poolagent record`, `poolagent
// advise` prints a change, the change is applied with `poolagent apply`,
// the same workload runs again, and its measured share of throttled
// periods is within the budget. `advise --verify` then replays the first
// recording under the advice and reports the budget met. Both are timing:
// a miss while the machine was starved (kerneltest.Root.Retry) is run again,
// up to three times, and said so.
func TestKernelAdvise(t *testing.T) {
	need := kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1, kerneltest.V2}, Controllers: []string{"cpuacct"}}
	h := kerneltest.Require(t, need)
	root := h.NewRoot(t, need)
	root.Favour(t)
	dir := t.TempDir()
	pools := filepath.Join(dir, "pools.sql")
	poolFile := "CREATE RESOURCE POOL app WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 20);\n"
	apply := func() {
		t.Helper()
		if err := os.WriteFile(pools, []byte(poolFile), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, stderr, err := runApp(t, "apply", "--pools", pools, "--root", root.Path, "--cpus", "2", "--memory", "1073741824"); err != nil {
			t.Fatalf("apply: %v\n%s", err, stderr)
		}
	}
	apply()

	before := runBursts(t, root, filepath.Join(dir, "before.json"))
	const budget = 0.1
	if r := ratio(before); r <= budget {
		t.Fatalf("the workload was throttled in %.0f%% of periods, not over the budget of %.0f%%: the test proves nothing (a loaded host?)", r*100, budget*100)
	}
	out, stderr, err := runApp(t, "advise", "--trace", filepath.Join(dir, "before.json"), "--max-throttled-periods", "10%")
	if err != nil {
		t.Fatalf("advise: %v\n%s", err, stderr)
	}
	t.Logf("advise:\n%s", out)
	var alter string
	for _, l := range strings.Split(out, "\n") {
		if s := strings.TrimSpace(l); strings.HasPrefix(s, "ALTER RESOURCE POOL app SET (") {
			alter = s
		}
	}
	if alter == "" {
		t.Fatalf("advise printed no ALTER RESOURCE POOL app for a pool over its budget")
	}
	poolFile += alter + "\n"
	apply()

	// The workload's throttling and --verify's are timing: judged only
	// while the machine gives the test its CPU (kerneltest.Root.Retry).
	root.Retry(t, 3, func(n int) string {
		after := runBursts(t, root, filepath.Join(dir, fmt.Sprintf("after-%d.json", n)))
		if r := ratio(after); r > budget {
			return fmt.Sprintf("after %s the workload was throttled in %.0f%% of periods, over the budget of %.0f%%", alter, r*100, budget*100)
		}
		t.Logf("throttled periods: %.0f%% before, %.0f%% after %s", ratio(before)*100, ratio(after)*100, alter)
		return ""
	})

	t.Setenv(envAsMain, "1") // the workers --verify starts are this binary as poolagent
	root.Retry(t, 3, func(int) string {
		out, stderr, err := runApp(t, "advise", "--trace", filepath.Join(dir, "before.json"), "--max-throttled-periods", "10%", "--verify", "--quiet")
		if err != nil || !strings.Contains(out, "budget at most 10% of periods throttled: met") {
			return fmt.Sprintf("advise --verify: %v\n%s\n%s", err, out, stderr)
		}
		t.Logf("advise --verify:\n%s", out[strings.Index(out, "\nverify:")+1:])
		return ""
	})
}

// runBursts runs the workload in pool app below root while `poolagent
// record` records the pool into trace, and returns the trace.
func runBursts(t *testing.T, root kerneltest.Root, trace string) *history.Trace {
	t.Helper()
	var burners []*kerneltest.Burner
	for range 2 * adviseBursts {
		b := kerneltest.StartBurner(t, kerneltest.Burn{For: adviseBurn, Clock: kerneltest.CPUTime})
		for _, d := range append([]string{root.Path}, root.Twins...) {
			if err := os.WriteFile(filepath.Join(d, "app", "cgroup.procs"), []byte(strconv.Itoa(b.PID)), 0); err != nil {
				t.Fatalf("place burner %d: %v", b.PID, err)
			}
		}
		burners = append(burners, b)
	}
	recorded := make(chan error, 1)
	total := adviseBurstGap*adviseBursts + 500*time.Millisecond
	go func() {
		_, stderr, err := runApp(t, "record", "--root", root.Path, "--pool", "app", "--for", total.String(), "-o", trace)
		if err != nil {
			t.Logf("record: %s", stderr)
		}
		recorded <- err
	}()
	time.Sleep(200 * time.Millisecond) // the recording's first interval is idle
	start := time.Now()
	for k := range adviseBursts {
		time.Sleep(time.Until(start.Add(time.Duration(k) * adviseBurstGap)))
		for _, b := range burners[2*k : 2*k+2] {
			if err := b.Go(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, b := range burners {
		if _, err := b.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-recorded; err != nil {
		t.Fatalf("record: %v", err)
	}
	f, err := os.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := history.ParseTrace(trace, f)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(trace); err == nil {
		t.Logf("%s:\n%s", filepath.Base(trace), b)
	}
	m := advise.Measured(tr)
	t.Logf("%s: %d of %d periods throttled, %d µs throttled, usage %d µs (want about %d)", filepath.Base(trace), m.NrThrottled, m.NrPeriods,
		m.ThrottledUsec, m.UsageUsec, 2*adviseBursts*adviseBurn.Microseconds())
	return tr
}

// ratio is a trace's measured share of throttled periods.
func ratio(t *history.Trace) float64 { return advise.Measured(t).ThrottledRatio() }
