package fleet

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchWindow is how long BenchmarkFleetNodes loads each size:
// $POOLAGENT_FLEET_BENCH_SECONDS, 10 s by default.
func benchWindow(b *testing.B) time.Duration {
	s := os.Getenv("POOLAGENT_FLEET_BENCH_SECONDS")
	if s == "" {
		return 10 * time.Second
	}
	sec, err := strconv.Atoi(s)
	if err != nil || sec < 1 || sec > 600 {
		b.Fatalf("POOLAGENT_FLEET_BENCH_SECONDS=%q: want whole seconds from 1 to 600", s)
	}
	return time.Duration(sec) * time.Second
}

// spread divides clients over n nodes, the first ones taking one more
// when they do not divide evenly.
func spread(clients, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = clients / n
		if i < clients%n {
			out[i]++
		}
	}
	return out
}

// rssOf is the resident memory of the processes, summed.
func rssOf(b *testing.B, pids []int) int64 {
	var sum int64
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			b.Fatal(err)
		}
		for line := range strings.Lines(string(raw)) {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				sum += kb << 10
			}
		}
	}
	return sum
}

// nodesFigures are one size's figures of BenchmarkFleetNodes.
type nodesFigures struct {
	nodes, admissions   int
	failed              int
	addedP50, addedP99  time.Duration
	eventsPerAdmPerNode float64
	bytesPerAdmPerNode  float64
	nodesCPU            time.Duration
	nodesIdlePct        float64 // of one CPU, every node at rest
	maxRSS, sumRSS      int64
	// From the members, filled in by fleetNodes.
	membersCPU, membersIdle time.Duration
	writes                  int64
	membersRSS              int64
}

// summarize adds up the nodes' results: the latencies of every node
// together, the watch figures as each node's mean per admission of the
// whole cluster.
func summarize(rs []benchNodeResult, window time.Duration) nodesFigures {
	f := nodesFigures{nodes: len(rs)}
	var fleet, single []time.Duration
	var events, bytes int64
	for _, r := range rs {
		f.admissions += r.Admissions
		f.failed += r.Failed
		fleet, single = append(fleet, r.Fleet...), append(single, r.Single...)
		events, bytes = events+r.WatchEvents, bytes+r.WatchBytes
		f.nodesCPU += r.CPU
		if r.RestWall > 0 {
			f.nodesIdlePct += 100 * r.RestCPU.Seconds() / r.RestWall.Seconds()
		}
		f.maxRSS = max(f.maxRSS, r.MaxRSS)
		f.sumRSS += r.MaxRSS
	}
	if f.admissions == 0 || len(rs) == 0 {
		return f
	}
	f.addedP50 = quantile(fleet, 0.5) - quantile(single, 0.5)
	f.addedP99 = quantile(fleet, 0.99) - quantile(single, 0.99)
	per := float64(f.admissions) * float64(len(rs))
	f.eventsPerAdmPerNode, f.bytesPerAdmPerNode = float64(events)/per, float64(bytes)/per
	return f
}

func (f nodesFigures) report(b *testing.B, window, rest time.Duration) {
	adm := float64(f.admissions)
	b.ReportMetric(adm/window.Seconds(), "admissions/s")
	b.ReportMetric(float64(f.failed), "failed")
	b.ReportMetric(ms(f.addedP50), "added-p50-ms")
	b.ReportMetric(ms(f.addedP99), "added-p99-ms")
	b.ReportMetric(f.eventsPerAdmPerNode, "events/adm/node")
	b.ReportMetric(f.bytesPerAdmPerNode, "bytes/adm/node")
	// Everything leaving the members: every node watches every event.
	b.ReportMetric(f.eventsPerAdmPerNode*float64(f.nodes)*adm/window.Seconds(), "fanout-events/s")
	b.ReportMetric(float64(f.writes)/adm, "etcd-writes/adm")
	b.ReportMetric(100*f.membersCPU.Seconds()/window.Seconds(), "members-cpu-%")
	b.ReportMetric(ms(f.membersCPU)/adm, "members-cpu-ms/adm")
	b.ReportMetric(100*f.membersIdle.Seconds()/rest.Seconds(), "members-idle-cpu-%")
	b.ReportMetric(ms(f.nodesCPU)/adm, "nodes-cpu-ms/adm")
	b.ReportMetric(f.nodesIdlePct, "nodes-idle-cpu-%")
	b.ReportMetric(float64(f.maxRSS)/(1<<20), "node-max-rss-MiB")
	b.ReportMetric(float64(f.sumRSS)/(1<<20), "nodes-rss-MiB")
	b.ReportMetric(float64(f.membersRSS)/(1<<20), "members-rss-MiB")
}
