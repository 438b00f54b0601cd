package fleet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/etcdtest"
	"github.com/poolagent/poolagent/internal/state"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// shared is one 3-member etcd cluster for the tests that kill no member;
// each test uses a cluster name of its own. TestMain starts it when a test
// asks and stops it at the end.
var (
	sharedMu  sync.Mutex
	shared    *etcdtest.Cluster
	sharedDir string
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(nodeEnv); spec != "" {
		os.Exit(runNode(spec))
	}
	if spec := os.Getenv(benchNodeEnv); spec != "" {
		os.Exit(runBenchNode(spec))
	}
	if spec := os.Getenv(chaosQueryEnv); spec != "" {
		os.Exit(runChaosQuery(spec))
	}
	code := m.Run()
	if chaosBinDir != "" {
		os.RemoveAll(chaosBinDir) // 30 MB of binaries, built once for the chaos tests
	}
	for _, c := range []struct {
		*etcdtest.Cluster
		dir string
	}{{shared, sharedDir}, {benchEtc, benchDir}} {
		if c.Cluster != nil {
			c.Stop()
			os.RemoveAll(c.dir)
		}
	}
	etcdtest.RemoveBuilt() // once no member runs it
	os.Exit(code)
}

func sharedCluster(t *testing.T) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts an etcd cluster")
	}
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		bin := etcdtest.Binary(t)
		dir, err := os.MkdirTemp("", "fleet-etcd-")
		if err != nil {
			t.Fatal(err)
		}
		c, err := etcdtest.New(bin, dir, etcdtest.Options{Members: 3})
		if err != nil {
			os.RemoveAll(dir)
			t.Fatal(err)
		}
		shared, sharedDir = c, dir
	}
	return shared.Endpoints()
}

// node is a backend with its events collected.
type node struct {
	*Backend
	events chan admission.Event
	// placed holds the queries submitAs found queued through Place: the
	// pipeline may have sent their Queued event too, which says nothing
	// new, so next and none drop it whenever it comes.
	placed map[admission.QueryID]bool
}

func openNode(t *testing.T, endpoints []string, cluster, name string, pools map[string]admission.Limits, ttl time.Duration) *node {
	t.Helper()
	return openNodeConfig(t, Config{
		Endpoints: endpoints, Cluster: cluster, Node: name, TTL: ttl,
		// Generous: the whole test run loads the machine.
		RequestTimeout: 10 * time.Second,
	}, pools)
}

func openNodeConfig(t *testing.T, cfg Config, pools map[string]admission.Limits) *node {
	t.Helper()
	cfg.VCPUs, cfg.Version = 2, "test"
	b, err := Open(context.Background(), cfg, pools)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{Backend: b, events: make(chan admission.Event, 1000), placed: map[admission.QueryID]bool{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case ev := <-b.Events():
				n.events <- ev
			case <-b.ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		b.Close()
		<-done
	})
	return n
}

func (n *node) next(t *testing.T, within time.Duration) admission.Event {
	t.Helper()
	ev, ok := n.receive(within)
	if !ok {
		t.Fatalf("node %s: no event within %s", n.cfg.Node, within)
	}
	return ev
}

// receive returns the next event within the time given, without the
// Queued events of queries the test already knows are queued.
func (n *node) receive(within time.Duration) (admission.Event, bool) {
	timeout := time.After(within)
	for {
		select {
		case ev := <-n.events:
			if ev.Queued && n.placed[ev.ID] {
				delete(n.placed, ev.ID)
				continue
			}
			return ev, true
		case <-timeout:
			return admission.Event{}, false
		}
	}
}

// final returns the next event that is not a Queued one.
func (n *node) final(t *testing.T, within time.Duration) admission.Event {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if ev := n.next(t, time.Until(deadline)); !ev.Queued {
			return ev
		}
	}
}

// submit is Submit with its decision, for a test that submits one query
// at a time: a query Submit leaves undecided gets its start, its refusal
// or its place in the queue from its first event.
func (n *node) submit(t *testing.T, pool string) (admission.QueryID, bool, error) {
	t.Helper()
	return n.submitAs(t, pool, "alice")
}

// submitAs is submit for a query of user.
func (n *node) submitAs(t *testing.T, pool, user string) (admission.QueryID, bool, error) {
	t.Helper()
	id, started, err := n.Submit(pool, user, time.Now())
	if err != nil || started {
		return id, started, err
	}
	if _, queued := n.Place(id, time.Now()); queued {
		n.placed[id] = true
		return id, false, nil
	}
	ev := n.next(t, 10*time.Second)
	switch {
	case ev.ID != id:
		t.Fatalf("node %s: event %+v; want one for query %d", n.cfg.Node, ev, id)
	case ev.Err != nil:
		return 0, false, ev.Err
	}
	return id, !ev.Queued, nil
}

func (n *node) none(t *testing.T, within time.Duration) {
	t.Helper()
	if ev, ok := n.receive(within); ok {
		t.Fatalf("node %s: unexpected event %+v", n.cfg.Node, ev)
	}
}

func limits(c, q int) admission.Limits {
	l := admission.UnlimitedLimits()
	l.ConcurrentQueryLimit, l.QueueSize = c, q
	return l
}

// TestGlobalLimit: three nodes share one pool with C = 4, Q = 10; sixty
// queries spread over them: 4 run, 10 queue, 46 are rejected with the
// cluster's figures; the queued ones start in arrival order across nodes
// as slots free, and all counts end at 0.
func TestGlobalLimit(t *testing.T) {
	eps := sharedCluster(t)
	pools := map[string]admission.Limits{"olap": limits(4, 10)}
	var nodes []*node
	for i := range 3 {
		nodes = append(nodes, openNode(t, eps, "global", fmt.Sprintf("n%d", i), pools, 0))
	}
	type ran struct {
		n  *node
		id admission.QueryID
	}
	var running []ran
	var queue []ran // arrival order
	var log runLog
	// The first 14 arrive one after the other, alternating nodes.
	for i := range 14 {
		n := nodes[i%3]
		id, started, err := n.submit(t, "olap")
		if err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
		if started != (i < 4) {
			t.Fatalf("query %d on %s: started %v, want %v", i, n.cfg.Node, started, i < 4)
		}
		if started {
			log.add(1)
			running = append(running, ran{n, id})
		} else {
			queue = append(queue, ran{n, id})
		}
	}
	burstRejected(t, nodes, 46)
	for _, n := range nodes {
		waitFor(t, func() bool {
			p := poolStats(n.Backend, "olap")
			return p.Running == 4 && p.Queued == 10
		}, "node %s sees 4 running and 10 queued", n.cfg.Node)
	}
	var queued []string
	for _, r := range queue {
		queued = append(queued, r.n.cfg.Node)
	}
	listsCluster(t, nodes, queued)
	// Each end starts the oldest queued query, wherever it waits.
	for len(running) > 0 {
		r := running[0]
		running = running[1:]
		log.add(-1)
		r.n.Leave(r.id, time.Now())
		if len(queue) == 0 {
			continue
		}
		head := queue[0]
		queue = queue[1:]
		ev := head.n.next(t, 5*time.Second)
		if ev.ID != head.id || ev.Err != nil {
			t.Fatalf("after an end, node %s got %+v; want query %d to start", head.n.cfg.Node, ev, head.id)
		}
		log.add(1)
		running = append(running, head)
		for _, n := range nodes {
			if n != head.n {
				n.none(t, 0)
			}
		}
	}
	for _, n := range nodes {
		waitFor(t, func() bool {
			p := poolStats(n.Backend, "olap")
			return p.Running == 0 && p.Queued == 0
		}, "node %s sees the pool empty", n.cfg.Node)
	}
	log.check(t, 4, 10)
}

// burstRejected submits n queries at once, in turn on each node, to pool
// olap (C = 4, Q = 10) holding 4 running and 10 queued: Submit decides
// none of them, and each gets its refusal, with the cluster's figures, as
// an event.
func burstRejected(t *testing.T, nodes []*node, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	submitted := make([]int, len(nodes))
	for i := range n {
		submitted[i%len(nodes)]++
		wg.Go(func() {
			if _, started, err := nodes[i%len(nodes)].Submit("olap", "alice", time.Now()); started || err != nil {
				errs <- fmt.Errorf("query %d: started %v, %v; want it undecided", i, started, err)
			}
		})
	}
	wg.Wait()
	for i, nd := range nodes {
		for range submitted[i] {
			errs <- nd.next(t, 10*time.Second).Err
		}
	}
	close(errs)
	for err := range errs {
		if !errors.Is(err, admission.ErrQueueFull) {
			t.Fatalf("want a rejection, got %v", err)
		}
		if !strings.Contains(err.Error(), ", number of global delayed/running requests is 14, sum of them is larger than allowed limit 10 (including concurrent query limit 4) for pool olap") {
			t.Fatalf("rejection without the cluster's figures: %v", err)
		}
	}
}

// listsCluster checks that every node lists the cluster's queries: 4
// running, then the queue in arrival order, each with its node (queued
// names them).
func listsCluster(t *testing.T, nodes []*node, queued []string) {
	t.Helper()
	for _, n := range nodes {
		qs := n.Queries()
		if len(qs) != 4+len(queued) {
			t.Fatalf("node %s lists %d queries, want %d: %+v", n.cfg.Node, len(qs), 4+len(queued), qs)
		}
		for i, q := range qs {
			running := i < 4
			if q.Running != running || q.Token == "" || !strings.HasPrefix(q.Token, q.Node+".") {
				t.Fatalf("node %s, query %d: %+v", n.cfg.Node, i, q)
			}
			if !running && (q.Position != i-3 || q.Node != queued[i-4]) {
				t.Fatalf("node %s, query %d: %+v; want position %d on %s", n.cfg.Node, i, q, i-3, queued[i-4])
			}
		}
	}
}

// runLog is the start and end times of the queries of one pool as their
// clients saw them: a start when Submit or an event said so, an end just
// before Leave.
type runLog struct {
	mu sync.Mutex
	at []time.Time
	d  []int // +1 start, -1 end
}

func (l *runLog) add(d int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at = append(l.at, time.Now())
	l.d = append(l.d, d)
}

// check replays the log in time order: never more than c running at once,
// and exactly c running before each of the first handOvers ends (an end
// that lets a queued query start), then 0 at the end.
func (l *runLog) check(t *testing.T, c, handOvers int) {
	t.Helper()
	idx := make([]int, len(l.at))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(i, j int) int { return l.at[i].Compare(l.at[j]) })
	n, ends := 0, 0
	for _, i := range idx {
		if l.d[i] < 0 {
			if ends < handOvers && n != c {
				t.Fatalf("log: %d running before end %d at %s; want %d", n, ends+1, l.at[i].Format(time.StampMicro), c)
			}
			ends++
		}
		n += l.d[i]
		if n > c {
			t.Fatalf("log: %d running at %s; the limit is %d", n, l.at[i].Format(time.StampMicro), c)
		}
	}
	if n != 0 || ends != handOvers+c {
		t.Fatalf("log: %d running at the end after %d ends; want 0 after %d", n, ends, handOvers+c)
	}
}

func changeOf(ddl string) state.Change {
	return state.Change{Seq: 1, Time: time.Now(), UID: 0, User: "root", DDL: ddl}
}

func poolStats(b *Backend, name string) admission.PoolStats {
	for _, p := range b.Pools() {
		if p.Name == name {
			return p
		}
	}
	return admission.PoolStats{}
}

func waitFor(t *testing.T, ok func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: "+format, args...)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestModel drives the backend on one node and the single-host
// admission.Controller with the same random calls: every decision, every
// rejection text and every started query must be the same.
func TestModel(t *testing.T) {
	eps := sharedCluster(t)
	pools := map[string]admission.Limits{"a": limits(2, 3), "b": limits(1, 0), "c": limits(3, admission.Unlimited), "d": limits(admission.Unlimited, 2)}
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			model, err := admission.NewController(admission.LoadConfig{}, pools)
			if err != nil {
				t.Fatal(err)
			}
			n := openNode(t, eps, fmt.Sprintf("model%d", seed), "n0", pools, 0)
			ids := map[admission.QueryID]admission.QueryID{} // model -> backend
			var live []admission.QueryID                     // model ids
			names := []string{"a", "b", "c", "d", "default"}
			for step := range 120 {
				now := time.Now()
				if len(live) == 0 || rng.IntN(5) < 3 {
					pool := names[rng.IntN(len(names))]
					mid, mStarted, mErr := model.Submit(pool, "alice", now)
					bid, bStarted, bErr := n.submit(t, pool)
					if (mErr == nil) != (bErr == nil) || mErr != nil && mErr.Error() != bErr.Error() {
						t.Fatalf("step %d submit %s: model %v, backend %v", step, pool, mErr, bErr)
					}
					if mStarted != bStarted {
						t.Fatalf("step %d submit %s: model started %v, backend %v", step, pool, mStarted, bStarted)
					}
					if mErr == nil {
						ids[mid] = bid
						live = append(live, mid)
					}
					continue
				}
				i := rng.IntN(len(live))
				mid := live[i]
				live = append(live[:i], live[i+1:]...)
				events := model.Leave(mid, now)
				n.Leave(ids[mid], now)
				for _, ev := range events {
					got := n.next(t, 5*time.Second)
					if got.ID != ids[ev.ID] || (got.Err == nil) != (ev.Err == nil) {
						t.Fatalf("step %d: model event %+v (backend id %d), backend %+v", step, ev, ids[ev.ID], got)
					}
				}
				n.none(t, 20*time.Millisecond)
				waitFor(t, func() bool {
					for _, want := range model.Pools() {
						got := poolStats(n.Backend, want.Name)
						if got.Running != want.Running || got.Queued != want.Queued {
							return false
						}
					}
					return true
				}, "step %d: pools as the model's %+v, backend %+v", step, model.Pools(), n.Pools())
			}
		})
	}
}

// TestDefinitionsConflict: two admins change the definitions read at the
// same revision from two nodes: one wins, the other gets ErrConflict, and
// both nodes see the winner's.
func TestDefinitionsConflict(t *testing.T) {
	eps := sharedCluster(t)
	var got [2]chan Definitions
	var nodes [2]*Backend
	for i := range 2 {
		got[i] = make(chan Definitions, 4)
		b, err := Open(context.Background(), Config{
			Endpoints: eps, Cluster: "defs", Node: fmt.Sprintf("n%d", i),
			Definitions: func(d Definitions) { got[i] <- d },
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		nodes[i] = b
	}
	seed := []byte("CREATE RESOURCE POOL olap WITH (CONCURRENT_QUERY_LIMIT=2);\n")
	d0, seeded, err := nodes[0].Seed(context.Background(), "pools.sql", seed, nil)
	if err != nil || !seeded {
		t.Fatalf("seed: %v, seeded %v", err, seeded)
	}
	d1, seeded, err := nodes[1].Seed(context.Background(), "other.sql", []byte("CREATE RESOURCE POOL x;\n"), nil)
	if err != nil || seeded || d1.PoolFile != string(seed) || d1.Rev != d0.Rev {
		t.Fatalf("second seed: %v, seeded %v, %+v; want the first node's definitions", err, seeded, d1)
	}
	change := func(b *Backend, d Definitions, ddl string) error {
		d.Changes = append(d.Changes, changeOf(ddl))
		_, err := b.Update(context.Background(), d)
		return err
	}
	errs := make(chan error, 2)
	go func() { errs <- change(nodes[0], d0, "ALTER RESOURCE POOL olap SET (CONCURRENT_QUERY_LIMIT=5);") }()
	go func() { errs <- change(nodes[1], d1, "ALTER RESOURCE POOL olap SET (CONCURRENT_QUERY_LIMIT=7);") }()
	e1, e2 := <-errs, <-errs
	if (e1 == nil) == (e2 == nil) {
		t.Fatalf("want one winner and one conflict, got %v and %v", e1, e2)
	}
	lost := e1
	if lost == nil {
		lost = e2
	}
	if !errors.Is(lost, ErrConflict) || !strings.Contains(lost.Error(), "nothing was changed") {
		t.Fatalf("loser's error %v: want ErrConflict saying nothing changed", lost)
	}
	for i := range 2 {
		var d Definitions
		for len(d.Changes) == 0 {
			select {
			case d = <-got[i]:
			case <-time.After(5 * time.Second):
				t.Fatalf("node %d never saw the change", i)
			}
		}
		m, _, err := d.Model()
		if err != nil {
			t.Fatal(err)
		}
		p, _ := m.Pool("olap")
		if len(d.Changes) != 1 || (p.ConcurrentQueryLimit != 5 && p.ConcurrentQueryLimit != 7) {
			t.Fatalf("node %d sees %+v", i, d)
		}
	}
}

// TestStaleOrphan: a node's watch may show its own put of a slot key only
// after the query left and another node took the slot under the same
// name; the node then takes the key for an orphan, and deleting it must
// not delete the other node's query.
func TestStaleOrphan(t *testing.T) {
	eps := sharedCluster(t)
	pools := map[string]admission.Limits{"olap": limits(1, 1)}
	a := openNode(t, eps, "stale", "a", pools, 0)
	b := openNode(t, eps, "stale", "b", pools, 0)
	id := admit(t, b, "olap", 10*time.Second)
	b.mu.Lock()
	old := *b.queries[id]
	lease := b.session.id()
	b.mu.Unlock()
	b.Leave(id, time.Now())
	waitFor(t, func() bool { return len(queryKeys(t, eps, "stale")) == 0 }, "b's slot freed")
	aid := admit(t, a, "olap", 10*time.Second)
	// b's put of the slot, shown late: its registration is no longer live.
	b.mu.Lock()
	b.applyPut(&mvccpb.KeyValue{
		Key: []byte(old.key), CreateRevision: old.rev, ModRevision: old.rev, Lease: int64(lease),
		Value: []byte(entry{Node: "b", Token: old.token, ArrivedUnixMilli: old.arrived.UnixMilli()}.value()),
	})
	if len(b.deletes) != 1 {
		t.Fatalf("the late put is not taken for an orphan: deletes %v", b.deletes)
	}
	b.mu.Unlock()
	b.poke()
	waitFor(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.deletes) == 0
	}, "b's pump done with the orphan")
	if keys := queryKeys(t, eps, "stale"); len(keys) != 1 || keys[0] != old.key {
		t.Fatalf("keys %v: a's query must still hold %s", keys, old.key)
	}
	a.Leave(aid, time.Now())
}
