package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/client"
	"github.com/poolagent/poolagent/internal/peer"
	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/planner"
	"golang.org/x/sys/unix"
)

// Tests of the in-place path (protocol.OpExec): the whole run command as
// poolagent-run runs it without --stats, in a process of its own (this
// test binary), which becomes the command once admitted.

// execProc is a run command in its own process. Its command's stdin and
// stdout are pipes held by the test; its stderr is kept.
type execProc struct {
	proc    *os.Process
	stdout  *os.File
	release *os.File // the command's stdin: closing it ends holdingCommand

	stderr *capture

	waitOnce sync.Once
	state    *os.ProcessState
}

// startExec starts `poolagent-run [--pool pool] -- argv...` against socket.
func startExec(t *testing.T, socket, pool string, argv ...string) *execProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, stdinW, stdoutR, stderrR := spawnClient(t, exe, clientSpec{Socket: socket, Pool: pool, Argv: argv, Exec: true}, nil, 2)
	c := &execProc{proc: p, stdout: stdoutR, release: stdinW, stderr: captureAll(stderrR)}
	t.Cleanup(func() {
		stdinW.Close()
		p.Kill()
		c.wait()
		stdoutR.Close()
	})
	return c
}

// wait waits for the process and returns how it ended and its stderr.
func (c *execProc) wait() (*os.ProcessState, string) {
	c.waitOnce.Do(func() {
		c.state, _ = c.proc.Wait()
		<-c.stderr.done
	})
	return c.state, c.stderr.text()
}

// capture is what a process wrote to a pipe or terminal, read as it comes.
type capture struct {
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{} // closed at the end: EOF, or EIO from a terminal no process has open
}

// captureAll reads f into a capture until its end, and closes it.
func captureAll(f *os.File) *capture {
	c := &capture{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer f.Close()
		buf := make([]byte, 512)
		for {
			n, err := f.Read(buf)
			c.mu.Lock()
			c.out.Write(buf[:n])
			c.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return c
}

func (c *capture) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// status is a shell's view of how the process ended: 128+N for signal N.
func status(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// startExecOnTerminal starts `poolagent-run --pool pool -- argv...`
// against socket with a terminal as its stderr, so that it draws its
// progress line; its stdin and stdout are /dev/null. What it writes to
// the terminal is captured.
func startExecOnTerminal(t *testing.T, socket, pool string, argv ...string) (*os.Process, *capture) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	spec, _ := json.Marshal(clientSpec{Socket: socket, Pool: pool, Argv: argv, Exec: true})
	p, err := os.StartProcess(exe, []string{exe}, &os.ProcAttr{
		Env:   append(os.Environ(), envTestClient+"="+string(spec)),
		Files: []*os.File{null, null, slave},
	})
	slave.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		p.Wait()
	})
	return p, captureAll(master)
}

// waitStarted reads the command's stdout until it printed "started".
func (c *execProc) waitStarted(t *testing.T) {
	t.Helper()
	b := make([]byte, 8)
	if _, err := io.ReadFull(c.stdout, b[:8]); err != nil || string(b) != "started\n" {
		t.Fatalf("command did not start: %q, %v", b, err)
	}
}

// TestExecTwoRunThreeQueueTen is twoThreeTen on the in-place path: of ten
// runs against CONCURRENT_QUERY_LIMIT=2, QUEUE_SIZE=3, two run, three
// queue and start in arrival order, five are refused with YDB's message
// and status 125; each process placed is the client process itself, which
// became the command.
func TestExecTwoRunThreeQueueTen(t *testing.T) {
	cg := newFakeCgroups(t)
	d := startDaemon(t, Config{}, policyOf(t, olapPool(2, 3, "")), cg, peer.SystemUsers{})
	const wantErr = "poolagent-run: Request was rejected, number of local pending requests is 1, " +
		"number of global delayed/running requests is 5, sum of them is larger than " +
		"allowed limit 3 (including concurrent query limit 2) for pool olap\n" +
		"Query failed during adding/waiting in workload pool olap\n"
	var runs []*execProc
	for i := range 10 {
		runs = append(runs, startExec(t, d.socket, "olap", holdingCommand...))
		waitFor(t, fmt.Sprintf("run %d to be counted", i), func() bool {
			p := d.pool(t, "olap")
			return p.Running+p.Queued+int(p.Rejected) == i+1
		})
	}
	for i, c := range runs[5:] {
		if st, stderr := c.wait(); status(st) != client.ExitRefused || stderr != wantErr {
			t.Errorf("run %d: status %d, stderr %q; want 125, %q", i+5, status(st), stderr, wantErr)
		}
	}
	for i := range 5 {
		runs[i].waitStarted(t)
		if pool := cg.placedIn(runs[i].proc.Pid); pool != "olap" {
			t.Fatalf("run %d (pid %d) placed in %q, want the client process itself in olap", i, runs[i].proc.Pid, pool)
		}
		if next := i + 2; next < 5 {
			waitFor(t, fmt.Sprintf("runs %d and %d running, %d queued", i, i+1, 3-i), func() bool {
				p := d.pool(t, "olap")
				return p.Running == 2 && p.Queued == 3-i
			})
			for _, later := range runs[next:5] {
				if cg.placedIn(later.proc.Pid) != "" {
					t.Fatalf("run %d started before run %d ended", slicesIndex(runs, later), i)
				}
			}
		}
		runs[i].release.Close()
		if st, stderr := runs[i].wait(); status(st) != 0 || stderr != "" {
			t.Fatalf("run %d: status %d, stderr %q", i, status(st), stderr)
		}
	}
	waitFor(t, "every slot to free", func() bool {
		p := d.pool(t, "olap")
		return p.Running == 0 && p.Queued == 0 && cg.left() == 0
	})
}

func slicesIndex(runs []*execProc, c *execProc) int {
	for i, r := range runs {
		if r == c {
			return i
		}
	}
	return -1
}

// TestExecDeadline: a run still queued after QUERY_CANCEL_AFTER_SECONDS
// leaves the queue with YDB's message and status 125.
func TestExecDeadline(t *testing.T) {
	d := startDaemon(t, Config{}, policyOf(t, olapPool(1, 5, ", QUERY_CANCEL_AFTER_SECONDS=1")), newFakeCgroups(t), peer.SystemUsers{})
	runner := startExec(t, d.socket, "olap", holdingCommand...)
	runner.waitStarted(t)
	late := startExec(t, d.socket, "olap", "/bin/true")
	want := "poolagent-run: Delay deadline exceeded in pool olap\nQuery failed during adding/waiting in workload pool olap\n"
	if st, stderr := late.wait(); status(st) != client.ExitRefused || stderr != want {
		t.Fatalf("status %d, stderr %q; want 125, %q", status(st), stderr, want)
	}
	if p := d.pool(t, "olap"); p.TimedOut != 1 || p.Queued != 0 || p.Running != 1 {
		t.Errorf("pool %+v: want 1 timed out, 0 queued, 1 running", p)
	}
}

// TestExecClassification: without --pool the classifiers place the run by
// its command's application name, and a rejecting classifier refuses it
// before anything runs.
func TestExecClassification(t *testing.T) {
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	policy := policyOf(t, olapPool(2, 2, "")+`
CREATE RESOURCE POOL CLASSIFIER shells WITH (RANK=10, RESOURCE_POOL='olap', HAS_APP_NAME='`+filepath.Base(sh)+`');
CREATE RESOURCE POOL CLASSIFIER no_false WITH (RANK=20, ACTION='reject', HAS_APP_NAME='false');
`)
	cg := newFakeCgroups(t)
	d := startDaemon(t, Config{}, policy, cg, peer.SystemUsers{})
	tests := []struct {
		name   string
		argv   []string
		status int
		pool   string // where the client was placed; "" when refused
		stderr string
	}{
		{"app name matches", []string{"sh", "-c", "exit 0"}, 0, "olap", ""},
		{"other app: default", []string{"true"}, 0, planner.DefaultPool, ""},
		{"rejected", []string{"false"}, client.ExitRefused, "",
			"poolagent-run: Request is rejected by classifier 'no_false' (rank=20)\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := startExec(t, d.socket, "", tc.argv...)
			st, stderr := c.wait()
			if status(st) != tc.status || stderr != tc.stderr || cg.placedIn(c.proc.Pid) != tc.pool {
				t.Errorf("status %d, stderr %q, placed in %q; want %d, %q, %q",
					status(st), stderr, cg.placedIn(c.proc.Pid), tc.status, tc.stderr, tc.pool)
			}
		})
	}
}

// TestExecStatusAndMessages: the run ends as its command does (the
// command is the process), and a command that cannot run gives 127 or
// 126 with the same message as the other path, before asking.
func TestExecStatusAndMessages(t *testing.T) {
	cg := newFakeCgroups(t)
	d := startDaemon(t, Config{}, policyOf(t, ""), cg, peer.SystemUsers{})
	tests := []struct {
		argv     []string
		status   int
		signaled bool
		stderr   string
		// refused: the run fails before asking, so nothing is placed
		refused bool
	}{
		{argv: []string{"/bin/sh", "-c", "exit 3"}, status: 3},
		{argv: []string{"/bin/sh", "-c", "echo own >&2; kill -TERM $$"}, status: 128 + int(syscall.SIGTERM), signaled: true, stderr: "own\n"},
		{argv: []string{"/bin/true"}, status: 0},
		{argv: []string{"no-such-command-poolagent"}, status: 127, refused: true,
			stderr: "poolagent-run: exec: \"no-such-command-poolagent\": executable file not found in $PATH\n"},
		{argv: []string{"/dev/null"}, status: 126, refused: true, stderr: "poolagent-run: exec: \"/dev/null\": permission denied\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.argv, " "), func(t *testing.T) {
			c := startExec(t, d.socket, "", tt.argv...)
			st, stderr := c.wait()
			ws := st.Sys().(syscall.WaitStatus)
			if status(st) != tt.status || ws.Signaled() != tt.signaled || stderr != tt.stderr {
				t.Fatalf("status %d (signaled: %v), stderr %q; want %d (%v), %q", status(st), ws.Signaled(), stderr, tt.status, tt.signaled, tt.stderr)
			}
			if placed := cg.placedIn(c.proc.Pid) != ""; placed == tt.refused {
				t.Errorf("placed: %v", placed)
			}
		})
	}
}

// TestExecSignals: a signal while queued makes the run leave the queue
// with 128+N, its progress line cleared; once it runs, the command is the
// process and gets the signal itself.
func TestExecSignals(t *testing.T) {
	d := startDaemon(t, Config{}, policyOf(t, olapPool(1, 5, "")), newFakeCgroups(t), peer.SystemUsers{})
	// The shell reports SIGUSR1 through its exit status.
	runner := startExec(t, d.socket, "olap", "/bin/sh", "-c", "trap 'exit 42' USR1; echo started; while :; do sleep 0.01; done")
	runner.waitStarted(t)
	// On a terminal the client draws its progress line once it waits,
	// having begun to catch signals: the signal comes after that.
	queued, term := startExecOnTerminal(t, d.socket, "olap", "/bin/true")
	waitFor(t, "the progress line", func() bool { return strings.Contains(term.text(), "poolagent-run: queued in pool olap, position 1") })
	queued.Signal(syscall.SIGTERM)
	st, _ := queued.Wait()
	<-term.done
	left := "\r\033[Kpoolagent-run: left the queue of pool olap after "
	if status(st) != 128+int(syscall.SIGTERM) || !strings.Contains(term.text(), left) {
		t.Fatalf("queued: status %d, terminal %q; want 143 and %q", status(st), term.text(), left)
	}
	waitFor(t, "the queue to empty", func() bool { return d.pool(t, "olap").Queued == 0 })
	runner.proc.Signal(syscall.SIGUSR1)
	if st, _ := runner.wait(); status(st) != 42 {
		t.Fatalf("runner: status %d, want 42 from the trapped SIGUSR1", status(st))
	}
	waitFor(t, "the slot to free", func() bool { return d.pool(t, "olap").Running == 0 })
}

// TestExecSignalBeforeAnswer: a client that starts at once catches no
// signal, so one that comes before the daemon's answer ends it as it would
// end the command: killed by the signal, nothing printed; the daemon,
// finding the query cgroup without a live process, frees the slot.
func TestExecSignalBeforeAnswer(t *testing.T) {
	cfg := Config{beforeMove: func(pid int) {
		// The client waits for the answer; its process is signalled
		// and gone before it is moved.
		syscall.Kill(pid, syscall.SIGTERM)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil || strings.Contains(string(b), ") Z ") {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("client %d still alive 10 s after SIGTERM", pid)
				return
			}
		}
	}}
	d := startDaemon(t, cfg, policyOf(t, olapPool(1, 5, "")), newFakeCgroups(t), peer.SystemUsers{})
	c := startExec(t, d.socket, "olap", "/bin/true")
	st, stderr := c.wait()
	ws := st.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGTERM || stderr != "" {
		t.Fatalf("client: %v, stderr %q; want killed by SIGTERM, nothing printed", st, stderr)
	}
	waitFor(t, "the slot to free", func() bool {
		p := d.pool(t, "olap")
		return p.Running == 0 && p.Admitted == 1
	})
}

func TestExecCPULimitInEnvironment(t *testing.T) {
	// 2 vCPUs × 100% × 75% per query: 1.5 vCPU.
	policy := policyOf(t, "CREATE RESOURCE POOL p WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=100, QUERY_CPU_LIMIT_PERCENT_PER_NODE=75);")
	d := startDaemon(t, Config{}, policy, newFakeCgroups(t), peer.SystemUsers{})
	c := startExec(t, d.socket, "p", "/bin/sh", "-c", "echo $"+client.EnvCPULimit)
	b, _ := io.ReadAll(c.stdout)
	if st, stderr := c.wait(); status(st) != 0 || string(b) != "1.5\n" {
		t.Errorf("status %d, stderr %q; command saw %s=%q, want 1.5", status(st), stderr, client.EnvCPULimit, b)
	}
}

// TestExecPlacesOnlyItsClient: an in-place run moves the connection's
// peer and nothing else: a pid in the request is ignored, and a client
// whose process is gone by the time its query starts (its connection
// handed to a child) has nothing placed, its child least of all, and
// its slot freed.
func TestExecPlacesOnlyItsClient(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cg := newFakeCgroups(t)
	d := startDaemon(t, Config{}, policyOf(t, olapPool(1, 5, "")), cg, peer.SystemUsers{})

	other := startHeld(t)
	runner := startClientProc(t, exe, clientSpec{Socket: d.socket, Pool: "olap", Raw: true, PID: other.Process.Pid}, nil)
	line := make([]byte, 8)
	if _, err := io.ReadFull(runner.stdout, line); err != nil || string(line) != "started\n" {
		t.Fatalf("reply %q, %v; want started", line, err)
	}
	if cg.placedIn(runner.proc.Pid) != "olap" || cg.placedIn(other.Process.Pid) != "" {
		t.Fatalf("placed %v; want the client process %d only", cg.placed, runner.proc.Pid)
	}

	h := startClientProc(t, exe, clientSpec{Socket: d.socket, Pool: "olap", Raw: true, Handoff: true}, nil)
	out, err := io.ReadAll(h.stdout)
	if err != nil {
		t.Fatal(err)
	}
	h.proc.Wait()
	reply, pid, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	child, err := strconv.Atoi(pid)
	if reply != protocol.ReplyQueued || err != nil {
		t.Fatalf("handoff client printed %q, want queued and its child's pid", out)
	}
	sleeper, _ := os.FindProcess(child)
	t.Cleanup(func() { sleeper.Kill() })
	// The runner ends: the handoff's query starts, and its peer is gone.
	runner.release.Close()
	waitFor(t, "the handoff's query to end", func() bool {
		p := d.pool(t, "olap")
		return p.Queued == 0 && p.Running == 0 && p.Admitted == 2
	})
	if cg.placedIn(child) != "" || cg.placedIn(h.proc.Pid) != "" {
		t.Fatalf("placed %v; the handoff client was gone and its child is not it", cg.placed)
	}
}

// TestKernelExecInPlace: on real cgroups an in-place run is its command in
// <root>/<pool>/<query> with the per-query cap in POOLAGENT_CPU_LIMIT; a
// grandchild it leaves keeps the slot after the command exited; a run
// killed while queued leaves the queue, one killed while running (the
// command itself) frees the slot; and no query cgroup is left.
func TestKernelExecInPlace(t *testing.T) {
	// 2 vCPU × 50% = 1 vCPU for the pool, × 10% = 0.1 vCPU per query.
	pools := olapPool(1, 5, ", TOTAL_CPU_LIMIT_PERCENT_PER_NODE=50, QUERY_CPU_LIMIT_PERCENT_PER_NODE=10")
	d, cg := kernelDaemon(t, bothModes, Config{}, pools, rootIdentity)
	left := queriesLeft(t, cg)

	c := startExec(t, d.socket, "olap", "/bin/sh", "-c", "echo $"+client.EnvCPULimit+"; cat /proc/self/cgroup")
	out, _ := io.ReadAll(c.stdout)
	if st, stderr := c.wait(); status(st) != 0 || stderr != "" {
		t.Fatalf("status %d, stderr %q", status(st), stderr)
	}
	limit, cgroups, _ := strings.Cut(string(out), "\n")
	found := false
	for _, line := range strings.Split(strings.TrimSpace(cgroups), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && (parts[1] == "" || strings.Contains(","+parts[1]+",", ",cpu,")) {
			found = found || strings.Contains(parts[2], "/olap/q")
		}
	}
	if limit != "0.1" || !found {
		t.Errorf("command saw %s=%q and cgroups\n%s\nwant 0.1 and a cpu cgroup below /olap/", client.EnvCPULimit, limit, cgroups)
	}
	waitFor(t, "the first query to end", func() bool { return d.pool(t, "olap").Running == 0 && left() == 0 })

	// The shell exits at once; the grandchild it leaves holds the slot.
	grand := startExec(t, d.socket, "olap", "/bin/sh", "-c", "exec 3<&0; cat <&3 >/dev/null 2>&1 & echo started")
	grand.waitStarted(t)
	if st, stderr := grand.wait(); status(st) != 0 || stderr != "" {
		t.Fatalf("status %d, stderr %q", status(st), stderr)
	}
	time.Sleep(200 * time.Millisecond)
	if p := d.pool(t, "olap"); p.Running != 1 {
		t.Fatalf("pool %+v: the slot was freed while a grandchild runs", p)
	}
	grand.release.Close()
	waitFor(t, "the grandchild's slot to free", func() bool { return d.pool(t, "olap").Running == 0 && left() == 0 })

	runner := startExec(t, d.socket, "olap", holdingCommand...)
	runner.waitStarted(t)
	queued := startExec(t, d.socket, "olap", holdingCommand...)
	waitFor(t, "one queued", func() bool { return d.pool(t, "olap").Queued == 1 })
	killProc(t, queued.proc)
	waitFor(t, "the killed run to leave the queue", func() bool { return d.pool(t, "olap").Queued == 0 })
	killProc(t, runner.proc)
	waitFor(t, "the killed run's slot to free", func() bool {
		p := d.pool(t, "olap")
		return p.Running == 0 && p.Queued == 0 && left() == 0
	})
}
