package observe

import (
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseConfigHZ(t *testing.T) {
	tests := []struct {
		name, src string
		hz        int
		ok        bool
	}{
		{"debian", "# CONFIG_HZ_100 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n", 250, true},
		{"hz 1000", "CONFIG_HZ_1000=y\nCONFIG_HZ=1000", 1000, true},
		{"missing", "CONFIG_HZ_250=y\n", 0, false},
		{"not a number", "CONFIG_HZ=fast\n", 0, false},
		{"out of range", "CONFIG_HZ=10\n", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hz, err := ParseConfigHZ(strings.NewReader(tt.src))
			if (err == nil) != tt.ok || hz != tt.hz {
				t.Errorf("ParseConfigHZ = %d, %v; want %d, ok %v", hz, err, tt.hz, tt.ok)
			}
		})
	}
}

func TestParseSliceUsec(t *testing.T) {
	tests := []struct {
		name, src string
		v         int64
		ok        bool
	}{
		{"default", "5000\n", 5000, true},
		{"one", "1", 1, true},
		{"zero", "0\n", 0, false},
		{"text", "five\n", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := ParseSliceUsec([]byte(tt.src))
			if (err == nil) != tt.ok || v != tt.v {
				t.Errorf("ParseSliceUsec = %d, %v; want %d, ok %v", v, err, tt.v, tt.ok)
			}
		})
	}
}

func TestReadKernelSettings(t *testing.T) {
	proc, boot := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(proc, "sys/kernel"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "sys/kernel/sched_cfs_bandwidth_slice_us"), []byte("3000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(boot, "config-6.1.0"), []byte("CONFIG_HZ=300\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	k := ReadKernelSettings(proc, boot, "6.1.0")
	if k.SliceUsec != 3000 || k.HZ != 300 {
		t.Errorf("from /boot: %+v, want slice 3000, HZ 300", k)
	}

	f, err := os.Create(filepath.Join(proc, "config.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	zw.Write([]byte("CONFIG_HZ=1000\n"))
	zw.Close()
	f.Close()
	if k := ReadKernelSettings(proc, boot, "6.1.0"); k.HZ != 1000 {
		t.Errorf("/proc/config.gz first: HZ %d, want 1000", k.HZ)
	}

	k = ReadKernelSettings(t.TempDir(), t.TempDir(), "x")
	if k.SliceUsec != 5000 || k.HZ != DefaultHZ || !strings.Contains(k.Source, "assumed") {
		t.Errorf("nothing readable: %+v, want the defaults and a source saying so", k)
	}
	if tick := k.TickUsec(); tick != 4000 {
		t.Errorf("TickUsec() = %d, want 4000", tick)
	}
	if err := os.WriteFile(filepath.Join(proc, "sys/kernel/sched_cfs_bandwidth_slice_us"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if k := ReadKernelSettings(proc, boot, "6.1.0"); k.SliceUsec != 5000 || !strings.Contains(k.Source, `slice 5000us (kernel default: sched_cfs_bandwidth_slice_us "0"`) {
		t.Errorf("unreadable slice: %+v, want slice 5000 and a source saying why", k)
	}
}

func FuzzParseConfigHZ(f *testing.F) {
	f.Add([]byte("CONFIG_HZ_250=y\nCONFIG_HZ=250\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		hz, err := ParseConfigHZ(strings.NewReader(string(b)))
		if err == nil && (hz < 100 || hz > 10000) {
			t.Errorf("accepted HZ %d outside 100..10000", hz)
		}
	})
}

func FuzzParseSliceUsec(f *testing.F) {
	f.Add([]byte("5000\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseSliceUsec(b)
		if err == nil && v < 1 {
			t.Errorf("accepted slice %d below 1", v)
		}
	})
}

// TestHostInfo reads the load and the CPU model from a fixture /proc.
func TestHostInfo(t *testing.T) {
	proc := t.TempDir()
	for name, data := range map[string]string{
		"loadavg": "0.52 0.40 0.30 1/100 1234\n",
		"cpuinfo": "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: QEMU TCG CPU version 2.5+\n\n",
	} {
		if err := os.WriteFile(filepath.Join(proc, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := Load1(proc); got != 0.52 {
		t.Errorf("Load1 = %v, want 0.52", got)
	}
	if !Emulated(proc) {
		t.Error("Emulated = false for QEMU TCG CPU")
	}
	empty := t.TempDir()
	if got := Load1(empty); got != -1 {
		t.Errorf("Load1 without loadavg = %v, want -1", got)
	}
	if Emulated(empty) {
		t.Error("Emulated without cpuinfo = true")
	}
}

// TestWakeCreditUsec holds the credit to CFS's place_entity: half of
// sched_latency (6 ms scaled by 1+log2 of up to 8 CPUs) before 6.6,
// nothing on EEVDF kernels or a release it cannot read.
func TestWakeCreditUsec(t *testing.T) {
	for _, c := range []struct {
		release string
		cpus    int
		want    int64
	}{
		{"6.1.0-57-cloud-amd64", 2, 6000},
		{"6.1.0", 1, 3000},
		{"5.15.0-91-generic", 4, 9000},
		{"6.5.13", 64, 12000},
		{"4.19.0", 0, 3000},
		{"6.6.0", 2, 0},
		{"6.18.44-fc-v1272", 2, 0},
		{"7.0", 2, 0},
		{"", 2, 0},
		{"six.one", 2, 0},
	} {
		if got := WakeCreditUsec(c.release, c.cpus); got != c.want {
			t.Errorf("WakeCreditUsec(%q, %d) = %d, want %d", c.release, c.cpus, got, c.want)
		}
	}
}
