package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/internal/protocol"
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
	cgroup := h.CgroupPath(capped.Path)
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

// TestKernelConfinementDemoted: a client whose process an administrator
// demoted (cpu.idle 1, or a low cpu.weight, v1 cpu.shares) is refused
// rather than moved into a pool of a higher weight, naming the file, the
// weight and the pool's; it is placed in a pool that is no better (a
// lower weight, an idle pool for an idle cgroup).
func TestKernelConfinementDemoted(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := kerneltest.Require(t, bothModes)
	v1 := h.Mode == kerneltest.V1
	weightFile := map[bool]string{false: "cpu.weight", true: "cpu.shares"}[v1]
	pools := "CREATE RESOURCE POOL heavy WITH (RESOURCES_WEIGHT=300);\n" +
		"CREATE RESOURCE POOL light WITH (RESOURCES_WEIGHT=40);\n" +
		"CREATE RESOURCE POOL spare WITH (CPU_IDLE=1, RESOURCES_WEIGHT=-1);\n"
	for _, p := range []string{"heavy", "light", "spare"} {
		pools += "GRANT USE ON RESOURCE POOL " + p + " TO 'all-users@well-known';\n"
	}
	tests := []struct {
		name, file, value, weight string
		// placed is the pool that is no better; "" for none.
		placed string
	}{
		{"weight 50", weightFile, map[bool]string{false: "50", true: "512"}[v1], "50", "light"},
		{"the least weight", weightFile, map[bool]string{false: "1", true: "2"}[v1], map[bool]string{false: "1", true: "0.195"}[v1], ""},
		{"idle", "cpu.idle", "1", "0.293", "spare"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			demoted := demotedCgroup(t, h, tt.file, tt.value)
			cgroup := h.CgroupPath(demoted)
			d, cg := kernelDaemon(t, bothModes, Config{}, pools, rootIdentity)
			spec := clientSpec{Socket: d.socket, Pool: "heavy", Argv: []string{"/bin/sh", "-c", "exit 0"}, Procs: filepath.Join(demoted, "cgroup.procs")}
			out, ok := startClientProc(t, exe, spec, nil).outcome(t)
			if !ok {
				t.Fatal("client reported nothing")
			}
			t.Logf("outcome: %+v", out)
			if out.Code != protocol.CodeConfined || out.Result.Ran {
				t.Fatalf("outcome %+v: want the command refused with %s", out, protocol.CodeConfined)
			}
			for _, want := range []string{"in cgroup " + cgroup + ",", tt.file + " " + tt.value, "a CPU weight of " + tt.weight + ", below pool heavy's 300"} {
				if !strings.Contains(out.Error, want) {
					t.Errorf("refusal %q does not say %q", out.Error, want)
				}
			}
			waitFor(t, "no query left", func() bool { return queriesLeft(t, cg)() == 0 && d.pool(t, "heavy").Running == 0 })
			if tt.placed == "" {
				return
			}
			spec.Pool = tt.placed
			out, ok = startClientProc(t, exe, spec, nil).outcome(t)
			if !ok {
				t.Fatal("client reported nothing")
			}
			if out.Error != "" || !out.Result.Ran || out.Result.ExitCode != 0 {
				t.Fatalf("outcome %+v in pool %s: want the command placed and run", out, tt.placed)
			}
			waitFor(t, "no query left", func() bool { return queriesLeft(t, cg)() == 0 })
		})
	}
}

// demotedCgroup makes a cgroup demoted by file (value) for a client to
// run in, and returns its path. It sits in a favoured test root of its
// own: the demotion is what the daemon reads, while the client still gets
// the CPU to talk to it when other work keeps the machine busy (at the
// least weight beside a busy host's tasks, its start-up alone could
// outlast the daemon's wait for a first request).
func demotedCgroup(t *testing.T, h kerneltest.Host, file, value string) string {
	t.Helper()
	parent := h.NewRoot(t, bothModes)
	parent.Favour(t)
	if h.Mode == kerneltest.V2 {
		if err := os.WriteFile(filepath.Join(parent.Path, "cgroup.subtree_control"), []byte("+cpu"), 0); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(parent.Path, "demoted")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		t.Fatal(err)
	}
	return dir
}
