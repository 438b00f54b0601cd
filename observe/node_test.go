package observe

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/cpulimit"
)

func TestReadNodeCapacity(t *testing.T) {
	tests := []struct {
		fixture string
		want    NodeCapacity
	}{
		{"unified", NodeCapacity{
			CPUs: 1.5, Online: cpus("0-3"), OnlineCPUs: 4, CgroupCPUs: 1.5,
			MemoryBytes: 2 << 30, MemTotalBytes: 8048136 * 1024, CgroupMemoryBytes: 2 << 30,
		}},
		{"hybrid", NodeCapacity{
			CPUs: 2, Online: cpus("0-1"), OnlineCPUs: 2,
			MemoryBytes: 4 << 30, MemTotalBytes: 24683620 * 1024, CgroupMemoryBytes: 4 << 30,
		}},
		{"legacy", NodeCapacity{
			CPUs: 2.5, Online: cpus("0,2-3,8-11"), OnlineCPUs: 7, CgroupCPUs: 2.5,
			MemoryBytes: 16384000 * 1024, MemTotalBytes: 16384000 * 1024,
		}},
		{"container", NodeCapacity{
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

func TestNodeParsers(t *testing.T) {
	cpuList := []struct {
		in   string
		want int
		err  string
	}{
		{"0\n", 1, ""},
		{"0-3", 4, ""},
		{"0,2-3,8-11\n", 7, ""},
		{"", 0, "empty CPU list"},
		{"3-1", 0, `range "3-1" runs backwards`},
		{"0-", 0, `"" is not a CPU number`},
		{"a", 0, `"a" is not a CPU number`},
	}
	for _, tc := range cpuList {
		got, err := parseOnline(tc.in)
		if got.Count() != tc.want || !strings.Contains(errString(err), tc.err) || (tc.err == "") != (err == nil) {
			t.Errorf("parseOnline(%q) = %d, %v; want %d, %q", tc.in, got.Count(), err, tc.want, tc.err)
		}
	}
	cfs := []struct {
		quota  string
		period uint64
		want   float64
		err    string
	}{
		{"-1\n", 100000, 0, ""},
		{"250000\n", 100000, 2.5, ""},
		{"0", 100000, 0, `cfs_quota_us "0": want -1 or a positive number of µs`},
		{"x", 100000, 0, `cfs_quota_us "x": want -1 or a positive number of µs`},
	}
	for _, tc := range cfs {
		got, err := parseCFSQuota(tc.quota, tc.period)
		if got != tc.want || errString(err) != tc.err {
			t.Errorf("parseCFSQuota(%q, %d) = %v, %v; want %v, %q", tc.quota, tc.period, got, err, tc.want, tc.err)
		}
	}
	period := []struct {
		in   string
		want uint64
		err  string
	}{
		{"100000\n", 100000, ""},
		{"0", 0, `cfs_period_us "0": want a positive number of µs`},
		{"x", 0, `cfs_period_us "x": want a positive number of µs`},
	}
	for _, tc := range period {
		got, err := parseCFSPeriod(tc.in)
		if got != tc.want || errString(err) != tc.err {
			t.Errorf("parseCFSPeriod(%q) = %v, %v; want %v, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
	mem := []struct {
		in   string
		want int64
		err  string
	}{
		{"max\n", -1, ""},
		{"1073741824\n", 1 << 30, ""},
		{"9223372036854771712\n", -1, ""}, // v1 unlimited
		{"0", 0, ""},
		{"1G", 0, `memory limit "1G": want "max" or bytes`},
		{"-1", 0, `memory limit "-1": want "max" or bytes`},
	}
	for _, tc := range mem {
		got, err := ParseMemoryLimit(tc.in)
		if got != tc.want || errString(err) != tc.err {
			t.Errorf("ParseMemoryLimit(%q) = %v, %v; want %v, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// cpus is the CPU list s, which must parse.
func cpus(s string) cpulimit.CPUSet {
	c, err := cpulimit.ParseCPUSet(s)
	if err != nil {
		panic(err)
	}
	return c
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzNodeLimits feeds arbitrary file contents to the node parsers: no
// panics, and accepted values are in range.
func FuzzNodeLimits(f *testing.F) {
	f.Add("0-3,8")
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := parseOnline(s); err == nil && n.Count() < 1 {
			t.Fatalf("parseOnline(%q) = %d CPUs", s, n.Count())
		}
		q, p, _ := strings.Cut(s, "\n")
		if period, err := parseCFSPeriod(p); err == nil {
			if c, err := parseCFSQuota(q, period); err == nil && (c < 0 || math.IsInf(c, 0) || math.IsNaN(c)) {
				t.Fatalf("parseCFSQuota(%q, %d) = %v", q, period, c)
			}
		}
		if m, err := ParseMemoryLimit(s); err == nil && m < -1 {
			t.Fatalf("ParseMemoryLimit(%q) = %v", s, m)
		}
		if w, err := parseCPUWeight(s); err == nil && (w < 1 || w > 10000) {
			t.Fatalf("parseCPUWeight(%q) = %v", s, w)
		}
		if w, err := parseCPUShares(s); err == nil && (w <= 0 || w > 262144*100/1024) {
			t.Fatalf("parseCPUShares(%q) = %v", s, w)
		}
	})
}

// TestReadNodeCapacityBadLimit: a limit file the kernel would never write
// is an error that names the file, not a silently ignored limit.
func TestReadNodeCapacityBadLimit(t *testing.T) {
	tests := []struct {
		name, fixture, file, content, want string
	}{
		{"v1 quota", "legacy", "sys/fs/cgroup/cpu,cpuacct/pools/cpu.cfs_quota_us", "0\n",
			`sys/fs/cgroup/cpu,cpuacct/pools/cpu.cfs_quota_us: cfs_quota_us "0": want -1 or a positive number of µs`},
		{"v1 period", "legacy", "sys/fs/cgroup/cpu,cpuacct/pools/cpu.cfs_period_us", "x\n",
			`sys/fs/cgroup/cpu,cpuacct/pools/cpu.cfs_period_us: cfs_period_us "x": want a positive number of µs`},
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

// TestReadCgroupLimitsCPUSet: a cpuset.cpus naming fewer CPUs than the
// hierarchy's root is a limit, with its CPUs; every CPU, an empty v2
// list (its parent's) or no file is none.
func TestReadCgroupLimitsCPUSet(t *testing.T) {
	for _, tc := range []struct {
		kind, rootFile, cpus, want string
	}{
		{LimitsV1CPUSet, "cpuset.cpus", "2-3", "2-3"},
		{LimitsV1CPUSet, "cpuset.cpus", "0-3", ""},
		{LimitsV2, "cpuset.cpus.effective", "1", "1"},
		{LimitsV2, "cpuset.cpus.effective", "", ""},
		{LimitsV2, "cpuset.cpus.effective", "-", ""},
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
		limits, err := ReadCgroupLimits(mount, "/a", tc.kind)
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

// TestReadCgroupLimitsDemotion: cpu.idle 1, or a cpu.weight (v2) or
// cpu.shares (v1) below the default, is a demotion with the weight the
// scheduler gives it; the default or more, or no file, is none; a value
// the kernel never writes is an error naming the file.
func TestReadCgroupLimitsDemotion(t *testing.T) {
	for _, tc := range []struct {
		name, kind string
		files      map[string]string
		want       string // "file value weight", "" for none
		wantErr    string
	}{
		{"v2 weight 1", LimitsV2, map[string]string{"cpu.weight": "1"}, "cpu.weight 1 1", ""},
		{"v2 weight 50", LimitsV2, map[string]string{"cpu.weight": "50", "cpu.idle": "0"}, "cpu.weight 50 50", ""},
		{"v2 default weight", LimitsV2, map[string]string{"cpu.weight": "100", "cpu.idle": "0"}, "", ""},
		{"v2 higher weight", LimitsV2, map[string]string{"cpu.weight": "300"}, "", ""},
		{"v2 idle", LimitsV2, map[string]string{"cpu.weight": "1", "cpu.idle": "1"}, "cpu.idle 1 0.293", ""},
		{"v2 no files", LimitsV2, nil, "", ""},
		{"v1 shares 2", LimitsV1CPU, map[string]string{"cpu.shares": "2"}, "cpu.shares 2 0.195", ""},
		{"v1 shares 512", LimitsV1CPU, map[string]string{"cpu.shares": "512", "cpu.idle": "0"}, "cpu.shares 512 50", ""},
		{"v1 default shares", LimitsV1CPU, map[string]string{"cpu.shares": "1024"}, "", ""},
		{"v1 idle", LimitsV1CPU, map[string]string{"cpu.shares": "1024", "cpu.idle": "1"}, "cpu.idle 1 0.293", ""},
		{"v2 weight 0", LimitsV2, map[string]string{"cpu.weight": "0"}, "", `cpu.weight "0": want 1..10000`},
		{"v1 shares 1", LimitsV1CPU, map[string]string{"cpu.shares": "1"}, "", `cpu.shares "1": want 2..262144`},
		{"idle 2", LimitsV2, map[string]string{"cpu.idle": "2"}, "", `cpu.idle "2": want 0 or 1`},
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
			limits, err := ReadCgroupLimits(mount, "/a", tc.kind)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), dir) {
					t.Fatalf("err = %v, want %q naming %s", err, tc.wantErr, dir)
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
