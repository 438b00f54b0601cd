package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/etcdtest"
	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/internal/protocol"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The chaos harness: a real 3-member etcd cluster, real `poolagent daemon`
// processes as the nodes (each reaching every member through proxies of
// its own that can sever, hold or delay its traffic), and clients running
// queries through `poolagent-run` that log their own start and end from
// inside their query cgroup.

// chaosQueryEnv makes the test binary a query (see runChaosQuery).
const chaosQueryEnv = "POOLAGENT_FLEET_CHAOS_QUERY"

// runChaosQuery is the test binary as a query: spec is "LOG MILLISECONDS";
// it sleeps that long and appends "START END" (Unix nanoseconds) to LOG in
// one write.
func runChaosQuery(spec string) int {
	log, ms, _ := strings.Cut(spec, " ")
	d, err := strconv.Atoi(ms)
	if err != nil {
		return 2
	}
	start := time.Now()
	time.Sleep(time.Duration(d) * time.Millisecond)
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return 1
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%d %d\n", start.UnixNano(), time.Now().UnixNano()); err != nil {
		return 1
	}
	return 0
}

var chaosNeed = kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1}, Controllers: []string{"cpuacct"}}

type chaos struct {
	t        testing.TB
	etcd     *etcdtest.Cluster
	dir      string
	bin, run string
	root     kerneltest.Root
	ttl      time.Duration
	pools    string
	nodes    []*chaosNode
}

type chaosNode struct {
	name   string
	links  []*proxy // one per etcd member
	socket string
	args   []string
	mu     sync.Mutex
	cmd    *exec.Cmd
	logs   bytes.Buffer
}

// chaosBinDir is the directory chaosBinaries made, "" before; TestMain
// removes it.
var chaosBinDir string

// chaosBinaries builds poolagent and poolagent-run once per test binary.
var chaosBinaries = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "poolagent-chaos-bin-")
	if err != nil {
		return "", err
	}
	chaosBinDir = dir
	for _, name := range []string{"poolagent", "poolagent-run"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), "github.com/poolagent/poolagent/cmd/"+name).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("go build %s: %w: %s", name, err, out)
		}
	}
	return dir, nil
})

// newChaos starts an etcd cluster of 3 members (fsync on when fsync) and
// nodes daemons of one cluster sharing pools, with session TTL ttl.
func newChaos(t testing.TB, nodes int, fsync bool, ttl time.Duration, pools string) *chaos {
	t.Helper()
	h := kerneltest.Require(t, chaosNeed)
	bins, err := chaosBinaries()
	if err != nil {
		t.Fatal(err)
	}
	c := &chaos{
		t: t, etcd: etcdtest.Start(t, etcdtest.Options{Members: 3, Fsync: fsync}), dir: t.TempDir(),
		bin: filepath.Join(bins, "poolagent"), run: filepath.Join(bins, "poolagent-run"),
		root: h.NewRoot(t, chaosNeed), ttl: ttl, pools: pools,
	}
	os.Chmod(c.dir, 0o755)
	file := filepath.Join(c.dir, "pools.sql")
	if err := os.WriteFile(file, []byte(pools), 0o644); err != nil {
		t.Fatal(err)
	}
	for range nodes {
		c.start(c.addNode())
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			c.stop(n, syscall.SIGTERM)
			if t.Failed() {
				n.mu.Lock()
				t.Logf("node %s log:\n%s", n.name, n.logs.String())
				n.mu.Unlock()
			}
		}
	})
	return c
}

// addNode makes the next node, its links to the members and its daemon's
// arguments; c.start starts it.
func (c *chaos) addNode() *chaosNode {
	c.t.Helper()
	i := len(c.nodes)
	n := &chaosNode{name: fmt.Sprintf("n%d", i), socket: filepath.Join(c.dir, fmt.Sprintf("n%d.sock", i))}
	var eps []string
	for _, m := range c.etcd.Members {
		p := startProxy(c.t, m.ClientURL)
		n.links = append(n.links, p)
		eps = append(eps, p.url())
	}
	state := filepath.Join(c.dir, "state-"+n.name)
	n.args = []string{"daemon", "--pools", filepath.Join(c.dir, "pools.sql"), "--root", filepath.Join(c.root.Path, n.name), "--socket", n.socket,
		"--state-dir", state, "--create-state-dir", "--cpus", "2", "--log-level", "info",
		"--etcd", strings.Join(eps, ","), "--cluster", "chaos", "--node", n.name, "--etcd-ttl", c.ttl.String()}
	c.nodes = append(c.nodes, n)
	return n
}

// single starts a daemon of the same pools without etcd (a cluster of
// one), for comparison.
func (c *chaos) single() *chaosNode {
	c.t.Helper()
	n := &chaosNode{name: "single", socket: filepath.Join(c.dir, "single.sock")}
	n.args = []string{"daemon", "--pools", filepath.Join(c.dir, "pools.sql"), "--root", filepath.Join(c.root.Path, n.name),
		"--socket", n.socket, "--cpus", "2", "--log-level", "warn"}
	c.start(n)
	c.t.Cleanup(func() { c.stop(n, syscall.SIGTERM) })
	return n
}

// start starts node n's daemon and waits for its socket.
func (c *chaos) start(n *chaosNode) {
	c.t.Helper()
	os.Remove(n.socket)
	cmd := exec.Command(c.bin, n.args...)
	n.mu.Lock()
	cmd.Stderr = &syncWriter{mu: &n.mu, w: &n.logs}
	n.mu.Unlock()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	n.mu.Lock()
	n.cmd = cmd
	n.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(n.socket); err == nil {
			return
		}
		if time.Now().After(deadline) {
			n.mu.Lock()
			defer n.mu.Unlock()
			c.t.Fatalf("node %s did not start:\n%s", n.name, n.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends sig to node n's daemon (by its PID) and reaps it.
func (c *chaos) stop(n *chaosNode, sig syscall.Signal) {
	n.mu.Lock()
	cmd := n.cmd
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(sig)
	cmd.Wait()
}

type syncWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// fault sets every link of node n: "sever", "hold", "restore".
func (n *chaosNode) fault(kind string) {
	for _, p := range n.links {
		switch kind {
		case "sever":
			p.sever()
		case "hold":
			p.hold()
		case "restore":
			p.restore()
		}
	}
}

func (n *chaosNode) delay(d time.Duration) {
	for _, p := range n.links {
		p.setDelay(d)
	}
}

// outcome is what one client run got.
type outcome struct {
	node    string
	pool    string
	err     string // "" when it ran
	refused bool   // the daemon refused it (queue full, cut off, deadline)
	start   time.Time
	wall    time.Duration
}

// query runs one query through node n's daemon: sleepMs in pool, logging
// to qlog (none when qlog is ""; then it runs /bin/true).
func (c *chaos) query(n *chaosNode, pool, qlog string, sleepMs int, full bool) outcome {
	var cmd *exec.Cmd
	argv := []string{"--socket", n.socket, "--pool", pool, "--"}
	if qlog == "" {
		argv = append(argv, "/bin/true")
	} else {
		argv = append(argv, os.Args[0], "-test.run=^$")
	}
	// No query of the suite may wait longer than this: a client stuck is
	// a failure, named, not a hung test.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if full {
		cmd = exec.CommandContext(ctx, c.bin, append([]string{"run"}, argv...)...)
	} else {
		cmd = exec.CommandContext(ctx, c.run, argv...)
	}
	if qlog != "" {
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d", chaosQueryEnv, qlog, sleepMs))
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	o := outcome{node: n.name, pool: pool, start: time.Now()}
	err := cmd.Run()
	o.wall = time.Since(o.start)
	if ctx.Err() != nil {
		o.err = fmt.Sprintf("client still waiting after %s", o.wall.Round(time.Second))
		return o
	}
	if err != nil {
		o.err = strings.TrimSpace(stderr.String())
		if o.err == "" {
			o.err = err.Error()
		}
		o.refused = strings.Contains(o.err, "Request was rejected") || strings.Contains(o.err, "cannot reach the cluster") ||
			strings.Contains(o.err, "Delay deadline")
	}
	return o
}

// load runs clients loops of queries in pool (per node in turn) until
// stop is closed, and returns what each run got.
func (c *chaos) load(clients int, pool, qlog string, sleepMs int, full bool, stop <-chan struct{}) func() []outcome {
	return c.loadOn(c.nodes, clients, pool, qlog, sleepMs, full, stop)
}

// loadOn is load through the given nodes.
func (c *chaos) loadOn(nodes []*chaosNode, clients int, pool, qlog string, sleepMs int, full bool, stop <-chan struct{}) func() []outcome {
	var mu sync.Mutex
	var all []outcome
	var wg sync.WaitGroup
	for i := range clients {
		n := nodes[i%len(nodes)]
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				o := c.query(n, pool, qlog, sleepMs, full)
				mu.Lock()
				all = append(all, o)
				mu.Unlock()
				if o.err != "" && !o.refused {
					time.Sleep(50 * time.Millisecond) // its daemon is down: not a busy loop
				}
			}
		})
	}
	return func() []outcome {
		wg.Wait()
		return all
	}
}

// interval is a query's run, from its own log.
type interval struct{ start, end int64 }

func readIntervals(t testing.TB, qlog string) []interval {
	t.Helper()
	data, err := os.ReadFile(qlog)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []interval
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		var iv interval
		if _, err := fmt.Sscanf(line, "%d %d", &iv.start, &iv.end); err == nil {
			out = append(out, iv)
		}
	}
	return out
}

// maxConcurrent is the largest number of intervals running at once, and
// for how long (ns) more than limit ran.
func maxConcurrent(ivs []interval, limit int) (peak int, overNs int64) {
	type ev struct {
		at int64
		d  int
	}
	var evs []ev
	for _, iv := range ivs {
		evs = append(evs, ev{iv.start, 1}, ev{iv.end, -1})
	}
	// Ends before starts at the same instant.
	slices.SortFunc(evs, func(a, b ev) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.d - b.d
	})
	n := 0
	var since int64
	for _, e := range evs {
		if n > limit && n+e.d <= limit {
			overNs += e.at - since
		}
		n += e.d
		if n > limit && n-e.d <= limit {
			since = e.at
		}
		peak = max(peak, n)
	}
	return peak, overNs
}

// keysLeft returns the cluster's query keys, read from etcd directly.
func (c *chaos) keysLeft() []string {
	return queryKeys(c.t, c.etcd.Endpoints(), "chaos")
}

func quantiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	return quantile(ds, 0.5), quantile(ds, 0.99)
}

// TestKernelFleetChaos: three `poolagent daemon` nodes on a 3-member etcd
// cluster (TTL 2 s), twelve clients looping 200 ms queries in a pool with
// C = 4 and room to queue them all, through each fault in turn. Each
// phase asserts from the queries' own start and end logs that at most C
// ran at once (or C plus what docs/fleet.md says the fault may add), that
// nothing was refused but what the fault explains, and that the cluster's
// query keys are back to zero after it.
func TestKernelFleetChaos(t *testing.T) {
	const c4 = 4
	ttl := 2 * time.Second
	ch := newChaos(t, 3, false, ttl, "CREATE RESOURCE POOL olap WITH (CONCURRENT_QUERY_LIMIT = 4, QUEUE_SIZE = 100);\n")
	n0, n1 := ch.nodes[0], ch.nodes[1]
	began := time.Now()
	phase := func(name string, over int, refusable func(outcome) bool, during func()) {
		t.Helper()
		ch.phase(name, c4, over, refusable, during)
	}
	none := func(outcome) bool { return false }
	cutOff := func(nodes ...*chaosNode) func(outcome) bool {
		return func(o outcome) bool {
			return strings.Contains(o.err, "cannot reach the cluster") && slices.ContainsFunc(nodes, func(n *chaosNode) bool { return n.name == o.node })
		}
	}
	phase("baseline", 0, none, func() { time.Sleep(time.Second) })
	phase("racing-admins", 0, none, func() { ch.racingAdmins(12) })
	phase("killed-clients", 0, none, func() { ch.killedClients(30) })
	for _, f := range []struct {
		kind string
		frac float64
	}{{"sever", 0.5}, {"hold", 0.5}, {"sever", 0.9}, {"hold", 0.9}} {
		phase(fmt.Sprintf("%s-%.1fTTL", f.kind, f.frac), 0, none, func() {
			n0.fault(f.kind)
			time.Sleep(time.Duration(f.frac * float64(ttl)))
			n0.fault("restore")
		})
	}
	// Longer than the TTL: n0's lease expires and its running queries (at
	// most C) may run beside C others until they end.
	for _, kind := range []string{"sever", "hold"} {
		phase(kind+"-2TTL", c4, cutOff(n0), func() {
			n0.fault(kind)
			time.Sleep(2 * ttl)
			n0.fault("restore")
		})
	}
	// A daemon killed: restarted within the TTL its old lease still holds
	// its queries' keys while it adopts them (counted twice, never over);
	// restarted after it, its queries ran on beside the slots given away.
	for _, f := range []struct {
		name string
		down time.Duration
		over int
	}{{"kill9-early", ttl / 2, 0}, {"kill9-late", 2 * ttl, c4}} {
		phase(f.name, f.over, none, func() {
			ch.stop(n1, syscall.SIGKILL)
			time.Sleep(f.down)
			ch.start(n1)
		})
	}
	// A daemon killed and started again while it cannot reach etcd: it
	// serves at once (pools without a global limit admit, the olap queries
	// sent to it are refused as cut off), its lease expires meanwhile and
	// its queries run on beside the slots given away, as in kill9-late.
	phase("restart-cut-off", c4, cutOff(n1), func() {
		ch.stop(n1, syscall.SIGKILL)
		n1.fault("sever")
		ch.start(n1)
		time.Sleep(2 * ttl)
		n1.fault("restore")
		time.Sleep(ttl)
	})
	// Members: one follower of three down changes nothing (the leader's
	// loss is an election, which the quorum phase covers); two down stop
	// every admission (refused as cut off) and nothing over-admits; back,
	// it resumes.
	m := ch.etcd.Members
	phase("member-down", 0, none, func() {
		f := ch.follower()
		ch.etcd.Kill(f)
		time.Sleep(ttl)
		if err := ch.etcd.Restart(f); err != nil {
			t.Fatal(err)
		}
	})
	phase("quorum-lost", 0, cutOff(ch.nodes...), func() {
		ch.etcd.Kill(m[1])
		ch.etcd.Kill(m[2])
		time.Sleep(2 * ttl)
		var wg sync.WaitGroup
		for _, mm := range m[1:] {
			wg.Go(func() {
				if err := ch.etcd.Restart(mm); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		time.Sleep(ttl)
	})
	phase("after-quorum", 0, none, func() { time.Sleep(time.Second) })
	t.Logf("chaos suite: %s", time.Since(began).Round(time.Second))
}

// TestKernelFleetStartCutOff: a node whose first start finds etcd
// unreachable serves at once from its pool file: a pool without a global
// limit admits, a globally limited one refuses as cut off. When etcd
// answers, the node seeds the empty cluster from its file and the limited
// pool admits.
func TestKernelFleetStartCutOff(t *testing.T) {
	ch := newChaos(t, 0, false, 2*time.Second, "CREATE RESOURCE POOL olap WITH (CONCURRENT_QUERY_LIMIT = 2);\n")
	n := ch.addNode()
	n.fault("sever")
	began := time.Now()
	ch.start(n)
	t.Logf("started with etcd unreachable in %s", time.Since(began).Round(time.Millisecond))
	if o := ch.query(n, "default", "", 0, false); o.err != "" {
		t.Fatalf("cut off, pool without a global limit: %s; want it run", o.err)
	}
	if o := ch.query(n, "olap", "", 0, false); !strings.Contains(o.err, "cannot reach the cluster") {
		t.Fatalf("cut off, pool olap: %q; want the cut-off refusal", o.err)
	}
	n.fault("restore")
	back := time.Now()
	waitFor(t, func() bool { return ch.query(n, "olap", "", 0, false).err == "" }, "pool olap admitting once etcd answers")
	t.Logf("etcd answering: pool olap admitted %s later", time.Since(back).Round(time.Millisecond))
	// The seeding runs beside admission: the log may say so a little later.
	waitFor(t, func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		logs := n.logs.String()
		return strings.Contains(logs, "the node joined the cluster") && strings.Contains(logs, "seeded from")
	}, "the node's log saying it joined and seeded the cluster")
}

// admin runs `poolagent sql -e stmt` through node n's daemon and returns
// its output and error.
func (c *chaos) admin(n *chaosNode, stmt string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.bin, "sql", "--socket", n.socket, "-e", stmt).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// racingAdmins: two administrators change the definitions at once through
// two nodes, each pool of its own, rounds changes each, each repeating a
// change the daemon refused because the other's came in between (as the
// refusal says). No change reported applied may be lost: the cluster's
// definitions hold every one (their count and both pools' last values),
// and every node shows both pools' last values.
func (c *chaos) racingAdmins(rounds int) {
	t := c.t
	t.Helper()
	for _, p := range []string{"race0", "race1"} {
		if out, err := c.admin(c.nodes[0], "CREATE RESOURCE POOL "+p+" WITH (CONCURRENT_QUERY_LIMIT = 1);"); err != nil {
			t.Fatalf("create %s: %v: %s", p, err, out)
		}
	}
	before := c.definitions().Changes
	var wg sync.WaitGroup
	conflicts := make([]int, 2)
	for i, n := range c.nodes[:2] {
		wg.Go(func() {
			for r := 1; r <= rounds; r++ {
				stmt := fmt.Sprintf("ALTER RESOURCE POOL race%d SET (QUEUE_SIZE = %d);", i, r)
				for try := 0; ; try++ {
					out, err := c.admin(n, stmt)
					if err == nil {
						break
					}
					if !strings.Contains(out, "changed concurrently") || try == 20 {
						t.Errorf("admin on %s, %q: %v: %s", n.name, stmt, err, out)
						return
					}
					conflicts[i]++
				}
			}
		})
	}
	wg.Wait()
	after := c.definitions().Changes
	if got := len(after) - len(before); got != 2*rounds {
		t.Errorf("racing admins: %d changes applied, the definitions gained %d", 2*rounds, got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range c.nodes {
		for {
			sizes := map[string]int64{}
			for _, p := range c.poolsOf(n) {
				sizes[p.Name] = p.QueueSize
			}
			if sizes["race0"] == int64(rounds) && sizes["race1"] == int64(rounds) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("racing admins: node %s shows QUEUE_SIZE race0 %d, race1 %d; want %d", n.name, sizes["race0"], sizes["race1"], rounds)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	c.t.Logf("racing admins: %d changes each, %d and %d refused as concurrent and repeated", rounds, conflicts[0], conflicts[1])
	if out, err := c.admin(c.nodes[1], "DROP RESOURCE POOL race0; DROP RESOURCE POOL race1;"); err != nil {
		t.Fatalf("drop: %v: %s", err, out)
	}
}

// definitions reads the cluster's pool definitions from etcd.
func (c *chaos) definitions() Definitions {
	c.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.etcd.Endpoints(), DialTimeout: 10 * time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, newKeySpace("chaos").defs())
	if err != nil || len(resp.Kvs) == 0 {
		c.t.Fatalf("reading the definitions: %v (%d keys)", err, len(resp.Kvs))
	}
	d, err := decodeDefinitions(resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
	if err != nil {
		c.t.Fatal(err)
	}
	return d
}

// poolsOf is `poolagent pools --format json` of node n.
func (c *chaos) poolsOf(n *chaosNode) []protocol.Pool {
	c.t.Helper()
	out, err := exec.Command(c.bin, "pools", "--socket", n.socket, "--format", "json").Output()
	if err != nil {
		c.t.Fatalf("pools on %s: %v", n.name, err)
	}
	var pools []protocol.Pool
	if err := json.Unmarshal(out, &pools); err != nil {
		c.t.Fatalf("pools on %s: %v: %s", n.name, err, out)
	}
	return pools
}

// killedClients: clients clients (in turn on each node) run 30 s queries
// in a pool of their own with C = 2, beside the phase's load; once every
// node shows 2 running and the rest queued, all are killed with SIGKILL
// (the client is its query once it runs: it execs it in place). The
// daemons are alive and renew their leases, so only their own deletes can
// remove the keys: the pool's keys in etcd and every node's view of it
// must be back to zero within 10 s.
func (c *chaos) killedClients(clients int) {
	t := c.t
	t.Helper()
	if out, err := c.admin(c.nodes[0], "CREATE RESOURCE POOL doomed WITH (CONCURRENT_QUERY_LIMIT = 2, QUEUE_SIZE = 100);"); err != nil {
		t.Fatalf("create doomed: %v: %s", err, out)
	}
	for _, n := range c.nodes { // every node has the definitions
		for deadline := time.Now().Add(10 * time.Second); !slices.ContainsFunc(c.poolsOf(n), func(p protocol.Pool) bool { return p.Name == "doomed" }); {
			if time.Now().After(deadline) {
				t.Fatalf("node %s has no pool doomed 10 s after it was created", n.name)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	ctx, kill := context.WithCancel(context.Background())
	defer kill()
	var wg sync.WaitGroup
	for i := range clients {
		n := c.nodes[i%len(c.nodes)]
		cmd := exec.CommandContext(ctx, c.run, "--socket", n.socket, "--pool", "doomed", "--", "/bin/sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { cmd.Wait() }) // killed (SIGKILL) when ctx ends
	}
	want := [2]int{2, clients - 2}
	c.waitView("doomed", want, 20*time.Second)
	kill()
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		for _, k := range c.keysLeft() {
			if _, pool := newKeySpace("chaos").parse(k); pool == "doomed" {
				left = append(left, k)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("killed clients: their keys left in etcd: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.waitView("doomed", [2]int{}, 10*time.Second)
	t.Logf("killed clients: %d running and %d queued killed; keys and views back to zero", want[0], want[1])
	if out, err := c.admin(c.nodes[1], "DROP RESOURCE POOL doomed;"); err != nil {
		t.Fatalf("drop doomed: %v: %s", err, out)
	}
}

// waitView waits until every node shows want (running, queued) in pool,
// for at most d.
func (c *chaos) waitView(pool string, want [2]int, d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for _, n := range c.nodes {
		for {
			var got [2]int
			for _, p := range c.poolsOf(n) {
				if p.Name == pool {
					got = [2]int{p.RunningQueries, p.QueuedQueries}
				}
			}
			if got == want {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("node %s shows %d running and %d queued in %s; want %d and %d", n.name, got[0], got[1], pool, want[0], want[1])
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// olapView is node n's view of pool olap: running and queued queries,
// once both are 0 or at until (at once when until is zero).
func (c *chaos) olapView(n *chaosNode, until time.Time) (run, queued int) {
	for {
		run, queued = 0, 0
		for _, p := range c.poolsOf(n) {
			if p.Name == "olap" {
				run, queued = p.RunningQueries, p.QueuedQueries
			}
		}
		if run == 0 && queued == 0 || !time.Now().Before(until) {
			return run, queued
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// revision is the etcd cluster's revision now: one more for each write
// transaction.
func (c *chaos) revision() int64 {
	c.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.etcd.Endpoints(), DialTimeout: 10 * time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, newKeySpace("chaos").defs())
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.Header.Revision
}

// phase runs one phase of TestKernelFleetChaos: twelve clients loop 200 ms
// queries in pool olap (C = c) for a second, through during, and a second
// more. It asserts from the queries' own logs that at most c + over ran at
// once, that no client was refused but as refusable says, and that the
// cluster's query keys and every node's view of olap are back to zero.
func (c *chaos) phase(name string, limit, over int, refusable func(outcome) bool, during func()) {
	t := c.t
	t.Helper()
	began := time.Now()
	qlog := filepath.Join(c.dir, name+".log")
	stop := make(chan struct{})
	wait := c.load(12, "olap", qlog, 200, false, stop)
	time.Sleep(time.Second)
	during()
	time.Sleep(time.Second)
	close(stop)
	outs := wait()
	ivs := readIntervals(t, qlog)
	peak, overNs := maxConcurrent(ivs, limit)
	var refused, failed []string
	for _, o := range outs {
		switch {
		case o.refused && !refusable(o):
			refused = append(refused, o.node+": "+o.err)
		case o.err != "" && !o.refused:
			failed = append(failed, o.node+": "+o.err)
		}
	}
	t.Logf("%s (%s): %d queries ran, %d client runs; at most %d at once (C = %d), over C for %.2f s; %d refused as the fault explains, %d clients lost their daemon",
		name, time.Since(began).Round(100*time.Millisecond), len(ivs), len(outs), peak, limit, float64(overNs)/1e9, countRefused(outs), len(failed))
	for _, f := range failed {
		if strings.HasPrefix(f[strings.Index(f, ": ")+2:], "client still waiting") {
			t.Errorf("%s: %s", name, f)
		}
	}
	if peak > limit+over {
		t.Errorf("%s: %d ran at once; C = %d and the fault may add %d", name, peak, limit, over)
	}
	if len(refused) > 0 {
		t.Errorf("%s: %d false refusals, first: %s", name, len(refused), refused[0])
	}
	if len(ivs) == 0 {
		t.Errorf("%s: no query ran", name)
	}
	deadline := time.Now().Add(3*c.ttl + 5*time.Second)
	for len(c.keysLeft()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: query keys left in etcd: %v", name, c.keysLeft())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, n := range c.nodes {
		if run, queued := c.olapView(n, deadline); run != 0 || queued != 0 {
			t.Fatalf("%s: node %s's view shows %d running and %d queued in olap with no query left", name, n.name, run, queued)
		}
	}
}

// follower returns a member that is not the cluster's leader.
func (c *chaos) follower() *etcdtest.Member {
	c.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.etcd.Endpoints(), DialTimeout: 10 * time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	defer cli.Close()
	for _, m := range c.etcd.Members {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := cli.Status(ctx, m.ClientURL)
		cancel()
		if err == nil && st.Leader != st.Header.MemberId {
			return m
		}
	}
	c.t.Fatal("no follower among the members")
	return nil
}

func countRefused(outs []outcome) int {
	n := 0
	for _, o := range outs {
		if o.refused {
			n++
		}
	}
	return n
}

// BenchmarkFleetEndToEnd: 30 loops of `poolagent run -- /bin/true` in a
// pool with a global limit (C = 1000) through 3 fleet nodes on a 3-member
// etcd cluster with fsync on, against the same loops through one daemon
// without etcd, in alternating 5 s phases of one run: admissions per
// second and each run's wall time (p50, p99) of both, and the ratio; the
// CPU time per admission of the daemons and members (in all, beyond what
// they use idle, and the members' alone) and of the clients, and the etcd
// write transactions per admission. The clients are `poolagent run`
// (client=full) or the slim `poolagent-run` (client=slim), whose start
// costs a fraction of the full binary's: with it the daemons' and
// members' share of the CPU is larger, and so is the ratio's distance
// from 1.
func BenchmarkFleetEndToEnd(b *testing.B) {
	b.Run("client=full", func(b *testing.B) { fleetEndToEnd(b, true) })
	b.Run("client=slim", func(b *testing.B) { fleetEndToEnd(b, false) })
}

func fleetEndToEnd(b *testing.B, full bool) {
	ch := newChaos(b, 3, true, 10*time.Second, "CREATE RESOURCE POOL olap WITH (CONCURRENT_QUERY_LIMIT = 1000);\n")
	fleet := &e2eSide{nodes: ch.nodes, members: ch.etcd.Members, full: full}
	single := &e2eSide{nodes: []*chaosNode{ch.single()}, full: full}
	// What the processes use without queries (leases, heartbeats, the
	// daemons' own sampling), to tell from what each admission costs.
	fleet.idleStart(b)
	single.idleStart(b)
	time.Sleep(3 * time.Second)
	fleet.idleEnd(b)
	single.idleEnd(b)
	for b.Loop() {
		fleet.phase(b, ch)
		single.phase(b, ch)
	}
	f50, f99 := quantiles(fleet.walls)
	s50, s99 := quantiles(single.walls)
	b.ReportMetric(fleet.rate(), "fleet-adm/s")
	b.ReportMetric(single.rate(), "single-adm/s")
	b.ReportMetric(fleet.rate()/single.rate(), "fleet/single")
	b.ReportMetric(ms(f50), "fleet-p50-ms")
	b.ReportMetric(ms(f99), "fleet-p99-ms")
	b.ReportMetric(ms(s50), "single-p50-ms")
	b.ReportMetric(ms(s99), "single-p99-ms")
	b.ReportMetric(fleet.perAdm(fleet.cpu), "fleet-cpu-ms/adm")
	b.ReportMetric(single.perAdm(single.cpu), "single-cpu-ms/adm")
	b.ReportMetric(fleet.perAdm(fleet.etcdCPU), "etcd-cpu-ms/adm")
	b.ReportMetric(fleet.busy(), "fleet-busy-cpu-ms/adm")
	b.ReportMetric(single.busy(), "single-busy-cpu-ms/adm")
	b.ReportMetric(fleet.idle*100, "fleet-idle-cpu-%")
	b.ReportMetric(fleet.perAdm(fleet.clientCPU), "fleet-client-cpu-ms/adm")
	b.ReportMetric(single.perAdm(single.clientCPU), "single-client-cpu-ms/adm")
	b.ReportMetric(float64(fleet.writes)/float64(fleet.n), "etcd-writes/adm")
}

// e2eSide is one side of BenchmarkFleetEndToEnd: its daemons, its etcd
// members (none for the single daemon) and what its phases measured.
type e2eSide struct {
	nodes   []*chaosNode
	members []*etcdtest.Member
	full    bool // the clients are `poolagent run`, not poolagent-run
	n       int  // admissions
	took    time.Duration
	walls   []time.Duration
	// CPU time of the daemons and members, of the members alone, and of
	// the clients and their queries.
	cpu, etcdCPU, clientCPU time.Duration
	writes                  int64 // etcd write transactions
	idle                    float64
	idle0                   time.Duration
	idleAt                  time.Time
}

// pids are the side's daemons, then its members.
func (s *e2eSide) pids() []int {
	var pids []int
	for _, n := range s.nodes {
		pids = append(pids, n.pid())
	}
	for _, m := range s.members {
		pids = append(pids, m.PID())
	}
	return pids
}

func (s *e2eSide) idleStart(b *testing.B) { s.idle0, s.idleAt = cpuOf(b, s.pids()), time.Now() }

// idleEnd sets idle, the fraction of one CPU the side used since
// idleStart.
func (s *e2eSide) idleEnd(b *testing.B) {
	s.idle = float64(cpuOf(b, s.pids())-s.idle0) / float64(time.Since(s.idleAt))
}

// phase runs 30 loops of `poolagent run -- /bin/true` through the side's
// daemons for 5 s and adds what it measured.
func (s *e2eSide) phase(b *testing.B, ch *chaos) {
	pids := s.pids()
	members := pids[len(s.nodes):]
	cpu0, etcd0, client0 := cpuOf(b, pids), cpuOf(b, members), childrenCPU(b)
	rev0 := ch.revision()
	stop := make(chan struct{})
	start := time.Now()
	wait := ch.loadOn(s.nodes, 30, "olap", "", 0, s.full, stop)
	time.Sleep(5 * time.Second)
	close(stop)
	outs := wait()
	s.took += time.Since(start)
	s.cpu += cpuOf(b, pids) - cpu0
	s.etcdCPU += cpuOf(b, members) - etcd0
	// Only the clients end, and are waited for, during a phase.
	s.clientCPU += childrenCPU(b) - client0
	if len(s.members) > 0 {
		s.writes += ch.revision() - rev0
	}
	for _, o := range outs {
		if o.err != "" {
			b.Fatalf("%s: %s", o.node, o.err)
		}
		s.walls = append(s.walls, o.wall)
	}
	s.n += len(outs)
}

func (s *e2eSide) rate() float64                  { return float64(s.n) / s.took.Seconds() }
func (s *e2eSide) perAdm(d time.Duration) float64 { return ms(d) / float64(s.n) }

// busy is the daemons' and members' CPU per admission beyond what they
// use idle.
func (s *e2eSide) busy() float64 {
	return s.perAdm(s.cpu - time.Duration(s.idle*float64(s.took)))
}

func (n *chaosNode) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd.Process.Pid
}

// cpuOf is the CPU time (user + system) the processes pids have used.
func cpuOf(b testing.TB, pids []int) time.Duration {
	b.Helper()
	var sum time.Duration
	for _, pid := range pids {
		sum += kerneltest.ProcessCPU(b, pid)
	}
	return sum
}

// BenchmarkFreePoolBesideEtcd: etcd 25 ms away from every node (12.5 ms
// each way through the proxies), the start of a query in a pool without a
// global limit (`poolagent-run -- /bin/true` on one node, one after the
// other), while a pool with C = 4 is idle and while it is saturated (12
// clients looping 2 s queries: 4 run, 8 queue), in alternating phases of
// one run: p50 and p99 of both and the ratio of the p50s.
func BenchmarkFreePoolBesideEtcd(b *testing.B) {
	ch := newChaos(b, 3, true, 10*time.Second, "CREATE RESOURCE POOL olap WITH (CONCURRENT_QUERY_LIMIT = 4, QUEUE_SIZE = 100);\n")
	for _, n := range ch.nodes {
		n.delay(12500 * time.Microsecond)
	}
	const phase = 5 * time.Second
	var idle, busy []time.Duration
	qlog := filepath.Join(ch.dir, "busy.log")
	for b.Loop() {
		for _, saturated := range []bool{false, true} {
			var wait func() []outcome
			stop := make(chan struct{})
			if saturated {
				wait = ch.load(12, "olap", qlog, 2000, false, stop)
				time.Sleep(time.Second) // the queue fills
			}
			for end := time.Now().Add(phase); time.Now().Before(end); {
				o := ch.query(ch.nodes[0], "default", "", 0, false)
				if o.err != "" {
					b.Fatal(o.err)
				}
				if saturated {
					busy = append(busy, o.wall)
				} else {
					idle = append(idle, o.wall)
				}
			}
			close(stop)
			if wait != nil {
				for _, o := range wait() {
					if o.refused {
						b.Fatalf("saturating load refused: %s", o.err)
					}
				}
			}
		}
	}
	i50, i99 := quantiles(idle)
	s50, s99 := quantiles(busy)
	b.ReportMetric(ms(i50), "idle-p50-ms")
	b.ReportMetric(ms(i99), "idle-p99-ms")
	b.ReportMetric(ms(s50), "saturated-p50-ms")
	b.ReportMetric(ms(s99), "saturated-p99-ms")
	b.ReportMetric(float64(s50)/float64(i50), "p50-ratio")
}

// childrenCPU is the CPU time (user + system) of the children of this
// process that have ended and been waited for, and of theirs.
func childrenCPU(b testing.TB) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
