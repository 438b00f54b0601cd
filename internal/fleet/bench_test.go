package fleet

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The benchmarks of docs/performance.md "Fleet mode" and docs/fleet.md
// (scripts/bench-fleet.sh runs them): a 3-member etcd cluster of separate
// processes on loopback with fsync on, as in production, shared by the
// benchmarks of one run; each uses a cluster name of its own.
var (
	benchMu  sync.Mutex
	benchEtc *etcdtest.Cluster
	benchDir string
	benchSeq int
)

func benchCluster(b *testing.B) ([]string, string) {
	b.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if benchEtc == nil {
		dir, err := os.MkdirTemp("", "fleet-bench-")
		if err != nil {
			b.Fatal(err)
		}
		c, err := etcdtest.New(etcdtest.Binary(b), dir, etcdtest.Options{Members: 3, Fsync: true})
		if err != nil {
			os.RemoveAll(dir)
			b.Fatal(err)
		}
		benchEtc, benchDir = c, dir
	}
	benchSeq++
	return benchEtc.Endpoints(), fmt.Sprintf("bench%d", benchSeq)
}

// benchNode is a backend whose events go to the goroutine waiting for
// them.
type benchNode struct {
	*Backend
	mu      sync.Mutex
	waiting map[admission.QueryID]chan admission.Event
	early   map[admission.QueryID]admission.Event
}

func openBenchNode(b *testing.B, eps []string, cluster, name string, pools map[string]admission.Limits) *benchNode {
	b.Helper()
	be, err := Open(b.Context(), Config{Endpoints: eps, Cluster: cluster, Node: name, VCPUs: 2, Version: "bench"}, pools)
	if err != nil {
		b.Fatal(err)
	}
	n, done := newBenchNode(be)
	b.Cleanup(func() {
		be.Close()
		<-done
	})
	return n
}

// newBenchNode routes be's events to the goroutines waiting for them
// until be closes; done closes then.
func newBenchNode(be *Backend) (n *benchNode, done chan struct{}) {
	n = &benchNode{Backend: be, waiting: map[admission.QueryID]chan admission.Event{}, early: map[admission.QueryID]admission.Event{}}
	done = make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case ev := <-be.Events():
				n.mu.Lock()
				if ch, ok := n.waiting[ev.ID]; ok {
					delete(n.waiting, ev.ID)
					ch <- ev
				} else {
					n.early[ev.ID] = ev
				}
				n.mu.Unlock()
			case <-be.ctx.Done():
				return
			}
		}
	}()
	return n, done
}

// await waits for the final event of query id (not a Queued one).
func (n *benchNode) await(b *testing.B, id admission.QueryID) admission.Event {
	ev, err := n.final(id)
	if err != nil {
		b.Fatal(err)
	}
	return ev
}

// final waits for the final event of query id (not a Queued one), at
// most 30 s for each.
func (n *benchNode) final(id admission.QueryID) (admission.Event, error) {
	for {
		ev, err := n.awaitAny(id)
		if err != nil || !ev.Queued {
			return ev, err
		}
	}
}

// awaitAny waits for the next event of query id, at most 30 s.
func (n *benchNode) awaitAny(id admission.QueryID) (admission.Event, error) {
	n.mu.Lock()
	if ev, ok := n.early[id]; ok {
		delete(n.early, id)
		n.mu.Unlock()
		return ev, nil
	}
	ch := make(chan admission.Event, 1)
	n.waiting[id] = ch
	n.mu.Unlock()
	select {
	case ev := <-ch:
		return ev, nil
	case <-time.After(30 * time.Second):
		return admission.Event{}, fmt.Errorf("node %s: no event for query %d within 30 s", n.cfg.Node, id)
	}
}

// admitted submits a query and waits until it starts.
func (n *benchNode) admitted(b *testing.B, pool string) admission.QueryID {
	id, err := n.admit(pool)
	if err != nil {
		b.Fatal(err)
	}
	return id
}

// admit submits a query and waits until it starts; an error if it is
// refused or fails.
func (n *benchNode) admit(pool string) (admission.QueryID, error) {
	id, started, err := n.Submit(pool, "alice", time.Now())
	if err != nil || started {
		return id, err
	}
	ev, err := n.final(id)
	if err == nil {
		err = ev.Err
	}
	return id, err
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkAdmitLatency: the time from Submit to a started query in a
// pool with a concurrency limit and a free slot, single-host (the
// admission.Controller) and fleet (one etcd transaction), interleaved
// with a bare etcd put of one key on the same cluster, the floor of any
// write; each query leaves at once. It reports the p50 and p99 of each,
// what the fleet adds to a single host's admission and what it adds to
// the bare put.
func BenchmarkAdmitLatency(b *testing.B) {
	eps, cluster := benchCluster(b)
	pools := map[string]admission.Limits{"olap": limits(64, 64)}
	n := openBenchNode(b, eps, cluster, "n0", pools)
	single, err := admission.NewController(admission.LoadConfig{}, pools)
	if err != nil {
		b.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	key := fmt.Sprintf("/poolagent/%s/put", cluster)
	var local, fleet, put []time.Duration
	for b.Loop() {
		start := time.Now()
		id, started, err := single.Submit("olap", "alice", start)
		local = append(local, time.Since(start))
		if !started || err != nil {
			b.Fatalf("single host: started %v, %v", started, err)
		}
		single.Leave(id, time.Now())
		start = time.Now()
		id = n.admitted(b, "olap")
		fleet = append(fleet, time.Since(start))
		n.Leave(id, time.Now())
		start = time.Now()
		if _, err := cli.Put(b.Context(), key, "x"); err != nil {
			b.Fatal(err)
		}
		put = append(put, time.Since(start))
	}
	b.ReportMetric(ms(quantile(put, 0.5)), "put-p50-ms")
	b.ReportMetric(ms(quantile(put, 0.99)), "put-p99-ms")
	b.ReportMetric(ms(quantile(local, 0.5)), "single-p50-ms")
	b.ReportMetric(ms(quantile(local, 0.99)), "single-p99-ms")
	b.ReportMetric(ms(quantile(fleet, 0.5)), "fleet-p50-ms")
	b.ReportMetric(ms(quantile(fleet, 0.99)), "fleet-p99-ms")
	b.ReportMetric(ms(quantile(fleet, 0.5)-quantile(local, 0.5)), "added-p50-ms")
	b.ReportMetric(ms(quantile(fleet, 0.99)-quantile(local, 0.99)), "added-p99-ms")
	b.ReportMetric(ms(quantile(fleet, 0.5)-quantile(put, 0.5)), "over-put-p50-ms")
	b.ReportMetric(ms(quantile(fleet, 0.99)-quantile(put, 0.99)), "over-put-p99-ms")
}

// BenchmarkClusterAdmissions: 3 nodes, 32 clients each, one pool shared
// by all 96: each client submits, waits until its query starts, and ends
// it at once. With C = 32 most queries queue and start when another ends
// (three key writes each: queue key, slot, delete); with C = 1000 every
// query finds a free slot (one key write when it takes over the slot key
// of a query of its node that just ended, two otherwise: slot, delete).
// It reports admissions per second across the cluster, the etcd write
// transactions and the CPU time per admission.
func BenchmarkClusterAdmissions(b *testing.B) {
	for _, c := range []int{32, 1000} {
		b.Run(fmt.Sprintf("C=%d", c), func(b *testing.B) { clusterAdmissions(b, c) })
	}
}

func clusterAdmissions(b *testing.B, c int) {
	eps, cluster := benchCluster(b)
	pools := map[string]admission.Limits{"olap": limits(c, 1000)}
	var nodes []*benchNode
	for i := range 3 {
		nodes = append(nodes, openBenchNode(b, eps, cluster, fmt.Sprintf("n%d", i), pools))
	}
	const clients = 96
	var mu sync.Mutex
	left := b.N
	rev0 := etcdRevision(b, nodes[0].Backend)
	pids := []int{os.Getpid()}
	for _, m := range benchEtc.Members {
		pids = append(pids, m.PID())
	}
	cpu0 := cpuOf(b, pids)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		n := nodes[c%3]
		wg.Go(func() {
			for {
				mu.Lock()
				if left == 0 {
					mu.Unlock()
					return
				}
				left--
				mu.Unlock()
				id := n.admitted(b, "olap")
				n.Leave(id, time.Now())
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "admissions/s")
	// The CPU time of the nodes, their clients and the members, per
	// admission: what bounds the rate on a machine of few cores.
	b.ReportMetric(ms(cpuOf(b, pids)-cpu0)/float64(b.N), "cpu-ms/adm")
	// Every write transaction is one revision: what an admission costs
	// etcd (its start, its end, the deletes and the queue's keys).
	b.ReportMetric(float64(etcdRevision(b, nodes[0].Backend)-rev0)/float64(b.N), "etcd-writes/adm")
}

// etcdRevision is the cluster's revision now.
func etcdRevision(b *testing.B, n *Backend) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := n.cli.Get(ctx, n.keys.defs())
	if err != nil {
		b.Fatal(err)
	}
	return resp.Header.Revision
}

// BenchmarkHandOver: C = 1 and two nodes; the query in the slot ends on
// one node while a query waits on the other: the time from the end (Leave)
// to the waiting query's start. The roles swap each round.
func BenchmarkHandOver(b *testing.B) {
	eps, cluster := benchCluster(b)
	pools := map[string]admission.Limits{"olap": limits(1, 10)}
	x := openBenchNode(b, eps, cluster, "a", pools)
	y := openBenchNode(b, eps, cluster, "b", pools)
	held := x.admitted(b, "olap")
	var d []time.Duration
	for b.Loop() {
		id, started, err := y.Submit("olap", "alice", time.Now())
		if started || err != nil {
			b.Fatalf("round %d, second query on %s: started %v, %v; keys %v", len(d), y.cfg.Node, started, err, y.Queries())
		}
		// Its queue key is in; wait until the holder's node has seen it, as
		// in a steady cluster, so the measure is the hand-over alone.
		for poolStats(x.Backend, "olap").Queued == 0 {
			time.Sleep(time.Millisecond)
		}
		end := time.Now()
		x.Leave(held, end)
		if ev := y.await(b, id); ev.Err != nil {
			b.Fatal(ev.Err)
		}
		d = append(d, time.Since(end))
		x, y, held = y, x, id
	}
	x.Leave(held, time.Now())
	b.ReportMetric(ms(quantile(d, 0.5)), "p50-ms")
	b.ReportMetric(ms(quantile(d, 0.99)), "p99-ms")
}

// BenchmarkEtcdWrites: the same cluster's own rate of writes from 96
// concurrent clients (one Put each, a key per client), the ceiling the
// admissions above are measured against: a query that starts at once
// costs one or two key writes (its slot, and the delete when it ends
// unless the node's next query takes the slot key over), a query that
// queues three; a transaction carries many.
func BenchmarkEtcdWrites(b *testing.B) {
	eps, cluster := benchCluster(b)
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	const clients = 96
	var mu sync.Mutex
	left := b.N
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			key := fmt.Sprintf("/poolagent/%s/w%d", cluster, c)
			for {
				mu.Lock()
				if left == 0 {
					mu.Unlock()
					return
				}
				left--
				mu.Unlock()
				if _, err := cli.Put(b.Context(), key, "x"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "writes/s")
}
