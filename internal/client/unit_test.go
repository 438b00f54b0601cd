package client

import "testing"

func TestInService(t *testing.T) {
	for _, c := range []struct {
		id, cgroup string
		want       bool
	}{
		{"abc", "0::/system.slice/etl.service\n", true},
		{"abc", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/job.service\n", true},
		{"", "0::/system.slice/etl.service\n", false},
		{"abc", "0::/user.slice/user-1000.slice/session-3.scope\n", false},
		{"abc", "0::/system.slice/poolagent-tests.scope/runner\n", false},
		{"abc", "0::/system.slice/etl.service/payload\n", false},
		// Hybrid: the unified line names systemd's cgroup.
		{"abc", "12:cpu,cpuacct:/system.slice/etl.service\n1:name=systemd:/system.slice/etl.service\n0::/system.slice/etl.service\n", true},
		// Legacy: only the named hierarchy does.
		{"abc", "12:cpu,cpuacct:/\n1:name=systemd:/system.slice/cron.service\n", true},
		{"abc", "garbage", false},
	} {
		if got := InService(c.id, []byte(c.cgroup)); got != c.want {
			t.Errorf("InService(%q, %q) = %v, want %v", c.id, c.cgroup, got, c.want)
		}
	}
}
