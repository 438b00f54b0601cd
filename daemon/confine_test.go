package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/protocol"
)

// TestKernelConfinement: a client whose process an administrator put in a
// cgroup capped at 0.1 vCPU, outside the pool root, is refused rather than
// moved out of the cap into the uncapped default pool; with --may-leave
// naming that cgroup its command is placed.
func TestKernelConfinement(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := kerneltest.Require(t, bothModes)
	capped := h.NewRoot(t, bothModes)
	limit, file := "10000 100000", "cpu.max"
	if h.Mode == kerneltest.V1 {
		limit, file = "10000", "cpu.cfs_quota_us"
	}
	if err := os.WriteFile(filepath.Join(capped.Path, file), []byte(limit), 0); err != nil {
		t.Fatal(err)
	}
	// As /proc/PID/cgroup names it.
	cgroup := "/" + filepath.Base(capped.Path)
	spec := clientSpec{Argv: []string{"/bin/sh", "-c", "exit 0"}, Procs: filepath.Join(capped.Path, "cgroup.procs")}

	t.Run("refused", func(t *testing.T) {
		d, cg := kernelDaemon(t, bothModes, Config{}, "", rootIdentity)
		spec.Socket = d.socket
		out, ok := startClientProc(t, exe, spec, nil).outcome(t)
		if !ok {
			t.Fatal("client reported nothing")
		}
		t.Logf("outcome: %+v", out)
		if out.Code != protocol.CodeConfined || out.Result.Ran {
			t.Fatalf("outcome %+v: want the command refused with %s", out, protocol.CodeConfined)
		}
		for _, want := range []string{"in cgroup " + cgroup + ",", file + " " + limit} {
			if !strings.Contains(out.Error, want) {
				t.Errorf("refusal %q does not say %q", out.Error, want)
			}
		}
		if strings.Contains(out.Error, "--") {
			t.Errorf("refusal %q names a command-line flag: the command adds it", out.Error)
		}
		waitFor(t, "no query left", func() bool { return queriesLeft(t, cg)() == 0 && d.pool(t, "default").Running == 0 })
	})
	t.Run("allowed", func(t *testing.T) {
		d, cg := kernelDaemon(t, bothModes, Config{MayLeave: []string{cgroup}}, "", rootIdentity)
		spec.Socket = d.socket
		out, ok := startClientProc(t, exe, spec, nil).outcome(t)
		if !ok {
			t.Fatal("client reported nothing")
		}
		if out.Error != "" || !out.Result.Ran || out.Result.ExitCode != 0 || out.Result.Stats == nil {
			t.Fatalf("outcome %+v: want the command placed and run", out)
		}
		waitFor(t, "no query left", func() bool { return queriesLeft(t, cg)() == 0 })
	})
}
