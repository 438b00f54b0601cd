package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/internal/protocol"
)

// Benchmarks of the real daemon binary on real cgroups (root needed):
// scripts/bench-admission.sh runs them and prints docs/performance.md's figures.

// envBenchBin names a directory holding poolagent and poolagent-run built
// beforehand (CGO_ENABLED=0 for the VM), used in place of building them:
// the VM of scripts/vm/run.sh has no Go toolchain, so a benchmark of the
// real daemon runs there with the binaries passed in (POOLAGENT_VM_FILES)
// and this variable (POOLAGENT_VM_ENV).
const envBenchBin = "POOLAGENT_BENCH_BIN"

// benchBinary builds cmd/NAME (poolagent or poolagent-run) into the
// benchmark's temporary directory, removed when it ends, and returns the
// binary's path. Go's build cache makes every build after the first
// cheap. With envBenchBin set it returns that directory's NAME instead.
func benchBinary(b *testing.B, name string) string {
	b.Helper()
	if dir := os.Getenv(envBenchBin); dir != "" {
		bin := filepath.Join(dir, name)
		if _, err := os.Stat(bin); err != nil {
			b.Fatalf("%s=%s: %v (want %s and its peer built there)", envBenchBin, dir, err, name)
		}
		return bin
	}
	bin := filepath.Join(b.TempDir(), name)
	out, err := exec.Command("go", "build", "-o", bin, "github.com/poolagent/poolagent/cmd/"+name).CombinedOutput()
	if err != nil {
		b.Fatalf("go build %s: %v: %s", name, err, out)
	}
	return bin
}

// benchDaemon starts `poolagent daemon` serving pools below a fresh test
// root and stops it when the benchmark ends.
func benchDaemon(b *testing.B, pools string, flags ...string) (socket string, pid int) {
	b.Helper()
	h := kerneltest.Require(b, bothModes)
	root := h.NewRoot(b, bothModes)
	bin := benchBinary(b, "poolagent")
	dir, err := os.MkdirTemp("", "poolagent-bench-")
	if err != nil {
		b.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	b.Cleanup(func() { os.RemoveAll(dir) })
	file := filepath.Join(dir, "pools.sql")
	if err := os.WriteFile(file, []byte(pools), 0o644); err != nil {
		b.Fatal(err)
	}
	socket = filepath.Join(dir, "agent.sock")
	args := append([]string{"daemon", "--pools", file, "--root", root.Path, "--socket", socket,
		"--cpus", "2", "--memory", "1073741824"}, flags...)
	cmd := exec.Command(bin, args...)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if b.Failed() {
			b.Logf("daemon log:\n%s", logs.String())
		}
	})
	waitFor(b, "the daemon's socket", func() bool {
		c, err := net.Dial("unix", socket)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return socket, cmd.Process.Pid
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkRunTrue times `poolagent run -- /bin/true` and the slim
// `poolagent-run -- /bin/true` (client start, admission, query cgroup
// created, the client moved into it and exec'ing the command; the query's
// end is the daemon's, after the command) against `/bin/true` alone, interleaved, and reports the three wall-clock
// medians and each client's overhead (difference of medians); and, since
// wall time on a shared host is mostly waiting for a CPU, the CPU time per
// run of each client (with the gate and the command, its children) and of
// the daemon per query (two queries an iteration).
func BenchmarkRunTrue(b *testing.B) {
	socket, pid := benchDaemon(b, "")
	full, slim := benchBinary(b, "poolagent"), benchBinary(b, "poolagent-run")
	// timed runs argv and returns its wall time and CPU time (its own and
	// its children's).
	timed := func(argv ...string) (wall, cpu time.Duration) {
		cmd := exec.Command(argv[0], argv[1:]...)
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
		}
		wall = time.Since(start)
		return wall, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	var viaRun, viaSlim, direct []time.Duration
	var runCPU, slimCPU, trueCPU time.Duration
	daemonBefore := kerneltest.ProcessCPU(b, pid)
	b.ResetTimer()
	for range b.N {
		wall, cpu := timed(full, "run", "--socket", socket, "--", "/bin/true")
		viaRun, runCPU = append(viaRun, wall), runCPU+cpu
		wall, cpu = timed(slim, "--socket", socket, "--", "/bin/true")
		viaSlim, slimCPU = append(viaSlim, wall), slimCPU+cpu
		wall, cpu = timed("/bin/true")
		direct, trueCPU = append(direct, wall), trueCPU+cpu
	}
	b.StopTimer()
	daemonCPU := kerneltest.ProcessCPU(b, pid) - daemonBefore
	mr, ms, md := median(viaRun), median(viaSlim), median(direct)
	msec := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	perRun := func(d time.Duration) float64 { return msec(d) / float64(b.N) }
	b.ReportMetric(msec(mr), "ms-run-median")
	b.ReportMetric(msec(ms), "ms-slim-median")
	b.ReportMetric(msec(md), "ms-true-median")
	b.ReportMetric(msec(mr-md), "ms-overhead-median")
	b.ReportMetric(msec(ms-md), "ms-slim-overhead-median")
	b.ReportMetric(perRun(runCPU), "ms-cpu-client")
	b.ReportMetric(perRun(slimCPU), "ms-cpu-slim-client")
	b.ReportMetric(perRun(daemonCPU)/2, "ms-cpu-daemon")
	b.ReportMetric(perRun(trueCPU), "ms-cpu-true")
}

// benchClient speaks the protocol for the admission benchmarks.
type benchClient struct {
	conn net.Conn
	r    *bufio.Reader
}

func benchDial(socket, pool string) (*benchClient, error) {
	conn, err := net.Dial("unix", socket)
	if err != nil {
		return nil, err
	}
	req, _ := json.Marshal(protocol.Request{Op: protocol.OpRun, Pool: pool})
	if _, err := conn.Write(append(req, '\n')); err != nil {
		conn.Close()
		return nil, err
	}
	return &benchClient{conn: conn, r: bufio.NewReader(conn)}, nil
}

func (c *benchClient) reply() (protocol.Reply, error) {
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		return protocol.Reply{}, err
	}
	var r protocol.Reply
	return r, json.Unmarshal(line, &r)
}

// BenchmarkAdmissions: queries admitted per second in the unlimited
// default pool, over the socket, by 16 concurrent clients; each connects,
// asks, is admitted and hangs up (which frees the slot).
func BenchmarkAdmissions(b *testing.B) {
	socket, _ := benchDaemon(b, "")
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c, err := benchDial(socket, "default")
			if err != nil {
				b.Error(err)
				return
			}
			r, err := c.reply()
			c.conn.Close()
			if err != nil || r.Type != protocol.ReplyAdmitted {
				b.Errorf("reply %+v, %v", r, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "admissions/s")
}

// BenchmarkQueuedRSS: the daemon's resident memory with 100 pools, each
// with one query holding its only slot and ten more queued: 1,000 queued
// clients in all.
func BenchmarkQueuedRSS(b *testing.B) {
	var pools strings.Builder
	for i := range 100 {
		fmt.Fprintf(&pools, "CREATE RESOURCE POOL p%03d WITH (CONCURRENT_QUERY_LIMIT=1, QUEUE_SIZE=1000, "+
			"RESOURCES_WEIGHT=%d, TOTAL_CPU_LIMIT_PERCENT_PER_NODE=50);\n", i, 10+i)
	}
	// All 1,100 clients are this process, one uid: above the per-user
	// limits a daemon keeps by default (docs/security.md), which bound
	// what one user can make it hold; the figure is for many users' load.
	socket, pid := benchDaemon(b, pools.String(), "--max-conns-per-user", "2000", "--max-unstarted-per-user", "200")
	for range b.N {
		var clients []*benchClient
		for i := range 1100 {
			pool := fmt.Sprintf("p%03d", i%100)
			c, err := benchDial(socket, pool)
			if err != nil {
				b.Fatal(err)
			}
			clients = append(clients, c)
			r, err := c.reply()
			want := protocol.ReplyQueued
			if i < 100 {
				want = protocol.ReplyAdmitted
			}
			if err != nil || r.Type != want {
				b.Fatalf("client %d: reply %+v, %v; want %s", i, r, err, want)
			}
		}
		b.ReportMetric(kerneltest.ProcessRSSMiB(b, pid), "MB-daemon-rss")
		for _, c := range clients {
			c.conn.Close()
		}
		// Before the next round every pool must be free again: a probe is
		// admitted only when nothing runs or waits there.
		for i := range 100 {
			pool := fmt.Sprintf("p%03d", i)
			waitFor(b, "pool "+pool+" to drain", func() bool {
				c, err := benchDial(socket, pool)
				if err != nil {
					return false
				}
				defer c.conn.Close()
				r, err := c.reply()
				return err == nil && r.Type == protocol.ReplyAdmitted
			})
		}
	}
}

// BenchmarkExitedSpam: what clients that send `exited` as fast as they
// can cost everyone else. Eight running queries (a sleeping process each)
// flood their connections with `exited` messages, each of which makes
// the daemon read the query cgroup, while `poolagent-run -- /bin/true`
// runs; spam on and off alternate run by run, and the benchmark reports
// both wall-clock medians and their ratio. Each connection's message
// budget (Limits.MessagesPerSecond) keeps the ratio near 1.
func BenchmarkExitedSpam(b *testing.B) {
	socket, _ := benchDaemon(b, "")
	slim := benchBinary(b, "poolagent-run")
	var spamming sync.WaitGroup
	on := make(chan struct{})
	stop := make(chan struct{})
	var gate sync.RWMutex // held for writing while spam is off
	gate.Lock()
	exited := []byte(`{"op":"exited"}` + "\n")
	for range 8 {
		c, err := benchDial(socket, "default")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.conn.Close() })
		if r, err := c.reply(); err != nil || r.Type != protocol.ReplyAdmitted {
			b.Fatalf("reply %+v, %v", r, err)
		}
		held := exec.Command("sleep", "3600")
		if err := held.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { held.Process.Kill(); held.Wait() })
		start, _ := json.Marshal(protocol.Request{Op: protocol.OpStart, PID: held.Process.Pid})
		c.conn.Write(append(start, '\n'))
		if r, err := c.reply(); err != nil || r.Type != protocol.ReplyStarted {
			b.Fatalf("reply %+v, %v", r, err)
		}
		spamming.Go(func() {
			<-on
			for {
				select {
				case <-stop:
					return
				default:
				}
				gate.RLock()
				c.conn.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
				c.conn.Write(exited)
				gate.RUnlock()
			}
		})
	}
	close(on)
	b.Cleanup(func() {
		close(stop)
		gate.Unlock()
		spamming.Wait()
	})
	timed := func() time.Duration {
		start := time.Now()
		if out, err := exec.Command(slim, "--socket", socket, "--", "/bin/true").CombinedOutput(); err != nil {
			b.Fatalf("poolagent-run: %v: %s", err, out)
		}
		return time.Since(start)
	}
	var quiet, spam []time.Duration
	b.ResetTimer()
	for range b.N {
		quiet = append(quiet, timed())
		gate.Unlock()
		time.Sleep(20 * time.Millisecond)
		spam = append(spam, timed())
		gate.Lock()
	}
	b.StopTimer()
	mq, ms := median(quiet), median(spam)
	b.ReportMetric(float64(mq.Microseconds())/1000, "ms-quiet-median")
	b.ReportMetric(float64(ms.Microseconds())/1000, "ms-spam-median")
	b.ReportMetric(float64(ms)/float64(mq), "spam/quiet")
}

// BenchmarkFairQueue: the cost of the fair queue against FIFO in the real
// daemon binary. A pool of one slot, held by a running query, has 1,000
// queries queued by 100 users (10 each, one process per uid); the daemon's
// resident memory is read, then the holder ends and the queue drains: each
// client hangs up as soon as it is admitted, which gives the slot to the
// next. Admissions per second is 1,000 over the drain's wall time. Each
// round runs a FIFO daemon and a fair one, in alternating order; the
// figures are the medians over rounds, and their ratios fair/FIFO.
func BenchmarkFairQueue(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root to run clients as 100 uids")
	}
	const users, perUser = 100, 10
	rate := map[string][]float64{}
	rss := map[string][]float64{}
	round := func(policy string) {
		pools := fmt.Sprintf("CREATE RESOURCE POOL shared WITH (CONCURRENT_QUERY_LIMIT=1, QUEUE_POLICY='%s');\n"+
			"GRANT USE ON RESOURCE POOL shared TO 'all-users@well-known';", policy)
		socket, pid := benchDaemon(b, pools)
		holder := exec.Command(benchBinary(b, "poolagent-run"), "--socket", socket, "--pool", "shared", "--", "/bin/sh", "-c", "read _")
		release, err := holder.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := holder.Start(); err != nil {
			b.Fatal(err)
		}
		defer holder.Wait()
		waitFor(b, "the holder running", func() bool { p := benchPool(b, socket); return p.RunningQueries == 1 })
		req, _ := json.Marshal(protocol.Request{Op: protocol.OpRun, Pool: "shared"})
		var floods []*flood
		for u := range users {
			floods = append(floods, startFlood(b, floodSpec{Network: "unix", Addr: socket, Conns: perUser,
				Send: string(req) + "\n", LeaveAdmitted: true}, uint32(300000+u)))
		}
		waitFor(b, "1,000 queued", func() bool { return benchPool(b, socket).QueuedQueries == users*perUser })
		rss[policy] = append(rss[policy], kerneltest.ProcessRSSMiB(b, pid))
		start := time.Now()
		release.Close()
		waitFor(b, "the queue drained", func() bool {
			p := benchPool(b, socket)
			return p.QueuedQueries == 0 && p.RunningQueries == 0
		})
		rate[policy] = append(rate[policy], users*perUser/time.Since(start).Seconds())
		admitted := 0
		for _, f := range floods {
			admitted += f.poll(b).Admitted
			f.release()
		}
		if admitted != users*perUser {
			b.Fatalf("%s: %d clients told admitted, want %d", policy, admitted, users*perUser)
		}
	}
	for i := range b.N {
		if i%2 == 0 {
			round("fifo")
			round("fair")
		} else {
			round("fair")
			round("fifo")
		}
	}
	med := func(v []float64) float64 { s := slices.Clone(v); slices.Sort(s); return s[len(s)/2] }
	b.ReportMetric(med(rate["fifo"]), "fifo-admissions/s")
	b.ReportMetric(med(rate["fair"]), "fair-admissions/s")
	b.ReportMetric(med(rate["fair"])/med(rate["fifo"]), "fair/fifo-admissions")
	b.ReportMetric(med(rss["fifo"]), "fifo-MB-rss")
	b.ReportMetric(med(rss["fair"]), "fair-MB-rss")
	b.ReportMetric(med(rss["fair"])/med(rss["fifo"]), "fair/fifo-rss")
}

// benchPool is the pool "shared" as the daemon at socket shows it.
func benchPool(b *testing.B, socket string) protocol.Pool {
	b.Helper()
	r, err := ask(socket, protocol.Request{Op: protocol.OpPools}, 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range r.Pools {
		if p.Name == "shared" {
			return p
		}
	}
	b.Fatalf("no pool shared in %+v", r.Pools)
	return protocol.Pool{}
}
