package fleet

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
)

// slotKey reads a slot key: its create revision, its version and the
// token it holds.
func slotKey(t *testing.T, n *node, key string) (created, version int64, token string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := n.cli.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return 0, 0, ""
	}
	kv := resp.Kvs[0]
	e, err := decodeEntry(slotDir, key[strings.LastIndexByte(key, '/')+1:], kv.Value)
	if err != nil {
		t.Fatal(err)
	}
	return kv.CreateRevision, kv.Version, e.Token
}

func (n *node) keyOf(id admission.QueryID) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.queries[id].key
}

// TestSlotTakenOver: the key of a query that ended waits for the node's
// next arrival (deleteLinger), which takes it over in one write: the
// same slot key, the new query's token, the cluster's revision one
// further. A key nothing takes over goes when the linger ends; a key
// another query waits for goes at once.
func TestSlotTakenOver(t *testing.T) {
	eps := sharedCluster(t)
	a := openNode(t, eps, "takeover", "a", map[string]admission.Limits{"olap": limits(4, 10), "one": limits(1, 10)}, 0)
	b := openNode(t, eps, "takeover", "b", map[string]admission.Limits{"olap": limits(4, 10), "one": limits(1, 10)}, 0)
	a.mu.Lock()
	a.linger = time.Minute // no arrival is too late for it on a loaded machine
	a.mu.Unlock()

	first := admit(t, a, "olap", 10*time.Second)
	key := a.keyOf(first)
	created, _, _ := slotKey(t, a, key)
	a.Leave(first, time.Now())
	second := admit(t, a, "olap", 10*time.Second)
	if got := a.keyOf(second); got != key {
		t.Fatalf("the arrival took slot key %s; want %s, the ended query's", got, key)
	}
	a.mu.Lock()
	token := a.queries[second].token
	a.mu.Unlock()
	// The same key, written once more: never deleted and put again.
	if c, v, tok := slotKey(t, a, key); c != created || v != 2 || tok != token {
		t.Errorf("slot key %s: created at %d, version %d, token %s; want created at %d, version 2, token %s", key, c, v, tok, created, token)
	}

	// The key another node's query waits for goes at once, whatever the
	// linger: that query starts.
	held := admit(t, a, "one", 10*time.Second)
	waiting := queue(t, b, "one")
	waitFor(t, func() bool { return poolStats(a.Backend, "one").Queued == 1 }, "a sees b's query queued")
	a.Leave(held, time.Now())
	if ev := b.final(t, 10*time.Second); ev.ID != waiting || ev.Err != nil {
		t.Fatalf("b's queued query: %+v", ev)
	}
	b.Leave(waiting, time.Now())

	// A key nothing takes over goes when the linger ends.
	a.mu.Lock()
	a.linger = deleteLinger
	a.mu.Unlock()
	a.Leave(second, time.Now())
	waitFor(t, func() bool { c, _, _ := slotKey(t, a, key); return c == 0 }, "the ended query's slot key deleted")
}

// TestQueueDeadline: QUERY_CANCEL_AFTER_SECONDS across nodes: a query
// queued on b behind a's running one fails with YDB's "Delay deadline
// exceeded" once its time is up, counted from its arrival on b (the node
// ticks every 100 ms), and its queue key leaves the cluster.
func TestQueueDeadline(t *testing.T) {
	eps := sharedCluster(t)
	l := limits(1, 10)
	l.CancelAfter = time.Second
	pools := map[string]admission.Limits{"olap": l}
	a := openNode(t, eps, "deadline", "a", pools, 0)
	b := openNode(t, eps, "deadline", "b", pools, 0)
	held := admit(t, a, "olap", 10*time.Second)
	arrived := time.Now()
	waiting := queue(t, b, "olap")
	ev := b.final(t, 10*time.Second)
	waited := time.Since(arrived)
	if ev.ID != waiting || !errors.Is(ev.Err, admission.ErrDelayDeadline) || !strings.Contains(ev.Err.Error(), "Delay deadline exceeded") {
		t.Fatalf("b got %+v; want query %d to fail with the delay deadline", ev, waiting)
	}
	if waited < time.Second || waited > 5*time.Second { // 1 s, and a tick, on a loaded machine
		t.Errorf("the deadline of 1 s came after %s", waited.Round(time.Millisecond))
	}
	waitFor(t, func() bool { return len(queryKeys(t, eps, "deadline")) == 1 }, "only a's slot key left")
	a.Leave(held, time.Now())
}

// TestWatchCounts: a node's Health counts the key events its watch
// delivers and their encoded size (poolagent_etcd_watch_events_total and
// ..._bytes_total): another node's query that starts and ends is at least
// the put and the delete of its slot key on this node's watch, each event
// carrying at least its key.
func TestWatchCounts(t *testing.T) {
	const cluster = "watchcount"
	eps, pools := sharedCluster(t), map[string]admission.Limits{"olap": limits(4, 10)}
	a, b := openNode(t, eps, cluster, "a", pools, 0), openNode(t, eps, cluster, "b", pools, 0)
	h0 := b.Health()
	id := admit(t, a, "olap", 10*time.Second)
	a.Leave(id, time.Now())
	waitFor(t, func() bool { return len(queryKeys(t, eps, cluster)) == 0 }, "the slot key deleted")
	waitFor(t, func() bool { return b.Health().WatchEvents-h0.WatchEvents >= 2 }, "b's watch counts the slot key's put and delete")
	h := b.Health()
	events, size := h.WatchEvents-h0.WatchEvents, h.WatchBytes-h0.WatchBytes
	if minimum := events * int64(len(newKeySpace(cluster).prefix)); size < minimum {
		t.Errorf("%d events of %d bytes in all; want at least %d, each event's key", events, size, minimum)
	}
}
