package observe

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/prometheus/procfs"
)

// fixtures holds files shaped like the kernel's.
const fixtures = "../testdata/observe"

func TestReadHostCPU(t *testing.T) {
	fs, err := procfs.NewFS(fixtures + "/proc")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadHostCPU(fs)
	if err != nil {
		t.Fatal(err)
	}
	// cpu  10132153 290696 3084719 46828483 16683 0 25195 0 175628 0 (ticks of 10 ms)
	wantBusy := (10132153 + 290696 + 3084719 + 0 + 25195 + 0) / 100.0
	wantTotal := wantBusy + (46828483+16683)/100.0
	if math.Abs(got.BusySeconds-wantBusy) > 1e-6 || math.Abs(got.TotalSeconds-wantTotal) > 1e-6 {
		t.Errorf("got %+v, want busy %v total %v", got, wantBusy, wantTotal)
	}
}

func TestBusyFraction(t *testing.T) {
	tests := []struct {
		name      string
		prev, cur HostCPU
		want      float64
		wantErr   error
	}{
		{name: "half busy", prev: HostCPU{10, 100}, cur: HostCPU{15, 110}, want: 0.5},
		{name: "idle", prev: HostCPU{10, 100}, cur: HostCPU{10, 102}, want: 0},
		{name: "all busy", prev: HostCPU{10, 100}, cur: HostCPU{12, 102}, want: 1},
		{name: "iowait stepped back: clamped", prev: HostCPU{10, 100}, cur: HostCPU{12, 101}, want: 1},
		{name: "no time passed", prev: HostCPU{10, 100}, cur: HostCPU{10, 100}, wantErr: ErrNoElapsed},
		{name: "counters reset", prev: HostCPU{10, 100}, cur: HostCPU{1, 5}, wantErr: ErrNoElapsed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cur.BusyFraction(tt.prev)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLoadSampler(t *testing.T) {
	proc := t.TempDir()
	stat := func(user, idle int) {
		t.Helper()
		text := []byte("cpu  " + strconv.Itoa(user) + " 0 0 " + strconv.Itoa(idle) + " 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n")
		if err := os.WriteFile(filepath.Join(proc, "stat"), text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stat(100, 300)
	s, err := NewLoadSampler(proc)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		user, idle int
		want       float64
		wantErr    error
	}{
		{user: 150, idle: 350, want: 0.5},
		{user: 150, idle: 350, wantErr: ErrNoElapsed},
		{user: 175, idle: 425, want: 0.25}, // measured from the last good sample
		{user: 275, idle: 425, want: 1},
	}
	for i, st := range steps {
		stat(st.user, st.idle)
		got, err := s.Sample()
		if !errors.Is(err, st.wantErr) || got != st.want {
			t.Errorf("step %d: got %v, %v, want %v, %v", i, got, err, st.want, st.wantErr)
		}
	}

	if _, err := NewLoadSampler(filepath.Join(proc, "missing")); err == nil {
		t.Error("missing proc root: no error")
	}
	if err := os.WriteFile(filepath.Join(proc, "stat"), []byte("cpu  x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sample(); err == nil {
		t.Error("corrupt /proc/stat: no error")
	}
}
