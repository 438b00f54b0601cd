package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/kerneltest"
)

// sudoPath is the PATH sudo gives a command on Debian (its sudoers'
// secure_path): no Go there when Go is installed as go.dev says, in
// /usr/local/go/bin.
const sudoPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// TestKernelReadmeSudoLine runs the README's set-up line for a user with
// sudo as sudo runs it: as root, from the clone, with sudo's PATH, on
// which Go is not (the test checks that), and the rest of the environment
// reset but for Go's caches. It must run the main job to its verdict.
// Only cgroup v1 here: the v2 VM holds the package's files, not the
// repository's.
func TestKernelReadmeSudoLine(t *testing.T) {
	need := kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1}, Controllers: []string{"cpuacct"}}
	kerneltest.Require(t, need)
	goTool := tool(t, "go")
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	line := readmeSudoLine(t, string(readme), "compare")
	words := strings.Fields(line)
	if len(words) < 2 || words[0] != "sudo" || strings.Contains(line, "$") {
		t.Fatalf("README's sudo line %q: want sudo and a command that needs nothing from the caller's environment", line)
	}
	for _, dir := range filepath.SplitList(sudoPath) {
		if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
			t.Fatalf("go is in %s, on sudo's PATH: this host cannot show the line working without Go on PATH", dir)
		}
	}
	env := []string{"PATH=" + sudoPath, "HOME=" + os.Getenv("HOME"), "LANG=C.UTF-8"}
	for _, v := range []string{"GOCACHE", "GOMODCACHE", "GOFLAGS", "GOPROXY", "GOTOOLCHAIN"} {
		out, err := exec.Command(goTool, "env", v).Output()
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, v+"="+strings.TrimSpace(string(out)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, words[1], append(words[2:], "--quiet")...)
	cmd.Dir = "../.."
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	t.Logf("%s --quiet, with PATH=%s:\n%s", strings.Join(words[1:], " "), sudoPath, out)
	if err != nil {
		t.Fatalf("the README's sudo line failed: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "verdict: within target on ") {
		t.Errorf("last line %q, want the main job's verdict", last)
	}
}

// readmeSudoLine is the line of the README's set-up for a user with sudo
// that runs cmd.
func readmeSudoLine(t *testing.T, readme, cmd string) string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## Set up on a fresh machine\n")
	if !ok {
		t.Fatal(`README.md has no "## Set up on a fresh machine" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "sudo ") && strings.Contains(line, " "+cmd) {
			return strings.TrimSpace(line)
		}
	}
	t.Fatalf("the README's set-up has no sudo line running %s", cmd)
	return ""
}
