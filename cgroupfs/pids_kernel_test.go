package cgroupfs_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/kerneltest"
)

// pidsNeed: the task limits on cgroup v2 (the test enables pids) and on
// v1's pids hierarchy, which only the VM's cgroup v1 boot lets a test use
// (kerneltest.EnvVMGuest); on the host's v1 the test skips.
var pidsNeed = kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1, kerneltest.V2}, Controllers: []string{"pids"}}

// The limits of TestKernelPidsLimits: pool olap's and each of its
// queries'.
const (
	pidsPool  = 8
	pidsQuery = 5
)

// TestKernelPidsLimits: TOTAL_PIDS_LIMIT becomes the pool's pids.max (in
// v1's pids hierarchy there); a second reconcile writes nothing; the
// limit, set to "max" behind poolagent's back, is written again.
// QUERY_PIDS_LIMIT becomes a query's pids.max; a shell in the query that
// forks twenty sleepers is held at it, and the refusal is in the query's
// pids.events, as the reader gives them; the query's processes are
// killed and its cgroup removed.
func TestKernelPidsLimits(t *testing.T) {
	h := kerneltest.Require(t, pidsNeed)
	h.Enable(t, "pids")
	k := newKernelFor(t, pidsNeed, cgroupfs.Options{})
	dir := k.root.Path // where the pids files are
	if !k.v2() {
		dir = h.Mounts.Twin("pids", k.root.Path)
	}
	d := seed()
	d.Pools[2].Pool.PidsMax, d.Pools[2].Query.PidsMax = pidsPool, pidsQuery
	ps := d.Pools[2]
	if _, err := k.tree.Reconcile(d); err != nil {
		t.Fatal(err)
	}
	if got := readTrim(t, filepath.Join(dir, "olap/pids.max")); got != "8" {
		t.Errorf("pool's pids.max: %q, want 8", got)
	}
	if res, err := k.tree.Reconcile(d); err != nil || res.Writes != 0 {
		t.Fatalf("second reconcile: %d writes (%v), %v; want none", res.Writes, res.Done, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "olap/pids.max"), []byte("max"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := k.tree.Reconcile(d); err != nil {
		t.Fatal(err)
	}
	if got := readTrim(t, filepath.Join(dir, "olap/pids.max")); got != "8" {
		t.Errorf("pool's pids.max after it was changed and reconciled: %q, want 8", got)
	}
	if err := k.tree.MakeQuery(*ps, "q"); err != nil {
		t.Fatal(err)
	}
	if got := readTrim(t, filepath.Join(dir, "olap/q/pids.max")); got != "5" {
		t.Errorf("query's pids.max: %q, want 5", got)
	}

	// The shell waits for its line until it is in the query, then forks
	// past the query's limit; a refused fork ends it.
	sh := exec.Command("/bin/sh", "-c", `read go; i=0; while [ $i -lt 20 ]; do sleep 600 </dev/null >/dev/null 2>&1 & i=$((i+1)); done`)
	in, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	sh.Stderr = &stderr
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		sh.Wait()
	})
	if err := k.tree.MoveToQuery(*ps, "q", sh.Process.Pid); err != nil {
		sh.Process.Kill()
		t.Fatal(err)
	}
	io.WriteString(in, "go\n")
	err = sh.Wait()
	t.Logf("shell: %v, stderr %q", err, stderr.String())
	if err == nil {
		t.Errorf("the shell forked 20 sleepers in a query limited to %d tasks", pidsQuery)
	}
	p, err := k.tree.Reader().Pids("olap/q")
	if err != nil || p == nil {
		t.Fatalf("query's tasks: %+v, %v", p, err)
	}
	t.Logf("query: %d tasks, limit %d, %d forks refused", p.CurrentTasks, p.Limit, p.Events.Max)
	if p.Limit != pidsQuery || p.CurrentTasks > pidsQuery || p.CurrentTasks == 0 || p.Events.Max == 0 {
		t.Errorf("query's tasks %+v: want limit %d, 1 to %d tasks and a refusal counted", *p, pidsQuery, pidsQuery)
	}

	if err := k.tree.KillQuery("olap", "q"); err != nil {
		t.Fatal(err)
	}
	waitEmpty(t, k.tree, "olap", "q")
	if err := k.tree.RemoveQuery("olap", "q"); err != nil {
		t.Fatal(err)
	}
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
