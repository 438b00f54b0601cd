package fleet

import (
	"slices"
	"testing"
	"time"
)

// TestSpread: the clients of BenchmarkFleetNodes go to its nodes evenly,
// all of them.
func TestSpread(t *testing.T) {
	for _, c := range []struct {
		clients, nodes int
		want           []int
	}{
		{100, 3, []int{34, 33, 33}},
		{100, 10, slices.Repeat([]int{10}, 10)},
		{100, 50, slices.Repeat([]int{2}, 50)},
		{2, 3, []int{1, 1, 0}},
	} {
		if got := spread(c.clients, c.nodes); !slices.Equal(got, c.want) {
			t.Errorf("spread(%d, %d) = %v, want %v", c.clients, c.nodes, got, c.want)
		}
	}
}

// TestSummarize: the figures of BenchmarkFleetNodes add up its nodes'
// results: latencies of all nodes together, less the single host's; watch
// figures per node per admission of the whole cluster.
func TestSummarize(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	f := summarize([]benchNodeResult{
		{Admissions: 2, Failed: 1, Fleet: ms(3, 5), Single: ms(0, 0), WatchEvents: 8, WatchBytes: 800, CPU: time.Second, MaxRSS: 10, RestCPU: 30 * time.Millisecond, RestWall: 3 * time.Second},
		{Admissions: 2, Fleet: ms(4, 9), Single: ms(1, 1), WatchEvents: 8, WatchBytes: 400, CPU: time.Second, MaxRSS: 30, RestCPU: 60 * time.Millisecond, RestWall: 2 * time.Second},
	}, time.Second)
	want := nodesFigures{
		nodes: 2, admissions: 4, failed: 1,
		// The fleet's sorted 3, 4, 5, 9 against 0, 0, 1, 1.
		addedP50: 5*time.Millisecond - time.Millisecond, addedP99: 9*time.Millisecond - time.Millisecond,
		eventsPerAdmPerNode: 2, bytesPerAdmPerNode: 150,
		nodesCPU: 2 * time.Second, nodesIdlePct: 1 + 3, maxRSS: 30, sumRSS: 40,
	}
	if f != want {
		t.Errorf("summarize = %+v, want %+v", f, want)
	}
	if f := summarize(nil, time.Second); f != (nodesFigures{}) {
		t.Errorf("summarize(nil) = %+v, want zero", f)
	}
}
