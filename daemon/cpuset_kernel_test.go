package daemon

import (
	"os"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/client"
	"github.com/poolagent/poolagent/internal/kerneltest"
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
