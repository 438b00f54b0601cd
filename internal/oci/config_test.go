package oci

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestRequestOf(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        Request
		err         string
	}{
		{"none: the id names it", nil, Request{App: "c1"}, ""},
		{"the pool annotation", map[string]string{AnnotationPool: "olap", "other": "x"}, Request{Pool: "olap", App: "c1"}, ""},
		{"Kubernetes' container name", map[string]string{"io.kubernetes.cri.container-name": "web"}, Request{App: "web"}, ""},
		{"a misspelt annotation", map[string]string{"io.poolagent.pol": "olap"}, Request{}, "unknown annotation io.poolagent.pol=\"olap\""},
		{"the query annotation is ours to write", map[string]string{AnnotationQuery: "a/b"}, Request{}, "unknown annotation io.poolagent.query"},
		{"an empty pool", map[string]string{AnnotationPool: ""}, Request{}, "the pool name is empty"},
		{"a path for a pool", map[string]string{AnnotationPool: "../x"}, Request{}, "a pool name has no '/'"},
		{"a long pool", map[string]string{AnnotationPool: strings.Repeat("p", 256)}, Request{}, "256 bytes long: at most 255"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RequestOf(&specs.Spec{Annotations: tc.annotations}, "c1")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParseConfigRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"ociVersion": "1.0.2", "process": `, "not an OCI runtime config (config.json): line 1, column 36: the file ends before its JSON does"},
		{"{\n  \"ociVersion\": 12}", "line 2, column"},
		{`{"process": {}}`, "has no ociVersion"},
		{`{"ociVersion": "1.0.2"} {}`, "more after its JSON object"},
		{`[]`, "not an OCI runtime config"},
	} {
		_, err := ParseConfig("b/config.json", []byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "b/config.json") {
			t.Errorf("ParseConfig(%q) = %v, want an error naming the file with %q", tc.in, err, tc.want)
		}
	}
}

func TestRewrite(t *testing.T) {
	b, err := os.ReadFile("testdata/podman.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseConfig("podman.json", b)
	if err != nil {
		t.Fatal(err)
	}
	Rewrite(s, Placed{Cgroup: "/system.slice/s.scope/pools/ctr/q1", Pool: "ctr", Query: "q1", CPULimit: 0.5,
		Limits: Limits{QuotaUsec: 50000, PeriodUsec: 100000, BurstUsec: 20000, MemoryBytes: 104857600}})
	if got, want := s.Linux.CgroupsPath, "/system.slice/s.scope/pools/ctr/q1/container"; got != want {
		t.Errorf("cgroupsPath = %q, want %q", got, want)
	}
	r := s.Linux.Resources
	if *r.CPU.Quota != 50000 || *r.CPU.Period != 100000 || r.Unified["cpu.max.burst"] != "20000" {
		t.Errorf("cpu = %d/%d burst %q, want the query's 50000/100000 burst 20000", *r.CPU.Quota, *r.CPU.Period, r.Unified["cpu.max.burst"])
	}
	if *r.Memory.Limit != 104857600 || *r.Memory.Swap != 2147483648 || r.Pids.Limit == nil || *r.Pids.Limit != 2048 {
		t.Errorf("memory %d swap %d, pids %v: want the query's limit, the container's swap and pids", *r.Memory.Limit, *r.Memory.Swap, r.Pids.Limit)
	}
	if !slices.Contains(s.Process.Env, "POOLAGENT_CPU_LIMIT=0.5") || slices.Contains(s.Process.Env, "POOLAGENT_CPU_LIMIT=9") {
		t.Errorf("env = %q, want POOLAGENT_CPU_LIMIT=0.5 alone", s.Process.Env)
	}
	if s.Annotations[AnnotationQuery] != "ctr/q1" || s.Annotations["io.container.manager"] != "libpod" {
		t.Errorf("annotations = %v", s.Annotations)
	}
}

func TestRewriteKeepsLowerLimits(t *testing.T) {
	q, p, m := int64(10000), uint64(100000), int64(1<<20)
	s := &specs.Spec{Version: "1.0.2", Linux: &specs.Linux{Resources: &specs.LinuxResources{
		CPU: &specs.LinuxCPU{Quota: &q, Period: &p}, Memory: &specs.LinuxMemory{Limit: &m}}}}
	Rewrite(s, Placed{Cgroup: "/p/q", Limits: Limits{QuotaUsec: 50000, PeriodUsec: 100000, MemoryBytes: 1 << 30}})
	r := s.Linux.Resources
	if *r.CPU.Quota != 10000 || *r.Memory.Limit != 1<<20 {
		t.Errorf("cpu quota %d, memory %d: want the container's own, lower limits kept", *r.CPU.Quota, *r.Memory.Limit)
	}
	s = &specs.Spec{Version: "1.0.2"}
	Rewrite(s, Placed{Cgroup: "/p/q", Limits: Limits{QuotaUsec: -1, PeriodUsec: 100000, MemoryBytes: -1}})
	if r := s.Linux.Resources; r.CPU != nil || r.Memory != nil {
		t.Errorf("a query without limits gave the container %+v", r)
	}
}

func TestWriteConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(file, []byte(`{"ociVersion":"1.0.2"}`), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := WriteConfig(file, &specs.Spec{Version: "1.0.2", Hostname: "h"}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o640 {
		t.Fatalf("rewritten config: %v %v, want mode 0640", st, err)
	}
	s, err := ReadConfig(file)
	if err != nil || s.Hostname != "h" {
		t.Errorf("read back %+v, %v", s, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(file))
	if len(entries) != 1 {
		t.Errorf("left %d files in the bundle, want config.json alone", len(entries))
	}
}

func TestParseCPUMax(t *testing.T) {
	for _, tc := range []struct {
		in     string
		quota  int64
		period uint64
		ok     bool
	}{{"max 100000", -1, 100000, true}, {"50000 100000", 50000, 100000, true}, {"max", 0, 0, false}, {"x 100000", 0, 0, false}} {
		q, p, err := parseCPUMax(tc.in)
		if (err == nil) != tc.ok || q != tc.quota || p != tc.period {
			t.Errorf("parseCPUMax(%q) = %d, %d, %v", tc.in, q, p, err)
		}
	}
}

// FuzzRewrite: whatever config.json the engine wrote, reading it either
// fails with an error or gives a spec that Rewrite places below the query
// cgroup, whose encoding reads back with the placement kept.
func FuzzRewrite(f *testing.F) {
	b, err := os.ReadFile("testdata/podman.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"ociVersion":"1.0.2"}`))
	f.Add([]byte(`{"ociVersion":"1","linux":{"resources":{"cpu":{"quota":-1,"period":0}}},"process":{"env":null}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := ParseConfig("config.json", in)
		if err != nil {
			return
		}
		if _, err := RequestOf(s, "c"); err != nil {
			return
		}
		Rewrite(s, Placed{Cgroup: "/pools/p/q", Pool: "p", Query: "q", CPULimit: 0.25,
			Limits: Limits{QuotaUsec: 25000, PeriodUsec: 100000, BurstUsec: 1000, MemoryBytes: 1 << 26}})
		dir := t.TempDir()
		file := filepath.Join(dir, "config.json")
		if err := WriteConfig(file, s); err != nil {
			t.Fatal(err)
		}
		back, err := ReadConfig(file)
		if err != nil {
			t.Fatalf("the rewritten config does not read back: %v", err)
		}
		r := back.Linux.Resources
		if back.Linux.CgroupsPath != "/pools/p/q/container" || back.Annotations[AnnotationQuery] != "p/q" {
			t.Errorf("placement lost: %q %v", back.Linux.CgroupsPath, back.Annotations)
		}
		if *r.Memory.Limit <= 0 || *r.Memory.Limit > 1<<26 {
			t.Errorf("memory limit %d is not at most the query's", *r.Memory.Limit)
		}
		if q, p := *r.CPU.Quota, *r.CPU.Period; q <= 0 || p == 0 || float64(q)/float64(p) > 0.25 {
			t.Errorf("cpu %d/%d is not at most the query's", q, p)
		}
	})
}
