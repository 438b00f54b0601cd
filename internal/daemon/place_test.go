package daemon

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/poolagent/poolagent/internal/client"
	"github.com/poolagent/poolagent/internal/peer"
	"github.com/poolagent/poolagent/internal/protocol"
)

// TestPlace: a query whose processes another program places (OpPlace,
// poolagent-oci's) gets its cgroup's path, holds its slot while that
// program runs and after the client hangs up while a process remains in
// the cgroup, and gives it back once the cgroup is empty; told the
// program returned (Done), the daemon answers with the query's
// statistics once the cgroup is empty.
func TestPlace(t *testing.T) {
	cg := newFakeCgroups(t)
	d := startDaemon(t, Config{}, policyOf(t, "CREATE RESOURCE POOL p WITH (CONCURRENT_QUERY_LIMIT = 1, QUEUE_SIZE = 0);"), cg, rootIdentity)
	p, err := client.Place(client.RunOptions{Socket: d.socket, Pool: "p", App: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Cgroup, "/fake/p/") || p.Pool != "p" || p.Query == "" {
		t.Fatalf("placement %+v: want a cgroup below /fake/p/", p)
	}
	// The runtime's container: a process the test puts in the cgroup.
	ctr := exec.Command("sleep", "60")
	if err := ctr.Start(); err != nil {
		t.Fatal(err)
	}
	defer ctr.Process.Kill()
	ps, _ := d.srv.rp.poolState("p")
	if err := cg.MoveToQuery(ps, p.Query, ctr.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := p.Detach(); err != nil {
		t.Fatal(err)
	}
	_, err = client.Place(client.RunOptions{Socket: d.socket, Pool: "p"})
	var refused *client.RefusedError
	if !errors.As(err, &refused) || refused.Code != protocol.CodeQueueFull {
		t.Fatalf("a second query while the container runs: %v, want queue full", err)
	}
	if got := d.pool(t, "p").Running; got != 1 {
		t.Fatalf("running %d after the client hung up with the container running, want 1", got)
	}
	ctr.Process.Kill()
	ctr.Wait()
	waitFor(t, "the slot back once the container's cgroup is empty", func() bool { return d.pool(t, "p").Running == 0 })

	p, err = client.Place(client.RunOptions{Socket: d.socket, Pool: "p"})
	if err != nil {
		t.Fatal(err)
	}
	stats, err := p.Done()
	if err != nil || stats.ResourcePoolID != "p" {
		t.Fatalf("Done = %+v, %v: want the statistics of a query of pool p", stats, err)
	}
	waitFor(t, "the slot back after Done", func() bool { return d.pool(t, "p").Running == 0 })
}

// TestPlaceRootOnly: a user other than root cannot ask for a query whose
// processes it places (a rootless engine's runtime): refused before the
// queue, nothing made.
func TestPlaceRootOnly(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to run a client as another user")
	}
	exe := userExecutable(t)
	cg := newFakeCgroups(t)
	d := startDaemon(t, Config{}, policyOf(t, "CREATE RESOURCE POOL p WITH (CONCURRENT_QUERY_LIMIT = 1);"), cg, peer.SystemUsers{})
	c := startClientProc(t, exe, clientSpec{Socket: d.socket, Pool: "p", Raw: true, Op: protocol.OpPlace}, &syscall.Credential{Uid: 65534, Gid: 65534})
	out, err := io.ReadAll(c.stdout)
	if err != nil || strings.TrimSpace(string(out)) != protocol.ReplyError+" "+protocol.CodeAccessDenied {
		t.Fatalf("uid 65534's placement: %q, %v; want %s %s", out, err, protocol.ReplyError, protocol.CodeAccessDenied)
	}
	if cg.created != 0 || d.pool(t, "p").Running != 0 {
		t.Errorf("made %d cgroups, %d running: want nothing", cg.created, d.pool(t, "p").Running)
	}
}
