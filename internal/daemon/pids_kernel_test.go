package daemon

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/internal/metrics"
	"github.com/poolagent/poolagent/internal/pooltree"
	"github.com/poolagent/poolagent/internal/protocol"
)

// Real-kernel tests of the task limits: in the cgroup v2 VM, whose init
// does not enable the pids controller (the test does), and in the VM's
// cgroup v1 boot, which has a pids hierarchy of its own. The host's own
// v1 pids hierarchy is not the tests' to use.

// pidsNeed is what the task limit tests need: the pids controller (on v2
// enabled by the test, kerneltest.Host.Enable; on v1 the VM's own).
var pidsNeed = kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1, kerneltest.V2}, Controllers: []string{"pids"}}

// bombTasks is the fork bomb's pool limit: TOTAL_PIDS_LIMIT of pool olap.
const bombTasks = 24

// bomb is a shell that forks a hundred sleepers, far past the pool's
// limit, and exits; the sleepers hold the pool's tasks until killed.
const bomb = `i=0; while [ $i -lt 100 ]; do sleep 600 </dev/null >/dev/null 2>&1 & i=$((i+1)); done; exit 0`

// TestKernelForkBomb: a fork bomb in pool olap (TOTAL_PIDS_LIMIT=24) is
// held at the pool's limit; while it holds it, a query of pool web starts
// and forks; the bomb's user is told that the pool's task limit refused
// its forks, in place and with --stats; the refusals are in the metrics
// (the pool's pids.events where the kernel counts there, else the
// daemon's count of its queries').
func TestKernelForkBomb(t *testing.T) {
	h := kerneltest.Require(t, pidsNeed)
	h.Enable(t, "pids")
	root := h.NewRoot(t, pidsNeed)
	cg, err := pooltree.Open(h.Mounts, root.Path, cgroupfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cg.Close() })
	pools := olapPool(2, 5, ", TOTAL_PIDS_LIMIT="+strconv.Itoa(bombTasks)) +
		"CREATE RESOURCE POOL web WITH (CONCURRENT_QUERY_LIMIT=2);\nGRANT USE ON RESOURCE POOL web TO 'all-users@well-known';\n"
	d := startDaemon(t, Config{}, policyOf(t, pools), cg, rootIdentity)
	left := queriesLeft(t, cg)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, stats := range []string{"", "json"} {
		t.Run("stats="+stats, func(t *testing.T) {
			p, stdinW, stdoutR, stderrR := spawnClient(t, exe, clientSpec{Socket: d.socket, Pool: "olap", Argv: []string{"/bin/sh", "-c", bomb}, Exec: true, Stats: stats}, nil, 2)
			c := &execProc{proc: p, stdout: stdoutR, release: stdinW, stderr: captureAll(stderrR)}
			t.Cleanup(func() {
				stdinW.Close()
				c.wait()
				stdoutR.Close()
			})
			// The sleepers fill the pool: the bomb's shell exits with at
			// most 23 of them left, one task short of the limit.
			waitFor(t, "the bomb to fill pool olap", func() bool {
				pp, err := cg.PoolPids("olap")
				return err == nil && pp != nil && pp.CurrentTasks >= bombTasks-1
			})
			web := startExec(t, d.socket, "web", "/bin/sh", "-c", "sleep 0 & wait; echo web-ok")
			st, stderr := web.wait()
			out := make([]byte, 64)
			n, _ := web.stdout.Read(out)
			if status(st) != 0 || strings.TrimSpace(string(out[:n])) != "web-ok" {
				t.Errorf("pool web's query beside the bomb: status %d, stdout %q, stderr %q; want 0 and web-ok", status(st), out[:n], stderr)
			}
			killQueries(t, root.Path, cg, "olap")
			st, stderr = c.wait()
			t.Logf("bomb: status %d, stderr:\n%s", status(st), stderr)
			want := " in pool olap could not start a process or thread "
			tail := ": the pool's task limit " + strconv.Itoa(bombTasks) + " (TOTAL_PIDS_LIMIT) was reached"
			if line := forkLine(stderr); !strings.HasPrefix(line, "poolagent: query q") || !strings.Contains(line, want) || !strings.HasSuffix(line, tail) {
				t.Errorf("fork line %q, want the pool's limit named", line)
			}
			if stats == "json" {
				var s protocol.Stats
				if err := jsonLine(stderr, &s); err != nil {
					t.Fatal(err)
				}
				if s.ForksRefused == 0 || s.Fork == nil || s.Fork.Limit != protocol.OOMLimitPool || s.Fork.PoolLimit != bombTasks {
					t.Errorf("stats %+v (fork %+v): want refusals at the pool's limit", s, s.Fork)
				}
			}
			waitFor(t, "the bomb's query to end", func() bool { return d.pool(t, "olap").Running == 0 && left() == 0 })
		})
	}
	p := metricsPool(t, d, "olap")
	if p.Pids == nil || p.Pids.Limit != bombTasks || p.Pids.Events.Max+p.QueryForksRefused == 0 {
		t.Fatalf("metrics of pool olap: tasks %+v, refusals in ended queries %d; want the limit %d and refusals counted", p.Pids, p.QueryForksRefused, bombTasks)
	}
	t.Logf("pool olap: pids.events max %d (hierarchical %v), refusals in ended queries %d", p.Pids.Events.Max, p.Pids.Hierarchical, p.QueryForksRefused)
}

// metricsPool is pool name in the daemon's metrics snapshot.
func metricsPool(t *testing.T, d *testDaemon, name string) metrics.Pool {
	t.Helper()
	snap, err := d.srv.MetricsSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range snap.Pools {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("pool %q not in the metrics", name)
	return metrics.Pool{}
}

// forkLine is the line of a client's stderr that tells refused forks.
func forkLine(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "could not start a process or thread") {
			return l
		}
	}
	return ""
}

// killQueries kills, by PID, the processes in pool's query cgroups below
// the test's root: the test's own commands and their children.
func killQueries(t *testing.T, root string, cg *pooltree.Handle, pool string) {
	t.Helper()
	qs, err := cg.Queries()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Pool != pool {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, q.Pool, q.Name, "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}
