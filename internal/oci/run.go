package oci

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/client"
)

// Name is the program's name in its messages.
const Name = "poolagent-oci"

// Runtimes are looked up on PATH in this order when --runtime-path is not
// given.
var Runtimes = []string{"runc", "crun"}

// Env names what Main reads from its environment besides PATH:
// the daemon's socket (the default when unset).
const EnvSocket = "POOLAGENT_SOCKET"

// Main is poolagent-oci: it runs the real OCI runtime with args (runc's
// command line, global options first), create and run once the
// container's query is admitted and placed, every other subcommand
// straight away (exec). --help with no subcommand prints its own help on
// stdout. It returns the exit status when it does not exec.
func Main(args []string, stdout, stderr io.Writer) int {
	inv, err := Parse(args)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", Name, err)
		return client.ExitRefused
	}
	if inv.WantsHelp() {
		fmt.Fprintf(stdout, "Usage: %s %s\n\n%s.\n\n%s\n", Name, ArgsUsage, Summary, Help)
		return 0
	}
	rt, err := findRuntime(inv.RuntimePath)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", Name, err)
		return client.ExitRefused
	}
	argv := append([]string{filepath.Base(rt)}, inv.RuntimeArgs()...)
	if !inv.Places() {
		err := unix.Exec(rt, argv, os.Environ())
		fmt.Fprintf(stderr, "%s: run %s: %v\n", Name, rt, err)
		return client.ExitCannotStart
	}
	status, err := create(inv, rt, argv, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", Name, err)
	}
	return status
}

// findRuntime is the runtime to run: given (a path, or a name looked up on
// PATH), else runc or crun from PATH.
func findRuntime(given string) (string, error) {
	if given != "" {
		p, err := exec.LookPath(given)
		if err != nil {
			return "", fmt.Errorf("--runtime-path %s: %w", given, err)
		}
		return p, nil
	}
	path := os.Getenv("PATH")
	if path == "" {
		// Engines run their runtime with an environment of their own,
		// which may have no PATH (podman's cleanup does).
		path = DefaultPath
	}
	for _, name := range Runtimes {
		for _, dir := range filepath.SplitList(path) {
			p := filepath.Join(dir, name)
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("no OCI runtime: neither runc nor crun is in %s; install one or give --runtime-path PATH", path)
}

// DefaultPath is where runc and crun are looked for when PATH is unset or
// empty.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// create waits in the container's pool's queue, rewrites its config to
// place it below its query cgroup and runs the runtime's create or run as
// a child, whose status it returns. The query's slot is held until the
// container's cgroup is empty: past poolagent-oci's exit for a container
// that runs on (create, run -d).
func create(inv Invocation, rt string, argv []string, stderr io.Writer) (int, error) {
	bundle := inv.Bundle
	if bundle == "" {
		bundle = "."
	}
	file := filepath.Join(bundle, "config.json")
	if inv.Config != "" {
		file = inv.Config
		if !filepath.IsAbs(file) {
			file = filepath.Join(bundle, file)
		}
	}
	spec, err := ReadConfig(file)
	if err != nil {
		return client.ExitRefused, err
	}
	req, err := RequestOf(spec, inv.ID)
	if err != nil {
		return client.ExitRefused, err
	}
	if os.Geteuid() != 0 {
		return client.ExitRefused, fmt.Errorf("container %s: runs as uid %d: a container is placed in a pool by a runtime run as root "+
			"(rootful podman, Docker, containerd); a rootless engine cannot create cgroups in root's query cgroups (docs/containers.md)", inv.ID, os.Geteuid())
	}
	var st unix.Statfs_t
	if err := unix.Statfs(CgroupMount, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		return client.ExitRefused, fmt.Errorf("container %s: %s is not a cgroup v2 mount: poolagent-oci places containers on cgroup v2 only", inv.ID, CgroupMount)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, client.QueueSignals...)
	defer signal.Stop(sigs)
	p, err := client.Place(client.RunOptions{Socket: os.Getenv(EnvSocket), Pool: req.Pool, App: req.App, Name: Name, Signals: sigs})
	if err != nil {
		return client.ExitRefused, fmt.Errorf("container %s: %w", inv.ID, err)
	}
	placed := Placed{Cgroup: p.Cgroup, Pool: p.Pool, Query: p.Query, CPULimit: p.CPULimit}
	if placed.Limits, err = ReadLimits(filepath.Join(CgroupMount, p.Cgroup)); err == nil {
		Rewrite(spec, placed)
		err = WriteConfig(file, spec)
	}
	if err != nil {
		p.Detach()
		return client.ExitRefused, fmt.Errorf("container %s, query %s in pool %s: %w", inv.ID, p.Query, p.Pool, err)
	}
	status, err := runChild(rt, argv, sigs)
	if err != nil || inv.Command == "create" || inv.Detach {
		p.Detach()
		return status, err
	}
	stats, err := p.Done()
	if err == nil && stats.OOM != nil {
		fmt.Fprintln(stderr, stats.OOM.Message(Name, p.Query, p.Pool))
	}
	return status, err
}

// runChild runs the runtime as a child with this process's standard files
// and every descriptor it inherited (--preserve-fds, the console socket
// given by path), passes on the signals caught, and returns its exit
// status, 128+N when signal N ended it. The child is killed if this
// process dies first: a runtime whose caller is gone must not create a
// container the daemon no longer holds a slot for.
func runChild(rt string, argv []string, sigs <-chan os.Signal) (int, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := &exec.Cmd{Path: rt, Args: argv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}
	if err := cmd.Start(); err != nil {
		return client.ExitCannotStart, fmt.Errorf("run %s: %w", rt, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-sigs:
			cmd.Process.Signal(sig)
		case err := <-done:
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				return client.ExitCannotStart, fmt.Errorf("wait for %s: %w", rt, err)
			}
			ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if ws.Signaled() {
				return 128 + int(ws.Signal()), nil
			}
			return ws.ExitStatus(), nil
		}
	}
}
