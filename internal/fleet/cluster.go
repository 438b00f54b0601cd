package fleet

import (
	"cmp"
	"log/slog"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// cluster is the node's view of the cluster, as the watch last showed it:
// the revision it reflects, each pool's queue, slots, extras and usage,
// and the live nodes' records.
//
// Lock order: cluster.mu is taken after the pipeline's lock (Backend.mu)
// when both are held, never before it: a start is decided on the view at
// its revision, and the pipeline adds its own started keys to the view
// at once. No other lock is taken while cluster.mu is held.
type cluster struct {
	keys keySpace
	log  *slog.Logger

	mu    sync.Mutex
	rev   int64 // revision the views reflect; 0 until the cluster is read
	views map[string]*view
	nodes map[string]NodeRecord
	// invalidAt is when a refused value was last logged; invalidQuiet
	// counts those refused since (invalid).
	invalidAt    time.Time
	invalidQuiet int
	// The watch's figures for Health: when it last delivered, the key
	// events and their encoded size.
	watchAt                 time.Time
	watchEvents, watchBytes int64
}

func newCluster(keys keySpace, log *slog.Logger) *cluster {
	return &cluster{keys: keys, log: log, views: map[string]*view{}, nodes: map[string]NodeRecord{}}
}

// view is the cluster's state of one pool, as the watch last showed it.
type view struct {
	queue  []entry                    // by create revision
	slots  map[string]entry           // slot key -> entry
	extras map[string]entry           // extra key -> entry
	byNode map[string][2]int          // node -> running, queued
	usage  map[string]admission.Usage // user -> CPU time in the pool
}

func newView() *view {
	return &view{slots: map[string]entry{}, extras: map[string]entry{}, usage: map[string]admission.Usage{}}
}

func (v *view) running() int { return len(v.slots) + len(v.extras) }

// position is the place of the queue key with create revision rev and
// token number seq, 0 for the head; -1 when the watch has not shown it
// yet.
func (v *view) position(rev int64, seq uint64) int {
	i, ok := slices.BinarySearchFunc(v.queue, entry{rev: rev, seq: seq}, queueOrder)
	if !ok {
		return -1
	}
	return i
}

// queueOrder is the FIFO order of queue keys: by create revision, then,
// for the keys one transaction put, by token number.
func queueOrder(a, b entry) int {
	if c := cmp.Compare(a.rev, b.rev); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

// view is pool's view, made empty when there is none; c.mu is held.
func (c *cluster) view(pool string) *view {
	v, ok := c.views[pool]
	if !ok {
		v = newView()
		c.views[pool] = v
	}
	return v
}

// read reports whether the node has read the cluster: false from a start
// while etcd was unreachable until it answers.
func (c *cluster) read() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rev != 0
}

// revision is the revision the views reflect.
func (c *cluster) revision() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rev
}

// reset forgets the views and the nodes before a full read; c.mu is held.
func (c *cluster) reset() {
	c.views = map[string]*view{}
	c.nodes = map[string]NodeRecord{}
}

// reached records that the views reflect revision rev, and events key
// events of size bytes delivered by the watch; c.mu is held.
func (c *cluster) reached(rev int64, events, size int) {
	c.rev = rev
	c.watchAt = time.Now()
	c.watchEvents += int64(events)
	c.watchBytes += int64(size)
}

// state adds the watch's figures to h.
func (c *cluster) state(h Health) Health {
	c.mu.Lock()
	defer c.mu.Unlock()
	h.WatchRevision, h.WatchAt = c.rev, c.watchAt
	h.WatchEvents, h.WatchBytes = c.watchEvents, c.watchBytes
	return h
}

// records returns the live nodes' records, by name.
func (c *cluster) records() []NodeRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]NodeRecord, 0, len(c.nodes))
	for _, n := range c.nodes {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b NodeRecord) int { return cmp.Compare(a.Node, b.Node) })
	return out
}

// loadPercent is the cluster's load: the mean over the live nodes'
// records of their measured load; own, this node's, when none is known.
// c.mu is held.
func (c *cluster) loadPercent(own float64) float64 {
	if len(c.nodes) == 0 {
		return own
	}
	sum := 0.0
	for _, n := range c.nodes {
		sum += n.LoadPercent
	}
	return sum / float64(len(c.nodes))
}

// put adds a key to the views; c.mu is held. It returns the definitions
// when the key is theirs, and the entry of a queue, slot or extra key
// (nil for any other key, or a queue key whose value is refused).
func (c *cluster) put(kv *mvccpb.KeyValue) (*Definitions, *entry) {
	key := string(kv.Key)
	dir, pool := c.keys.parse(key)
	switch dir {
	case nodesDir:
		name := key[len(c.keys.node("")):]
		r, err := decodeNodeRecord(name, kv.Value)
		if err != nil {
			// Not counted: a record out of range must not steer the
			// cluster's load.
			delete(c.nodes, name)
			c.invalid(key, err)
			return nil, nil
		}
		c.nodes[name] = r
		return nil, nil
	case defsKey:
		d, err := decodeDefinitions(kv.Value, kv.ModRevision)
		if err != nil {
			c.invalid(key, err)
			return nil, nil
		}
		return &d, nil
	case "":
		return nil, nil
	case usageDir:
		user, err := url.PathUnescape(c.keys.name(key, dir, pool))
		if err == nil {
			var u admission.Usage
			if u, err = decodeUsage(kv.Value); err == nil {
				c.view(pool).usage[user] = u
				return nil, nil
			}
		}
		c.invalid(key, err)
		return nil, nil
	}
	e, err := decodeEntry(dir, c.keys.name(key, dir, pool), kv.Value)
	if err != nil {
		c.invalid(key, err)
		if dir == queueDir {
			return nil, nil // no node's query: it never starts, so it holds no place
		}
		// A slot or extra key holds its slot whatever its value says (the
		// start transactions compare on the key itself): counted, with no
		// node.
		e = entry{}
	}
	e.key, e.rev, e.lease = key, kv.CreateRevision, kv.Lease
	v := c.view(pool)
	switch dir {
	case queueDir:
		if i, found := slices.BinarySearchFunc(v.queue, e, queueOrder); !found {
			// New keys come last, but a full read comes in key order.
			v.queue = slices.Insert(v.queue, i, e)
		}
	case slotDir:
		v.slots[key] = e
	case extraDir:
		v.extras[key] = e
	}
	return nil, &e
}

// remove removes a key from the views; c.mu is held. It reports whether
// the key was a queue, slot or extra key.
func (c *cluster) remove(kv *mvccpb.KeyValue) bool {
	key := string(kv.Key)
	dir, pool := c.keys.parse(key)
	switch dir {
	case nodesDir:
		delete(c.nodes, key[len(c.keys.node("")):])
		return false
	case usageDir:
		if user, err := url.PathUnescape(c.keys.name(key, dir, pool)); err == nil {
			delete(c.view(pool).usage, user)
		}
		return false
	case queueDir, slotDir, extraDir:
	default:
		return false
	}
	v := c.view(pool)
	switch dir {
	case queueDir:
		v.queue = slices.DeleteFunc(v.queue, func(e entry) bool { return e.key == key })
	case slotDir:
		delete(v.slots, key)
	case extraDir:
		delete(v.extras, key)
	}
	return true
}

// invalid logs a value read from etcd that is not used, at most once a
// second (with the count of those not logged); c.mu is held.
func (c *cluster) invalid(key string, err error) {
	now := time.Now()
	if now.Sub(c.invalidAt) < time.Second {
		c.invalidQuiet++
		return
	}
	c.log.Error("value in etcd refused: not used", "key", clip(key), "err", err, "refused_since_last", c.invalidQuiet)
	c.invalidAt, c.invalidQuiet = now, 0
}
