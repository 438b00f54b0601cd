package daemon

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/client"
	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/internal/peer"
	"github.com/poolagent/poolagent/internal/protocol"
)

// TestKernelFairTwoUsers: two users made for the test share a pool of 4
// slots. User A queues 50 queries (4 run, 46 wait), user B submits one a
// moment later. Slots then free one at a time. Under QUEUE_POLICY='fair'
// B's query takes the first slot that frees; under FIFO it starts only
// after all of A's. The clients are processes of the two users, told
// apart by the daemon from the socket's peer credentials. (v1 run only:
// the VM has no user database.)
func TestKernelFairTwoUsers(t *testing.T) {
	need := kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1}, Controllers: []string{"cpuacct"}}
	kerneltest.Require(t, need)
	tag := fmt.Sprintf("pa%d", os.Getpid()%100000)
	userA, userB := tag+"fa", tag+"fb"
	testAccount(t, "useradd", "--no-create-home", "--shell", "/bin/sh", userA)
	testAccount(t, "useradd", "--no-create-home", "--shell", "/bin/sh", userB)
	for _, tc := range []struct {
		policy string
		// aheadOfB is how many of A's queued queries start before B's.
		aheadOfB int
	}{
		{"fair", 0},
		{"fifo", 46},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			pools := fmt.Sprintf(`CREATE RESOURCE POOL shared WITH (CONCURRENT_QUERY_LIMIT=4, QUEUE_POLICY='%s');
GRANT USE ON RESOURCE POOL shared TO 'all-users@well-known';`, tc.policy)
			d, _ := kernelDaemon(t, need, Config{}, pools, peer.SystemUsers{})
			exe := userExecutable(t)
			spec := clientSpec{Socket: d.socket, Pool: "shared", Argv: holdingCommand}
			var clients []*fairClient
			for range 50 {
				clients = append(clients, startFairClient(t, exe, spec, userA))
			}
			waitFor(t, "A's 4 running and 46 queued", func() bool {
				p := d.pool(t, "shared")
				return p.Running == 4 && p.Queued == 46
			})
			started := func() int {
				n := 0
				for _, c := range clients {
					if c.isStarted() {
						n++
					}
				}
				return n
			}
			waitFor(t, "A's 4 commands running", func() bool { return started() == 4 })
			b := startFairClient(t, exe, spec, userB)
			waitFor(t, "B's query queued", func() bool { return d.pool(t, "shared").Queued == 47 })
			rows := d.srv.views.queryRows()
			for _, r := range rows {
				if r.User == userB && (r.Wait == nil || r.UserRunning != 0 || r.UserQueued != 1) {
					t.Errorf("B's row %+v: want queued, 0 running and 1 queued of its user", r)
				}
				if r.User != userB || r.Wait == nil {
					continue
				}
				want := protocol.Wait{Reason: protocol.WaitConcurrency, HeadReason: protocol.WaitConcurrency, Running: 4, Limit: 4,
					ThresholdPercent: -1, UserLimit: -1}
				if tc.policy == "fifo" {
					want.Reason, want.Ahead = protocol.WaitBehindHead, 46
				}
				if *r.Wait != want || r.QueuePosition != want.Ahead+1 {
					t.Errorf("B waits at %d: %+v (%s), want %+v", r.QueuePosition, *r.Wait, r.Wait, want)
				}
			}
			// Free slots one at a time, the oldest running first, and
			// count A's queries that start before B's.
			startedA := 4
			for !b.isStarted() {
				var next *fairClient
				for _, c := range clients {
					if c.isStarted() && !c.released {
						next = c
						break
					}
				}
				if next == nil {
					t.Fatal("nothing of A's runs and B has not started")
				}
				next.release.Close()
				next.released = true
				waitFor(t, "the freed slot taken", func() bool {
					if n := started(); n > startedA {
						startedA = n
						return true
					}
					return b.isStarted()
				})
			}
			if got := startedA - 4; got != tc.aheadOfB {
				t.Errorf("%d of A's queued queries started before B's, want %d", got, tc.aheadOfB)
			}
			for _, c := range append(clients, b) {
				c.release.Close()
			}
			waitFor(t, "the pool empty", func() bool {
				p := d.pool(t, "shared")
				return p.Running == 0 && p.Queued == 0
			})
		})
	}
}

// fairClient is a client process of one user whose command prints
// "started" and holds its slot until release closes.
type fairClient struct {
	*clientProc
	started  chan struct{}
	released bool
}

func startFairClient(t *testing.T, exe string, spec clientSpec, user string) *fairClient {
	t.Helper()
	c := &fairClient{clientProc: startClientProc(t, exe, spec, credential(t, user)), started: make(chan struct{})}
	go func() {
		b, _ := io.ReadAll(io.LimitReader(c.stdout, 7))
		if strings.HasPrefix(string(b), "started") {
			close(c.started)
		}
	}()
	return c
}

func (c *fairClient) isStarted() bool {
	select {
	case <-c.started:
		return true
	default:
		return false
	}
}

// TestKernelUsageCharged: a query that spins 200 ms of CPU time in a fair
// pool has its query cgroup's usage charged to its user when it ends: the
// user's usage, as the fair order counts it, is what the cgroup read.
func TestKernelUsageCharged(t *testing.T) {
	pools := "CREATE RESOURCE POOL shared WITH (CONCURRENT_QUERY_LIMIT=1, QUEUE_POLICY='fair', USAGE_HALF_LIFE_SECONDS=100000);"
	d, _ := kernelDaemon(t, bothModes, Config{}, pools, rootIdentity)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.CreateTemp(t.TempDir(), "cgroup")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	res, err := client.Run(client.RunOptions{Socket: d.socket, Pool: "shared", Args: []string{exe},
		Env: append(os.Environ(), envTestSpin+"=200ms"), Stdout: out, Stderr: os.Stderr})
	if err != nil || res.ExitCode != 0 || res.Stats == nil {
		t.Fatalf("run: exit %d, %v", res.ExitCode, err)
	}
	// A held query keeps the user in the pool's view.
	held := startInProc(t, d.socket, "shared")
	waitFor(t, "the held query running", held.isStarted)
	p := d.pool(t, "shared")
	if len(p.Users) != 1 || p.Users[0].User != "root" {
		t.Fatalf("users %+v, want root alone", p.Users)
	}
	got, want := p.Users[0].Usage.Seconds, float64(res.Stats.UsageUsec)/1e6
	// The command spins 200 ms of its own CPU time; what it spent before
	// it was moved into its query cgroup (its runtime's start, tens of ms
	// on the test VM's emulated CPUs) is not the cgroup's.
	if want < 0.1 || got < want*0.999 || got > want*1.001 {
		t.Errorf("root's usage %.4f s, want the query cgroup's %.4f s (at least 0.1)", got, want)
	}
	held.release.Close()
	<-held.done
}
