package simulate

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/poolagent/poolagent/internal/cpulimit"
)

// queryStream is the workload an advisor replays: a pool capped at 4
// CPUs on an 8-CPU node, every query in a group of its own under the
// pool, as poolagent runs them, with a per-query cap of 2 CPUs. n queries
// arrive over n seconds in bursts of four within 200 ms every 4 s; each
// has 1-8 threads and 10-400 ms of CPU, one in five is a heavy one of
// 0.5-2 s of CPU on 8 threads, so both the queries and the pool are
// throttled. The same n always gives the same host.
func queryStream(n int) Host {
	const ms = 1000
	r := rand.New(rand.NewPCG(uint64(n), 14))
	h := Host{CPUs: 8, TickUsec: ms,
		Groups: []Group{{Name: "pool", Limit: cpulimit.Limit{QuotaUsec: 400 * ms, PeriodUsec: 100 * ms}}}}
	for i := range n {
		q := fmt.Sprintf("q%d", i)
		h.Groups = append(h.Groups, Group{Name: q, Parent: "pool", Limit: cpulimit.Limit{QuotaUsec: 200 * ms, PeriodUsec: 100 * ms}})
		t := HostTask{Name: q, Group: q, ArriveUsec: int64(i-i%4)*1000*ms + int64(r.IntN(200))*ms,
			NeedUsec: int64(10+r.IntN(391)) * ms, Threads: 1 + r.IntN(8)}
		if r.IntN(5) == 0 {
			t.NeedUsec, t.Threads = int64(500+r.IntN(1501))*ms, 8
		}
		h.Tasks = append(h.Tasks, t)
	}
	return h
}

// queryStreamSizes are the numbers of queries (and seconds) of the
// scaling benchmark.
var queryStreamSizes = []int{60, 240, 600, 1800, 3600}

// BenchmarkQueryStream replays queryStream(n) with both models, so the
// cost per query can be compared across n and between the models in one
// run (scripts/bench-simulate.sh prints the table).
func BenchmarkQueryStream(b *testing.B) {
	for _, n := range queryStreamSizes {
		h := queryStream(n)
		b.Run(fmt.Sprintf("n=%d/kernel", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := RunKernel(h, DefaultKernelParams()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/query")
		})
		b.Run(fmt.Sprintf("n=%d/host", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := RunHost(h, HostOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/query")
		})
	}
}
