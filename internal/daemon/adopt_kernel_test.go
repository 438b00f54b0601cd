package daemon

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/internal/pooltree"
)

// TestKernelAdoptedPerUserLimit: a query of uid abuseUID runs in a pool
// with CONCURRENT_QUERY_LIMIT_PER_USER=1 when the daemon is restarted.
// The new daemon charges the query it adopts to that uid: the uid's next
// query waits, and another user's starts in the pool's second slot. On
// the tree before, the adopted query counted for no user, the uid's
// second query started and held both slots. On the v1 host: the test VM
// has no uid but root's that may run the test binary (its copy below
// the socket directory is refused to uid 60001 there), and what is shown
// (the owner of an adopted cgroup's processes) is the same in both modes.
func TestKernelAdoptedPerUserLimit(t *testing.T) {
	requireRoot(t)
	need := kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1}, Controllers: []string{"cpuacct"}}
	h := kerneltest.Require(t, need)
	root := h.NewRoot(t, need)
	cg, err := pooltree.Open(h.Mounts, root.Path, cgroupfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cg.Close() })
	policy := policyOf(t, olapPool(2, 5, ", CONCURRENT_QUERY_LIMIT_PER_USER=1"))
	user := uidUsers{}
	exe := userExecutable(t)
	cred := &syscall.Credential{Uid: abuseUID, Gid: abuseUID}

	// The earlier daemon: the uid's query starts, then the daemon stops
	// while it runs.
	earlier, err := New(Config{Socket: filepath.Join(socketDir(t), "earlier.sock"), LoadSample: 10 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, policy, cg, user, &fixedLoad{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- earlier.Serve(ctx) }()
	<-earlier.Listening()
	first := startHeldClient(t, exe, earlier.cfg.Socket, cred)
	stop()
	if err := <-served; err != nil {
		t.Fatalf("earlier daemon: %v", err)
	}

	d := startDaemon(t, Config{}, policy, cg, user)
	users := d.pool(t, "olap").Users
	t.Logf("after the restart: pool olap's users %+v", users)
	if !slices.ContainsFunc(users, func(u admission.UserStats) bool {
		return u.User == (admission.Identity{UID: abuseUID}).UserKey() && u.Running == 1
	}) {
		t.Errorf("the adopted query is not counted as uid %d's running query: users %+v", abuseUID, users)
	}
	startHeldClient(t, exe, d.socket, nil) // another user's: the pool's second slot
	third := spawnHeld(t, exe, d.socket, cred)
	waitFor(t, "another user's query to start", func() bool { return d.pool(t, "olap").Running == 2 })
	time.Sleep(200 * time.Millisecond)
	if p := d.pool(t, "olap"); p.Queued != 1 || third.started() {
		t.Errorf("pool %+v: the uid's second query started beside its adopted one (CONCURRENT_QUERY_LIMIT_PER_USER=1)", p)
	}
	first.end()
	waitFor(t, "the uid's second query to start once its adopted one ended", third.started)
}

// uidUsers names users by uid alone, as a host without a user database
// (the test VM) does.
type uidUsers struct{}

func (uidUsers) Identity(cred *unix.Ucred) (admission.Identity, error) {
	return admission.Identity{UID: cred.Uid, GID: cred.Gid, PID: int(cred.Pid)}, nil
}

// heldClient is an in-place client (as cred, or this process's user when
// nil) whose command prints "started" and waits for its stdin to close.
type heldClient struct {
	proc    *os.Process
	stdin   *os.File
	startCh chan struct{}
}

func spawnHeld(t *testing.T, exe, socket string, cred *syscall.Credential) *heldClient {
	t.Helper()
	p, stdinW, stdoutR, _ := spawnClient(t, exe, clientSpec{Socket: socket, Pool: "olap", Argv: holdingCommand, Exec: true}, cred, 2)
	c := &heldClient{proc: p, stdin: stdinW, startCh: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdoutR)
		for sc.Scan() {
			if sc.Text() == "started" {
				close(c.startCh)
				break
			}
		}
		io.Copy(io.Discard, stdoutR)
	}()
	t.Cleanup(c.end)
	return c
}

// startHeldClient is spawnHeld, returning once the command runs.
func startHeldClient(t *testing.T, exe, socket string, cred *syscall.Credential) *heldClient {
	t.Helper()
	c := spawnHeld(t, exe, socket, cred)
	select {
	case <-c.startCh:
	case <-time.After(20 * time.Second):
		t.Fatal("the query did not start within 20 s")
	}
	return c
}

func (c *heldClient) started() bool {
	select {
	case <-c.startCh:
		return true
	default:
		return false
	}
}

// end closes the command's input and waits for it.
func (c *heldClient) end() {
	if c.stdin != nil {
		c.stdin.Close()
		c.stdin = nil
		c.proc.Wait()
	}
}
