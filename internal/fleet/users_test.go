package fleet

import (
	"fmt"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
)

// fleetQuery is one query of a test: the node it was submitted on and its
// id there.
type fleetQuery struct {
	n  *node
	id admission.QueryID
}

// nextStart waits for the next start on any of nodes and returns it; a
// failure fails the test.
func nextStart(t *testing.T, nodes []*node, within time.Duration) fleetQuery {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, n := range nodes {
			select {
			case ev := <-n.events:
				if ev.Err != nil {
					t.Fatalf("node %s: query %d failed: %v", n.cfg.Node, ev.ID, ev.Err)
				}
				if !ev.Queued {
					return fleetQuery{n, ev.ID}
				}
			default:
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no query started within %s", within)
	return fleetQuery{}
}

// drainStarts returns the starts the nodes have told so far.
func drainStarts(t *testing.T, nodes []*node) []fleetQuery {
	t.Helper()
	var out []fleetQuery
	for _, n := range nodes {
		for len(n.events) > 0 {
			ev := <-n.events
			if ev.Err != nil {
				t.Fatalf("node %s: query %d failed: %v", n.cfg.Node, ev.ID, ev.Err)
			}
			if !ev.Queued {
				out = append(out, fleetQuery{n, ev.ID})
			}
		}
	}
	return out
}

// waitAll waits until every node's view of pool satisfies cond.
func waitAll(t *testing.T, nodes []*node, pool string, what string, cond func(admission.PoolStats) bool) {
	t.Helper()
	waitFor(t, func() bool {
		for _, n := range nodes {
			ok := false
			for _, p := range n.Pools() {
				ok = ok || p.Name == pool && cond(p)
			}
			if !ok {
				return false
			}
		}
		return true
	}, "%s", what)
}

// TestFairAcrossNodes: the case across 3 nodes on a real etcd. In
// a pool of 4 slots, user A queues 50 queries spread over the nodes (4
// run, 46 wait) and user B submits 1 a moment later on another node.
// Slots then free one at a time. Under QUEUE_POLICY='fair' B's query
// takes the first slot that frees, on whichever node it waits; under
// FIFO it starts after all of A's. Every node counts each user's queries
// cluster-wide.
func TestFairAcrossNodes(t *testing.T) {
	eps := sharedCluster(t)
	for _, tc := range []struct {
		name     string
		users    admission.UserLimits
		aheadOfB int
		bPlace   int
	}{
		{"fair", admission.UserLimits{Fair: true, HalfLife: time.Hour}, 0, 1},
		{"fifo", admission.UserLimits{}, 46, 47},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := limits(4, -1)
			l.Users = tc.users
			pools := map[string]admission.Limits{"shared": l}
			var nodes []*node
			for i := range 3 {
				nodes = append(nodes, openNode(t, eps, "fair-"+tc.name, fmt.Sprintf("n%d", i), pools, 0))
			}
			// An arrival that finds its node's view behind the cluster's
			// waits for the watch and starts a moment later: the starts
			// are counted, not their moments.
			var running []fleetQuery
			for i := range 50 {
				n := nodes[i%3]
				id, started, err := n.submitAs(t, "shared", "userA")
				if err != nil {
					t.Fatalf("A's query %d on %s: %v", i, n.cfg.Node, err)
				}
				if started {
					running = append(running, fleetQuery{n, id})
				}
			}
			waitAll(t, nodes, "shared", "A's 4 running and 46 queued", func(p admission.PoolStats) bool { return p.Running == 4 && p.Queued == 46 })
			running = append(running, drainStarts(t, nodes)...)
			if len(running) != 4 {
				t.Fatalf("%d of A's queries started, want 4", len(running))
			}
			b, started, err := nodes[1].submitAs(t, "shared", "userB")
			if err != nil || started {
				t.Fatalf("B's query: started %v, %v; want queued", started, err)
			}
			waitAll(t, nodes, "shared", "47 queued, A with 4 running and 46 queued, B with 1 queued, on every node", func(p admission.PoolStats) bool {
				return p.Queued == 47 && p.UsersRunning == 1 && p.UsersQueued == 2 && len(p.Users) == 2 &&
					p.Users[0] == admission.UserStats{User: "userA", Running: 4, Queued: 46} && p.Users[1] == admission.UserStats{User: "userB", Queued: 1}
			})
			pl, ok := nodes[1].Place(b, time.Now())
			if !ok || pl.Position != tc.bPlace || pl.User != "userB" || pl.UserQueued != 1 {
				t.Errorf("B's place %+v, %v; want position %d", pl, ok, tc.bPlace)
			}
			nodes[1].mu.Lock()
			token := nodes[1].queries[b].token
			nodes[1].mu.Unlock()
			seen := false
			for _, q := range nodes[0].Queries() {
				if q.Token == token {
					seen = true
					if q.Position != tc.bPlace {
						t.Errorf("n0 shows B's query at %d, want %d", q.Position, tc.bPlace)
					}
				}
			}
			if !seen {
				t.Errorf("n0 does not show B's query %s", token)
			}
			startedA := 0
			for {
				next := running[0]
				running = running[1:]
				next.n.Leave(next.id, time.Now())
				s := nextStart(t, nodes, 20*time.Second)
				if s == (fleetQuery{nodes[1], b}) {
					break
				}
				startedA++
				running = append(running, s)
			}
			if startedA != tc.aheadOfB {
				t.Errorf("%d of A's queued queries started before B's, want %d", startedA, tc.aheadOfB)
			}
		})
	}
}

// TestUserLimitsAcrossNodes: CONCURRENT_QUERY_LIMIT_PER_USER counts a
// user's queries on every node, and holds back only that user; the
// usage one node charges orders the queue on the others.
func TestUserLimitsAcrossNodes(t *testing.T) {
	eps := sharedCluster(t)
	l := limits(4, -1)
	l.Users = admission.UserLimits{Running: 2, Fair: true, HalfLife: time.Hour}
	pools := map[string]admission.Limits{"shared": l}
	var nodes []*node
	for i := range 3 {
		nodes = append(nodes, openNode(t, eps, "peruser", fmt.Sprintf("n%d", i), pools, 0))
	}
	var alice []fleetQuery
	for i := range 3 {
		n := nodes[i]
		id, _, err := n.submitAs(t, "shared", "alice")
		if err != nil {
			t.Fatalf("alice's query %d on %s: %v", i, n.cfg.Node, err)
		}
		alice = append(alice, fleetQuery{n, id})
	}
	waitAll(t, nodes, "shared", "one of alice's queries queued with the pool half empty", func(p admission.PoolStats) bool {
		return p.Running == 2 && p.Queued == 1
	})
	// The views can show both slots taken before the node whose start
	// took one has its answer: wait until just one query of alice's waits.
	waitFor(t, func() bool {
		waiting := 0
		for _, q := range alice {
			if _, queued := q.n.Place(q.id, time.Now()); queued {
				waiting++
			}
		}
		return waiting == 1
	}, "one of alice's queries waiting, two started")
	drainStarts(t, nodes)
	for i, q := range alice {
		if _, queued := q.n.Place(q.id, time.Now()); queued {
			alice[0], alice[1], alice[2] = alice[(i+1)%3], alice[(i+2)%3], q // the waiting one last
		}
	}
	pl, ok := alice[2].n.Place(alice[2].id, time.Now())
	if w := admission.WhyWaiting(pl, admission.PoolStats{Limits: l, Running: 2}, admission.LoadStats{}); !ok || w.String() != "you have 2 running of your 2" {
		t.Errorf("alice's waiting query: %q (%+v, %v)", w, pl, ok)
	}
	if _, _, err := nodes[0].submitAs(t, "shared", "bob"); err != nil {
		t.Fatalf("bob's query: %v", err)
	}
	waitAll(t, nodes, "shared", "bob's query running while alice waits at her limit", func(p admission.PoolStats) bool {
		return p.Running == 3 && p.Queued == 1
	})
	drainStarts(t, nodes)
	// alice's first query ends having used 100 s of CPU; her third starts
	// in its place.
	nodes[0].Charge(alice[0].id, 100*time.Second, time.Now())
	nodes[0].Leave(alice[0].id, time.Now())
	if s := nextStart(t, nodes, 20*time.Second); s != alice[2] {
		t.Fatalf("start %+v, want alice's third query", s)
	}
	waitAll(t, nodes, "shared", "alice's 100 s on every node", func(p admission.PoolStats) bool {
		for _, u := range p.Users {
			if u.User == "alice" {
				return u.Usage.Seconds >= 99
			}
		}
		return false
	})
	// The pool full (alice 2, bob 1, carol 1), carol's second query and
	// dave's wait; carol's first ends having used 50 s, charged on n1:
	// both then run nothing, and dave, who used nothing, goes before
	// carol's older query on n2 as on every node.
	carol1, _, err := nodes[1].submitAs(t, "shared", "carol")
	if err != nil {
		t.Fatal(err)
	}
	waitAll(t, nodes, "shared", "carol running: the pool full", func(p admission.PoolStats) bool { return p.Running == 4 })
	drainStarts(t, nodes)
	if _, _, err := nodes[1].submitAs(t, "shared", "carol"); err != nil {
		t.Fatal(err)
	}
	dave, _, err := nodes[2].submitAs(t, "shared", "dave")
	if err != nil {
		t.Fatal(err)
	}
	waitAll(t, nodes, "shared", "carol and dave queued", func(p admission.PoolStats) bool { return p.Queued == 2 })
	nodes[1].Charge(carol1, 50*time.Second, time.Now())
	waitAll(t, nodes, "shared", "carol's 50 s on every node", func(p admission.PoolStats) bool {
		for _, u := range p.Users {
			if u.User == "carol" {
				return u.Usage.Seconds >= 49
			}
		}
		return false
	})
	nodes[1].Leave(carol1, time.Now())
	if s := nextStart(t, nodes, 20*time.Second); s != (fleetQuery{nodes[2], dave}) {
		t.Fatalf("start %+v, want dave's (no usage) before carol's older query (50 s used)", s)
	}
}
