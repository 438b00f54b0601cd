package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
)

// TestStrictSlots: a pool with strict slots (C = 2) full with the queries
// of a node killed with SIGKILL: its slots outlive its lease, so a query
// queued on another node does not start (0 over-admission) until an
// administrator releases the dead node; then it starts at once. The time
// it was blocked is the cost, logged.
func TestStrictSlots(t *testing.T) {
	eps := sharedCluster(t)
	const cluster = "strict"
	ttl := 2 * time.Second
	l := limits(2, 10)
	l.StrictSlots = true
	pools := map[string]admission.Limits{"lic": l}
	dead := startNode(t, nodeSpec{Endpoints: eps, Cluster: cluster, Node: "dead", Pool: "lic", TTL: ttl, C: 2, Q: 10, Submit: 2, Strict: true})
	a := openNode(t, eps, cluster, "a", pools, ttl)
	waitFor(t, func() bool { return poolStats(a.Backend, "lic").Running == 2 }, "a sees the dead node's 2 queries")
	q := queue(t, a, "lic")
	killed := time.Now()
	dead.Process.Kill()
	dead.Wait()
	// Two TTLs and etcd's expiry check: a lease pool would have started q.
	a.none(t, 2*ttl+time.Second)
	if keys := queryKeys(t, eps, cluster); len(keys) != 3 {
		t.Fatalf("keys %v: want the dead node's 2 slots and q's queue key", keys)
	}
	n, err := a.ReleaseNode(context.Background(), "dead")
	if err != nil || n != 2 {
		t.Fatalf("release: %d slots, %v; want 2", n, err)
	}
	if ev := a.final(t, 10*time.Second); ev.ID != q || ev.Err != nil {
		t.Fatalf("after the release a got %+v; want q to start", ev)
	}
	t.Logf("strict slots: 0 queries over C = 2 while the node was dead; q blocked %s from the kill (%.1f TTL), until the release",
		time.Since(killed).Round(time.Millisecond), time.Since(killed).Seconds()/ttl.Seconds())
	a.Leave(q, time.Now())
	waitFor(t, func() bool { return len(queryKeys(t, eps, cluster)) == 0 }, "no query key left: %v", queryKeys(t, eps, cluster))
}

// TestStrictSlotsRestart: a node with 2 queries in strict slots stops
// without a word; the daemon that comes back under its name adopts the one
// still running, which keeps its slot, and one TTL later the slot of the
// one that ended meanwhile goes to a query waiting on another node.
func TestStrictSlotsRestart(t *testing.T) {
	eps := sharedCluster(t)
	const cluster = "strict-restart"
	ttl := 2 * time.Second
	l := limits(2, 10)
	l.StrictSlots = true
	pools := map[string]admission.Limits{"lic": l}
	a := openNode(t, eps, cluster, "a", pools, ttl)
	first, err := Open(context.Background(), Config{Endpoints: eps, Cluster: cluster, Node: "b", TTL: ttl, RequestTimeout: 10 * time.Second}, pools)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		id, _, _ := first.Submit("lic", "alice", time.Now())
		if ev := <-first.Events(); ev.ID != id || ev.Err != nil || ev.Queued {
			t.Fatalf("first run of b: %+v; want query %d to start", ev, id)
		}
	}
	first.cancel() // gone without deleting anything, as a crash
	first.wg.Wait()
	first.cli.Close()
	q := queue(t, a, "lic")
	b := openNode(t, eps, cluster, "b", pools, ttl)
	adopted := b.Adopt("lic", "", time.Now())
	// The adopted query holds one slot, the other is released a TTL after
	// b came back: q starts then, and never with 3 running.
	if ev := a.final(t, ttl+10*time.Second); ev.ID != q || ev.Err != nil {
		t.Fatalf("a got %+v; want q to start once b released the slot of its ended query", ev)
	}
	if p := poolStats(a.Backend, "lic"); p.Running != 2 {
		t.Fatalf("a sees %+v; want 2 running: b's adopted query and q", p)
	}
	b.Leave(adopted, time.Now())
	a.Leave(q, time.Now())
	waitFor(t, func() bool { return len(queryKeys(t, eps, cluster)) == 0 }, "no query key left: %v", queryKeys(t, eps, cluster))
}

// TestStrictSlotsPartition: a node holding both strict slots (C = 2) cut
// off from etcd for twice the TTL: its lease expires, but no query of
// another node starts in its slots (0 over-admission); back in touch it
// still holds them, registers nothing again, and the first of its queries
// to end hands its slot to the query waiting elsewhere.
func TestStrictSlotsPartition(t *testing.T) {
	eps := sharedCluster(t)
	const cluster = "strict-partition"
	ttl := 2 * time.Second
	l := limits(2, 10)
	l.StrictSlots = true
	pools := map[string]admission.Limits{"lic": l}
	px := startProxy(t, eps[0])
	c := openNodeConfig(t, Config{Endpoints: []string{px.url()}, Cluster: cluster, Node: "c", TTL: ttl, RequestTimeout: time.Second}, pools)
	a := openNode(t, eps, cluster, "a", pools, ttl)
	c1, c2 := admit(t, c, "lic", 10*time.Second), admit(t, c, "lic", 10*time.Second)
	q := queue(t, a, "lic")
	px.sever()
	cut := time.Now()
	a.none(t, 2*ttl+time.Second)
	px.restore()
	waitFor(t, func() bool { return c.Health().Connected }, "c back in touch")
	if keys := queryKeys(t, eps, cluster); len(keys) != 3 {
		t.Fatalf("keys %v: want c's 2 slots and q's queue key", keys)
	}
	c.Leave(c1, time.Now())
	if ev := a.final(t, 10*time.Second); ev.ID != q || ev.Err != nil {
		t.Fatalf("after c1 ended a got %+v; want q to start", ev)
	}
	t.Logf("strict slots under a partition of %s (2 TTL): 0 over C = 2; q blocked %s, until c's query ended",
		2*ttl, time.Since(cut).Round(time.Millisecond))
	c.Leave(c2, time.Now())
	a.Leave(q, time.Now())
	waitFor(t, func() bool { return len(queryKeys(t, eps, cluster)) == 0 }, "no query key left: %v", queryKeys(t, eps, cluster))
}
