package cgroupfs

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/observe"
)

// readerFixtures holds trees shaped like the kernel's, with the values of
// a pool capped at 20% of one CPU that a busy loop ran in for 2 s.
const readerFixtures = "../testdata/observe"

func u64(v uint64) *uint64 { return &v }

func TestReaderAt(t *testing.T) {
	tests := []struct {
		name    string
		dir     string
		want    string
		wantErr string
	}{
		{name: "v2", dir: readerFixtures + "/v2/poolagent", want: "v2"},
		{name: "v1 cpu hierarchy", dir: readerFixtures + "/v1/cpu/poolagent/olap", want: "v1"},
		{name: "v1 cpuacct hierarchy is not a cpu root", dir: readerFixtures + "/v1/cpuacct/poolagent", wantErr: "neither a cgroup v2 directory"},
		{name: "missing", dir: readerFixtures + "/nonexistent", wantErr: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ReaderAt(tt.dir, "", "")
			checkErr(t, err, tt.wantErr)
			if err == nil && r.Version() != tt.want {
				t.Errorf("got %v, want %v", r.Version(), tt.want)
			}
		})
	}
}

// checkErr fails unless err contains want ("": no error).
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}

func TestReaderReadAllV2(t *testing.T) {
	r := NewReader(true, readerFixtures+"/v2/poolagent", "", "", nil)
	defer r.Close()
	got, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	olapPSI := &observe.Pressure{
		Some: observe.PressureLine{Avg10Percent: 3.10, Avg60Percent: 1.02, Avg300Percent: 0.25, TotalUsec: 95210},
		Full: &observe.PressureLine{Avg10Percent: 3.05, Avg60Percent: 1.00, Avg300Percent: 0.24, TotalUsec: 94100},
	}
	idle := &observe.Pressure{Full: &observe.PressureLine{}}
	memPSI := &observe.Pressure{
		Some: observe.PressureLine{Avg10Percent: 0.50, Avg60Percent: 0.20, Avg300Percent: 0.05, TotalUsec: 31000},
		Full: &observe.PressureLine{Avg10Percent: 0.40, Avg60Percent: 0.10, Avg300Percent: 0.02, TotalUsec: 25000},
	}
	events := observe.MemoryEvents{Max: 41, OOM: 1, OOMKill: 1}
	olapMem := &observe.Memory{CurrentBytes: 272629760, PeakBytes: u64(536870912), LimitBytes: 1 << 30, HighBytes: -1, SwapBytes: u64(0),
		Events: events, Pressure: memPSI, Stat: observe.MemoryStat{AnonBytes: 268435456, FileBytes: 4096, KernelBytes: 4190208}}
	queryMem := &observe.Memory{CurrentBytes: 268435456, PeakBytes: u64(536866816), LimitBytes: 512 << 20, HighBytes: -1, SwapBytes: u64(0),
		Events: events, Pressure: memPSI, Stat: observe.MemoryStat{AnonBytes: 268435456}}
	want := []observe.Sample{
		{Group: ".", CPU: observe.CPUStat{UsageUsec: 432109, UserUsec: 425300, SystemUsec: 6809}, UsageKnown: true,
			Pressure: &observe.Pressure{Some: olapPSI.Some, Full: &observe.PressureLine{TotalUsec: 0}}},
		{Group: "default", CPU: observe.CPUStat{UsageUsec: 12050, UserUsec: 8010, SystemUsec: 4040}, UsageKnown: true, LocalThrottledUsec: u64(0), Pressure: idle},
		{Group: "olap", CPU: observe.CPUStat{UsageUsec: 420059, UserUsec: 417290, SystemUsec: 2769, NrPeriods: 21, NrThrottled: 20, ThrottledUsec: 1603874, NrBursts: 1, BurstUsec: 20000},
			UsageKnown: true, LocalThrottledUsec: u64(1603874), Pressure: olapPSI, Memory: olapMem},
		{Group: "olap/q-1", CPU: observe.CPUStat{UsageUsec: 420059, UserUsec: 417290, SystemUsec: 2769, NrPeriods: 21},
			UsageKnown: true, LocalThrottledUsec: u64(1603874), Pressure: olapPSI, Memory: queryMem},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", dump(got), dump(want))
	}
}

func TestReaderReadAllV1(t *testing.T) {
	r := NewReader(false, readerFixtures+"/v1/cpu/poolagent", readerFixtures+"/v1/cpuacct/poolagent", readerFixtures+"/v1/memory/poolagent", nil)
	defer r.Close()
	got, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := []observe.Sample{
		{Group: ".", CPU: observe.CPUStat{UsageUsec: 432109, UserUsec: 420_000, SystemUsec: 10_000}, UsageKnown: true, LocalThrottledUsec: u64(0)},
		{Group: "default", CPU: observe.CPUStat{UsageUsec: 12050, UserUsec: 10_000, SystemUsec: 0}, UsageKnown: true, LocalThrottledUsec: u64(0)},
		{Group: "olap", CPU: observe.CPUStat{UsageUsec: 420059, UserUsec: 410_000, SystemUsec: 10_000, NrPeriods: 21, NrThrottled: 20, ThrottledUsec: 1603874, NrBursts: 1, BurstUsec: 20000},
			UsageKnown: true, LocalThrottledUsec: u64(1603874), Memory: &observe.Memory{V1: true, CurrentBytes: 272629760, PeakBytes: u64(1 << 30),
				LimitBytes: 1 << 30, HighBytes: -1, Events: observe.MemoryEvents{Max: 12, OOMKill: 1}, Stat: observe.MemoryStat{AnonBytes: 268435456, FileBytes: 4096}}},
		// q-1 exists in the cpu hierarchy only: usage unknown, not an error
		{Group: "olap/q-1", CPU: observe.CPUStat{NrPeriods: 21}, LocalThrottledUsec: u64(1603874)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", dump(got), dump(want))
	}

	noAcct := NewReader(false, readerFixtures+"/v1/cpu/poolagent", "", "", nil)
	defer noAcct.Close()
	s, err := noAcct.Read("olap")
	if err != nil {
		t.Fatal(err)
	}
	if s.UsageKnown || s.CPU.UsageUsec != 0 || s.CPU.NrThrottled != 20 {
		t.Errorf("without cpuacct: got %+v, want usage unknown and cpu.stat read", s)
	}
}

// countingFS is an FS that lists the files read through it.
type countingFS struct {
	FS
	read *[]string
}

func (c countingFS) ReadFile(name string) ([]byte, error) {
	*c.read = append(*c.read, name)
	return c.FS.ReadFile(name)
}

// TestReaderReadCPU: ReadCPU is Read's CPU accounting alone, read from
// cpu.stat (and on v1 cpuacct's usage) without the other files, and Usage
// is its usage from one file.
func TestReaderReadCPU(t *testing.T) {
	tests := []struct {
		name string
		dirs [3]string // cpu, cpuacct, memory
		v2   bool
		want []string // files ReadCPU reads of olap
		// wantPSI are the files CPUPressure reads of olap, wantUsage
		// those Usage reads.
		wantPSI, wantUsage []string
	}{
		{name: "v2", v2: true, dirs: [3]string{"/v2/poolagent"}, want: []string{"olap/cpu.stat"}, wantPSI: []string{"olap/cpu.pressure"},
			wantUsage: []string{"olap/cpu.stat"}},
		{name: "v1", dirs: [3]string{"/v1/cpu/poolagent", "/v1/cpuacct/poolagent", "/v1/memory/poolagent"},
			want: []string{"olap/cpu.stat", "olap/cpuacct.usage"}, wantUsage: []string{"olap/cpuacct.usage"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var read []string
			open := func(dir string) (FS, error) {
				d, err := OpenDir(dir)
				return countingFS{FS: d, read: &read}, err
			}
			r := NewReader(tt.v2, readerFixtures+tt.dirs[0], readerFixtures+tt.dirs[1], readerFixtures+tt.dirs[2], open)
			defer r.Close()
			groups, err := r.Groups()
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range groups {
				full, err := r.Read(g)
				if err != nil {
					t.Fatal(err)
				}
				got, err := r.ReadCPU(g)
				if err != nil {
					t.Fatal(err)
				}
				want := observe.Sample{Group: g, CPU: full.CPU, UsageKnown: full.UsageKnown}
				if !tt.v2 {
					want.CPU.UserUsec, want.CPU.SystemUsec = 0, 0 // cpuacct.stat is not read
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("ReadCPU(%s) = %s, want %s", g, dump([]observe.Sample{got}), dump([]observe.Sample{want}))
				}
				if usage, known, err := r.Usage(g); err != nil || known != full.UsageKnown || usage != full.CPU.UsageUsec {
					t.Errorf("Usage(%s) = %d, %v, %v; want Read's %d, %v", g, usage, known, err, full.CPU.UsageUsec, full.UsageKnown)
				}
				if psi, err := r.CPUPressure(g); err != nil || !reflect.DeepEqual(psi, full.Pressure) {
					t.Errorf("CPUPressure(%s) = %+v, %v; want Read's %+v", g, psi, err, full.Pressure)
				}
			}
			read = nil
			if _, err := r.ReadCPU("olap"); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(read, tt.want) {
				t.Errorf("ReadCPU(olap) read %q, want %q", read, tt.want)
			}
			read = nil
			if _, err := r.CPUPressure("olap"); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(read, tt.wantPSI) {
				t.Errorf("CPUPressure(olap) read %q, want %q", read, tt.wantPSI)
			}
			read = nil
			if _, _, err := r.Usage("olap"); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(read, tt.wantUsage) {
				t.Errorf("Usage(olap) read %q, want %q", read, tt.wantUsage)
			}
		})
	}
}

func TestReaderErrors(t *testing.T) {
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "cpu.stat"), []byte("nr_periods x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		r       *Reader
		group   string
		wantErr string
	}{
		{name: "group missing", r: NewReader(true, readerFixtures+"/v2/poolagent", "", "", nil), group: "nope",
			wantErr: "read " + readerFixtures + "/v2/poolagent/nope/cpu.stat: no such file"},
		{name: "bad cpu.stat keeps its path", r: NewReader(false, bad, "", "", nil), group: ".", wantErr: bad + "/cpu.stat: line 1: nr_periods value \"x\""},
		{name: "beneath the root only", r: NewReader(true, readerFixtures+"/v2/poolagent", "", "", nil), group: "../v2/poolagent/olap",
			wantErr: "cross-device link"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer tt.r.Close()
			_, err := tt.r.Read(tt.group)
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
	r := NewReader(true, root, "", "", nil)
	defer r.Close()
	got, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Group != "." || got[0].CPU.UsageUsec != 1 {
		t.Errorf("got %s, want the root only", dump(got))
	}

	os.Remove(filepath.Join(root, "cpu.stat"))
	if _, err := r.ReadAll(); err == nil {
		t.Error("root without cpu.stat: no error")
	}
}

func TestReaderThreads(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, rel), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cgroup.threads", "")
	write("q1/cgroup.threads", "10\n11\n")
	write("q2/cgroup.threads", "20\n")
	r := NewReader(true, root, "", "", nil)
	defer r.Close()
	tids, truncated, err := r.Threads(".", 10)
	if err != nil || truncated || len(tids) != 3 {
		t.Fatalf("%v %v %v", tids, truncated, err)
	}
	if tids, truncated, err = r.Threads(".", 2); err != nil || !truncated || len(tids) != 2 {
		t.Fatalf("limited: %v %v %v", tids, truncated, err)
	}
	write("cgroup.threads", "1\n")
	write("q1/sub/cgroup.threads", "12\n")
	if tids, _, err = r.ThreadsExcept(".", map[string]bool{"q1": true}, 10); err != nil || !slices.Equal(tids, []int{1, 20}) {
		t.Fatalf("except q1: %v %v, want the root's and q2's, none of q1 or below it", tids, err)
	}
	if tids, _, err = r.ThreadsExcept(".", map[string]bool{"sub": true}, 10); err != nil || !slices.Equal(tids, []int{1, 10, 11, 12, 20}) {
		t.Fatalf("except sub: %v %v, want all: only a cgroup directly below is left out", tids, err)
	}
	write("q3/cgroup.threads", "x\n")
	if _, _, err := r.Threads(".", 10); err == nil || !strings.Contains(err.Error(), `q3/cgroup.threads: "x" is not a PID`) {
		t.Fatalf("a file with a non-number: %v", err)
	}
}

func TestReaderProcs(t *testing.T) {
	root := t.TempDir()
	for rel, text := range map[string]string{
		"p/q1/cgroup.procs":        "10\n",
		"p/q1/cgroup.threads":      "10\n11\n",
		"p/q1/leaf/cgroup.procs":   "12\n",
		"p/q2/cgroup.procs":        "20\n",
		"p/cgroup.procs":           "",
		"p/q1/leaf/cgroup.threads": "12\n",
	} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, rel), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := NewReader(true, root, "", "", nil)
	defer r.Close()
	pids, truncated, err := r.Procs("p/q1", 10)
	if err != nil || truncated || !slices.Equal(pids, []int{10, 12}) {
		t.Fatalf("the query and the cgroup below it: %v %v %v, want [10 12]", pids, truncated, err)
	}
	if pids, truncated, err = r.Procs("p/q1", 1); err != nil || !truncated || !slices.Equal(pids, []int{10}) {
		t.Fatalf("limited to 1: %v %v %v", pids, truncated, err)
	}
	if _, _, err := r.Procs("p/gone", 10); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a query cgroup that is not there: %v, want ErrNotExist", err)
	}
}

func dump(s []observe.Sample) string {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}
