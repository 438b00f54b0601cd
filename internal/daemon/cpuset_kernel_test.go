package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/client"
	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/internal/protocol"
)

// TestKernelCPUSetQuery: a command run through the daemon in a pool with
// CPUS='0' may run on CPU 0 only (the kernel's Cpus_allowed_list of the
// command), and one in a pool without CPUS on every CPU; the query
// cgroups go when the commands end.
func TestKernelCPUSetQuery(t *testing.T) {
	need := kerneltest.Need{Modes: bothModes.Modes, Controllers: []string{"cpuacct", "cpuset"}}
	pools := "CREATE RESOURCE POOL one WITH (CPUS='0');\nCREATE RESOURCE POOL all;"
	d, cg := kernelDaemon(t, need, Config{}, pools, rootIdentity)
	online, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	for pool, want := range map[string]string{"one": "0", "all": strings.TrimSpace(string(online))} {
		out, err := os.CreateTemp(t.TempDir(), "status")
		if err != nil {
			t.Fatal(err)
		}
		res, err := client.Run(client.RunOptions{Socket: d.socket, Pool: pool, Args: []string{"/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status"},
			Env: os.Environ(), Stdout: out, Stderr: os.Stderr})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("run in %s: exit %d, %v", pool, res.ExitCode, err)
		}
		b, _ := os.ReadFile(out.Name())
		got := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(b)), "Cpus_allowed_list:"))
		t.Logf("pool %s: the command's Cpus_allowed_list %q", pool, got)
		if got != want {
			t.Errorf("pool %s: the command may run on CPUs %q, want %q", pool, got, want)
		}
	}
	waitFor(t, "the query cgroups to go", func() bool { return queriesLeft(t, cg)() == 0 })
}

// TestKernelCPUSetConfinement: a client an administrator confined to CPU 1
// (a cpuset outside the pool root) is refused a pool on CPU 0, which would
// free it from that set, and placed in a pool on CPU 1, which keeps it
// within.
func TestKernelCPUSetConfinement(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	need := kerneltest.Need{Modes: bothModes.Modes, Controllers: []string{"cpuacct", "cpuset"}}
	h := kerneltest.Require(t, need)
	confined := h.NewRoot(t, need)
	dir := confined.Path
	if h.Mode == kerneltest.V1 {
		dir = h.Mounts.Twin("cpuset", confined.Path)
		mems, err := os.ReadFile(filepath.Join(filepath.Dir(dir), "cpuset.mems"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cpuset.mems"), mems, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cpuset.cpus"), []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	cgroup := h.CgroupPath(dir)
	pools := "CREATE RESOURCE POOL zero WITH (CPUS='0');\nCREATE RESOURCE POOL one WITH (CPUS='1');"
	d, cg := kernelDaemon(t, need, Config{}, pools, rootIdentity)
	spec := clientSpec{Socket: d.socket, Argv: []string{"/bin/sh", "-c", "exit 0"}, Procs: filepath.Join(dir, "cgroup.procs")}

	spec.Pool = "zero"
	out, ok := startClientProc(t, exe, spec, nil).outcome(t)
	t.Logf("pool zero: %+v", out)
	if !ok || out.Code != protocol.CodeConfined || out.Result.Ran || !strings.Contains(out.Error, "in cgroup "+cgroup+", limited by its cpuset.cpus 1") {
		t.Errorf("pool zero: outcome %+v, want the command refused as confined to cpuset.cpus 1 of %s", out, cgroup)
	}
	spec.Pool = "one"
	out, ok = startClientProc(t, exe, spec, nil).outcome(t)
	if !ok || out.Error != "" || !out.Result.Ran || out.Result.ExitCode != 0 {
		t.Errorf("pool one: outcome %+v, want the command run: the pool's CPUs are within the client's", out)
	}
	waitFor(t, "no query left", func() bool { return queriesLeft(t, cg)() == 0 })
}
