package simulate

import (
	"fmt"
	"testing"

	"github.com/poolagent/poolagent/internal/cpulimit"
)

// benchHost is a busy node: 16 CPUs, 4 pools of 3 query groups each,
// 48 tasks of 1-8 threads arriving over 5 s of 1 ms ticks.
func benchHost() Host {
	const ms = 1000
	h := Host{CPUs: 16, TickUsec: ms}
	for p := range 4 {
		pool := fmt.Sprintf("pool%d", p)
		h.Groups = append(h.Groups, Group{Name: pool, Limit: cpulimit.Limit{QuotaUsec: int64(300+100*p) * ms, PeriodUsec: 100 * ms, Weight: int64(100 * (p + 1))}})
		for q := range 3 {
			h.Groups = append(h.Groups, Group{Name: fmt.Sprintf("%s-q%d", pool, q), Parent: pool, Limit: cpulimit.Limit{QuotaUsec: 150 * ms, PeriodUsec: 100 * ms}})
		}
	}
	for i := range 48 {
		h.Tasks = append(h.Tasks, HostTask{
			Name:       fmt.Sprintf("t%d", i),
			Group:      fmt.Sprintf("pool%d-q%d", i%4, i%3),
			ArriveUsec: int64(i*100) * ms,
			NeedUsec:   int64(200+50*(i%5)) * ms,
			Threads:    1 + i%8,
		})
	}
	return h
}

// BenchmarkRunHost simulates benchHost to the end, with a trace of the
// first 3 periods as `poolagent simulate` asks for.
func BenchmarkRunHost(b *testing.B) {
	h := benchHost()
	run, err := RunHost(h, HostOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RunHost(h, HostOptions{TraceTicks: TimelineTicks(h, 3)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(run.Ticks), "ticks")
}
