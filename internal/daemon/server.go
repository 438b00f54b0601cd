// Package daemon is poolagent's admission service: it listens on a Unix
// socket, identifies each caller by the kernel's peer credentials
// (package peer), classifies and admits their queries (package
// admission), places each admitted query's process in its own cgroup
// <root>/<pool>/<query>, holds the slot until that cgroup is empty, and
// re-plans the pools' CPU shares (weighted max-min) as pools become active
// or idle. The messages are package protocol, the client side package
// client; package service runs a Server as a system service.
package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/guard"
	"github.com/poolagent/poolagent/internal/history"
	"github.com/poolagent/poolagent/internal/metrics"
	"github.com/poolagent/poolagent/internal/peer"
	"github.com/poolagent/poolagent/internal/pooltree"
	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/internal/tell"
	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// Cgroups is the cgroup work the daemon needs: the pool cgroups' plan and
// counters, and the query cgroups, each of which a query holds as a
// *pooltree.Query working through the tree's pooltree.QueryTree. The
// production implementation, *pooltree.Handle, writes and reads through
// package cgroupfs; tests may use a fake. Pool names are plain names,
// never paths. A query cgroup that no longer exists (its pool was dropped
// and its processes moved to default) reads as empty.
type Cgroups interface {
	pooltree.QueryTree
	// Apply makes the pool cgroups match d, writing only what differs.
	Apply(d planner.Desired) error
	// Repair is Apply of the whole tree that also says how many writes it
	// made: none when the tree still matched d. With queries false it
	// may leave out the values of the query cgroups made for d
	// (pooltree.Handle.Repair).
	Repair(d planner.Desired, queries bool) (writes int, err error)
	// Pending are the lowered memory limits the last Apply or Repair
	// held back, their cgroups using more.
	Pending() []cgroupfs.Pending
	// Queries lists the query cgroups that exist.
	Queries() ([]pooltree.QueryKey, error)
	// PoolMemory reads the pool cgroup's memory; nil where the memory
	// controller is not there.
	PoolMemory(pool string) (*observe.Memory, error)
	// PoolPids reads the pool cgroup's tasks; nil where the pids
	// controller is not there for it.
	PoolPids(pool string) (*observe.Pids, error)
	// PoolStats reads the counters of the named pools' cgroups: CPU
	// accounting and, where the kernel keeps them, CPU pressure and
	// memory.
	PoolStats(pools []string) (map[string]observe.Sample, error)
	// The pools' and queries' CPU counters, as the history reads them
	// (PoolCPUStats the throttling prediction too).
	history.Reader
}

// rootWatcher is a Cgroups that can say its pool root was removed while
// it was open: *pooltree.Handle.
type rootWatcher interface {
	RootInPlace() error
}

// LoadSource measures the host's CPU load: the busy fraction (0..1) of
// all CPUs since the previous call. *observe.LoadSampler is one.
type LoadSource interface {
	Sample() (float64, error)
}

// Policy is what the daemon serves: the pool model (pools, classifiers,
// grants), the node it plans for, and the host's admin group.
type Policy struct {
	Model *planner.Model
	Node  planner.Node
	// AdminGroup is a Unix group whose members administer the pools
	// besides root; "" for none.
	AdminGroup string
}

// Config tunes the daemon.
type Config struct {
	// Socket is the Unix socket's path; DefaultSocket when empty. Its
	// directory is created if missing, and the socket is made
	// world-writable (0666) so that every local user may connect.
	Socket string
	// Listener, when set, is Socket already listening, passed by systemd's
	// socket activation (poolagent.socket): Serve accepts on it instead of
	// creating the socket, and leaves the socket file to systemd, so
	// clients that connect while the daemon restarts wait in its backlog.
	Listener *net.UnixListener
	// LoadSample is the host load sampling interval;
	// admission.DefaultSampleInterval when 0.
	LoadSample time.Duration
	// Load tunes CPU-load admission (refresh interval, reservation) of
	// the single-host admission.Controller.
	Load admission.LoadConfig
	// Admission is the admission state; nil makes a single-host
	// admission.Controller with Load. New configures it with the
	// policy's limits.
	Admission admission.Backend
	// Cluster, in fleet mode, is the cluster's side of the views and
	// metrics; nil on a single host.
	Cluster ClusterView
	// Progress is how often a queued client that asked for progress is
	// told its position if it changed; 1 s when 0.
	Progress time.Duration
	// ProcRoot is the proc filesystem used to check the processes clients
	// name; "/proc" when empty.
	ProcRoot string
	// HostRoot is where the kernel's files (sys, proc) are read to check
	// the throttling model's assumptions (observe.ReadModelHost); "" is /.
	HostRoot string
	// Log receives the daemon's own events; slog.Default() when nil.
	Log *slog.Logger
	// MayLeave lists cgroups ("/"-rooted, as /proc/PID/cgroup names them)
	// whose CPU and memory limits a query's process may leave: a process
	// held by a limit set on any other cgroup that the query cgroup is not
	// below is refused (ErrConfined). A cgroup allows its descendants.
	MayLeave []string
	// Reconcile is how often the pool tree is compared with the plan and
	// drift repaired (also on every Reload); DefaultReconcile when 0.
	Reconcile time.Duration
	// Limits bound what local users can make the daemon hold; zero
	// fields take their defaults (docs/security.md).
	Limits Limits
	// History is what the daemon keeps of each pool's recent counters
	// for `poolagent advise --pool`; a zero Window keeps none.
	History history.Config
	// MetricsPerUser exports each user's running and queued queries per
	// pool, with a user label; off, only the counts of distinct users.
	MetricsPerUser bool

	// beforeMove, when set (tests), runs while a process is held and
	// checked, just before its pid is written to cgroup.procs: the window
	// in which a reaped process's pid could pass to another.
	beforeMove func(pid int)
}

// DefaultReconcile is how often a daemon compares the pool tree with its
// plan unless told otherwise.
const DefaultReconcile = 30 * time.Second

// Server is a running admission service, made of parts that each own one
// lock and one job:
//
//   - changes: reloads and run-time DDL, each installing a policy in the
//     registry and the replanner;
//   - replanner: the policy in force, dividing the CPU among the pools
//     and applying it;
//   - registry: the admission backend and the queries of connected
//     clients;
//   - the cgroups (Cgroups; pooltree.Handle serialises its writes).
//
// Beside them, parts that only read those and hold no lock of the order:
// views (what `poolagent pools` and `queries` show), limitHits (what
// poolagent's limits did to a query, told to its client), prediction (the
// throttling prediction and starvation for the metrics), queryNames, and
// the pools' history (package history), which the daemon hands the plan
// and its running queries.
//
// Lock order: ops → plan → state → cgroups, that is changes.mu, then
// replanner.mu, then registry.mu, then the Cgroups' own lock. A part holding
// its lock may call into a part after it in this order, never into one
// before it, and no lock is held while waiting on a client or a channel.
// The socket service (Serve, the sessions) holds none of these while it
// talks to a client; its own count of what each user holds (perUser) has a
// lock that is a leaf: nothing is called while it is held.
type Server struct {
	cfg Config
	// modelCaveats are the throttling model's assumptions that do not
	// hold for the prediction on this host (metrics.PredictionCaveats),
	// read once.
	modelCaveats observe.ModelCaveats
	limits       Limits
	peers        *perUser
	// loops are the accept loops running, for the health check.
	loops sync.Map // *guard.Listener -> struct{}
	// listening is closed once Serve accepts clients.
	listening     chan struct{}
	listeningOnce sync.Once
	cg            Cgroups
	users         peer.Users
	load          LoadSource
	procs         peer.Checker
	changes       *changes
	rp            *replanner
	reg           *registry
	// names names this run's queries, unlike any earlier run's.
	names queryNames
	// prediction and waitHists feed the metrics (metrics.go).
	prediction *prediction
	waitHists  sync.Map // pool name -> *metrics.WaitRecorder
	// history is each pool's recent counters; nil when kept for no
	// window.
	history *history.Rolling
	// hits reads and tells what poolagent's limits did to each query.
	hits *limitHits
	// views builds what `poolagent pools` and `queries` show.
	views *views
}

// New checks the configuration and applies the initial plan (no pool
// active), so that every pool cgroup exists before the first query.
func New(cfg Config, policy Policy, cg Cgroups, users peer.Users, load LoadSource) (*Server, error) {
	if cfg.Socket == "" {
		cfg.Socket = protocol.DefaultSocket
	}
	if cfg.LoadSample == 0 {
		cfg.LoadSample = admission.DefaultSampleInterval
	}
	if cfg.LoadSample < 0 {
		return nil, fmt.Errorf("load sample interval %s: want a positive duration", cfg.LoadSample)
	}
	if cfg.Progress == 0 {
		cfg.Progress = time.Second
	}
	if cfg.Reconcile == 0 {
		cfg.Reconcile = DefaultReconcile
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.HostRoot == "" {
		cfg.HostRoot = "/"
	}
	if err := cfg.Limits.check(); err != nil {
		return nil, err
	}
	if err := cfg.History.Check(); err != nil {
		return nil, err
	}
	limits := cfg.Limits.withDefaults()
	backend := cfg.Admission
	if backend == nil {
		ctl, err := admission.NewController(cfg.Load, admission.LimitsFromModel(policy.Model))
		if err != nil {
			return nil, err
		}
		backend = ctl
	}
	procs, err := peer.NewChecker(cfg.ProcRoot)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:          cfg,
		limits:       limits,
		peers:        newPerUser(limits),
		cg:           cg,
		users:        users,
		load:         load,
		procs:        procs,
		listening:    make(chan struct{}),
		names:        queryNames{start: strconv.FormatInt(time.Now().Unix(), 36)},
		modelCaveats: metrics.PredictionCaveats(observe.ReadModelHost(cfg.HostRoot)),
	}
	if len(s.modelCaveats) > 0 {
		cfg.Log.Warn(s.modelCaveats.String(), "reasons", s.modelCaveats.Reasons())
	}
	s.reg = newRegistry(backend, policy)
	s.rp = newReplanner(cg, cfg.Log, s.reg)
	s.hits = &limitHits{cg: cg, rp: s.rp, log: cfg.Log, tellers: tell.New()}
	s.changes = &changes{log: cfg.Log, reg: s.reg, rp: s.rp}
	s.changes.set(policy)
	s.views = &views{cg: cg, reg: s.reg, rp: s.rp, changes: s.changes, cluster: cfg.Cluster, names: &s.names}
	if err := s.rp.plan(); err != nil {
		return nil, err
	}
	if cfg.History.Window > 0 {
		s.history = history.New(cfg.History, cg, sampled{s.rp, s.reg}, cfg.ProcRoot, cfg.Log)
	}
	s.prediction = &prediction{cg: cg, rp: s.rp, reg: s.reg, history: s.history, log: cfg.Log,
		predictor: metrics.NewPredictor(), starvation: metrics.NewStarvation()}
	return s, nil
}

// Listening is closed once Serve accepts clients.
func (s *Server) Listening() <-chan struct{} { return s.listening }

// Serve listens on the socket and serves clients until ctx ends. Query
// cgroups that still hold processes when it starts (queries of an earlier
// daemon) keep their slots until they are empty. Queries still running
// when it ends keep their cgroups for the next daemon. It returns once
// every goroutine it started has ended: the reads of every connection end
// with ctx, and a reply still being written within Limits.Write.
func (s *Server) Serve(ctx context.Context) error {
	sock := s.cfg.Listener
	if sock == nil {
		var err error
		var madeDir string
		if sock, madeDir, err = listen(s.cfg.Socket); err != nil {
			return err
		}
		if madeDir != "" {
			// Runs last, once the socket is closed (and so unlinked): a
			// daemon leaves no directory it made behind. Only an empty
			// directory is removed.
			defer os.Remove(madeDir)
		}
	}
	refusal, _ := json.Marshal(protocol.Reply{Type: protocol.ReplyError, Code: protocol.CodeLimit,
		Error: "the poolagent daemon is out of file descriptors: try again in a few seconds"})
	ln, err := guard.New(sock, "socket "+s.cfg.Socket, s.cfg.Log, append(refusal, '\n'))
	if err != nil {
		sock.Close()
		return err
	}
	defer ln.DropReserve()
	// Deferred calls run last first: the goroutines are told to end
	// (cancel) before Serve waits for them.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := s.adoptRunning(ctx, &wg); err != nil {
		ln.Close()
		return err
	}
	wg.Go(func() { s.sampleLoop(ctx) })
	if s.history != nil {
		wg.Go(func() { s.history.Run(ctx) })
	}
	wg.Go(func() { s.rp.loop(ctx) })
	wg.Go(func() { s.rp.reconcileLoop(ctx, s.cfg.Reconcile) })
	wg.Go(func() { s.reg.deliver(ctx) })
	wg.Go(func() {
		<-ctx.Done()
		ln.Close()
		s.peers.stop()
	})
	s.loops.Store(ln, struct{}{})
	defer s.loops.Delete(ln)
	s.listeningOnce.Do(func() { close(s.listening) })
	s.cfg.Log.Info("listening", "socket", s.cfg.Socket)
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept on %s: %w", s.cfg.Socket, err)
		}
		wg.Go(func() { s.serveConn(ctx, conn.(*net.UnixConn)) })
	}
}

// adoptRunning counts the populated query cgroups found at start as
// running queries and frees each slot when its cgroup empties. Empty ones
// (an earlier daemon died before removing them) are removed at once; one
// that cannot be read is logged and left alone.
func (s *Server) adoptRunning(ctx context.Context, wg *sync.WaitGroup) error {
	queries, err := s.cg.Queries()
	if err != nil {
		return fmt.Errorf("list running queries: %w", err)
	}
	s.names.avoid(queries)
	for _, k := range queries {
		cg := pooltree.NewQuery(s.cg, k)
		busy, err := cg.Populated()
		if err != nil {
			s.cfg.Log.Error("query cgroup of an earlier daemon cannot be read; not counted", "pool", k.Pool, "query", k.Name, "err", err)
			continue
		}
		if !busy {
			if err := cg.Remove(); err != nil {
				s.cfg.Log.Error("remove empty query cgroup of an earlier daemon", "pool", k.Pool, "query", k.Name, "err", err)
			}
			continue
		}
		q := s.adoptQuery(cg)
		s.cfg.Log.Info("query of an earlier daemon still running", "pool", k.Pool, "query", k.Name)
		wg.Go(func() {
			// As for a query of this daemon: a cgroup that cannot be
			// read or removed frees its slot rather than hold it for ever.
			if _, err := q.end(ctx); err != nil && ctx.Err() == nil {
				s.cfg.Log.Error("query cgroup of an earlier daemon cannot be read or removed; slot freed", "pool", k.Pool, "query", k.Name, "err", err)
			}
		})
	}
	if len(queries) > 0 {
		s.rp.request()
	}
	return nil
}

// queryNames names this run's queries "q<start>-<qid>": start is the
// run's start time in seconds, base 36, after every earlier daemon's whose
// query cgroups remain (avoid), so names do not repeat across restarts.
// start is set before serving and only read after.
type queryNames struct{ start string }

// name is the id of query qid and the name of its cgroup below its pool.
func (n *queryNames) name(qid admission.QueryID) string {
	return "q" + n.start + "-" + strconv.FormatUint(uint64(qid), 10)
}

// avoid makes the names of this daemon's queries differ from those of
// the query cgroups found at start. A daemon restarted within the second an
// earlier one started in would otherwise name its queries like the earlier
// one's still running, and place new processes in their cgroups; it takes
// a start after the latest one found instead. Called before serving.
func (n *queryNames) avoid(queries []pooltree.QueryKey) {
	start, err := strconv.ParseInt(n.start, 36, 64)
	if err != nil {
		return
	}
	latest := start - 1
	for _, q := range queries {
		rest, ok := strings.CutPrefix(q.Name, "q")
		prefix, _, cut := strings.Cut(rest, "-")
		if v, err := strconv.ParseInt(prefix, 36, 64); ok && cut && err == nil {
			latest = max(latest, v)
		}
	}
	if latest >= start {
		n.start = strconv.FormatInt(latest+1, 36)
	}
}

// ErrNotSocket: the socket's path names a file that exists and is not a
// socket, which the daemon does not replace.
var ErrNotSocket = errors.New("exists and is not a socket")

// listen creates the socket, replacing a stale one left by a daemon that
// died, and opens it to every local user. madeDir is the socket's
// directory when listen made it, for the daemon to remove at exit.
func listen(path string) (ln *net.UnixListener, madeDir string, err error) {
	defer func() {
		if err != nil && madeDir != "" {
			os.Remove(madeDir)
			madeDir = ""
		}
	}()
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, madeDir, fmt.Errorf("socket directory: %w", err)
		}
		// 0755 whatever the umask: every user must reach the socket.
		madeDir = dir
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, madeDir, fmt.Errorf("socket directory: %w", err)
		}
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return nil, madeDir, fmt.Errorf("socket %s: another daemon is listening on it", path)
	}
	// Only a socket is replaced: --socket naming a file by mistake must
	// not delete it.
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() != os.ModeSocket {
		return nil, madeDir, fmt.Errorf("socket %s: %w (%s); give a path that is free or a stale socket", path, ErrNotSocket, fileKind(fi.Mode()))
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, madeDir, fmt.Errorf("remove stale socket: %w", err)
	}
	ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, madeDir, fmt.Errorf("listen on %s: %w", path, err)
	}
	// NOTE: connecting to a Unix socket needs write permission on it; the
	// caller's identity comes from SO_PEERCRED, so anyone may connect.
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, madeDir, fmt.Errorf("socket mode: %w", err)
	}
	return ln, madeDir, nil
}

// fileKind names a file's type for an error.
func fileKind(m os.FileMode) string {
	switch m.Type() {
	case 0:
		return "a regular file"
	case os.ModeDir:
		return "a directory"
	case os.ModeSymlink:
		return "a symbolic link"
	case os.ModeNamedPipe:
		return "a named pipe"
	case os.ModeDevice, os.ModeDevice | os.ModeCharDevice:
		return "a device"
	}
	return "not a socket"
}

func (s *Server) sampleLoop(ctx context.Context) {
	everyTick(ctx, s.cfg.LoadSample, func(now time.Time) {
		busy, err := s.load.Sample()
		if errors.Is(err, observe.ErrNoElapsed) {
			return
		}
		if err != nil {
			s.cfg.Log.Error("host load sample", "err", err)
			return
		}
		if s.reg.sample(now, 100*busy) {
			s.rp.observeDemand(now)
			s.rp.request()
		}
	})
}
