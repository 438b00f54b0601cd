package cgroupfs_test

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/kerneltest"
)

// killNeed: the kill tests start their forking shells straight in the
// query cgroup (clone3's CLONE_INTO_CGROUP), which only cgroup v2 has;
// v1's kill, in rounds, is not tested on a real kernel (the host's v1
// cpu hierarchy is the only one ours to use, and a process moved there
// leaves its children behind while it moves).
var killNeed = kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V2}}

// killRoundsWanted is how many queries each way of killing kills while
// they fork.
const killRoundsWanted = 100

// forkLoop forks sleepers as fast as the shell can, until it is killed;
// the query's pids.max (killTasks) bounds it should a kill fail.
const forkLoop = `while :; do sleep 600 </dev/null >/dev/null 2>&1 & done`

// killTasks is the query's task limit in the kill test.
const killTasks = 200

// TestKernelKillWhileForking: a query whose shell forks without pause is
// killed, 100 times by cgroup.kill and 100 times by freezing and then
// signalling: each time, once the shell has forked a few children, the
// kill leaves no process in the query cgroup, however many the shell
// forked while it ran.
func TestKernelKillWhileForking(t *testing.T) {
	h := kerneltest.Require(t, killNeed)
	h.Enable(t, "pids")
	k := newKernelFor(t, killNeed, cgroupfs.Options{})
	d := seed()
	d.Pools[2].Query.PidsMax = killTasks
	if _, err := k.tree.Reconcile(d); err != nil {
		t.Fatal(err)
	}
	for _, way := range []struct {
		name string
		kill func(pool, query string) error
	}{{"cgroup.kill", k.tree.KillQuery}, {"freeze", k.tree.KillQueryFreezing}} {
		t.Run(way.name, func(t *testing.T) {
			most := 0
			for i := range killRoundsWanted {
				q := "k" + strconv.Itoa(i)
				if err := k.tree.MakeQuery(*d.Pools[2], q); err != nil {
					t.Fatal(err)
				}
				dir := filepath.Join(k.root.Path, "olap", q)
				sh := startIn(t, dir, forkLoop)
				waitProcs(t, dir, 4)
				if err := way.kill("olap", q); err != nil {
					t.Fatalf("round %d: %v", i, err)
				}
				sh.Wait()
				n := waitEmpty(t, k.tree, "olap", q)
				most = max(most, n)
				if err := k.tree.RemoveQuery("olap", q); err != nil {
					t.Fatalf("round %d: %v", i, err)
				}
			}
			t.Logf("%d queries killed while forking; the most processes seen in one after its kill returned: %d", killRoundsWanted, most)
		})
	}
	if err := k.tree.KillQuery("olap", "gone"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("kill of a query cgroup that does not exist: %v, want fs.ErrNotExist", err)
	}
}

// startIn starts /bin/sh -c script straight in the cgroup dir.
func startIn(t *testing.T, dir, script string) *exec.Cmd {
	t.Helper()
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// waitProcs waits until the cgroup dir holds at least n processes.
func waitProcs(t *testing.T, dir string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		if len(strings.Fields(string(b))) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: fewer than %d processes after 30 s: %q", dir, n, b)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitEmpty waits until the query cgroup holds no thread and returns the
// most processes it saw in it meanwhile; it fails the test if any is
// still there after 30 s: a survivor of the kill.
func waitEmpty(t *testing.T, tr *cgroupfs.Tree, pool, query string) int {
	t.Helper()
	most := 0
	deadline := time.Now().Add(30 * time.Second)
	for {
		busy, err := tr.QueryPopulated(pool, query)
		if err != nil {
			t.Fatal(err)
		}
		if !busy {
			return most
		}
		b, _ := os.ReadFile(filepath.Join(tr.Root(cgroupfs.HierUnified), pool, query, "cgroup.procs"))
		most = max(most, len(strings.Fields(string(b))))
		if time.Now().After(deadline) {
			t.Fatalf("query %s/%s: processes survived the kill: %q", pool, query, b)
		}
		time.Sleep(time.Millisecond)
	}
}
