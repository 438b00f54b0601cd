package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/kerneltest"
)

// readmeTour is the README's tour: the shell lines of the first fenced
// block under "## A tour".
func readmeTour(t *testing.T, readme string) []string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## A tour\n")
	if !ok {
		t.Fatal(`README.md has no "## A tour" section`)
	}
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatal("the tour has no ```sh block")
	}
	block, _, _ = strings.Cut(block, "```")
	return strings.Split(strings.TrimSpace(block), "\n")
}

// TestKernelReadmeTour runs the README's tour as a newcomer would: every
// line in order, as root, from a copy of the repository's files with
// poolagent and poolagent-run on PATH, and no systemd. It fails on the
// first line that fails and when the tour leaves anything behind: the pool
// root (and its cpuacct twin), the state directory, the socket's
// directory. /run and /tmp are private to the tour (a mount namespace), so
// another poolagent on this host neither sees nor disturbs it; the pool
// root is the host's default one and must be free. Only cgroup v1 here:
// the v2 VM holds the package's files, not the repository's.
func TestKernelReadmeTour(t *testing.T) {
	need := kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1}, Controllers: []string{"cpuacct"}}
	h := kerneltest.Require(t, need)
	goTool, git, unshare := tool(t, "go"), tool(t, "git"), tool(t, "unshare")

	// One tour at a time on this host: they share the default pool root.
	lock, err := os.OpenFile("/run/lock/poolagent-readme-tour.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	root, err := h.Mounts.DefaultRoot()
	if err != nil {
		t.Fatal(err)
	}
	roots := []string{root}
	if twin := h.Mounts.Twin("cpuacct", root); twin != "" && twin != root {
		roots = append(roots, twin)
	}
	for _, r := range roots {
		if _, err := os.Stat(r); err == nil {
			t.Fatalf("%s exists before the tour: another poolagent uses the default pool root (stop it, then poolagent teardown)", r)
		}
	}

	// The repository's files as a clone has them, outside /tmp (which
	// the tour gets a private one of), and the two binaries.
	clone, err := os.MkdirTemp("/var/tmp", "poolagent-tour-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(clone) })
	files, err := exec.Command(git, "-C", "../..", "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		info, err := os.Lstat(filepath.Join("../..", f))
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the working tree, or a link
		}
		if err := os.MkdirAll(filepath.Join(clone, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		copyFile(t, filepath.Join("../..", f), filepath.Join(clone, f))
		if err := os.Chmod(filepath.Join(clone, f), info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(clone, "bin")
	build := exec.Command(goTool, "build", "-o", bin+"/", "./cmd/poolagent", "./cmd/poolagent-run")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	readme, err := os.ReadFile(filepath.Join(clone, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	tour := readmeTour(t, string(readme))
	script := "set -e\n" +
		"mount -t tmpfs -o mode=0755 tour-run /run\n" +
		"mount -t tmpfs -o mode=1777 tour-tmp /tmp\n" +
		"set -x\n" + strings.Join(tour, "\n") + "\n" +
		"set +x\n" +
		"for p in /run/poolagent /run/poolagent-state; do\n" +
		"	if [ -e \"$p\" ]; then echo \"the tour left $p behind\"; exit 1; fi\n" +
		"done\n" +
		"echo 'the tour ran to its end'\n"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, unshare, "--mount", "--propagation", "private", "sh", "-c", script)
	cmd.Dir = clone
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	// A tour stopped half-way leaves its daemon running: end the tour's
	// process group, then remove the pool tree it made.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	t.Logf("the tour:\n%s", out.String())
	if err != nil || !strings.Contains(out.String(), "the tour ran to its end") {
		t.Errorf("the tour failed: %v", err)
	}
	for _, r := range roots {
		if _, err := os.Stat(r); err == nil {
			t.Errorf("the tour left the pool cgroup %s behind", r)
		}
	}
	if _, err := os.Stat(root); err == nil {
		time.Sleep(time.Second) // the killed daemon lets go of the root
		if out, err := exec.Command(filepath.Join(bin, "poolagent"), "teardown").CombinedOutput(); err != nil {
			t.Errorf("removing what the tour left: %v\n%s", err, out)
		}
	}
	if n := len(tour); n < 15 {
		t.Errorf("the tour has %d lines; the extraction is broken", n)
	}
}
