package observe

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// fixtures holds trees shaped like the kernel's, with the values of a
// pool capped at 20% of one CPU that a busy loop ran in for 2 s.
const fixtures = "../testdata/observe"

func u64(v uint64) *uint64 { return &v }

func TestDetectVersion(t *testing.T) {
	tests := []struct {
		name    string
		dir     string
		want    Version
		wantErr string
	}{
		{name: "v2", dir: fixtures + "/v2/poolagent", want: V2},
		{name: "v1 cpu hierarchy", dir: fixtures + "/v1/cpu/poolagent/olap", want: V1},
		{name: "v1 cpuacct hierarchy is not a cpu root", dir: fixtures + "/v1/cpuacct/poolagent", wantErr: "neither a cgroup v2 directory"},
		{name: "missing", dir: fixtures + "/nonexistent", wantErr: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DetectVersion(tt.dir)
			checkErr(t, err, tt.wantErr)
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTreeReadAllV2(t *testing.T) {
	tree := Tree{Version: V2, Root: fixtures + "/v2/poolagent"}
	got, err := tree.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	olapPSI := &Pressure{
		Some: PressureLine{Avg10Percent: 3.10, Avg60Percent: 1.02, Avg300Percent: 0.25, TotalUsec: 95210},
		Full: &PressureLine{Avg10Percent: 3.05, Avg60Percent: 1.00, Avg300Percent: 0.24, TotalUsec: 94100},
	}
	idle := &Pressure{Full: &PressureLine{}}
	want := []Sample{
		{Group: ".", CPU: CPUStat{UsageUsec: 432109, UserUsec: 425300, SystemUsec: 6809}, UsageKnown: true,
			Pressure: &Pressure{Some: olapPSI.Some, Full: &PressureLine{TotalUsec: 0}}},
		{Group: "default", CPU: CPUStat{UsageUsec: 12050, UserUsec: 8010, SystemUsec: 4040}, UsageKnown: true, LocalThrottledUsec: u64(0), Pressure: idle},
		{Group: "olap", CPU: CPUStat{UsageUsec: 420059, UserUsec: 417290, SystemUsec: 2769, NrPeriods: 21, NrThrottled: 20, ThrottledUsec: 1603874, NrBursts: 1, BurstUsec: 20000},
			UsageKnown: true, LocalThrottledUsec: u64(1603874), Pressure: olapPSI},
		{Group: "olap/q-1", CPU: CPUStat{UsageUsec: 420059, UserUsec: 417290, SystemUsec: 2769, NrPeriods: 21},
			UsageKnown: true, LocalThrottledUsec: u64(1603874), Pressure: olapPSI},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", dump(got), dump(want))
	}
}

func TestTreeReadAllV1(t *testing.T) {
	tree := Tree{Version: V1, Root: fixtures + "/v1/cpu/poolagent", CPUAcctRoot: fixtures + "/v1/cpuacct/poolagent"}
	got, err := tree.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := []Sample{
		{Group: ".", CPU: CPUStat{UsageUsec: 432109, UserUsec: 420_000, SystemUsec: 10_000}, UsageKnown: true, LocalThrottledUsec: u64(0)},
		{Group: "default", CPU: CPUStat{UsageUsec: 12050, UserUsec: 10_000, SystemUsec: 0}, UsageKnown: true, LocalThrottledUsec: u64(0)},
		{Group: "olap", CPU: CPUStat{UsageUsec: 420059, UserUsec: 410_000, SystemUsec: 10_000, NrPeriods: 21, NrThrottled: 20, ThrottledUsec: 1603874, NrBursts: 1, BurstUsec: 20000},
			UsageKnown: true, LocalThrottledUsec: u64(1603874)},
		// q-1 exists in the cpu hierarchy only: usage unknown, not an error
		{Group: "olap/q-1", CPU: CPUStat{NrPeriods: 21}, LocalThrottledUsec: u64(1603874)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", dump(got), dump(want))
	}

	tree.CPUAcctRoot = ""
	s, err := tree.Read("olap")
	if err != nil {
		t.Fatal(err)
	}
	if s.UsageKnown || s.CPU.UsageUsec != 0 || s.CPU.NrThrottled != 20 {
		t.Errorf("without cpuacct: got %+v, want usage unknown and cpu.stat read", s)
	}
}

func TestTreeErrors(t *testing.T) {
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "cpu.stat"), []byte("nr_periods x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		tree    Tree
		group   string
		wantErr string
	}{
		{name: "group missing", tree: Tree{Version: V2, Root: fixtures + "/v2/poolagent"}, group: "nope", wantErr: "read cpu.stat: open " + fixtures + "/v2/poolagent/nope/cpu.stat: no such file"},
		{name: "bad cpu.stat keeps its path", tree: Tree{Version: V1, Root: bad}, group: ".", wantErr: bad + "/cpu.stat: line 1: nr_periods value \"x\""},
		{name: "unknown version", tree: Tree{Root: fixtures + "/v2/poolagent"}, group: ".", wantErr: "cgroup version 0: want 1 or 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.tree.Read(tt.group)
			checkErr(t, err, tt.wantErr)
		})
	}
}

func TestReadAllSkipsVanishedGroup(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{".", "gone"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "cpu.stat"), []byte("usage_usec 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// "gone" is listed but has no cpu.stat, as when a query's cgroup is
	// removed between listing and reading.
	got, err := Tree{Version: V2, Root: root}.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Group != "." || got[0].CPU.UsageUsec != 1 {
		t.Errorf("got %s, want the root only", dump(got))
	}

	os.Remove(filepath.Join(root, "cpu.stat"))
	if _, err := (Tree{Version: V2, Root: root}).ReadAll(); err == nil {
		t.Error("root without cpu.stat: no error")
	}
}

func dump(s []Sample) string {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}
