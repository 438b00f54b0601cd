package daemon

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/internal/protocol"
)

// BenchmarkCostByPools is the real daemon's CPU (/proc/PID/stat, as
// BenchmarkRunTrue reads it) against the number of pools, 10, 100 and
// 1,000, each pool a cgroup of its own on a fresh root. For each count it
// reports:
//
//   - ms-cpu-per-pool-s: the daemon's CPU per pool per second at rest (no
//     query), over restFor;
//   - ms-cpu-per-running-s: per running query per second, over the same
//     span with `sleepers` queries sleeping in place, less the rest rate;
//   - ms-cpu-start: per query start and end (`poolagent-run -p P --
//     /bin/true`, each in a pool other than the last, so that every start
//     and every end changes the active set and is re-planned), less the
//     rest rate over the runs' wall time;
//
// and, from 100 pools on, each figure over the 10-pool one of the same
// run (the x10-* metrics): the machine is shared, so only those ratios
// are to be compared across runs. b.N is the number of starts.
func BenchmarkCostByPools(b *testing.B) {
	slim := benchBinary(b, "poolagent-run")
	var first map[string]float64
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("pools=%d", n), func(b *testing.B) {
			got := costByPools(b, slim, n)
			for name, v := range got {
				b.ReportMetric(v, name)
				if n != 10 && first[name] > 0 {
					b.ReportMetric(v/first[name], "x10-"+strings.TrimPrefix(name, "ms-cpu-"))
				}
			}
			if n == 10 {
				first = got // the last run of 10 pools, b.N starts
			}
		})
	}
}

const (
	restFor  = 8 * time.Second
	sleepers = 50
)

// costByPools measures one pool count for BenchmarkCostByPools.
func costByPools(b *testing.B, slim string, n int) map[string]float64 {
	var ddl strings.Builder
	for i := range n {
		fmt.Fprintf(&ddl, "CREATE RESOURCE POOL p%04d WITH (CONCURRENT_QUERY_LIMIT=%d, RESOURCES_WEIGHT=%d, TOTAL_CPU_LIMIT_PERCENT_PER_NODE=%d);\n",
			i, sleepers+1, 10+i%90, 10+i%90)
	}
	socket, pid := benchDaemon(b, ddl.String(), "--max-conns-per-user", "2000")
	msec := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	// The daemon's first plan and sampling settle before anything is timed.
	time.Sleep(time.Second)
	// rate is the daemon's CPU per second of wall time while fn runs.
	rate := func(fn func()) (perSecond float64, wall time.Duration) {
		cpu, start := kerneltest.ProcessCPU(b, pid), time.Now()
		fn()
		wall = time.Since(start)
		return msec(kerneltest.ProcessCPU(b, pid)-cpu) / wall.Seconds(), wall
	}
	rest, _ := rate(func() { time.Sleep(restFor) })
	var running []*exec.Cmd
	for i := range sleepers {
		cmd := exec.Command(slim, "--socket", socket, "-p", fmt.Sprintf("p%04d", i%n), "--", "/bin/sleep", "30")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		running = append(running, cmd)
	}
	b.Cleanup(func() {
		for _, cmd := range running {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	waitRunning(b, socket, sleepers)
	busy, _ := rate(func() { time.Sleep(restFor) })
	for _, cmd := range running {
		cmd.Process.Kill()
		cmd.Wait()
	}
	running = nil
	waitRunning(b, socket, 0)
	b.ResetTimer()
	starts, wall := rate(func() {
		for i := range b.N {
			out, err := exec.Command(slim, "--socket", socket, "-p", fmt.Sprintf("p%04d", i%n), "--", "/bin/true").CombinedOutput()
			if err != nil {
				b.Fatalf("poolagent-run -- /bin/true: %v: %s", err, out)
			}
		}
		waitRunning(b, socket, 0)
	})
	b.StopTimer()
	return map[string]float64{
		"ms-cpu-per-pool-s":    rest / float64(n),
		"ms-cpu-per-running-s": (busy - rest) / sleepers,
		"ms-cpu-start":         (starts - rest) * wall.Seconds() / float64(b.N),
	}
}

// waitRunning waits until the daemon at socket has want queries running
// over all its pools.
func waitRunning(b *testing.B, socket string, want int) {
	b.Helper()
	waitFor(b, fmt.Sprintf("%d running queries", want), func() bool {
		r, err := ask(socket, protocol.Request{Op: protocol.OpPools}, 5*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		total := 0
		for _, p := range r.Pools {
			total += p.RunningQueries
		}
		return total == want
	})
}
