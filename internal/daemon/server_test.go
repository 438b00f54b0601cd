package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/client"
	"github.com/poolagent/poolagent/internal/peer"
	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/planner"
)

// olapPool is a pool file with one pool olap of the given limits, open to
// every user.
func olapPool(concurrent, queue int, more string) string {
	return fmt.Sprintf("CREATE RESOURCE POOL olap WITH (CONCURRENT_QUERY_LIMIT=%d, QUEUE_SIZE=%d%s);\n"+
		"GRANT USE ON RESOURCE POOL olap TO 'all-users@well-known';\n", concurrent, queue, more)
}

// twoThreeTen is the case over the socket: CONCURRENT_QUERY_LIMIT=2,
// QUEUE_SIZE=3, ten clients. Exactly two run, three queue, five are
// rejected with YDB's message; queued ones start in arrival order as
// runners finish; at the end nothing runs, nothing waits, nothing is left.
func twoThreeTen(t *testing.T, d *testDaemon, leftover func() int) {
	const wantErr = "Request was rejected, number of local pending requests is 1, " +
		"number of global delayed/running requests is 5, sum of them is larger than " +
		"allowed limit 3 (including concurrent query limit 2) for pool olap\n" +
		"Query failed during adding/waiting in workload pool olap"
	var clients []*inProcClient
	for i := range 10 {
		c := startInProc(t, d.socket, "olap")
		clients = append(clients, c)
		// Arrivals one after the other, so their order is known.
		waitFor(t, fmt.Sprintf("client %d to be counted", i), func() bool {
			if i < 5 && c.isDone() {
				t.Fatalf("client %d ended before it was counted: exit %d, %v", i, c.res.ExitCode, c.err)
			}
			p := d.pool(t, "olap")
			return p.Running+p.Queued+int(p.Rejected) == i+1
		})
	}
	for i, c := range clients[:2] {
		waitFor(t, fmt.Sprintf("client %d to start", i), c.isStarted)
	}
	for i, c := range clients[5:] {
		<-c.done
		var refused *client.RefusedError
		if !errors.As(c.err, &refused) || refused.Code != protocol.CodeQueueFull || c.err.Error() != wantErr {
			t.Errorf("client %d: error %v, want %q", i+5, c.err, wantErr)
		}
	}
	if p := d.pool(t, "olap"); p.Running != 2 || p.Queued != 3 || p.Rejected != 5 {
		t.Fatalf("pool %+v: want 2 running, 3 queued, 5 rejected", p)
	}
	for _, c := range clients[2:5] {
		if c.isStarted() || c.isDone() {
			t.Fatal("a queued client started before a slot was free")
		}
	}
	// Finish the runners one by one: each frees the slot for the next in
	// arrival order.
	for i := range 5 {
		clients[i].release.Close()
		<-clients[i].done
		if clients[i].err != nil || clients[i].res.ExitCode != 0 {
			t.Fatalf("client %d: exit %d, %v", i, clients[i].res.ExitCode, clients[i].err)
		}
		if next := i + 2; next < 5 {
			waitFor(t, fmt.Sprintf("client %d to start", next), clients[next].isStarted)
			for _, later := range clients[next+1 : 5] {
				if later.isStarted() {
					t.Fatalf("client %d started before client %d", slices.Index(clients, later), next)
				}
			}
		}
	}
	if p := d.pool(t, "olap"); p.Running != 0 || p.Queued != 0 || p.Admitted != 5 {
		t.Errorf("end: %+v, want 0 running, 0 queued, 5 admitted", p)
	}
	if n := leftover(); n != 0 {
		t.Errorf("%d query cgroups left", n)
	}
}

func TestTwoRunThreeQueueTenClients(t *testing.T) {
	cg := newFakeCgroups(t)
	d := startDaemon(t, Config{}, policyOf(t, olapPool(2, 3, "")), cg, peer.SystemUsers{})
	twoThreeTen(t, d, cg.left)
	if cg.created != 5 || cg.removed != 5 {
		t.Errorf("created %d, removed %d query cgroups; want 5 and 5", cg.created, cg.removed)
	}
}

func TestStats(t *testing.T) {
	cg := newFakeCgroups(t)
	d := startDaemon(t, Config{}, policyOf(t, olapPool(1, 1, "")), cg, peer.SystemUsers{})
	first := startInProc(t, d.socket, "olap")
	waitFor(t, "first to start", first.isStarted)
	second := startInProc(t, d.socket, "olap")
	waitFor(t, "second to queue", func() bool { return d.pool(t, "olap").Queued == 1 })
	time.Sleep(50 * time.Millisecond)
	first.release.Close()
	waitFor(t, "second to start", second.isStarted)
	second.release.Close()
	<-second.done
	st := second.res.Stats
	if second.err != nil || st == nil {
		t.Fatalf("no stats: %v", second.err)
	}
	if st.ResourcePoolID != "olap" || st.QueuedTimeUs < 50000 || st.TotalDurationUs < st.QueuedTimeUs {
		t.Errorf("stats %+v: want pool olap, queued >= 50 ms, total >= queued", st)
	}
	if second.res.Pool != "olap" || !strings.HasPrefix(second.res.Query, "q") {
		t.Errorf("result %+v", second.res)
	}
}

func TestSignalWhileQueuedLeavesQueue(t *testing.T) {
	cg := newFakeCgroups(t)
	d := startDaemon(t, Config{}, policyOf(t, olapPool(1, 5, "")), cg, peer.SystemUsers{})
	runner := startInProc(t, d.socket, "olap")
	waitFor(t, "runner to start", runner.isStarted)
	waiting := startInProc(t, d.socket, "olap")
	waitFor(t, "one queued", func() bool { return d.pool(t, "olap").Queued == 1 })
	waiting.signals <- syscall.SIGINT
	<-waiting.done
	if !errors.Is(waiting.err, client.ErrLeftQueue) || waiting.res.ExitCode != 130 {
		t.Fatalf("exit %d, error %v; want 130 and ErrLeftQueue", waiting.res.ExitCode, waiting.err)
	}
	waitFor(t, "the queue to empty", func() bool { return d.pool(t, "olap").Queued == 0 })
	runner.release.Close()
	<-runner.done
	waitFor(t, "nothing running", func() bool { return d.pool(t, "olap").Running == 0 })
	if p := d.pool(t, "olap"); p.Admitted != 1 {
		t.Errorf("pool %+v: the client that left was admitted", p)
	}
}

func TestProgressLine(t *testing.T) {
	cg := newFakeCgroups(t)
	d := startDaemon(t, Config{}, policyOf(t, olapPool(1, 5, "")), cg, peer.SystemUsers{})
	runner := startInProc(t, d.socket, "olap")
	waitFor(t, "runner to start", runner.isStarted)
	var progress lockedBuffer
	sigs := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() {
		_, err := client.Run(client.RunOptions{Socket: d.socket, Pool: "olap", Args: []string{"true"},
			Env: os.Environ(), Progress: &progress, Signals: sigs, Name: "poolagent-run"})
		done <- err
	}()
	waitFor(t, "a progress line", func() bool {
		return strings.Contains(progress.String(), "\r\033[Kpoolagent-run: queued in pool olap, position 1, waited")
	})
	runner.release.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if s := progress.String(); !strings.HasSuffix(s, "\r\033[K") {
		t.Errorf("progress line not cleared at the end: %q", s)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestQueueTimeoutOverSocket(t *testing.T) {
	cg := newFakeCgroups(t)
	d := startDaemon(t, Config{}, policyOf(t, olapPool(1, 5, ", QUERY_CANCEL_AFTER_SECONDS=1")), cg, peer.SystemUsers{})
	runner := startInProc(t, d.socket, "olap")
	waitFor(t, "runner to start", runner.isStarted)
	late := startInProc(t, d.socket, "olap")
	<-late.done
	want := "Delay deadline exceeded in pool olap\nQuery failed during adding/waiting in workload pool olap"
	var refused *client.RefusedError
	if !errors.As(late.err, &refused) || refused.Code != protocol.CodeDelayDeadline || late.err.Error() != want {
		t.Fatalf("error %v, want %q", late.err, want)
	}
	if p := d.pool(t, "olap"); p.TimedOut != 1 || p.Queued != 0 {
		t.Errorf("pool %+v: want 1 timed out, 0 queued", p)
	}
}

// fixedUsers gives every caller the same identity, for access tests.
type fixedUsers admission.Identity

func (f fixedUsers) Identity(*unix.Ucred) (admission.Identity, error) {
	return admission.Identity(f), nil
}

func TestRefusals(t *testing.T) {
	policy := policyOf(t, `
CREATE RESOURCE POOL off WITH (CONCURRENT_QUERY_LIMIT=0);
CREATE RESOURCE POOL ceo WITH (CONCURRENT_QUERY_LIMIT=1, QUEUE_SIZE=1);
GRANT USE ON RESOURCE POOL off TO 'all-users@well-known';
GRANT USE ON RESOURCE POOL ceo TO ceo;
`)
	alice := fixedUsers{UID: 1000, GID: 1000, User: "alice", Groups: []string{"alice"}}
	d := startDaemon(t, Config{}, policy, newFakeCgroups(t), alice)
	tests := []struct {
		pool string
		code string
		msg  string
	}{
		{pool: "off", code: protocol.CodePoolDisabled, msg: "Resource pool off was disabled due to zero concurrent query limit\n" +
			"Query failed during adding/waiting in workload pool off"},
		{pool: "ceo", code: protocol.CodeAccessDenied, msg: `access denied: resource pool "ceo" refused alice (uid 1000): ` +
			"no grant to use it for the user, their groups (alice) or all-users@well-known; " +
			"an administrator can run GRANT USE ON RESOURCE POOL ceo TO alice"},
		{pool: "nope", code: protocol.CodeUnknownPool, msg: `unknown pool: resource pool "nope" does not exist (pools: default, ceo, off)`},
	}
	for _, tt := range tests {
		t.Run(tt.pool, func(t *testing.T) {
			res, err := client.Run(client.RunOptions{Socket: d.socket, Pool: tt.pool, Args: []string{"true"}})
			var refused *client.RefusedError
			if !errors.As(err, &refused) || refused.Code != tt.code || err.Error() != tt.msg || res.Ran {
				t.Fatalf("error %v, want %s: %q", err, tt.code, tt.msg)
			}
		})
	}
}

// rawClient speaks the protocol by hand, to send what `poolagent run`
// never sends.
type rawClient struct {
	conn net.Conn
	enc  *json.Encoder
	dec  *json.Decoder
}

func dialRaw(t *testing.T, socket string) *rawClient {
	t.Helper()
	conn, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawClient{conn: conn, enc: json.NewEncoder(conn), dec: json.NewDecoder(conn)}
}

func (r *rawClient) send(t *testing.T, req protocol.Request) {
	t.Helper()
	if err := r.enc.Encode(req); err != nil {
		t.Fatal(err)
	}
}

func (r *rawClient) recv(t *testing.T) protocol.Reply {
	t.Helper()
	var rep protocol.Reply
	if err := r.dec.Decode(&rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestStartRefusesForeignProcess: a client may only place its own direct
// child, never another process (here: pid 1, its parent, a thread).
func TestStartRefusesForeignProcess(t *testing.T) {
	cg := newFakeCgroups(t)
	d := startDaemon(t, Config{}, policyOf(t, ""), cg, peer.SystemUsers{})
	for _, pid := range []int{1, os.Getppid(), os.Getpid(), unix.Gettid(), -5} {
		t.Run(fmt.Sprint(pid), func(t *testing.T) {
			c := dialRaw(t, d.socket)
			c.send(t, protocol.Request{Op: protocol.OpRun})
			if r := c.recv(t); r.Type != protocol.ReplyAdmitted {
				t.Fatalf("reply %+v, want admitted", r)
			}
			c.send(t, protocol.Request{Op: protocol.OpStart, PID: pid})
			r := c.recv(t)
			if r.Type != protocol.ReplyError || r.Code != protocol.CodeBadRequest || !strings.Contains(r.Error, "not the client's own child") {
				t.Fatalf("reply %+v, want a refusal naming the process", r)
			}
		})
	}
	waitFor(t, "no query left", func() bool { return cg.left() == 0 && d.pool(t, planner.DefaultPool).Running == 0 })
}

// TestStartRefusesForeignDescriptor: the descriptor sent with start must
// be a pidfd of the client's own child; its pid names nothing by itself.
func TestStartRefusesForeignDescriptor(t *testing.T) {
	cg := newFakeCgroups(t)
	d := startDaemon(t, Config{}, policyOf(t, ""), cg, peer.SystemUsers{})
	pipeR, pipeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pipeR.Close()
	defer pipeW.Close()
	init, err := unix.PidfdOpen(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(init)
	child := startHeld(t)
	for _, tc := range []struct {
		name string
		fd   int
		want string
	}{
		{"pipe", int(pipeR.Fd()), "not a pidfd"},
		{"pid 1", init, "process 1 has parent 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, d.socket)
			c.send(t, protocol.Request{Op: protocol.OpRun})
			if r := c.recv(t); r.Type != protocol.ReplyAdmitted {
				t.Fatalf("reply %+v, want admitted", r)
			}
			// The pid says the held child, the descriptor another.
			b, _ := json.Marshal(protocol.Request{Op: protocol.OpStart, PID: child.Process.Pid})
			if _, _, err := c.conn.(*net.UnixConn).WriteMsgUnix(append(b, '\n'), unix.UnixRights(tc.fd), nil); err != nil {
				t.Fatal(err)
			}
			r := c.recv(t)
			if r.Type != protocol.ReplyError || r.Code != protocol.CodeBadRequest || !strings.Contains(r.Error, tc.want) {
				t.Fatalf("reply %+v, want a refusal saying %q", r, tc.want)
			}
		})
	}
	waitFor(t, "no query left", func() bool { return cg.left() == 0 && d.pool(t, planner.DefaultPool).Running == 0 })
}

func TestBadFirstRequest(t *testing.T) {
	d := startDaemon(t, Config{}, policyOf(t, ""), newFakeCgroups(t), peer.SystemUsers{})
	c := dialRaw(t, d.socket)
	c.send(t, protocol.Request{Op: protocol.OpStart, PID: 1})
	if r := c.recv(t); r.Type != protocol.ReplyError || r.Code != protocol.CodeBadRequest {
		t.Fatalf("reply %+v, want bad_request", r)
	}
	c = dialRaw(t, d.socket)
	c.conn.Write([]byte("not json\n"))
	if r := c.recv(t); r.Type != protocol.ReplyError || r.Code != protocol.CodeBadRequest {
		t.Fatalf("reply %+v, want bad_request", r)
	}
}

// TestClientGoneAfterAdmission: a client that hangs up between admission
// and start frees its slot and its cgroup.
func TestClientGoneAfterAdmission(t *testing.T) {
	cg := newFakeCgroups(t)
	d := startDaemon(t, Config{}, policyOf(t, olapPool(1, 0, "")), cg, peer.SystemUsers{})
	c := dialRaw(t, d.socket)
	c.send(t, protocol.Request{Op: protocol.OpRun, Pool: "olap"})
	if r := c.recv(t); r.Type != protocol.ReplyAdmitted {
		t.Fatalf("reply %+v", r)
	}
	c.conn.Close()
	waitFor(t, "the slot to free", func() bool { return d.pool(t, "olap").Running == 0 && cg.left() == 0 })
}

func TestClientKilled(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cg := newFakeCgroups(t)
	d := startDaemon(t, Config{}, policyOf(t, olapPool(1, 5, "")), cg, peer.SystemUsers{})
	killQueuedAndRunning(t, d, exe, 50*time.Millisecond)
	waitFor(t, "the query cgroups to go", func() bool { return cg.left() == 0 })

	// Nothing leaked: the next query runs at once.
	spec := clientSpec{Socket: d.socket, Pool: "olap", Argv: holdingCommand}
	next := startClientProc(t, exe, spec, nil)
	next.waitStarted(t)
	next.release.Close()
	if out, ok := next.outcome(t); !ok || out.Error != "" || out.Result.ExitCode != 0 {
		t.Fatalf("next client: %+v", out)
	}
}

// TestExitStatus: the client exits with the command's status, 128+N for a
// signal, and a command that cannot run never starts.
func TestExitStatus(t *testing.T) {
	d := startDaemon(t, Config{}, policyOf(t, ""), newFakeCgroups(t), peer.SystemUsers{})
	tests := []struct {
		argv []string
		want int
	}{
		{argv: []string{"/bin/sh", "-c", "exit 3"}, want: 3},
		{argv: []string{"/bin/sh", "-c", "kill -TERM $$"}, want: 128 + int(syscall.SIGTERM)},
		{argv: []string{"/bin/true"}, want: 0},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.argv, " "), func(t *testing.T) {
			res, err := client.Run(client.RunOptions{Socket: d.socket, Args: tt.argv, Env: os.Environ()})
			if err != nil || res.ExitCode != tt.want || res.Pool != planner.DefaultPool || !res.Ran {
				t.Fatalf("exit %d in %q (ran: %v), %v; want %d in default", res.ExitCode, res.Pool, res.Ran, err, tt.want)
			}
		})
	}
}

// TestRunCommand runs the whole run command, flags to statistics, against
// a daemon: the command's status passes through and --stats json prints
// the query's statistics after the command's own output.
func TestRunCommand(t *testing.T) {
	d := startDaemon(t, Config{}, policyOf(t, olapPool(1, 1, "")), newFakeCgroups(t), peer.SystemUsers{})
	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	status := client.RunCommand("poolagent-run", []string{"--socket", d.socket, "-p", "olap", "--stats", "json", "--",
		"sh", "-c", "echo own output >&2; exit 3"}, nil, nil, stderr)
	out, err := os.ReadFile(stderr.Name())
	if err != nil {
		t.Fatal(err)
	}
	own, stats, _ := strings.Cut(string(out), "\n")
	var st protocol.Stats
	if status != 3 || own != "own output" || json.Unmarshal([]byte(stats), &st) != nil || st.ResourcePoolID != "olap" {
		t.Fatalf("status %d, stderr %q; want 3, the command's line, then olap's statistics as JSON", status, out)
	}
}

func TestSignalPassedToCommand(t *testing.T) {
	d := startDaemon(t, Config{}, policyOf(t, ""), newFakeCgroups(t), peer.SystemUsers{})
	stdoutR, stdoutW, _ := os.Pipe()
	defer stdoutR.Close()
	sigs := make(chan os.Signal, 1)
	done := make(chan client.Result, 1)
	go func() {
		// The shell reports SIGUSR1 through its exit status.
		argv := []string{"/bin/sh", "-c", "trap 'exit 42' USR1; echo started; while :; do sleep 0.01; done"}
		res, _ := client.Run(client.RunOptions{Socket: d.socket, Args: argv, Env: os.Environ(), Stdout: stdoutW, Signals: sigs})
		stdoutW.Close()
		done <- res
	}()
	b := make([]byte, 7)
	if _, err := stdoutR.Read(b); err != nil || string(b) != "started" {
		t.Fatalf("command output %q, %v", b, err)
	}
	sigs <- syscall.SIGUSR1
	if res := <-done; res.ExitCode != 42 {
		t.Fatalf("exit %d, want 42 from the trapped SIGUSR1", res.ExitCode)
	}
}

func TestCPULimitInEnvironment(t *testing.T) {
	// 2 vCPUs × 100% × 75% per query: 1.5 vCPU.
	policy := policyOf(t, "CREATE RESOURCE POOL p WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=100, QUERY_CPU_LIMIT_PERCENT_PER_NODE=75);")
	d := startDaemon(t, Config{}, policy, newFakeCgroups(t), peer.SystemUsers{})
	out, err := os.CreateTemp(t.TempDir(), "env")
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{"/bin/sh", "-c", "echo $" + client.EnvCPULimit}
	if _, err := client.Run(client.RunOptions{Socket: d.socket, Pool: "p", Args: argv, Env: os.Environ(), Stdout: out}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out.Name())
	if string(b) != "1.5\n" {
		t.Errorf("command saw %s=%q, want 1.5", client.EnvCPULimit, b)
	}
}

// TestArgvAsTyped: the command gets its argv exactly as given, argv[0]
// included, found through PATH.
func TestArgvAsTyped(t *testing.T) {
	d := startDaemon(t, Config{}, policyOf(t, ""), newFakeCgroups(t), peer.SystemUsers{})
	out, err := os.CreateTemp(t.TempDir(), "argv")
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{"cat", "/proc/self/cmdline"}
	if _, err := client.Run(client.RunOptions{Socket: d.socket, Args: argv, Env: os.Environ(), Stdout: out}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out.Name())
	if want := "cat\x00/proc/self/cmdline\x00"; string(b) != want {
		t.Errorf("argv %q, want %q", b, want)
	}
}

func TestCPUThresholdOverSocket(t *testing.T) {
	cfg := Config{Load: admission.LoadConfig{RefreshInterval: 50 * time.Millisecond}}
	policy := policyOf(t, "CREATE RESOURCE POOL olap WITH (QUEUE_SIZE=10, DATABASE_LOAD_CPU_THRESHOLD=50);")
	d := startDaemon(t, cfg, policy, newFakeCgroups(t), peer.SystemUsers{})
	d.load.set(0.9)
	waitFor(t, "a refresh at 90%", func() bool { return d.srv.reg.load().AveragePercent > 89 })
	c := startInProc(t, d.socket, "olap")
	waitFor(t, "the query to queue", func() bool { return d.pool(t, "olap").Queued == 1 })
	time.Sleep(150 * time.Millisecond)
	if c.isStarted() {
		t.Fatal("started above the threshold")
	}
	d.load.set(0.1)
	waitFor(t, "the query to start once the load fell", c.isStarted)
	c.release.Close()
	<-c.done
}

// TestQueryNamesAvoidEarlierDaemons: a daemon started within the second an
// earlier one started in names its queries after the earlier one's that
// still run, so no new query is placed in their cgroups.
func TestQueryNamesAvoidEarlierDaemons(t *testing.T) {
	cg := newFakeCgroups(t)
	earlier := startHeld(t)
	cfg := Config{Socket: filepath.Join(socketDir(t), "agent.sock"), LoadSample: 10 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	srv, err := New(cfg, policyOf(t, olapPool(5, 5, "")), cg, peer.SystemUsers{}, &fixedLoad{})
	if err != nil {
		t.Fatal(err)
	}
	// The earlier daemon's second query, by the name this daemon's first
	// query would take (the adopted query is this daemon's query 1).
	old := "q" + srv.names.start + "-2"
	cg.queries["olap/"+old] = []int{earlier.Process.Pid}
	d := serve(t, srv, cfg.Socket)
	c := startInProc(t, d.socket, "olap")
	waitFor(t, "the new query to start", func() bool { return c.isStarted() || c.isDone() })
	if c.isDone() {
		t.Fatalf("new query: %v", c.err)
	}
	if got := cg.left(); got != 2 {
		t.Errorf("query cgroups %v: want the earlier one and a new one", cg.queries)
	}
	c.release.Close()
	<-c.done
	if c.err != nil {
		t.Errorf("new query: %v", c.err)
	}
}

// TestAdoptRunningAtStart: a query cgroup that still holds a process when
// the daemon starts (an earlier daemon's query) keeps its slot until it
// is empty, then is removed; an empty one left by a daemon that died is
// removed at start and takes no slot.
func TestAdoptRunningAtStart(t *testing.T) {
	cg := newFakeCgroups(t)
	earlier := startHeld(t)
	cg.queries["olap/qold-1"] = []int{earlier.Process.Pid}
	cg.queries["olap/qold-2"] = nil
	d := startDaemon(t, Config{}, policyOf(t, olapPool(1, 5, "")), cg, peer.SystemUsers{})
	if p := d.pool(t, "olap"); p.Running != 1 || p.Admitted != 0 {
		t.Fatalf("pool %+v: want the earlier query counted as running, not admitted", p)
	}
	if cg.left() != 1 {
		t.Fatalf("query cgroups %v: want the empty one removed at start", cg.queries)
	}
	c := startInProc(t, d.socket, "olap")
	waitFor(t, "the new query to queue", func() bool { return d.pool(t, "olap").Queued == 1 })
	earlier.end()
	waitFor(t, "the new query to start", c.isStarted)
	c.release.Close()
	<-c.done
	if cg.left() != 0 {
		t.Errorf("query cgroups left: %v", cg.queries)
	}
}
