package fleet

import (
	"context"
	"hash/crc32"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The pipeline: everything the node asks of etcd runs in the background,
// never under a lock and never in a call of the daemon, so that a pool
// without a global limit admits in microseconds whatever etcd does. Each
// pump starts what can start:
//
//   - per pool, one registration transaction at a time, carrying every
//     query of the pool that arrived on this node since the last one
//     (arrivals batch while a transaction is in flight), up to maxBatch;
//   - one transaction starting every queued query of this node the views
//     allow to start, each in a nested transaction of its own;
//   - one transaction deleting the keys of ended queries;
//   - the node record after a load refresh, and the registration of
//     running queries without a key.
//
// Many transactions are in flight at once (one per pool registering, the
// starts, the deletes); etcd orders them, and every one is guarded by
// compares, so none over-admits.

// pipeline is this node's part in the cluster's admission: its queries,
// the pools' limits and counters, the registrations' tokens, the slots its
// starts claim and the keys it is to delete. It decides what to ask of
// etcd; Backend asks it.
//
// Lock order: pipeline.mu is the outermost lock of the backend. While it
// is held the cluster view's lock may be taken (a decision reads the
// views at their revision: lock), or the session's, but not both at
// once; it is never taken while either of those is held.
type pipeline struct {
	node string
	keys keySpace
	log  *slog.Logger
	ttl  time.Duration
	// cluster is the backend's view of the cluster, locked after mu.
	cluster *cluster
	// wakePump runs the pump again (Backend.poke).
	wakePump func()

	// mu guards everything below. It is never held during an etcd request
	// or a call of cfg.Definitions or of the daemon's.
	mu      sync.Mutex
	seq     uint64
	pools   map[string]*poolState
	queries map[admission.QueryID]*query
	tokens  map[string]*query
	lastID  admission.QueryID
	load    admission.LoadWindow
	// deletes are keys of this node to delete, with their create
	// revision (0: a key named by its token, which no other registration
	// reuses): of queries that ended, and orphans (keys whose registration
	// is no longer live).
	deletes map[string]int64
	// lingerUntil is when the keys to delete go in a transaction of their
	// own, if no registration has carried them by then (deleteLinger);
	// zero when none waits.
	lingerUntil time.Time
	linger      time.Duration // deleteLinger; tests set their own
	// deletingKeys are the keys of np.deletes the delete transaction in
	// flight (np.deleting) deletes.
	deletingKeys map[string]int64
	// claims are the slot keys this node's start transactions in flight
	// put; offset is where an arriving query of this node starts looking
	// for a free slot, so that the nodes' arrivals spread over the slots.
	claims map[string]struct{}
	offset int
	// inherited are this node's keys without a lease (strict slots) left
	// by its earlier run, by pool, for the queries it adopts until
	// inheritedUntil (strict.go).
	inherited      map[string][]entry
	inheritedUntil time.Time
	// publish: the node record changed (a load refresh) and is to be put.
	publish bool
	// charges are the CPU time this node's queries used, by pool and
	// user, not yet added to the cluster's usage keys (users.go).
	charges map[usageKey]admission.Usage
	// The pipeline's transactions in flight (pipeline.go).
	publishing, deleting, reregistering, charging bool
}

func newPipeline(cfg Config, keys keySpace, log *slog.Logger, c *cluster, load admission.LoadWindow, wakePump func()) *pipeline {
	return &pipeline{
		node: cfg.Node, keys: keys, log: log, ttl: cfg.TTL,
		cluster: c, wakePump: wakePump,
		pools:     map[string]*poolState{},
		queries:   map[admission.QueryID]*query{},
		tokens:    map[string]*query{},
		load:      load,
		deletes:   map[string]int64{},
		claims:    map[string]struct{}{},
		charges:   map[usageKey]admission.Usage{},
		inherited: map[string][]entry{},
		offset:    int(crc32.ChecksumIEEE([]byte(cfg.Node)) % 1024),
		linger:    deleteLinger,
	}
}

type phase int

const (
	pending  phase = iota // not registered in the cluster (yet)
	queued                // its queue key exists
	starting              // a start transaction is in flight
	running               // its slot or extra key exists (or it runs locally)
)

type query struct {
	id       admission.QueryID
	pool     string
	user     string // "" when not known (adopted)
	local    bool   // a pool without global limits: never in etcd
	st       phase
	token    string // the current registration; "" when none
	key      string // the queue, slot or extra key that holds it
	rev      int64  // create revision of the queue key
	arrived  time.Time
	deadline time.Time // for waiting; zero: none
	// unreachableBy is when a query that cannot be registered because etcd
	// is unreachable gives up, if it has no deadline of its own.
	unreachableBy time.Time
	// lost: a running query whose key went with an expired lease (or an
	// adopted one); it is registered again as an extra by the pump.
	lost bool
	// seq is the number of its current token: it orders the queue keys
	// one transaction puts, which share a create revision.
	seq uint64
	// told: the daemon knows the query waits (Submit's Position was not
	// 0, or an Event with Queued was sent); placed is its place in the
	// queue as its registration read it, until the watch shows its key.
	told   bool
	placed int
}

type poolState struct {
	limits  admission.Limits
	dropped bool
	stats   admission.PoolStats // local counters
	local   int                 // running queries of a local pool
	pending int                 // queries of this node not registered yet
	// registering: a registration transaction of the pool is in flight.
	registering bool
}

// entryOf is the value of q's keys.
func (np *pipeline) entryOf(q *query) entry {
	return entry{Node: np.node, Token: q.token, ArrivedUnixMilli: q.arrived.UnixMilli(), User: q.user}
}

// lock takes the pipeline's lock (np.mu) and then the cluster view's, in
// the lock order (see cluster); unlock releases both. A decision on the
// views holds both.
func (np *pipeline) lock() {
	np.mu.Lock()
	np.cluster.mu.Lock()
}

func (np *pipeline) unlock() {
	np.cluster.mu.Unlock()
	np.mu.Unlock()
}

// newToken names a new registration of the session lease; np.mu is held.
func (np *pipeline) newToken(lease clientv3.LeaseID) string {
	np.seq++
	return np.node + "." + strconv.FormatInt(int64(lease), 16) + "." + strconv.FormatUint(np.seq, 10)
}

// forgetToken ends q's registration; a key that still carries it becomes
// an orphan the pump deletes. np.mu is held.
func (np *pipeline) forgetToken(q *query) {
	if q.token != "" {
		delete(np.tokens, q.token)
	}
	q.token, q.key, q.rev = "", "", 0
}

// pumpLoop runs the pump each time something may have become possible.
func (b *Backend) pumpLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.kick:
		}
		b.pump()
	}
}

// pump starts what the views allow (see above); b.mu is not held.
func (b *Backend) pump() {
	now := time.Now()
	b.mu.Lock()
	lease, connected := b.session.current(now)
	b.cluster.mu.Lock() // b.lock, once the session is read
	var work []func()
	// Nothing is decided on views not yet read (a start while etcd was
	// unreachable).
	live := connected && b.cluster.rev != 0
	b.releaseInheritedLocked(now)
	if live && b.publish && !b.publishing {
		b.publish, b.publishing = false, true
		work = append(work, b.publishRecord)
	}
	if live && len(b.charges) > 0 && !b.charging {
		b.charging = true
		work = append(work, b.writeCharges)
	}
	if live && !b.reregistering && b.anyLostLocked() {
		b.reregistering = true
		work = append(work, func() {
			b.reregister()
			b.mu.Lock()
			b.reregistering = false
			b.mu.Unlock()
		})
	}
	if live {
		for _, r := range b.registrationsLocked(lease) {
			work = append(work, func() { b.emit(b.register(r)) })
		}
		if as := b.startableLocked(lease); len(as) > 0 {
			work = append(work, func() { b.emit(b.start(as)) })
		}
	}
	if len(b.deletes) > 0 && !b.deleting && lease != 0 && b.deletesDueLocked(now) {
		b.deleting = true
		work = append(work, b.deleteKeys)
	}
	b.unlock()
	for _, w := range work {
		b.wg.Go(w)
	}
}

func (np *pipeline) anyLostLocked() bool {
	for _, q := range np.queries {
		if q.st == running && q.lost && q.token == "" {
			return true
		}
	}
	return false
}
