package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
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

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/history"
	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/internal/peer"
	"github.com/poolagent/poolagent/internal/pooltree"
	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/internal/service"
	"github.com/poolagent/poolagent/planner"
)

// The abuse suite (abuse_test.go) runs the daemon in a process of its
// own, this test binary with envTestDaemon set, so that its descriptor
// limit can be lowered and its memory measured apart from the clients'.
// The attackers are processes of their own too (envTestFlood), running as
// another uid when a test needs the daemon to tell users apart. Everything
// talks over a Unix socket in a temporary directory or over loopback TCP.

// envTestDaemon, set to a JSON daemonSpec, makes this test binary a daemon.
const envTestDaemon = "POOLAGENT_TEST_DAEMON"

// envTestFlood, set to a JSON floodSpec, makes this test binary a flood of
// connections.
const envTestFlood = "POOLAGENT_TEST_FLOOD"

// daemonSpec is what a daemon process serves.
type daemonSpec struct {
	// Socket is where it listens: a fresh path when empty.
	Socket string
	// Root, when set, is a real cgroup (a kerneltest root) the daemon
	// makes its pools and queries in; fake cgroups otherwise.
	Root string
	// History is the daemon's history; with HistoryFill, the pools'
	// history holds that many intervals of history.MinInterval (read from
	// the fake cgroups' stats, each busy) before the daemon serves.
	History     history.Config
	HistoryFill int
	// RootUsers makes every client root (rootIdentity), for a host
	// without /etc/passwd (the test VM); the system's users otherwise.
	RootUsers bool
	// Pools is the pool file (DDL); PoolCount more pools (manyPools) are
	// added to it there, to keep the spec within an environment
	// variable's size.
	Pools     string
	PoolCount int
	Limits    Limits
	// NoFile, when not 0, is the daemon's RLIMIT_NOFILE.
	NoFile uint64
	// Metrics serves the metrics endpoint on a loopback port.
	Metrics bool
	// PoolStats makes the fake cgroups report a cpu.stat and a
	// cpu.pressure for every pool, as a host does, so that a scrape is as
	// large as a real one; each read's usage_usec is the read's number,
	// which tells one gather's output from another's.
	PoolStats bool
	// PredictEvery is the throttling prediction's interval (the
	// predictor reads the pools' stats too); 1 s when 0.
	PredictEvery time.Duration
	// Notify and WatchdogUsec, when set, are the daemon's NOTIFY_SOCKET
	// and WATCHDOG_USEC, as systemd gives them.
	Notify       string
	WatchdogUsec int64
}

func daemonMain(spec string) int {
	var s daemonSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if s.NoFile > 0 {
		lim := unix.Rlimit{Cur: s.NoFile, Max: s.NoFile}
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			fmt.Fprintln(os.Stderr, "setrlimit:", err)
			return 2
		}
	}
	m, _, err := planner.Load("test.sql", []byte(s.Pools+manyPools(s.PoolCount)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cg := &fakeCgroups{queries: map[string][]int{}, stats: s.PoolStats}
	var cgs Cgroups = cg
	if s.Root != "" {
		ms, err := cgroupfs.Detect("/")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		h, err := pooltree.Open(ms, s.Root, cgroupfs.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer h.Close()
		cgs = h
	}
	if s.Notify != "" {
		os.Setenv("NOTIFY_SOCKET", s.Notify)
		os.Setenv("WATCHDOG_USEC", strconv.FormatInt(s.WatchdogUsec, 10))
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	cfg := Config{Socket: s.Socket, LoadSample: 100 * time.Millisecond, Log: log, Limits: s.Limits, History: s.History}
	policy := Policy{Model: m, Node: planner.Node{CPUs: 2, MemoryBytes: 1 << 30, PeriodUsec: 100000}}
	var users peer.Users = peer.SystemUsers{}
	if s.RootUsers {
		users = rootIdentity
	}
	srv, err := New(cfg, policy, cgs, users, &fixedLoad{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if s.HistoryFill > 0 && srv.history != nil {
		from := time.Now().Add(-time.Duration(s.HistoryFill) * history.MinInterval)
		for i := range s.HistoryFill {
			srv.history.Sample(from.Add(time.Duration(i) * history.MinInterval))
		}
	}
	opt := service.Options{Log: log, PredictEvery: s.PredictEvery}
	if s.Metrics {
		opt.MetricsListen = "127.0.0.1:0"
	}
	err = service.Run(context.Background(), srv, opt)
	calls, most := cg.statReads()
	log.Info(msgStatReads, "calls", calls, "most_at_once", most)
	if err != nil {
		log.Error("daemon ended", "err", err)
		return 1
	}
	return 0
}

// daemonProc is a daemon in its own process.
type daemonProc struct {
	cmd     *exec.Cmd
	socket  string
	metrics string // host:port of the metrics endpoint, if served
	log     lockedBuffer
	exited  chan struct{}
	waitErr error
}

// startDaemonProc starts a daemon process serving spec on a fresh socket
// and returns once it is ready; it is stopped (and must stop cleanly) when
// the test ends.
func startDaemonProc(t testing.TB, spec daemonSpec) *daemonProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if spec.Socket == "" {
		spec.Socket = filepath.Join(socketDir(t), "agent.sock")
	}
	b, _ := json.Marshal(spec)
	d := &daemonProc{socket: spec.Socket, exited: make(chan struct{})}
	d.cmd = exec.Command(exe)
	d.cmd.Env = append(os.Environ(), envTestDaemon+"="+string(b))
	// Killed with the test process, should that die before its cleanups
	// (a panic, a timeout): no daemon outlives its test.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			d.log.Write([]byte(line + "\n"))
			var rec struct{ Msg, URL string }
			json.Unmarshal([]byte(line), &rec)
			if rec.Msg == "metrics endpoint" {
				d.metrics = strings.TrimSuffix(strings.TrimPrefix(rec.URL, "http://"), "/metrics")
			}
			if rec.Msg == "ready" {
				once.Do(func() { close(ready) })
			}
		}
		d.waitErr = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() { d.stop(t) })
	select {
	case <-ready:
	case <-d.exited:
		t.Fatalf("daemon exited before it was ready: %v\n%s", d.waitErr, d.log.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("daemon not ready within 20 s:\n%s", d.log.String())
	}
	return d
}

// stop sends SIGTERM and fails the test unless the daemon exits with
// status 0 within 20 s: a stop must never hang.
func (d *daemonProc) stop(t testing.TB) {
	t.Helper()
	select {
	case <-d.exited:
	default:
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(20 * time.Second):
			d.cmd.Process.Kill()
			<-d.exited
			t.Errorf("daemon did not stop within 20 s of SIGTERM:\n%s", d.tail())
			return
		}
	}
	if d.waitErr != nil {
		t.Errorf("daemon: %v\n%s", d.waitErr, d.tail())
	}
}

// tail is the end of the daemon's log, for a failure message.
func (d *daemonProc) tail() string {
	s := d.log.String()
	if len(s) > 4000 {
		s = "..." + s[len(s)-4000:]
	}
	return s
}

// logged counts the daemon's log records with message msg.
func (d *daemonProc) logged(msg string) int {
	n := 0
	for line := range strings.Lines(d.log.String()) {
		var rec struct{ Msg string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == msg {
			n++
		}
	}
	return n
}

// memory returns the daemon's resident set now and its peak (VmRSS and
// VmHWM), bytes.
func (d *daemonProc) memory(t *testing.T) (rss, peak uint64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kib, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kib << 10
		case "VmHWM:":
			peak = kib << 10
		}
	}
	return rss, peak
}

// cpu returns the CPU time the daemon has used (user and system).
func (d *daemonProc) cpu(t *testing.T) time.Duration {
	t.Helper()
	p, err := procfs.NewProc(d.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(st.CPUTime() * float64(time.Second))
}

// checkPeak fails the test if the daemon's peak resident set passed
// bound bytes.
func (d *daemonProc) checkPeak(t *testing.T, bound uint64) {
	t.Helper()
	rss, peak := d.memory(t)
	t.Logf("daemon resident set %d MiB, peak %d MiB (bound %d MiB)", rss>>20, peak>>20, bound>>20)
	if peak > bound {
		t.Errorf("daemon's peak resident set %d MiB passed the bound of %d MiB", peak>>20, bound>>20)
	}
}

// ask sends one operator request and reads its reply within timeout.
func ask(socket string, req protocol.Request, timeout time.Duration) (protocol.AdminReply, error) {
	conn, err := net.DialTimeout("unix", socket, timeout)
	if err != nil {
		return protocol.AdminReply{}, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return protocol.AdminReply{}, err
	}
	var r protocol.AdminReply
	if err := json.NewDecoder(conn).Decode(&r); err != nil {
		return protocol.AdminReply{}, err
	}
	if r.Type != protocol.ReplyDone {
		return r, fmt.Errorf("%s: %s", r.Code, r.Error)
	}
	return r, nil
}

// answers fails the test unless the daemon answers the pools view within
// 5 s, and returns the view.
func (d *daemonProc) answers(t *testing.T) []protocol.Pool {
	t.Helper()
	r, err := ask(d.socket, protocol.Request{Op: protocol.OpPools}, 5*time.Second)
	if err != nil {
		t.Fatalf("the daemon did not answer the pools view: %v\n%s", err, d.tail())
	}
	return r.Pools
}

// floodSpec is what a flood process does: open Conns connections to Addr
// (Network "unix" or "tcp"), write Send on each, then Dribble one byte
// every DribbleEvery, reading what comes back only if Read. With
// LeaveAdmitted it reads each connection's replies until one says
// admitted, and hangs up then (the daemon gives the slot back). With
// Scrapers it runs that many HTTP clients instead, each GETting URL in a
// loop and reading every reply whole.
type floodSpec struct {
	Network, Addr string
	Conns         int
	Send          string
	Dribble       string
	DribbleEvery  time.Duration
	Read          bool
	LeaveAdmitted bool
	Scrapers      int
	URL           string
}

// floodStatus is what a flood process reports on each line it reads on
// its standard input.
type floodStatus struct {
	// Opened is how many connections were made, Failed how many could
	// not be (connect or send failed).
	Opened, Failed int
	// Closed is how many the daemon has closed (or reset).
	Closed int
	// Codes counts the protocol error codes of the first replies read
	// (Read only).
	Codes map[string]int
	// FirstErrors holds a few of the error texts read.
	FirstErrors []string
	// Admitted counts the connections told admitted (LeaveAdmitted).
	Admitted int
	// Scrapes counts the scrapers' replies by HTTP status ("200", "503";
	// "error" when the request failed).
	Scrapes map[string]int
}

func floodMain(spec string) int {
	var s floodSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// net/http logs each refusal a scraper reads before its request.
	log.SetOutput(io.Discard)
	var (
		mu    sync.Mutex
		st    = floodStatus{Codes: map[string]int{}, Scrapes: map[string]int{}}
		conns []net.Conn
		stop  = make(chan struct{})
	)
	var scrapers sync.WaitGroup
	for range s.Scrapers {
		scrapers.Go(func() {
			// Uncompressed replies: the most the daemon writes.
			hc := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableCompression: true}}
			for {
				select {
				case <-stop:
					return
				default:
				}
				outcome := "error"
				if resp, err := hc.Get(s.URL); err == nil {
					if _, err := io.Copy(io.Discard, resp.Body); err == nil {
						outcome = strconv.Itoa(resp.StatusCode)
					}
					resp.Body.Close()
				}
				mu.Lock()
				st.Scrapes[outcome]++
				mu.Unlock()
				if outcome == "error" {
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	for range s.Conns {
		c, err := net.DialTimeout(s.Network, s.Addr, 5*time.Second)
		if err == nil && s.Send != "" {
			c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, err = io.WriteString(c, s.Send)
		}
		if err != nil {
			st.Failed++
			if c != nil {
				c.Close()
			}
			continue
		}
		st.Opened++
		conns = append(conns, c)
	}
	for _, c := range conns {
		if s.LeaveAdmitted {
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadBytes('\n')
					var reply protocol.Reply
					if err != nil || json.Unmarshal(line, &reply) != nil || reply.Type == protocol.ReplyError {
						return
					}
					if reply.Type == protocol.ReplyAdmitted {
						mu.Lock()
						st.Admitted++
						mu.Unlock()
						return
					}
				}
			}()
			continue
		}
		if s.Read {
			go func() {
				line, err := bufio.NewReader(c).ReadString('\n')
				var r protocol.Reply
				mu.Lock()
				defer mu.Unlock()
				if json.Unmarshal([]byte(line), &r) == nil && r.Type == protocol.ReplyError {
					st.Codes[r.Code]++
					if len(st.FirstErrors) < 3 {
						st.FirstErrors = append(st.FirstErrors, r.Error)
					}
				}
				if err == nil {
					_, err = io.Copy(io.Discard, c)
				}
			}()
		}
		if s.Dribble != "" {
			go func() {
				for i := 0; ; i = (i + 1) % len(s.Dribble) {
					time.Sleep(s.DribbleEvery)
					if _, err := c.Write([]byte{s.Dribble[i]}); err != nil {
						return
					}
				}
			}()
		}
	}
	report := func() {
		closed := 0
		for _, c := range conns {
			if peerClosed(c) {
				closed++
			}
		}
		mu.Lock()
		st.Closed = closed
		b, _ := json.Marshal(st)
		mu.Unlock()
		os.Stdout.Write(append(b, '\n'))
	}
	report()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		report()
	}
	close(stop)
	for _, c := range conns {
		c.Close()
	}
	scrapers.Wait()
	return 0
}

// peerClosed reports, without reading, whether the other end of c has
// closed or reset it.
func peerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
			closed = fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
		}
	})
	return closed
}

// flood is a running flood process.
type flood struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	status floodStatus
}

// startFlood starts a flood process, as uid when uid is not 0, and
// returns once its connections are open; it ends when the test does, or at
// release.
func startFlood(t testing.TB, spec floodSpec, uid uint32) *flood {
	t.Helper()
	b, _ := json.Marshal(spec)
	f := startTestProc(t, envTestFlood+"="+string(b), uid)
	f.read(t)
	return f
}

// startTestProc starts this test binary with env set, as uid when uid is
// not 0, talking to it over its standard input and output; it ends when
// the test does, or at release.
func startTestProc(t testing.TB, env string, uid uint32) *flood {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if uid != 0 {
		exe = userExecutable(t)
	}
	f := &flood{cmd: exec.Command(exe)}
	f.cmd.Env = append(os.Environ(), env)
	f.cmd.Stderr = os.Stderr
	// As the daemon's: killed with the test process.
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if uid != 0 {
		f.cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uid, Gid: uid}
	}
	if f.in, err = f.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := f.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	f.out = bufio.NewScanner(stdout)
	f.out.Buffer(nil, 1<<20)
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.release)
	return f
}

func (f *flood) read(t testing.TB) floodStatus {
	t.Helper()
	if !f.out.Scan() {
		t.Fatalf("flood process ended: %v", f.out.Err())
	}
	f.status = floodStatus{}
	if err := json.Unmarshal(f.out.Bytes(), &f.status); err != nil {
		t.Fatalf("flood status %q: %v", f.out.Text(), err)
	}
	return f.status
}

// poll asks the flood process for its status.
func (f *flood) poll(t testing.TB) floodStatus {
	t.Helper()
	io.WriteString(f.in, "status\n")
	return f.read(t)
}

// release closes the flood's connections and waits for it to exit.
func (f *flood) release() {
	if f.in != nil {
		f.in.Close()
		f.in = nil
		f.cmd.Wait()
	}
}

// requireRoot gates the tests that run clients as other uids: they skip
// when not root, except where the real-kernel tests are required (CI),
// where they fail, so they never silently stop running.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv(kerneltest.EnvRequire) == "1" {
		t.Fatalf("needs root to run clients as other users (%s=1 makes this a failure)", kerneltest.EnvRequire)
	}
	t.Skip("needs root to run clients as other users")
}

// userExes holds each test's copy of the test binary for other users.
var userExes sync.Map // testing.TB -> string

// userExecutable copies the test binary, once per test, where the test's
// other users may run it (beside a socket of socketDir's).
func userExecutable(t testing.TB) string {
	t.Helper()
	if exe, ok := userExes.Load(t); ok {
		return exe.(string)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(socketDir(t), "daemon.test")
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	userExes.Store(t, exe)
	t.Cleanup(func() { userExes.Delete(t) })
	return exe
}

// msgStatReads is the daemon process's last record: how often it read the
// pools' stats, and the most reads at once.
const msgStatReads = "pool stats read"

// statReads returns what the stopped daemon logged in msgStatReads.
func (d *daemonProc) statReads(t *testing.T) (calls, mostAtOnce int64) {
	t.Helper()
	for line := range strings.Lines(d.log.String()) {
		var rec struct {
			Msg        string
			Calls      int64 `json:"calls"`
			MostAtOnce int64 `json:"most_at_once"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == msgStatReads {
			return rec.Calls, rec.MostAtOnce
		}
	}
	t.Fatalf("the daemon did not log %q:\n%s", msgStatReads, d.tail())
	return 0, 0
}

// watchdog listens where a daemon sends its systemd notifications and
// records when each WATCHDOG=1 arrived.
type watchdog struct {
	path  string
	mu    sync.Mutex
	pings []time.Time
}

// listenWatchdog opens a notification socket in a fresh directory,
// closed when the test ends.
func listenWatchdog(t *testing.T) *watchdog {
	t.Helper()
	w := &watchdog{path: filepath.Join(socketDir(t), "notify.sock")}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: w.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			if slices.Contains(strings.Split(string(buf[:n]), "\n"), "WATCHDOG=1") {
				w.mu.Lock()
				w.pings = append(w.pings, time.Now())
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// longestGap is the longest time between two pings, or from the last
// ping to now, since from.
func (w *watchdog) longestGap(from time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var gap time.Duration
	last := from
	for _, p := range w.pings {
		if p.Before(from) {
			continue
		}
		gap = max(gap, p.Sub(last))
		last = p
	}
	return max(gap, time.Since(last))
}
