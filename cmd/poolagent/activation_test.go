package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/kerneltest"
)

// TestKernelSocketActivation plays systemd's part of socket activation: the
// test holds the listening socket, a client connects before any daemon
// runs (as during a restart) and waits, then the daemon starts with the
// socket passed as fd 3 (LISTEN_FDS, LISTEN_PID) and serves the waiting
// client. Stopping the daemon leaves the socket file to its owner.
func TestKernelSocketActivation(t *testing.T) {
	need := kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1, kerneltest.V2}, Controllers: []string{"cpuacct"}}
	host := kerneltest.Require(t, need)
	root := host.NewRoot(t, need)
	userDatabase(t)

	dir, err := os.MkdirTemp("", "poolagent-activation-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	socket, pools := filepath.Join(dir, "agent.sock"), filepath.Join(dir, "pools.sql")
	if err := os.WriteFile(pools, []byte("CREATE RESOURCE POOL olap WITH (CONCURRENT_QUERY_LIMIT=1);\nGRANT USE ON RESOURCE POOL olap TO 'all-users@well-known';\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	listening, err := ln.File()
	if err != nil {
		t.Fatal(err)
	}
	defer listening.Close()

	// The client arrives first: it connects to the backlog and waits.
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	client := poolagentContext(ctx, "run", "--socket", socket, "--pool", "olap", "--", "true")
	clientOut, err := client.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	clientDone := make(chan error, 1)
	go func() {
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := clientOut.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		err := client.Wait()
		if err != nil {
			t.Logf("client stderr: %s", b.String())
		}
		clientDone <- err
	}()
	time.Sleep(200 * time.Millisecond) // let it connect and send its request
	select {
	case err := <-clientDone:
		t.Fatalf("the client ended before any daemon ran: %v", err)
	default:
	}

	// systemd's part: fd 3 and LISTEN_PID of the process that execs the
	// daemon, so the shell's $$ is the daemon's pid.
	daemon := exec.CommandContext(ctx, "/bin/sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`, os.Args[0],
		"daemon", "--pools", pools, "--root", root.Path, "--socket", socket, "--cpus", "2", "--memory", "1073741824")
	daemon.Env = append(os.Environ(), envAsMain+"=1", "LISTEN_FDS=1")
	daemon.ExtraFiles = []*os.File{listening}
	var daemonLog strings.Builder
	daemon.Stderr = &daemonLog
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	daemonDone := make(chan error, 1)
	go func() { daemonDone <- daemon.Wait() }()
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", daemonLog.String())
		}
	}()
	if err := within(t, "the waiting client to be served", clientDone); err != nil {
		t.Fatalf("the client that waited for the daemon: %v", err)
	}
	daemon.Process.Signal(syscall.SIGTERM)
	if err := within(t, "the daemon to stop", daemonDone); err != nil {
		t.Fatalf("daemon: %v", err)
	}
	if _, err := os.Stat(socket); err != nil {
		t.Errorf("the daemon removed the socket it was passed: %v", err)
	}
	if !strings.Contains(daemonLog.String(), "msg=serving") {
		t.Errorf("the daemon did not log serving:\n%s", daemonLog.String())
	}
}
