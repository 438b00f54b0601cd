package kerneltest

import (
	"testing"

	"github.com/poolagent/poolagent/cgroupfs"
)

func TestCgroupPath(t *testing.T) {
	h := Host{Mounts: cgroupfs.Mounts{Unified: "/sys/fs/cgroup/unified", V1: map[string]string{"cpu": "/sys/fs/cgroup/cpu,cpuacct", "cpuset": "/sys/fs/cgroup/cpuset"}}}
	for dir, want := range map[string]string{
		"/sys/fs/cgroup/cpu,cpuacct/poolagent-test-1":       "/poolagent-test-1",
		"/sys/fs/cgroup/cpuset/a/b":                         "/a/b",
		"/sys/fs/cgroup/unified/system.slice/tests.scope/x": "/system.slice/tests.scope/x",
		"/sys/fs/cgroup/cpu,cpuacct":                        "/",
	} {
		if got := h.CgroupPath(dir); got != want {
			t.Errorf("CgroupPath(%s) = %q, want %q", dir, got, want)
		}
	}
}
