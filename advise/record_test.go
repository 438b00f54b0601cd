package advise

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/observe"
)

// TestRecorder samples a pool of a cgroup v2 tree and a /proc made of
// files: usage, throttling and PSI are the counters' growth, and a thread
// that ran and ended between two samples counts in Ran, seen by a poll.
func TestRecorder(t *testing.T) {
	root, proc := t.TempDir(), t.TempDir()
	write := func(dir, name, text string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pool, query := filepath.Join(root, "olap"), filepath.Join(root, "olap", "q-1")
	write(root, "cgroup.controllers", "cpu\n")
	cpuStat := func(usage, periods, throttled, throttledUsec, psi int) {
		write(pool, "cpu.stat", "usage_usec "+strconv.Itoa(usage)+"\nuser_usec 0\nsystem_usec 0\nnr_periods "+strconv.Itoa(periods)+
			"\nnr_throttled "+strconv.Itoa(throttled)+"\nthrottled_usec "+strconv.Itoa(throttledUsec)+"\nnr_bursts 0\nburst_usec 0\n")
		write(pool, "cpu.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total="+strconv.Itoa(psi)+"\n")
	}
	thread := func(tid, runUsec int, state string) {
		write(filepath.Join(proc, strconv.Itoa(tid)), "schedstat", strconv.Itoa(runUsec*1000)+" 0 1\n")
		write(filepath.Join(proc, strconv.Itoa(tid)), "stat", strconv.Itoa(tid)+" (burn) "+state+" 1 1\n")
	}
	cpuStat(1000, 1, 0, 0, 0)
	write(pool, "cgroup.threads", "")
	write(query, "cgroup.threads", "11\n12\n")
	thread(11, 500, "S")
	thread(12, 500, "S")

	tree := observe.Tree{Version: observe.V2, Root: root}
	r, err := NewRecorder(tree, "olap", proc, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	// Threads 11 and 12 run 40 ms each; 12 ends before the sample, and
	// 13 starts and runs 0.5 ms (below 1% of the interval).
	thread(11, 40_500, "R")
	thread(12, 40_500, "R")
	if err := r.Poll(); err != nil {
		t.Fatal(err)
	}
	write(query, "cgroup.threads", "11\n13\n")
	os.RemoveAll(filepath.Join(proc, "12"))
	thread(13, 500, "R")
	cpuStat(81_000, 2, 1, 120_000, 60_000)
	s, err := r.Sample()
	if err != nil {
		t.Fatal(err)
	}
	want := Sample{UsageUsec: 80_000, NrPeriods: 1, NrThrottled: 1, ThrottledUsec: 120_000, Threads: 2, Ran: 2, Runnable: 2}
	if s.PressureSomeUsec == nil || *s.PressureSomeUsec != 60_000 {
		t.Errorf("pressure %v, want 60000", s.PressureSomeUsec)
	}
	s.PressureSomeUsec = nil
	if s != want {
		t.Errorf("sample %+v\nwant   %+v", s, want)
	}
	// The next interval starts afresh: nothing ran.
	if s, err = r.Sample(); err != nil || s.Ran != 0 || s.UsageUsec != 0 {
		t.Errorf("idle sample %+v, %v", s, err)
	}
	os.RemoveAll(pool)
	if _, err := r.Sample(); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "olap") {
		t.Errorf("sample of a removed pool: %v", err)
	}
}
