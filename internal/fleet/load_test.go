package fleet

import (
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
)

// TestLoadThresholdAcrossNodes: DATABASE_LOAD_CPU_THRESHOLD = 50 on two
// nodes that published 80% and 0% (a mean of 40%). The first query on a
// starts and reserves 10% of a (40 + 10 is not below 50), so the next one
// on a waits, and one arriving on b waits behind it though b reserved
// nothing: only the head of the queue may start under a threshold. At a's
// next refresh its reservation goes and both start, in arrival order.
func TestLoadThresholdAcrossNodes(t *testing.T) {
	eps := sharedCluster(t)
	l := admission.UnlimitedLimits()
	l.LoadCPUThresholdPercent, l.QueueSize = 50, 10
	pools := map[string]admission.Limits{"cpu": l}
	open := func(name string) *node {
		return openNodeConfig(t, Config{
			Endpoints: eps, Cluster: "load", Node: name, RequestTimeout: 10 * time.Second,
			Load: admission.LoadConfig{RefreshInterval: time.Hour}, // refreshed by the test alone
		}, pools)
	}
	a, b := open("a"), open("b")
	now := time.Now()
	a.Sample(now, 80)
	b.Sample(now, 0)
	waitFor(t, func() bool { return a.Load().AveragePercent == 40 && b.Load().AveragePercent == 40 },
		"both nodes see the cluster's load at 40%%")
	admit(t, a, "cpu", 10*time.Second)
	second := queue(t, a, "cpu")
	third := queue(t, b, "cpu")
	b.none(t, 500*time.Millisecond) // b's query is not the head
	a.none(t, 0)
	a.Sample(now.Add(2*time.Hour), 0) // a refreshes: its reservation goes
	if ev := a.final(t, 10*time.Second); ev.ID != second || ev.Err != nil {
		t.Fatalf("after a's refresh, a got %+v; want query %d to start", ev, second)
	}
	if ev := b.final(t, 10*time.Second); ev.ID != third || ev.Err != nil {
		t.Fatalf("after the head started, b got %+v; want query %d to start", ev, third)
	}
}
