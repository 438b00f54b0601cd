package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/kerneltest"
)

// BenchmarkStartBesideSleepers: what a host's long-running queries cost
// everyone else's starts. A real daemon on a fresh pool root; b.N/2 starts
// of `poolagent-run -- /bin/true` with nothing else running, then 446
// in-place queries of `sleep` are started and left to run (their polls,
// where there are polls, backed off for 5 s), and b.N starts beside them;
// then the sleepers are killed, and once the daemon has ended them the
// other b.N/2 quiet starts are made. Quiet starts both before and after
// the sleepers, so that a host whose load drifts over the run (a busy
// 2-core host's does, by seconds) does not count for or against them.
// Reported: the quiet starts' median and p99 and the beside ones', their
// ratios (beside/quiet), the quiet p99 after over before (how far the host
// drifted), the daemon's CPU per second at rest over 10 s, with the
// sleepers and before they came (at-rest-quiet; 10 ms ticks, so to 1 ms/s),
// and its CPU per start in each phase (its CPU over the phase over its
// starts: less at the mercy of a busy host than the latencies).
// BENCH_FLAGS adds daemon flags (BENCH_FLAGS="--history-window 0" shows
// what the history costs). On the host (v1):
//
//	sudo go test -run '^$' -bench StartBesideSleepers -benchtime 1000x ./internal/daemon
//
// and in the VM (v2) with the binaries built beforehand, as
// BenchmarkCostAtScale's comment shows.
func BenchmarkStartBesideSleepers(b *testing.B) {
	const sleepers = 446
	socket, pid := benchDaemon(b, "", strings.Fields(os.Getenv("BENCH_FLAGS"))...)
	slim := benchBinary(b, "poolagent-run")
	// starts makes n starts and returns their wall times, sorted, and
	// the daemon's CPU over them.
	starts := func(n int) ([]time.Duration, time.Duration) {
		var ds []time.Duration
		cpu0 := kerneltest.ProcessCPU(b, pid)
		for range n {
			cmd := exec.Command(slim, "--socket", socket, "--", "/bin/true")
			t0 := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("poolagent-run -- /bin/true: %v: %s", err, out)
			}
			ds = append(ds, time.Since(t0))
		}
		cpu := kerneltest.ProcessCPU(b, pid) - cpu0
		slices.Sort(ds)
		return ds, cpu
	}
	// atRest is the daemon's CPU over a window of 10 s, 5 s after the
	// last thing it did.
	const window = 10 * time.Second
	atRest := func() time.Duration {
		time.Sleep(5 * time.Second)
		cpu0 := kerneltest.ProcessCPU(b, pid)
		time.Sleep(window)
		return kerneltest.ProcessCPU(b, pid) - cpu0
	}
	half := (b.N + 1) / 2
	b.ResetTimer()
	before, beforeCPU := starts(half)
	b.StopTimer()
	restQuiet := atRest()

	running := startInPlace(b, slim, socket, sleepers, func(int) string { return "" }, "/bin/sleep", "600")
	restBeside := atRest()

	b.StartTimer()
	beside, besideCPU := starts(b.N)
	b.StopTimer()

	for _, c := range running {
		c.Process.Kill()
		c.Wait()
	}
	waitRunning(b, socket, 0)
	b.StartTimer()
	after, afterCPU := starts(b.N - half)
	b.StopTimer()
	quiet := slices.Sorted(slices.Values(slices.Concat(before, after)))

	msec := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p99 := func(ds []time.Duration) time.Duration { return ds[len(ds)*99/100] }
	b.ReportMetric(msec(median(quiet)), "ms-quiet-median")
	b.ReportMetric(msec(p99(quiet)), "ms-quiet-p99")
	b.ReportMetric(msec(median(beside)), "ms-beside-median")
	b.ReportMetric(msec(p99(beside)), "ms-beside-p99")
	b.ReportMetric(float64(median(beside))/float64(median(quiet)), "median-ratio")
	b.ReportMetric(float64(p99(beside))/float64(p99(quiet)), "p99-ratio")
	if len(after) > 0 {
		b.ReportMetric(float64(p99(after))/float64(p99(before)), "quiet-p99-after/before")
	}
	b.ReportMetric(msec(restQuiet)/window.Seconds(), "daemon-cpu-ms/s-at-rest-quiet")
	b.ReportMetric(msec(restBeside)/window.Seconds(), "daemon-cpu-ms/s-at-rest")
	b.ReportMetric(msec(beforeCPU+afterCPU)/float64(b.N), "daemon-cpu-ms/start-quiet")
	b.ReportMetric(msec(besideCPU)/float64(b.N), "daemon-cpu-ms/start-beside")
}

// startInPlace starts n in-place queries, `poolagent-run --socket socket
// -p pool(i) -- argv...` (the default pool where pool(i) is ""), and
// waits until each client has become its command (its /proc/PID/comm is
// argv[0]'s base name): they run while the benchmark does, and are killed
// by PID when it ends. They start in batches of 32, below the daemon's
// limit of admitted, not yet started queries per user (64).
func startInPlace(b *testing.B, slim, socket string, n int, pool func(i int) string, argv ...string) []*exec.Cmd {
	b.Helper()
	var started []*exec.Cmd
	b.Cleanup(func() {
		for _, c := range started {
			c.Process.Kill()
			c.Wait()
		}
	})
	var stderr lockedBuffer
	comm := filepath.Base(argv[0])
	isCommand := func(c *exec.Cmd) bool {
		got, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c.Process.Pid))
		return err == nil && strings.TrimSpace(string(got)) == comm
	}
	for len(started) < n {
		batch := started[len(started):]
		for range min(32, n-len(started)) {
			args := []string{"--socket", socket}
			if p := pool(len(started)); p != "" {
				args = append(args, "-p", p)
			}
			c := exec.Command(slim, append(append(args, "--"), argv...)...)
			c.Stderr = &stderr
			if err := c.Start(); err != nil {
				b.Fatal(err)
			}
			started = append(started, c)
			batch = append(batch, c)
		}
		for deadline := time.Now().Add(time.Minute); !allOf(batch, isCommand); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("of %d in-place %s queries, a batch did not start within a minute; their clients said:\n%.2000s",
					len(started), comm, stderr.String())
			}
		}
	}
	return started
}

// allOf reports whether ok holds for every command.
func allOf(cs []*exec.Cmd, ok func(*exec.Cmd) bool) bool {
	for _, c := range cs {
		if !ok(c) {
			return false
		}
	}
	return true
}
