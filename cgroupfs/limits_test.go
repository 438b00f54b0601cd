package cgroupfs

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/observe"
)

// cpus is the CPU list s, which must parse.
func cpus(s string) cpulimit.CPUSet {
	c, err := cpulimit.ParseCPUSet(s)
	if err != nil {
		panic(err)
	}
	return c
}

func TestReadNodeCapacity(t *testing.T) {
	tests := []struct {
		fixture string
		want    observe.NodeCapacity
	}{
		{"unified", observe.NodeCapacity{
			CPUs: 1.5, Online: cpus("0-3"), OnlineCPUs: 4, CgroupCPUs: 1.5,
			MemoryBytes: 2 << 30, MemTotalBytes: 8048136 * 1024, CgroupMemoryBytes: 2 << 30,
		}},
		{"hybrid", observe.NodeCapacity{
			CPUs: 2, Online: cpus("0-1"), OnlineCPUs: 2,
			MemoryBytes: 4 << 30, MemTotalBytes: 24683620 * 1024, CgroupMemoryBytes: 4 << 30,
		}},
		{"legacy", observe.NodeCapacity{
			CPUs: 2.5, Online: cpus("0,2-3,8-11"), OnlineCPUs: 7, CgroupCPUs: 2.5,
			MemoryBytes: 16384000 * 1024, MemTotalBytes: 16384000 * 1024,
		}},
		{"container", observe.NodeCapacity{
			CPUs: 2, Online: cpus("0-63"), OnlineCPUs: 64, CgroupCPUs: 2,
			MemoryBytes: 1 << 30, MemTotalBytes: 65536000 * 1024, CgroupMemoryBytes: 1 << 30,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			got, err := ReadNodeCapacity(filepath.Join("..", "testdata", "node", tc.fixture))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestReadNodeCapacityMissing(t *testing.T) {
	_, err := ReadNodeCapacity(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "read online CPUs") {
		t.Errorf("err = %v, want the missing online CPU list named", err)
	}
}

// TestReadNodeCapacityLiveHost reads this machine: whatever its cgroup
// layout, it must yield a usable node no larger than its CPUs.
func TestReadNodeCapacityLiveHost(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads Linux /proc and /sys")
	}
	n, err := ReadNodeCapacity("/")
	if err != nil {
		t.Fatal(err)
	}
	if !(n.CPUs > 0) || n.CPUs > float64(n.OnlineCPUs) || n.MemoryBytes <= 0 || n.MemoryBytes > n.MemTotalBytes {
		t.Errorf("implausible node: %+v", n)
	}
}

// TestReadNodeCapacityBadLimit: a limit file the kernel would never write
// is an error that names the file, not a silently ignored limit.
func TestReadNodeCapacityBadLimit(t *testing.T) {
	tests := []struct {
		name, fixture, file, content, want string
	}{
		{"v1 quota", "legacy", "sys/fs/cgroup/cpu,cpuacct/pools/cpu.cfs_quota_us", "0\n",
			`sys/fs/cgroup/cpu,cpuacct/pools/cpu.cfs_quota_us: cpu.cfs_quota_us "0": want -1 or a positive number of µs`},
		{"v1 period", "legacy", "sys/fs/cgroup/cpu,cpuacct/pools/cpu.cfs_period_us", "x\n",
			`sys/fs/cgroup/cpu,cpuacct/pools/cpu.cfs_period_us: cpu.cfs_period_us "x": want a positive number of µs`},
		{"v2 cpu.max", "unified", "sys/fs/cgroup/system.slice/cpu.max", "max\n",
			`sys/fs/cgroup/system.slice/cpu.max: cpu.max "max": want "max PERIOD" or "QUOTA PERIOD"`},
		{"v2 memory.max", "unified", "sys/fs/cgroup/system.slice/memory.max", "lots\n",
			`sys/fs/cgroup/system.slice/memory.max: memory limit "lots": want "max" or bytes`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.CopyFS(root, os.DirFS(filepath.Join("..", "testdata", "node", tc.fixture))); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, tc.file), []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadNodeCapacity(root)
			if want := filepath.Join(root, tc.want); err == nil || err.Error() != want {
				t.Errorf("err = %v\nwant %s", err, want)
			}
		})
	}
}

// TestReadLimitsCPUSet: a cpuset.cpus naming fewer CPUs than the
// hierarchy's root is a limit, with its CPUs; every CPU, an empty v2
// list (its parent's) or no file is none.
func TestReadLimitsCPUSet(t *testing.T) {
	for _, tc := range []struct {
		kind, rootFile, cpus, want string
	}{
		{HierCPUSet, "cpuset.cpus", "2-3", "2-3"},
		{HierCPUSet, "cpuset.cpus", "0-3", ""},
		{HierUnified, "cpuset.cpus.effective", "1", "1"},
		{HierUnified, "cpuset.cpus.effective", "", ""},
		{HierUnified, "cpuset.cpus.effective", "-", ""},
	} {
		mount := t.TempDir()
		if err := os.WriteFile(filepath.Join(mount, tc.rootFile), []byte("0-3\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(mount, "a"), 0o755); err != nil {
			t.Fatal(err)
		}
		if tc.cpus != "-" {
			if err := os.WriteFile(filepath.Join(mount, "a", "cpuset.cpus"), []byte(tc.cpus+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		limits, err := ReadLimits(mount, "/a", tc.kind)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range limits {
			got = append(got, l.CPUSet.String())
			if l.File != "cpuset.cpus" || l.Value != tc.want || l.CPUs != float64(l.CPUSet.Count()) {
				t.Errorf("%s %q: limit %+v", tc.kind, tc.cpus, l)
			}
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("%s cpuset.cpus %q: limits %q, want %q", tc.kind, tc.cpus, got, tc.want)
		}
	}
}

// TestReadLimitsDemotion: cpu.idle 1, or a cpu.weight (v2) or cpu.shares
// (v1) below the default, is a demotion with the weight the scheduler
// gives it; the default or more, or no file, is none; a value the kernel
// never writes is an error naming the file.
func TestReadLimitsDemotion(t *testing.T) {
	for _, tc := range []struct {
		name, hier string
		files      map[string]string
		want       string // "file value weight", "" for none
		wantErr    string
	}{
		{"v2 weight 1", HierUnified, map[string]string{"cpu.weight": "1"}, "cpu.weight 1 1", ""},
		{"v2 weight 50", HierUnified, map[string]string{"cpu.weight": "50", "cpu.idle": "0"}, "cpu.weight 50 50", ""},
		{"v2 default weight", HierUnified, map[string]string{"cpu.weight": "100", "cpu.idle": "0"}, "", ""},
		{"v2 higher weight", HierUnified, map[string]string{"cpu.weight": "300"}, "", ""},
		{"v2 idle", HierUnified, map[string]string{"cpu.weight": "1", "cpu.idle": "1"}, "cpu.idle 1 0.293", ""},
		{"v2 no files", HierUnified, nil, "", ""},
		{"v1 shares 2", HierCPU, map[string]string{"cpu.shares": "2"}, "cpu.shares 2 0.195", ""},
		{"v1 shares 512", HierCPU, map[string]string{"cpu.shares": "512", "cpu.idle": "0"}, "cpu.shares 512 50", ""},
		{"v1 default shares", HierCPU, map[string]string{"cpu.shares": "1024"}, "", ""},
		{"v1 idle", HierCPU, map[string]string{"cpu.shares": "1024", "cpu.idle": "1"}, "cpu.idle 1 0.293", ""},
		{"v2 weight not a number", HierUnified, map[string]string{"cpu.weight": "x"}, "", `a/cpu.weight: "x": want an unsigned integer`},
		{"v1 shares negative", HierCPU, map[string]string{"cpu.shares": "-2"}, "", `a/cpu.shares: "-2": want an unsigned integer`},
		{"idle 2", HierUnified, map[string]string{"cpu.idle": "2"}, "", `a/cpu.idle: cpu.idle "2": want 0 or 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mount := t.TempDir()
			dir := filepath.Join(mount, "a")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, content := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			limits, err := ReadLimits(mount, "/a", tc.hier)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range limits {
				got = append(got, fmt.Sprintf("%s %s %.3g", l.File, l.Value, l.Weight))
			}
			if strings.Join(got, ",") != tc.want {
				t.Errorf("limits %q, want %q", got, tc.want)
			}
		})
	}
}
