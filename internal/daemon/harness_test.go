package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/client"
	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/internal/peer"
	"github.com/poolagent/poolagent/internal/pooltree"
	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// envTestClient, set in this test binary's environment, makes it a client
// (like `poolagent run`) described by the JSON value, so that tests can
// kill a client process or run one as another user.
const envTestClient = "POOLAGENT_TEST_CLIENT"

// envTestSpin, set to a duration, makes this test binary a command that
// spins for that much CPU time, prints its cgroups and exits.
const envTestSpin = "POOLAGENT_TEST_SPIN"

func TestMain(m *testing.M) {
	if spec, ok := os.LookupEnv(envTestAlloc); ok {
		os.Exit(allocMain(spec))
	}
	if spec, ok := os.LookupEnv(envTestClient); ok {
		os.Exit(testClientMain(spec))
	}
	if socket, ok := os.LookupEnv(envTestRacer); ok {
		os.Exit(racerMain(socket))
	}
	if d, ok := os.LookupEnv(envTestSpin); ok {
		os.Exit(spinMain(d))
	}
	if spec, ok := os.LookupEnv(envTestDaemon); ok {
		os.Exit(daemonMain(spec))
	}
	if spec, ok := os.LookupEnv(envTestFlood); ok {
		os.Exit(floodMain(spec))
	}
	if socket, ok := os.LookupEnv(envTestNSClient); ok {
		os.Exit(nsClientMain(socket))
	}
	if _, ok := os.LookupEnv(envTestVforkSitter); ok {
		os.Exit(vforkSitterMain())
	}
	if spec, ok := os.LookupEnv(envTestVforkClients); ok {
		os.Exit(vforkClientsMain(spec))
	}
	if _, ok := os.LookupEnv(envTestGOMAXPROCS); ok {
		os.Exit(gomaxprocsMain())
	}
	kerneltest.Main(m)
}

func spinMain(d string) int {
	dur, err := time.ParseDuration(d)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var ts unix.Timespec
	for {
		unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts)
		if time.Duration(ts.Nano()) >= dur {
			break
		}
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	os.Stdout.Write(b)
	return 0
}

// clientSpec is what a client process runs: client.Run, or with Exec the
// whole run command (client.RunCommand as poolagent-run), which runs the
// command in place of the client.
type clientSpec struct {
	Socket string
	Pool   string
	Argv   []string
	Exec   bool
	// Stats, with Exec, runs the command with --stats FORMAT: the client
	// stays its parent.
	Stats string
	// Raw makes the client send an OpExec request naming PID itself and
	// print the reply's type: once started, it waits for its stdin to
	// close. With Handoff, once queued it hands its connection to a child
	// (/bin/sleep), prints the child's pid and exits: the connection's
	// peer is gone when the query starts.
	Raw     bool
	PID     int
	Handoff bool
	// Op, with Raw, is the first request's op in place of OpExec; an
	// error reply is printed as its type and code.
	Op string
	// Procs, when set, is a cgroup.procs file the client moves itself
	// into before anything else.
	Procs string
}

// clientOutcome is what a client process reports on file descriptor 3.
type clientOutcome struct {
	Result client.Result
	Code   string // RefusedError code
	Error  string
}

func testClientMain(spec string) int {
	var s clientSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if s.Procs != "" {
		if err := os.WriteFile(s.Procs, []byte("0"), 0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	syscall.CloseOnExec(3)
	if s.Raw {
		return rawMain(s)
	}
	if s.Exec {
		args := []string{"--socket", s.Socket}
		if s.Pool != "" {
			args = append(args, "--pool", s.Pool)
		}
		if s.Stats != "" {
			args = append(args, "--stats", s.Stats)
		}
		return client.RunCommand("poolagent-run", append(append(args, "--"), s.Argv...), os.Stdin, os.Stdout, os.Stderr)
	}
	report := os.NewFile(3, "report")
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	res, err := client.Run(client.RunOptions{
		Socket: s.Socket, Pool: s.Pool, Args: s.Argv, Env: os.Environ(),
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Signals: sigs,
	})
	out := clientOutcome{Result: res}
	if err != nil {
		out.Error = err.Error()
		var refused *client.RefusedError
		if errors.As(err, &refused) {
			out.Code = refused.Code
		}
	}
	json.NewEncoder(report).Encode(out)
	return res.ExitCode
}

// rawMain is the Raw client.
func rawMain(s clientSpec) int {
	conn, err := client.Dial(s.Socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	op := protocol.OpExec
	if s.Op != "" {
		op = s.Op
	}
	json.NewEncoder(conn).Encode(protocol.Request{Op: op, Pool: s.Pool, PID: s.PID})
	var r protocol.Reply
	if err := json.NewDecoder(conn).Decode(&r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if r.Type == protocol.ReplyError {
		fmt.Println(r.Type, r.Code)
		return 0
	}
	fmt.Println(r.Type)
	if !s.Handoff {
		io.Copy(io.Discard, os.Stdin)
		return 0
	}
	child := exec.Command("/bin/sleep", "30")
	child.ExtraFiles = []*os.File{conn}
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println(child.Process.Pid)
	return 0
}

// fakeCgroups keeps query "cgroups" as lists of pids; a query is empty
// when none of its pids is alive. It cannot see
// grandchildren: tests of those use the real kernel.
type fakeCgroups struct {
	mu      sync.Mutex
	queries map[string][]int
	// placed is every process placed, by pid: the pool it was placed in.
	placed  map[int]string
	created int
	removed int
	applied []planner.Desired
	// killed lists the query cgroups KillQuery was asked to kill.
	killed []string

	// stats makes PoolStats report a sample per pool; the counters say
	// how often it was called and how many calls overlapped at most.
	stats                          bool
	statCalls, statsNow, statsMost atomic.Int64
}

func newFakeCgroups(t testing.TB) *fakeCgroups {
	return &fakeCgroups{queries: map[string][]int{}}
}

func (f *fakeCgroups) Apply(d planner.Desired) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, d)
	return nil
}

func (f *fakeCgroups) MakeQuery(ps planner.PoolState, query string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := ps.Name + "/" + query
	if _, ok := f.queries[key]; ok {
		return fmt.Errorf("query cgroup %s exists", key)
	}
	f.queries[key] = []int{}
	f.created++
	return nil
}

func (f *fakeCgroups) MoveToQuery(ps planner.PoolState, query string, pid int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := ps.Name + "/" + query
	if _, ok := f.queries[key]; !ok {
		return fmt.Errorf("query cgroup %s: no such cgroup", key)
	}
	f.queries[key] = append(f.queries[key], pid)
	if f.placed == nil {
		f.placed = map[int]string{}
	}
	f.placed[pid] = ps.Name
	return nil
}

func (f *fakeCgroups) Repair(planner.Desired, bool) (int, error) { return 0, nil }

func (f *fakeCgroups) LimitsLeft(planner.PoolState, string, int) ([]observe.CgroupLimit, error) {
	return nil, nil
}

func (f *fakeCgroups) populated(key string) bool {
	f.mu.Lock()
	pids := slices.Clone(f.queries[key])
	f.mu.Unlock()
	for _, pid := range pids {
		if alive(pid) {
			return true
		}
	}
	return false
}

// alive reports whether process pid has a thread that has not exited, as
// its pidfd tells it: a pidfd turns readable only once the whole thread
// group has exited, so a process caught in an exec from a thread other
// than its leader (the leader a zombie for a moment, the exec'ing
// thread's id changing) reads as alive, where /proc's thread list can
// show no live thread. A pid that is gone, or reaped, is not alive.
func alive(pid int) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n == 0
	}
}

func (f *fakeCgroups) Populated(pool, query string) (bool, error) {
	return f.populated(pool + "/" + query), nil
}

func (f *fakeCgroups) QueryStat(pool, query string) (observe.Sample, error) {
	return observe.Sample{Group: pool + "/" + query}, nil
}

func (f *fakeCgroups) QueryUsage(pool, query string) (uint64, bool, error) { return 0, true, nil }

func (f *fakeCgroups) QueryThrottling(pool, query string) (observe.CPUStat, error) {
	return observe.CPUStat{}, nil
}

func (f *fakeCgroups) PoolMemory(string) (*observe.Memory, error) { return nil, nil }
func (f *fakeCgroups) PoolPids(string) (*observe.Pids, error)     { return nil, nil }

func (f *fakeCgroups) Pending() []cgroupfs.Pending { return nil }

// KillQuery ends the query as its processes' exit would.
func (f *fakeCgroups) KillQuery(pool, query string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.queries[pool+"/"+query]; !ok {
		return fmt.Errorf("query %s/%s: %w", pool, query, os.ErrNotExist)
	}
	f.killed = append(f.killed, pool+"/"+query)
	return nil
}

func (f *fakeCgroups) RemoveQuery(pool, query string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := pool + "/" + query
	if _, ok := f.queries[key]; ok {
		delete(f.queries, key)
		f.removed++
	}
	return nil
}

func (f *fakeCgroups) QueryCgroup(pool, query string) (string, error) {
	return "/fake/" + pool + "/" + query, nil
}

func (f *fakeCgroups) Queries() ([]pooltree.QueryKey, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []pooltree.QueryKey
	for key := range f.queries {
		pool, query, _ := strings.Cut(key, "/")
		out = append(out, pooltree.QueryKey{Pool: pool, Name: query})
	}
	return out, nil
}

// PoolStats reports nothing, or with stats set a sample for every pool
// whose usage_usec is the read's number (1, 2, ...).
func (f *fakeCgroups) PoolStats(names []string) (map[string]observe.Sample, error) {
	if !f.stats {
		return nil, nil
	}
	n := f.statCalls.Add(1)
	now := f.statsNow.Add(1)
	defer f.statsNow.Add(-1)
	for most := f.statsMost.Load(); now > most && !f.statsMost.CompareAndSwap(most, now); most = f.statsMost.Load() {
	}
	out := make(map[string]observe.Sample, len(names))
	for _, name := range names {
		out[name] = observe.Sample{
			Group: name, UsageKnown: true,
			CPU: observe.CPUStat{UsageUsec: uint64(n), UserUsec: 812_345_678, SystemUsec: 91_234_567,
				NrPeriods: 123_456, NrThrottled: 4_567, ThrottledUsec: 345_678_901, NrBursts: 12, BurstUsec: 456_789},
			Pressure: &observe.Pressure{
				Some: observe.PressureLine{Avg10Percent: 1.25, Avg60Percent: 0.75, Avg300Percent: 0.5, TotalUsec: 123_456_789},
				Full: &observe.PressureLine{Avg10Percent: 0.5, Avg60Percent: 0.25, Avg300Percent: 0.125, TotalUsec: 23_456_789},
			},
		}
	}
	return out, nil
}

// PoolCPUStats is PoolStats without the pressure.
func (f *fakeCgroups) PoolCPUStats(names []string) (map[string]observe.Sample, error) {
	out, err := f.PoolStats(names)
	for name, s := range out {
		s.Pressure = nil
		out[name] = s
	}
	return out, err
}

// PoolCPUPressure is the pressure of PoolStats.
func (f *fakeCgroups) PoolCPUPressure(names []string) (map[string]*observe.Pressure, error) {
	out, err := f.PoolStats(names)
	psi := make(map[string]*observe.Pressure, len(out))
	for name, s := range out {
		psi[name] = s.Pressure
	}
	return psi, err
}

// statReads returns how many times PoolStats or PoolCPUStats read stats and the most
// reads under way at once.
func (f *fakeCgroups) statReads() (calls, mostAtOnce int64) {
	return f.statCalls.Load(), f.statsMost.Load()
}

// placedIn is the pool process pid was placed in, "" if none.
func (f *fakeCgroups) placedIn(pid int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.placed[pid]
}

// left is the number of query cgroups not removed.
func (f *fakeCgroups) left() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queries)
}

// fixedLoad is a load source that always reports the same busy fraction.
type fixedLoad struct {
	mu   sync.Mutex
	busy float64
}

func (l *fixedLoad) Sample() (float64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.busy, nil
}

func (l *fixedLoad) set(busy float64) {
	l.mu.Lock()
	l.busy = busy
	l.mu.Unlock()
}

// policyOf is the policy of a pool file on a 2 vCPU node; pools is DDL.
func policyOf(t testing.TB, pools string) Policy {
	t.Helper()
	m, _, err := planner.Load("test.sql", []byte(pools))
	if err != nil {
		t.Fatal(err)
	}
	return Policy{Model: m, Node: planner.Node{CPUs: 2, MemoryBytes: 1 << 30, PeriodUsec: 100000}}
}

// socketDir makes a directory every user may enter, for sockets and
// binaries that clients of other users use.
func socketDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "poolagent-daemon-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

type testDaemon struct {
	srv    *Server
	socket string
	load   *fixedLoad
}

// startDaemon serves policy on a fresh socket until the test ends, with a
// load source the test sets.
func startDaemon(t testing.TB, cfg Config, policy Policy, cg Cgroups, users peer.Users) *testDaemon {
	t.Helper()
	cfg.Socket = filepath.Join(socketDir(t), "agent.sock")
	if cfg.LoadSample == 0 {
		cfg.LoadSample = 10 * time.Millisecond
	}
	if cfg.Progress == 0 {
		cfg.Progress = 10 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	load := &fixedLoad{}
	srv, err := New(cfg, policy, cg, users, load)
	if err != nil {
		t.Fatal(err)
	}
	d := serve(t, srv, cfg.Socket)
	d.load = load
	return d
}

// serve runs srv until the test ends. It returns once the daemon serves:
// after it adopted the queries of an earlier daemon, as a client would
// first see it (the socket file exists before that).
func serve(t testing.TB, srv *Server, socket string) *testDaemon {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	select {
	case <-srv.Listening():
	case err := <-served:
		served <- err // for the cleanup
		t.Fatalf("the daemon did not start serving on %s: %v", socket, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("the daemon did not start serving on %s within 10 s", socket)
	}
	return &testDaemon{srv: srv, socket: socket}
}

// waitFor polls cond for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (d *testDaemon) pool(t testing.TB, name string) admission.PoolStats {
	t.Helper()
	for _, p := range d.srv.reg.pools() {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("pool %q not in %+v", name, d.srv.reg.pools())
	return admission.PoolStats{}
}

// inProcClient is a query run by Run in this process: its command is a
// shell that prints "started" and waits for its stdin to close.
type inProcClient struct {
	release *os.File // closing it ends the command
	started chan struct{}
	done    chan struct{}
	signals chan os.Signal
	res     client.Result
	err     error
}

// heldProcess is a process of the test that runs until end: a shell
// reading its standard input, which exits when the input closes.
type heldProcess struct {
	*exec.Cmd
	stdin io.WriteCloser
	once  sync.Once
	err   error
}

// startHeld starts a heldProcess, ended at the latest when the test ends.
func startHeld(t testing.TB) *heldProcess {
	t.Helper()
	h := &heldProcess{Cmd: exec.Command("/bin/sh", "-c", "exec cat >/dev/null")}
	var err error
	if h.stdin, err = h.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.end() })
	return h
}

// end closes the process's input and waits for it to exit.
func (h *heldProcess) end() error {
	h.once.Do(func() {
		h.stdin.Close()
		h.err = h.Wait()
	})
	return h.err
}

// holdingCommand prints "started" and waits for stdin to close.
var holdingCommand = []string{"/bin/sh", "-c", "echo started; exec cat >/dev/null"}

func startInProc(t *testing.T, socket, pool string) *inProcClient {
	t.Helper()
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &inProcClient{release: stdinW, started: make(chan struct{}), done: make(chan struct{}), signals: make(chan os.Signal, 1)}
	go func() {
		defer close(c.done)
		defer stdinR.Close()
		defer stdoutW.Close()
		c.res, c.err = client.Run(client.RunOptions{
			Socket: socket, Pool: pool, Args: holdingCommand, Env: os.Environ(),
			Stdin: stdinR, Stdout: stdoutW, Stderr: os.Stderr, Signals: c.signals,
		})
	}()
	go func() {
		defer stdoutR.Close()
		b, _ := io.ReadAll(io.LimitReader(stdoutR, 8))
		if strings.HasPrefix(string(b), "started") {
			close(c.started)
		}
	}()
	t.Cleanup(func() {
		stdinW.Close()
		select {
		case c.signals <- syscall.SIGTERM: // leave the queue if still there
		default:
		}
		<-c.done
	})
	return c
}

func (c *inProcClient) isStarted() bool {
	select {
	case <-c.started:
		return true
	default:
		return false
	}
}

func (c *inProcClient) isDone() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// clientProc is a client in its own process (this test binary). Its
// command's stdin and stdout are pipes held by the test.
type clientProc struct {
	proc    *os.Process
	report  *os.File
	stdout  *os.File
	release *os.File // the command's stdin: closing it ends holdingCommand
}

// startClientProc starts a client process, as cred's user when cred is
// not nil.
func startClientProc(t *testing.T, exe string, spec clientSpec, cred *syscall.Credential) *clientProc {
	t.Helper()
	p, stdinW, stdoutR, reportR := spawnClient(t, exe, spec, cred, 3)
	c := &clientProc{proc: p, report: reportR, stdout: stdoutR, release: stdinW}
	t.Cleanup(func() {
		stdinW.Close()
		p.Kill()
		p.Wait()
		reportR.Close()
		stdoutR.Close()
	})
	return c
}

// spawnClient starts the test binary as a client process running spec,
// as cred's user when cred is not nil, with a pipe as its stdin (the
// write end returned), one as its stdout and one as file descriptor
// third (2, its stderr; or 3, a report beside the test's stderr), whose
// read ends are returned.
func spawnClient(t *testing.T, exe string, spec clientSpec, cred *syscall.Credential, third int) (p *os.Process, stdin, stdout, thirdR *os.File) {
	t.Helper()
	b, _ := json.Marshal(spec)
	var fds [6]*os.File
	for i := 0; i < len(fds); i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		fds[i], fds[i+1] = r, w
	}
	stdinR, stdinW, stdoutR, stdoutW, thirdR, thirdW := fds[0], fds[1], fds[2], fds[3], fds[4], fds[5]
	files := []*os.File{stdinR, stdoutW, thirdW}
	if third == 3 {
		files = []*os.File{stdinR, stdoutW, os.Stderr, thirdW}
	}
	p, err := os.StartProcess(exe, []string{exe}, &os.ProcAttr{
		Env:   append(os.Environ(), envTestClient+"="+string(b)),
		Files: files,
		Sys:   &syscall.SysProcAttr{Credential: cred},
	})
	stdinR.Close()
	stdoutW.Close()
	thirdW.Close()
	if err != nil {
		t.Fatal(err)
	}
	return p, stdinW, stdoutR, thirdR
}

// outcome waits for the client process and returns its report; a killed
// client has none.
func (c *clientProc) outcome(t *testing.T) (clientOutcome, bool) {
	t.Helper()
	var out clientOutcome
	err := json.NewDecoder(c.report).Decode(&out)
	c.proc.Wait()
	return out, err == nil
}

// waitStarted reads the client's stdout until the command printed
// "started".
func (c *clientProc) waitStarted(t *testing.T) {
	t.Helper()
	b := make([]byte, 8)
	if _, err := io.ReadFull(c.stdout, b[:7]); err != nil || string(b[:7]) != "started" {
		t.Fatalf("command did not start: %q, %v", b, err)
	}
}

func killProc(t *testing.T, p *os.Process) {
	t.Helper()
	if err := p.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// killQueuedAndRunning starts one client that runs holdingCommand in olap
// (limit 1) and one that queues behind it, kills the queued one and checks
// it leaves the queue, then kills the running one and checks its command
// keeps the slot (for settle) until released, after which the slot frees.
func killQueuedAndRunning(t *testing.T, d *testDaemon, exe string, settle time.Duration) {
	t.Helper()
	spec := clientSpec{Socket: d.socket, Pool: "olap", Argv: holdingCommand}
	runner := startClientProc(t, exe, spec, nil)
	runner.waitStarted(t)
	queued := startClientProc(t, exe, spec, nil)
	waitFor(t, "one queued", func() bool { return d.pool(t, "olap").Queued == 1 })
	killProc(t, queued.proc)
	waitFor(t, "the killed client to leave the queue", func() bool { return d.pool(t, "olap").Queued == 0 })

	// Killed while running: the command outlives its client and keeps the
	// slot until it exits.
	killProc(t, runner.proc)
	runner.proc.Wait()
	time.Sleep(settle)
	if p := d.pool(t, "olap"); p.Running != 1 {
		t.Fatalf("pool %+v: the slot was freed while the command of the killed client runs", p)
	}
	runner.release.Close()
	waitFor(t, "the killed runner's slot to free", func() bool { return d.pool(t, "olap").Running == 0 })
}
