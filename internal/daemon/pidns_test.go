package daemon

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/poolagent/poolagent/internal/peer"
	"github.com/poolagent/poolagent/internal/protocol"
)

// envTestNSClient, set to a socket path, makes this test binary a client
// that names its child by its pid alone (as clients did before they sent
// pidfds), meant to run in a pid namespace of its own. It prints the
// daemon's reply to its start on standard output.
const envTestNSClient = "POOLAGENT_TEST_NS_CLIENT"

func nsClientMain(socket string) int {
	conn, err := net.Dial("unix", socket)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer conn.Close()
	enc, dec := json.NewEncoder(conn), json.NewDecoder(conn)
	var r protocol.Reply
	if err := enc.Encode(protocol.Request{Op: protocol.OpRun}); err != nil || dec.Decode(&r) != nil || r.Type != protocol.ReplyAdmitted {
		fmt.Fprintf(os.Stderr, "run: %+v, %v\n", r, err)
		return 2
	}
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	if err := enc.Encode(protocol.Request{Op: protocol.OpStart, PID: child.Process.Pid}); err != nil || dec.Decode(&r) != nil {
		fmt.Fprintln(os.Stderr, "start:", err)
		return 2
	}
	json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

// TestStartFromOwnPIDNamespace: a client in a pid namespace of its own
// that names its child by pid (a number of its namespace) is refused with
// a message that says so, rather than "pidfd_open: no such process" or a
// check of whatever process has that number here.
func TestStartFromOwnPIDNamespace(t *testing.T) {
	requireRoot(t)
	cg := newFakeCgroups(t)
	d := startDaemon(t, Config{}, policyOf(t, ""), cg, peer.SystemUsers{})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envTestNSClient+"="+d.socket)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client in its own pid namespace: %v", err)
	}
	var r protocol.Reply
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	if r.Type != protocol.ReplyError || r.Code != protocol.CodeBadRequest || !strings.Contains(r.Error, "runs in a pid namespace of its own") {
		t.Fatalf("reply %+v, want a refusal naming the pid namespace", r)
	}
	if cg.created != 0 {
		t.Errorf("%d query cgroups made", cg.created)
	}
	waitFor(t, "the slot to free", func() bool { return d.pool(t, "default").Running == 0 })
}
