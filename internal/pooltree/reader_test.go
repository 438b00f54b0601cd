package pooltree

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/cgroupfs"
)

// hybridHost is a host root with the project's hybrid cgroup layout (cpu
// and cpuacct apart) and a v1 pool root /sys/fs/cgroup/cpu/poolagent.
func hybridHost(t *testing.T) string {
	t.Helper()
	host := t.TempDir()
	b, err := os.ReadFile("../../testdata/cgroupfs/mounts/hybrid/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"proc/self/mountinfo":                                string(b),
		"sys/fs/cgroup/unified/cgroup.controllers":           "",
		"sys/fs/cgroup/cpu/poolagent/cpu.cfs_period_us":      "100000\n",
		"sys/fs/cgroup/cpuacct/poolagent/cpuacct.usage":      "0\n",
		"sys/fs/cgroup/cpu/poolagent/olap/cpu.cfs_period_us": "100000\n",
	} {
		p := filepath.Join(host, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return host
}

func TestRoot(t *testing.T) {
	m := cgroupfs.Mounts{Mode: cgroupfs.Unified, Unified: "/sys/fs/cgroup", UnifiedControllers: []string{"cpu"}}
	tests := []struct {
		name  string
		m     cgroupfs.Mounts
		given string
		want  string
		err   string
	}{
		{"given", m, "/sys/fs/cgroup/mine", "/sys/fs/cgroup/mine", ""},
		{"default", m, "", "/sys/fs/cgroup/poolagent", ""},
		{"no cpu controller", cgroupfs.Mounts{Mode: cgroupfs.Unavailable}, "", "", "find the default pool root: cpu (mode unavailable)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Root(tt.m, tt.given)
			if got != tt.want || (err == nil) != (tt.err == "") || err != nil && !strings.HasPrefix(err.Error(), tt.err) {
				t.Errorf("Root = %q, %v; want %q, %q", got, err, tt.want, tt.err)
			}
			if tt.err != "" && !errors.Is(err, cgroupfs.ErrNoController) {
				t.Errorf("err %v does not wrap ErrNoController", err)
			}
		})
	}
}

func TestReaderAt(t *testing.T) {
	type want struct{ version, root, acct string }
	host := hybridHost(t)
	cpu := filepath.Join(host, "sys/fs/cgroup/cpu/poolagent")
	acct := filepath.Join(host, "sys/fs/cgroup/cpuacct/poolagent")
	copyV1, _ := filepath.Abs("../../testdata/observe/v1/cpu/poolagent")
	v2, _ := filepath.Abs("../../testdata/observe/v2/poolagent")
	tests := []struct {
		name            string
		host, dir, acct string
		want            want
		err             string
	}{
		{"default root, usage from its cpuacct twin", host, "", "", want{"v1", cpu, acct}, ""},
		{"one pool", host, cpu + "/olap", "", want{"v1", cpu + "/olap", acct + "/olap"}, ""},
		{"cpuacct given", host, cpu, "/elsewhere", want{"v1", cpu, "/elsewhere"}, ""},
		{"a copy outside the mounts: usage unknown", host, copyV1, "", want{"v1", copyV1, ""}, ""},
		{"v2", host, v2, "", want{"v2", v2, ""}, ""},
		{"no mounts, root given", t.TempDir(), v2, "", want{"v2", v2, ""}, ""},
		{"no mounts, no root", t.TempDir(), "", "", want{}, "find the default pool root: detect cgroup mounts:"},
		{"missing root", host, filepath.Join(host, "nonexistent"), "", want{}, "open pool root "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ReaderAt(tt.host, tt.dir, tt.acct, "")
			var got want
			if r != nil {
				got = want{r.Version(), r.Root(), r.Dir(cgroupfs.HierCPUAcct)}
				r.Close()
			}
			if got != tt.want || (err == nil) != (tt.err == "") || err != nil && !strings.HasPrefix(err.Error(), tt.err) {
				t.Errorf("ReaderAt = %+v, %v;\nwant %+v, %q", got, err, tt.want, tt.err)
			}
		})
	}
	if err := os.RemoveAll(cpu); err != nil {
		t.Fatal(err)
	}
	if _, err := ReaderAt(host, "", "", ""); err == nil || !strings.HasPrefix(err.Error(), "no pool root at the default place (poolagent apply creates it)") {
		t.Errorf("no default root: %v", err)
	}
}
