package history

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/cpulimit"
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

	tree := cgroupfs.NewReader(true, root, "", "", nil)
	defer tree.Close()
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

// TestSpread: a late sample's growth is shared evenly, the remainder to
// the first samples, the totals kept and nr_throttled at most nr_periods
// in every share.
func TestSpread(t *testing.T) {
	some := uint64(7)
	s := Sample{UsageUsec: 250001, NrPeriods: 5, NrThrottled: 4, ThrottledUsec: 10, NrBursts: 1, BurstUsec: 3,
		Threads: 4, Ran: 3, Runnable: 2, PressureSomeUsec: &some}
	for _, n := range []int{0, 1, 2, 3, 6} {
		got := Spread(s, n)
		if want := max(n, 1); len(got) != want {
			t.Fatalf("n=%d: %d samples, want %d", n, len(got), want)
		}
		var sum Sample
		var pressure uint64
		for i, p := range got {
			if p.NrThrottled > p.NrPeriods {
				t.Errorf("n=%d: sample %d: nr_throttled %d > nr_periods %d", n, i, p.NrThrottled, p.NrPeriods)
			}
			if p.Threads != s.Threads || p.Ran != s.Ran || p.Runnable != s.Runnable {
				t.Errorf("n=%d: sample %d: threads %d/%d/%d, want %d/%d/%d", n, i, p.Threads, p.Ran, p.Runnable, s.Threads, s.Ran, s.Runnable)
			}
			if i > 0 && (p.UsageUsec > got[0].UsageUsec || got[0].UsageUsec-p.UsageUsec > 1) {
				t.Errorf("n=%d: sample %d: usage %d, first %d: not an even share", n, i, p.UsageUsec, got[0].UsageUsec)
			}
			sum.UsageUsec += p.UsageUsec
			sum.NrPeriods += p.NrPeriods
			sum.NrThrottled += p.NrThrottled
			sum.ThrottledUsec += p.ThrottledUsec
			sum.NrBursts += p.NrBursts
			sum.BurstUsec += p.BurstUsec
			pressure += *p.PressureSomeUsec
		}
		if sum.UsageUsec != s.UsageUsec || sum.NrPeriods != s.NrPeriods || sum.NrThrottled != s.NrThrottled ||
			sum.ThrottledUsec != s.ThrottledUsec || sum.NrBursts != s.NrBursts || sum.BurstUsec != s.BurstUsec || pressure != some {
			t.Errorf("n=%d: shares add up to %+v (pressure %d), want %+v (pressure %d)", n, sum, pressure, s, some)
		}
	}
	if *s.PressureSomeUsec != some {
		t.Errorf("the sample spread was changed: pressure %d", *s.PressureSomeUsec)
	}
}

// TestRecord runs the sampling loop on a cgroup v2 tree of files: it
// takes the samples asked for on its schedule, and stops at once when
// the pool's limit is no longer the trace's or when the pool is gone.
func TestRecord(t *testing.T) {
	root := t.TempDir()
	pool := filepath.Join(root, "olap")
	if err := os.MkdirAll(pool, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"cpu.stat": "usage_usec 10\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n",
		"cpu.max": "40000 100000\n", "cgroup.threads": ""} {
		if err := os.WriteFile(filepath.Join(pool, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tree := cgroupfs.NewReader(true, root, "", "", nil)
	defer tree.Close()
	trace := func(quota int64) *Trace {
		return &Trace{Format: TraceFormat, Version: TraceVersion, Pool: "olap", Cgroup: "v2", CPUs: 1, NodeCPUs: 1, SliceUsec: 5000, TickUsec: 4000,
			Limit: cpulimit.Limit{QuotaUsec: quota, PeriodUsec: 100_000}, IntervalUsec: 5000}
	}
	tr := trace(40_000)
	rec, err := Record(context.Background(), tree, t.TempDir(), tr, 3)
	if err != nil || len(tr.Samples) != 3 || rec.Why != "recorded 15ms" {
		t.Fatalf("%d samples, %+v, %v; want 3, recorded 15ms", len(tr.Samples), rec, err)
	}
	tr = trace(50_000)
	if rec, err := Record(context.Background(), tree, t.TempDir(), tr, 3); err != nil || len(tr.Samples) != 0 || rec.Why != "the pool's CPU limit changed" {
		t.Errorf("%d samples, %+v, %v; want none, the limit changed", len(tr.Samples), rec, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tr = trace(40_000)
	if rec, err := Record(ctx, tree, t.TempDir(), tr, 3); err != nil || rec.Why != "interrupted" {
		t.Errorf("%+v, %v; want interrupted", rec, err)
	}
}
