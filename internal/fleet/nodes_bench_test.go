package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// BenchmarkFleetNodes runs 3, 10 and 50 nodes against the same 3-member
// etcd cluster (fsync on) in one run, each node a process of its own (the
// test binary as a node: the backend with its real etcd client, a watch
// and a lease of its own). Every size has the same 100 clients spread
// over its nodes, each looping: a query submitted to a pool with C = 1000
// (no query queues), its start awaited, its end at once. It reports the
// cluster's admissions/s, the latency etcd adds to an admission (p50 and
// p99 against the single-host admission.Controller's, interleaved in the
// same loop), the watch events and bytes each node receives per
// admission, the members' CPU under load and at rest, the nodes' CPU per
// admission and their peak RSS. The last size, 50 nodes of which 3 have
// the clients and 47 only follow the cluster, holds the admissions to
// those of 3 nodes: what it costs beyond 3 nodes alone is what every
// node's watch and lease cost, apart from the batching a node loses when
// its clients are few. docs/fleet.md "Performance and capacity"
// holds the figures; its capacity model predicts the watch events per
// admission per node (the key writes per admission, whatever the number of
// nodes) and the fan-out leaving the members (that times the nodes).
//
// $POOLAGENT_FLEET_BENCH_SECONDS sets the load's duration at each size
// (default 10).
func BenchmarkFleetNodes(b *testing.B) {
	window := benchWindow(b)
	for _, size := range []struct{ nodes, active int }{{3, 3}, {10, 10}, {50, 50}, {50, 3}} {
		name := fmt.Sprintf("nodes=%d", size.nodes)
		if size.active < size.nodes {
			name += fmt.Sprintf(",active=%d", size.active)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				fleetNodes(b, size.nodes, size.active, window)
			}
		})
	}
}

// benchNodeEnv makes the test binary one node of BenchmarkFleetNodes
// (runBenchNode).
const benchNodeEnv = "POOLAGENT_FLEET_BENCH_NODE"

// benchClients is the clients of BenchmarkFleetNodes, over all its nodes.
const benchClients = 100

// benchNodeSpec is what one node process of BenchmarkFleetNodes does.
type benchNodeSpec struct {
	nodeSpec
	// Clients loop admissions for Window from the moment the node reads
	// "go" on its standard input.
	Clients int
	Window  time.Duration
}

// benchNodeResult is what a node process reports, one JSON line on its
// standard output: its admissions, the latency of each (fleet) and of
// the single-host controller's admission in the same loop (single), what
// its watch delivered during the window, its CPU time during the window
// and its peak RSS.
type benchNodeResult struct {
	Admissions              int
	Fleet, Single           []time.Duration
	WatchEvents, WatchBytes int64
	CPU                     time.Duration
	MaxRSS                  int64 // bytes
	// RestCPU is its CPU time from "ready" to "go", RestWall how long
	// that was: the node at rest, renewing its lease.
	RestCPU, RestWall time.Duration
	// Failed counts the queries that did not start (the node cut off
	// from etcd on a loaded host: the pool refuses none); Err says why
	// the first did not, and whether the watch fell short of the
	// cluster's writes (its counts are then short too).
	Failed int
	Err    string
}

// runBenchNode is the test binary as a node of BenchmarkFleetNodes: it
// joins, prints "ready", waits for "go", loops its clients for the window,
// prints its result and leaves.
func runBenchNode(spec string) int {
	var s benchNodeSpec
	be, code := openSpecNode(spec, &s, &s.nodeSpec)
	if be == nil {
		return code
	}
	n, done := newBenchNode(be)
	defer func() {
		be.Close()
		<-done
	}()
	cpu0, t0 := selfCPU(), time.Now()
	fmt.Println("ready")
	if line, _ := bufio.NewReader(os.Stdin).ReadString('\n'); line != "go\n" {
		return 1
	}
	rest, restWall := selfCPU()-cpu0, time.Since(t0)
	r := n.loop(s)
	r.RestCPU, r.RestWall = rest, restWall
	json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

// loop runs s.Clients clients for s.Window: each submits a query to the
// single-host controller and leaves it, then to the cluster, awaits its
// start and leaves it.
func (n *benchNode) loop(s benchNodeSpec) benchNodeResult {
	var r benchNodeResult
	single, err := admission.NewController(admission.LoadConfig{}, map[string]admission.Limits{s.Pool: limits(s.C, s.Q)})
	if err != nil {
		r.Err = err.Error()
		return r
	}
	h0, cpu0 := n.Health(), selfCPU()
	var mu, singleMu sync.Mutex
	end := time.Now().Add(s.Window)
	var wg sync.WaitGroup
	for range s.Clients {
		wg.Go(func() {
			for time.Now().Before(end) {
				dSingle, dFleet, err := n.once(s.Pool, single, &singleMu)
				mu.Lock()
				if err == nil {
					r.Admissions++
					r.Single, r.Fleet = append(r.Single, dSingle), append(r.Fleet, dFleet)
				} else if r.Failed++; r.Err == "" {
					r.Err = err.Error()
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(100 * time.Millisecond) // etcd out of reach: no busy loop
				}
			}
		})
	}
	wg.Wait()
	time.Sleep(time.Until(end)) // a node without clients follows the cluster as long
	// The last ends' deletes go 50 ms after them at the latest; every
	// write until then is counted once the watch has delivered it.
	time.Sleep(200 * time.Millisecond)
	if err := n.caughtUp(time.Minute); err != nil {
		r.Err = fmt.Sprint(r.Err, " ", err)
	}
	h := n.Health()
	r.WatchEvents, r.WatchBytes = h.WatchEvents-h0.WatchEvents, h.WatchBytes-h0.WatchBytes
	r.CPU = selfCPU() - cpu0
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	r.MaxRSS = ru.Maxrss << 10
	return r
}

// caughtUp waits until n's watch has delivered the cluster's revision of
// now, at most for within.
func (n *benchNode) caughtUp(within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	resp, err := n.cli.Get(ctx, n.keys.defs())
	if err != nil {
		return err
	}
	for n.Health().WatchRevision < resp.Header.Revision {
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s: watch short of revision %d after %v", n.cfg.Node, resp.Header.Revision, within)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// once is one query of a client of loop: the time the single-host
// controller takes to admit it, and the time n takes to start it.
func (n *benchNode) once(pool string, single *admission.Controller, singleMu *sync.Mutex) (dSingle, dFleet time.Duration, err error) {
	// The controller is not safe for concurrent use: the daemon calls it
	// under a lock of its own.
	singleMu.Lock()
	t0 := time.Now()
	id, _, err := single.Submit(pool, "alice", t0)
	dSingle = time.Since(t0)
	single.Leave(id, time.Now())
	singleMu.Unlock()
	if err != nil {
		return 0, 0, err
	}
	t1 := time.Now()
	id, err = n.admit(pool)
	dFleet = time.Since(t1)
	n.Leave(id, time.Now())
	return dSingle, dFleet, err
}

// selfCPU is the process's CPU time so far, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchNodeProc is a running node process of BenchmarkFleetNodes.
type benchNodeProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // its standard output, line by line
}

// startBenchNodes starts n node processes, the first active ones sharing
// benchClients clients, adding each to *procs (stopBenchNodes ends them);
// it returns once every one has joined.
func startBenchNodes(b *testing.B, procs *[]*benchNodeProc, eps []string, cluster string, n, active int, window time.Duration) {
	b.Helper()
	clients := append(spread(benchClients, active), make([]int, n-active)...)
	for i, clients := range clients {
		cmd, stdin, out := spawnSelf(b, benchNodeEnv, benchNodeSpec{
			nodeSpec: nodeSpec{Endpoints: eps, Cluster: cluster, Node: fmt.Sprintf("n%d", i), Pool: "olap", C: 1000, Q: 1000},
			Clients:  clients, Window: window,
		})
		p := &benchNodeProc{cmd: cmd, stdin: stdin, lines: make(chan string, 2)}
		*procs = append(*procs, p)
		go func() {
			defer close(p.lines)
			s := bufio.NewScanner(out)
			s.Buffer(nil, 64<<20) // a result holds every latency
			for s.Scan() {
				p.lines <- s.Text()
			}
		}()
	}
	for i, p := range *procs {
		if line := p.next(b, 2*time.Minute); line != "ready" {
			b.Fatalf("node process n%d said %q, want ready", i, line)
		}
	}
}

// stopBenchNodes kills the node processes by their PIDs and reaps them.
func stopBenchNodes(procs []*benchNodeProc) {
	for _, p := range procs {
		p.stdin.Close()
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
}

// next is the process's next line of output, "" if it ended.
func (p *benchNodeProc) next(b *testing.B, within time.Duration) string {
	select {
	case line := <-p.lines:
		return line
	case <-time.After(within):
		b.Fatalf("node process %d: nothing said within %v", p.cmd.Process.Pid, within)
		return ""
	}
}

// fleetNodes is one size of BenchmarkFleetNodes.
func fleetNodes(b *testing.B, n, active int, window time.Duration) {
	eps, cluster := benchCluster(b)
	var procs []*benchNodeProc
	defer func() { stopBenchNodes(procs) }()
	startBenchNodes(b, &procs, eps, cluster, n, active, window)
	var members []int
	for _, m := range benchEtc.Members {
		members = append(members, m.PID())
	}
	// At rest: the nodes renew their leases, nothing else.
	const rest = 3 * time.Second
	idle0 := cpuOf(b, members)
	time.Sleep(rest)
	cpu0 := cpuOf(b, members)
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	rev0 := revisionOf(b, cli)
	for _, p := range procs {
		io.WriteString(p.stdin, "go\n")
	}
	var results []benchNodeResult
	for i, p := range procs {
		var r benchNodeResult
		line := p.next(b, window+2*time.Minute)
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			b.Fatalf("node n%d: %q: %v", i, line, err)
		}
		if r.Err != "" {
			b.Logf("node n%d: %d queries did not start; %s", i, r.Failed, r.Err)
		}
		results = append(results, r)
	}
	f := summarize(results, window)
	f.membersCPU = cpuOf(b, members) - cpu0
	f.membersIdle = cpu0 - idle0
	f.writes = revisionOf(b, cli) - rev0
	f.membersRSS = rssOf(b, members)
	f.report(b, window, rest)
}

// revisionOf is the revision of the cluster of cli now.
func revisionOf(b *testing.B, cli *clientv3.Client) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/poolagent/", clientv3.WithCountOnly())
	if err != nil {
		b.Fatal(err)
	}
	return resp.Header.Revision
}
