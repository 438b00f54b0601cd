package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/poolagent/poolagent/cgroupfs"
)

// TestNotRoot runs the commands that write cgroups as an unprivileged
// user (uid 65534): the daemon refuses before it reads, listens or logs
// anything, and apply says to run it as root instead of only "permission
// denied". It needs root to drop to another uid.
func TestNotRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run poolagent as another user")
	}
	// The test binary, where uid 65534 may run it.
	dir, err := os.MkdirTemp("", "poolagent-notroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "poolagent")
	copyFile(t, os.Args[0], bin)
	pools, _ := filepath.Abs("../../testdata/admission/pools.sql")
	copyFile(t, pools, filepath.Join(dir, "pools.sql"))
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mounts, err := cgroupfs.Detect("/")
	if err != nil {
		t.Fatal(err)
	}
	cpu, _, err := mounts.Controller("cpu")
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(cpu, fmt.Sprintf("poolagent-notroot-%d", os.Getpid()))
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"daemon", []string{"daemon", "--pools", "pools.sql", "--socket", filepath.Join(dir, "agent.sock")},
			"poolagent: daemon needs root: it writes the pool cgroups and moves every user's queries into them; run it as root, or with sudo (running as uid 65534)\n"},
		{"apply", []string{"apply", "--pools", "pools.sql", "--root", root},
			"poolagent: apply needs root: run it as root, or with sudo (as uid 65534: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), envAsMain+"=1")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.HasPrefix(string(out), tc.want) {
				t.Errorf("poolagent %s as uid 65534: %v\n%s\nwant it to start with %q", tc.name, err, out, tc.want)
			}
			if strings.Contains(string(out), "serving") {
				t.Errorf("logged serving:\n%s", out)
			}
		})
	}
	if _, err := os.Stat(root); err == nil {
		os.Remove(root)
		t.Errorf("apply as uid 65534 made %s", root)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
