package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/internal/protocol"
)

// envAsMain makes this test binary run poolagent's main, so tests can
// start the daemon and clients as processes of their own.
const envAsMain = "POOLAGENT_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envAsMain) == "1" {
		main()
		os.Exit(0)
	}
	kerneltest.Main(m)
}

// poolagent returns a command running this binary as poolagent.
func poolagent(args ...string) *exec.Cmd {
	return poolagentContext(context.Background(), args...)
}

// poolagentContext is poolagent, killed when ctx ends.
func poolagentContext(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), envAsMain+"=1")
	return cmd
}

// waitLimit bounds every wait of the daemon tests: a daemon or client
// that hangs fails its test with what it logged, instead of holding up
// the whole run until go test's own timeout.
const waitLimit = 20 * time.Second

// within waits at most waitLimit for a value from ch.
func within[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("timed out after %v waiting for %s", waitLimit, what)
		panic("unreachable")
	}
}

func TestSQLRefusesBeforeAsking(t *testing.T) {
	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{"neither", []string{"sql"}, "sql: give one of -e 'DDL' or -f FILE"},
		{"both", []string{"sql", "-e", "x", "-f", "y"}, "sql: give one of -e 'DDL' or -f FILE"},
		{"argument", []string{"sql", "DROP"}, `unexpected argument "DROP" (give the DDL with -e 'DDL' or -f FILE)`},
		{"missing file", []string{"sql", "-f", "/nonexistent.sql"}, "sql: open /nonexistent.sql: no such file or directory"},
		{"no daemon", []string{"sql", "--socket", "/nonexistent/agent.sock", "-e", "DROP RESOURCE POOL a;"},
			"connect to the poolagent daemon at /nonexistent/agent.sock (is `poolagent daemon` running?)"},
		{"view format", []string{"pools", "--format", "xml"}, `--format "xml" is not accepted (accepted: text, json)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runAppStatus(t, tt.args...)
			if err == nil || !strings.HasPrefix(err.Error(), tt.msg) {
				t.Fatalf("error %v, want %q", err, tt.msg)
			}
		})
	}
}

// TestSQLNoAnswer: when the connection drops after the DDL was sent,
// the error says the change may have been applied.
func TestSQLNoAnswer(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		// A daemon that reads the request whole and dies before answering.
		c, err := ln.Accept()
		if err != nil {
			return
		}
		bufio.NewReader(c).ReadString('\n')
		c.Close()
	}()
	_, _, err = runAppStatus(t, "sql", "--socket", socket, "-e", "DROP RESOURCE POOL a;")
	if err == nil || !strings.Contains(err.Error(), "no answer from the poolagent daemon") ||
		!strings.Contains(err.Error(), "the change may have been applied and saved before the connection dropped") {
		t.Fatalf("error %v, want it to say the change may have been applied", err)
	}
}

// agent is a `poolagent daemon` process of a test.
type agent struct {
	cmd     *exec.Cmd
	metrics string // the metrics endpoint's URL
	exited  chan error
	mu      sync.Mutex
	log     strings.Builder
}

// startAgent starts the daemon with args and waits for READY=1 on a
// notify socket of the test's own.
func startAgent(t *testing.T, notify *net.UnixConn, args ...string) *agent {
	t.Helper()
	a := &agent{cmd: poolagent(append([]string{"daemon", "--log-level", "debug", "--metrics-listen", "127.0.0.1:0"}, args...)...), exited: make(chan error, 1)}
	a.cmd.Env = append(a.cmd.Env, "NOTIFY_SOCKET="+notify.LocalAddr().String())
	stderr, err := a.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`url=(http://\S+)`)
		for sc.Scan() {
			a.mu.Lock()
			a.log.WriteString(sc.Text() + "\n")
			a.mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				url <- m[1]
			}
		}
		a.exited <- a.cmd.Wait()
	}()
	t.Cleanup(func() {
		a.cmd.Process.Kill()
		if t.Failed() {
			a.mu.Lock()
			t.Logf("daemon log:\n%s", a.log.String())
			a.mu.Unlock()
		}
	})
	if got := recvNotify(t, notify); !strings.HasPrefix(got, "READY=1\n") {
		t.Fatalf("first notification %q, want READY=1", got)
	}
	a.metrics = within(t, "the metrics endpoint in the daemon's log", url)
	return a
}

func recvNotify(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(waitLimit))
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no notification from the daemon: %v", err)
	}
	return string(buf[:n])
}

// stop sends SIGTERM and waits for a clean exit after STOPPING=1.
func (a *agent) stop(t *testing.T, notify *net.UnixConn) {
	t.Helper()
	a.cmd.Process.Signal(syscall.SIGTERM)
	if got := recvNotify(t, notify); !strings.HasPrefix(got, "STOPPING=1\n") {
		t.Fatalf("on SIGTERM %q, want STOPPING=1", got)
	}
	if err := within(t, "the daemon to exit after STOPPING=1", a.exited); err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
}

// output runs poolagent with args, for at most waitLimit, and returns its
// standard output.
func output(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	out, err := poolagentContext(ctx, args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("poolagent %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return string(out)
}

func poolRow(t *testing.T, socket, name string) protocol.Pool {
	t.Helper()
	var rows []protocol.Pool
	if err := json.Unmarshal([]byte(output(t, "pools", "--socket", socket, "--format", "json")), &rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no pool %s in %+v", name, rows)
	return protocol.Pool{}
}

// userDatabase gives a host without a user database (the test VM) one
// with root alone, for the daemon's identity lookups, and removes it after
// the test; a host's own files are never touched.
func userDatabase(t *testing.T) {
	t.Helper()
	for file, line := range map[string]string{"/etc/passwd": "root:x:0:0:root:/root:/bin/sh\n", "/etc/group": "root:x:0:\n"} {
		if _, err := os.Stat(file); err == nil {
			continue
		}
		os.MkdirAll("/etc", 0o755)
		if err := os.WriteFile(file, []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(file) })
	}
}

// loopbackUp brings the loopback interface up where it is down (the test
// VM boots without networking), for the metrics endpoint; where it is up
// (any host) nothing is changed.
func loopbackUp(t *testing.T) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		t.Fatalf("loopback flags: %v", err)
	}
	if flags := ifr.Uint16(); flags&unix.IFF_UP == 0 {
		ifr.SetUint16(flags | unix.IFF_UP)
		if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
			t.Fatalf("bring loopback up: %v", err)
		}
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKernelOperate runs the daemon as an operator would, on the real
// kernel: run-time DDL applied to the cgroups, persisted, visible in the
// views and the metrics; a restart while a query runs re-adopts it (its
// slot neither lost nor counted twice); a reload with an invalid file
// keeps the pools and says why.
func TestKernelOperate(t *testing.T) {
	need := kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1, kerneltest.V2}, Controllers: []string{"cpuacct"}}
	host := kerneltest.Require(t, need)
	root := host.NewRoot(t, need)
	userDatabase(t)
	loopbackUp(t)

	dir, err := os.MkdirTemp("", "poolagent-operate-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	socket := filepath.Join(dir, "agent.sock")
	pools := filepath.Join(dir, "pools.sql")
	const poolFile = "CREATE RESOURCE POOL olap WITH (CONCURRENT_QUERY_LIMIT=1, QUEUE_SIZE=5, TOTAL_CPU_LIMIT_PERCENT_PER_NODE=50);\n" +
		"GRANT USE ON RESOURCE POOL olap TO 'all-users@well-known';\n"
	if err := os.WriteFile(pools, []byte(poolFile), 0o644); err != nil {
		t.Fatal(err)
	}
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "notify"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()
	args := []string{"--pools", pools, "--root", root.Path, "--state-dir", filepath.Join(dir, "state"), "--create-state-dir",
		"--socket", socket, "--cpus", "2", "--memory", "1073741824"}
	a := startAgent(t, notify, args...)

	// Run-time DDL: applied to the kernel at once and persisted.
	if out := output(t, "sql", "--socket", socket, "-e", "ALTER RESOURCE POOL olap SET (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=25);"); !strings.HasPrefix(out, "change 1 applied") {
		t.Fatalf("sql: %q", out)
	}
	quota := func() string {
		file := "cpu.max"
		if host.Mode == kerneltest.V1 {
			file = "cpu.cfs_quota_us"
		}
		b, err := os.ReadFile(filepath.Join(root.Path, "olap", file))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(string(b))[0]
	}
	if q := quota(); q != "50000" {
		t.Errorf("olap quota after the change %s, want 50000 (25%% of 2 vCPUs per 100 ms)", q)
	}
	bad := poolagent("sql", "--socket", socket, "-e", "ALTER RESOURCE POOL olap\n SET (QUEUE_SIZE=-3);")
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "-e:2:") {
		t.Errorf("invalid DDL: %v\n%s\nwant an error at -e:2:col", err, out)
	}
	if r := poolRow(t, socket, "olap"); r.TotalCpuLimitPercentPerNode != 25 || r.CpuLimitCores != 0.5 {
		t.Errorf("olap row %+v", r)
	}
	resp, err := http.Get(a.metrics)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `poolagent_pool_cpu_limit_cores{pool="olap"} 0.5`) {
		t.Errorf("metrics lack olap's limit:\n%s", body)
	}

	// A query runs while the daemon restarts. Its command runs only once
	// the daemon has placed it in its query cgroup, so the file it makes
	// says the restart finds a running query (an admitted query not yet
	// placed would be told the daemon stops). It waits for the test's
	// release at most 30 s, so a failed test leaves no process behind.
	running, release := filepath.Join(dir, "running"), filepath.Join(dir, "release")
	first := poolagent("run", "--socket", socket, "--pool", "olap", "--", "/bin/sh", "-c",
		"touch "+running+"; n=0; while [ ! -e "+release+" ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done")
	firstDone := make(chan error, 1)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Process.Kill() })
	go func() { firstDone <- first.Wait() }()
	waitUntil(t, "the first query's command to run", func() bool {
		_, err := os.Stat(running)
		return err == nil
	})
	a.stop(t, notify)

	a = startAgent(t, notify, args...)
	if r := poolRow(t, socket, "olap"); r.RunningQueries != 1 || r.TotalCpuLimitPercentPerNode != 25 {
		t.Fatalf("after the restart olap %+v: want the running query adopted and the change kept", r)
	}
	second := poolagent("run", "--socket", socket, "--pool", "olap", "--", "true")
	secondDone := make(chan error, 1)
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Process.Kill() })
	go func() { secondDone <- second.Wait() }()
	waitUntil(t, "the second query to queue behind the adopted one", func() bool { return poolRow(t, socket, "olap").QueuedQueries == 1 })
	var rows []protocol.Query
	json.Unmarshal([]byte(output(t, "queries", "--socket", socket, "--format", "json")), &rows)
	if len(rows) != 2 || !rows[0].Adopted || rows[1].State != protocol.StateQueued {
		t.Errorf("queries %+v, want the adopted query running and the new one queued", rows)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := within(t, "the first query to end", firstDone); err != nil {
		t.Errorf("first query across the restart: %v", err)
	}
	if err := within(t, "the second query to end", secondDone); err != nil {
		t.Errorf("second query: %v", err)
	}
	waitUntil(t, "the pool to be idle", func() bool {
		r := poolRow(t, socket, "olap")
		return r.RunningQueries == 0 && r.QueuedQueries == 0
	})

	// A reload with an invalid file keeps the pools and says why.
	if err := os.WriteFile(pools, []byte("CREATE RESOURCE POOL olap WITH (QUEUE_SIZE=-2);"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.cmd.Process.Signal(syscall.SIGHUP)
	if got := recvNotify(t, notify); got != "RELOADING=1" {
		t.Fatalf("on SIGHUP %q", got)
	}
	if got := recvNotify(t, notify); !strings.Contains(got, "STATUS=reload refused, running pools kept: ") || !strings.Contains(got, pools+":1:") {
		t.Errorf("after an invalid reload %q", got)
	}
	if q := quota(); q != "50000" {
		t.Errorf("olap quota after a refused reload %s, want 50000", q)
	}
	a.stop(t, notify)
}
