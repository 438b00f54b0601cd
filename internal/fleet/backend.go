// Package fleet is poolagent's admission across many hosts: the
// database-wide limits of YDB's resource pools (CONCURRENT_QUERY_LIMIT,
// QUEUE_SIZE, DATABASE_LOAD_CPU_THRESHOLD, QUERY_CANCEL_AFTER_SECONDS) kept
// in an etcd cluster, so that every daemon of a cluster admits against the
// same running set and the same FIFO queue. It implements the rules of
// package admission, which stays the single-host reference: with every
// client on one node the two decide alike.
//
// Each daemon holds a session lease; its node record and every key of its
// queries are attached to it, so a node that dies frees its slots when the
// lease expires. Queued queries wake through a watch on the cluster's
// prefix. docs/fleet.md states the key layout, the failure semantics and
// what over-admission is possible.
package fleet

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultTTL is the session lease's time to live: a node that stops
// renewing it (it died, or lost etcd) has its slots freed this long after
// its last renewal. The node renews every TTL/20 (renewInterval).
const DefaultTTL = 10 * time.Second

// DefaultRequestTimeout bounds each etcd request.
const DefaultRequestTimeout = 2 * time.Second

// ErrClusterUnreachable: a query of a globally limited pool could not be
// admitted because this node cannot reach etcd.
var ErrClusterUnreachable = errors.New("cluster unreachable")

// ErrConflict: the pool definitions changed in the cluster between reading
// them and writing the change.
var ErrConflict = errors.New("pool definitions changed concurrently")

// Config says which cluster to join and as which node.
type Config struct {
	// Endpoints are the etcd client URLs.
	Endpoints []string
	// TLS, when set, is the client's TLS configuration (client certificate
	// and the CA that signed the members').
	TLS *tls.Config
	// Cluster names the cluster: its keys live under /poolagent/<Cluster>/.
	Cluster string
	// Node names this daemon in the cluster; unique per cluster.
	Node string
	// TTL is the session lease's time to live; DefaultTTL when 0.
	TTL time.Duration
	// RequestTimeout bounds each etcd request; DefaultRequestTimeout when 0.
	RequestTimeout time.Duration
	// Load tunes CPU-load admission (refresh interval, reservation).
	Load admission.LoadConfig
	// VCPUs and Version go into the node record.
	VCPUs   int
	Version string
	// Definitions, when set, is called with the cluster's pool definitions
	// each time they change (not for the first reading: see Definitions).
	Definitions func(Definitions)
	// Log receives the backend's own events; slog.Default() when nil.
	Log *slog.Logger
}

// NodeRecord is what each node publishes under nodes/<node>.
type NodeRecord struct {
	Node  string `json:"node"`
	VCPUs int    `json:"vcpus"`
	// LoadPercent is the node's measured CPU load at its last refresh,
	// percent of the node: the moving average DATABASE_LOAD_CPU_THRESHOLD
	// is checked against, averaged over the live nodes.
	LoadPercent float64 `json:"load_percent"`
	Version     string  `json:"version"`
	// UpdatedUnix is when the node last wrote the record, seconds.
	UpdatedUnix int64 `json:"updated"`
}

// Backend is one node's view of, and its part in, the cluster's admission.
// Its methods are safe for concurrent use.
//
// It is the composition of three parts, each with a lock of its own: the
// node pipeline (this node's queries, tokens, claims and keys to delete:
// pipeline.go), the cluster view (revision, views, node records:
// cluster.go) and the session (lease and liveness: session.go). The
// cluster's and the session's locks are each taken alone or under the
// pipeline's, never one under the other, nor the pipeline's under
// either; none is held during an etcd request or a call of
// cfg.Definitions. Backend itself holds the etcd client and the loops,
// and is the one that asks etcd.
type Backend struct {
	cfg  Config
	cli  *clientv3.Client
	keys keySpace
	log  *slog.Logger

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{}
	// wake tells an idle tick loop that a query may be waiting (poke).
	wake   chan struct{}
	events chan admission.Event

	session *session
	cluster *cluster
	// The node pipeline, embedded: b.mu is its lock.
	*pipeline
}

// Health is the backend's connection to etcd, for metrics and views.
type Health struct {
	// Connected: the node's session lease is certainly alive (renewed
	// less than a TTL ago).
	Connected bool
	Lease     int64
	// LastRoundTrip is the duration of the latest successful request.
	LastRoundTrip time.Duration
	// LastError is the latest failed request's error; "" after a success.
	LastError string
	// WatchRevision is the revision the node's view of the cluster
	// reflects; WatchLag is how long ago the watch last delivered.
	WatchRevision int64
	WatchAt       time.Time
	// WatchEvents and WatchBytes count the key events the watch has
	// delivered and their encoded size (key, value, revisions): what the
	// cluster's writes cost this node, growing with the cluster's key
	// writes, not with this node's own queries.
	WatchEvents, WatchBytes int64
	// Sessions counts the leases the node has held (1 + re-registrations).
	Sessions int
}

// Open connects to etcd, checks that the cluster answers within the
// request timeout, takes a session lease, publishes the node record and
// starts watching. pools are the limits in force (see Configure).
func Open(ctx context.Context, cfg Config, pools map[string]admission.Limits) (*Backend, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	load, err := admission.NewLoadWindow(cfg.Load)
	if err != nil {
		return nil, err
	}
	cli, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	keys, log := newKeySpace(cfg.Cluster), cfg.Log.With("cluster", cfg.Cluster, "node", cfg.Node)
	b := &Backend{
		cfg:     cfg,
		cli:     cli,
		keys:    keys,
		log:     log,
		kick:    make(chan struct{}, 1),
		wake:    make(chan struct{}, 1),
		events:  make(chan admission.Event, 256),
		session: &session{},
		cluster: newCluster(keys, log),
	}
	b.pipeline = newPipeline(cfg, keys, log, b.cluster, load, b.poke)
	b.Configure(pools, time.Now())
	b.ctx, b.cancel = context.WithCancel(context.Background())
	err = b.newSession(ctx)
	if err == nil {
		err = b.loadViews(ctx)
	}
	switch {
	case err != nil && !transient(err):
		if lease := b.session.id(); lease != 0 {
			cli.Revoke(context.Background(), lease)
		}
		b.cancel()
		cli.Close()
		return nil, err
	case err != nil:
		// The session loop takes the lease and the watch loop reads the
		// cluster when etcd answers; meanwhile pools without a global
		// limit admit and the others wait (Submit), as after a cut.
		b.log.Warn("etcd unreachable at start: pools without a global limit admit, globally limited pools wait until it answers", "err", err)
	}
	run := b.ctx
	b.wg.Go(func() { b.sessionLoop(run) })
	b.wg.Go(func() { b.watchLoop(run) })
	b.wg.Go(func() { b.pumpLoop(run) })
	b.wg.Go(func() { b.tickLoop(run) })
	return b, nil
}

// withDefaults checks cfg and fills in the defaults of the fields left
// zero.
func (cfg Config) withDefaults() (Config, error) {
	if err := validNodeName("cluster", cfg.Cluster); err != nil {
		return cfg, err
	}
	if err := validNodeName("node", cfg.Node); err != nil {
		return cfg, err
	}
	if len(cfg.Endpoints) == 0 {
		return cfg, errors.New("no etcd endpoints; want https://HOST:2379[,...]")
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.TTL < 2*time.Second {
		return cfg, fmt.Errorf("session TTL %s: want at least 2s (etcd leases count whole seconds)", cfg.TTL)
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return cfg, nil
}

// newClient is the etcd client of cfg.
func newClient(cfg Config) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.Endpoints,
		TLS:                  cfg.TLS,
		DialTimeout:          cfg.RequestTimeout,
		DialKeepAliveTime:    cfg.TTL / 3,
		DialKeepAliveTimeout: cfg.RequestTimeout,
		// gRPC's default reconnection backoff grows to 120 s: a node back
		// in touch after a cut could wait that long, and lose a lease
		// that outlived the cut. At most one renewal interval between
		// attempts keeps it within the lease's margin (renewInterval).
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: renewInterval(cfg.TTL), Multiplier: 1.6, Jitter: 0.2, MaxDelay: renewInterval(cfg.TTL)},
			MinConnectTimeout: cfg.RequestTimeout,
		})},
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %v: %w", cfg.Endpoints, err)
	}
	return cli, nil
}

// Close stops the backend. When no query of this node runs, it revokes
// the session lease so the node leaves the cluster at once; otherwise the
// lease expires within the TTL and a daemon started meanwhile adopts the
// running queries and registers them again.
func (b *Backend) Close() error {
	b.cancel()
	b.wg.Wait()
	b.mu.Lock()
	lease, busy := b.session.id(), false
	for _, q := range b.queries {
		busy = busy || (q.st == running && !q.local)
	}
	dels := b.takeDeletesLocked(maxBatchDeletes)
	b.mu.Unlock()
	if lease != 0 && len(dels) > 0 {
		// The keys of ended queries still waiting (deleteLinger), so that
		// they hold no slot until the lease expires.
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.RequestTimeout)
		b.cli.Txn(ctx).Then(deleteOps(dels)...).Commit()
		cancel()
	}
	if lease != 0 && !busy {
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.RequestTimeout)
		b.cli.Revoke(ctx, lease)
		cancel()
	}
	return b.cli.Close()
}

// request bounds one etcd request; Close ends it.
func (b *Backend) request() (context.Context, context.CancelFunc) {
	return context.WithTimeout(clientv3.WithRequireLeader(b.ctx), b.cfg.RequestTimeout)
}

func (b *Backend) unreachable(err error) error {
	return fmt.Errorf("%w: etcd at %v: %w", ErrClusterUnreachable, b.cfg.Endpoints, err)
}

// transient reports whether err is etcd not answering (no connection, no
// leader, a request timed out), which passes, rather than a refusal
// (authentication, permission, a bad request), which does not.
func transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	code := codes.OK
	var ee rpctypes.EtcdError
	if st, ok := status.FromError(err); ok {
		code = st.Code()
	} else if errors.As(err, &ee) {
		code = ee.Code()
	}
	return code == codes.Unavailable || code == codes.DeadlineExceeded
}

func (b *Backend) record() NodeRecord {
	b.mu.Lock()
	defer b.mu.Unlock()
	return NodeRecord{
		Node: b.cfg.Node, VCPUs: b.cfg.VCPUs, Version: b.cfg.Version,
		LoadPercent: b.load.Stats().AveragePercent, UpdatedUnix: time.Now().Unix(),
	}
}

func (b *Backend) putRecord(ctx context.Context, lease clientv3.LeaseID) error {
	v, _ := json.Marshal(b.record())
	_, err := b.cli.Put(ctx, b.keys.node(b.cfg.Node), string(v), clientv3.WithLease(lease))
	return err
}

// poke wakes the pump, and the tick loop if it idles.
func (b *Backend) poke() {
	for _, c := range []chan struct{}{b.kick, b.wake} {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// emit sends events no call returned; b.mu is not held.
func (b *Backend) emit(events []admission.Event) {
	for _, ev := range events {
		select {
		case b.events <- ev:
		case <-b.ctx.Done():
			return
		}
	}
}

// Events implements admission.Backend: queued queries of this node that
// started or failed without a call of the daemon (another node freed a
// slot, a lease expired, the backend's own tick).
func (b *Backend) Events() <-chan admission.Event { return b.events }

// Health returns the state of the connection to etcd.
func (b *Backend) Health() Health {
	return b.cluster.state(b.session.state(time.Now()))
}

// Nodes returns the live nodes' records (those whose lease is alive), by
// name.
func (b *Backend) Nodes() []NodeRecord { return b.cluster.records() }

var _ admission.Backend = (*Backend)(nil)
