package kerneltest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// recorder is a TB that keeps what a test would log and report.
type recorder struct{ logs, errors []string }

func (r *recorder) Helper() {}
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// TestRetry: a wrong result on a machine that gave the CPU fails at once;
// one on a starved machine runs again, and says so; a machine starved in
// every attempt fails as too busy to judge; a right result passes.
func TestRetry(t *testing.T) {
	tests := []struct {
		name     string
		shares   []Share
		results  []string // "" right
		attempts int      // attempts run
		errs     []string // substrings of the one error, none when nil
		logs     int
	}{
		{"right at once", []Share{0.3}, []string{""}, 1, nil, 1},
		{"wrong on a machine that gave the CPU", []Share{0.95}, []string{"5 of 28 periods throttled"}, 1,
			[]string{"5 of 28 periods throttled (attempt 1 of 3, the machine gave 95% of a CPU: a wrong result, not a busy machine)"}, 0},
		{"starved, then right", []Share{0.4, 0.9}, []string{"5 of 28 periods throttled", ""}, 2, nil, 2},
		{"starved, then wrong", []Share{0.4, 0.9}, []string{"missed", "missed"}, 2, []string{"a wrong result"}, 1},
		{"starved every time", []Share{0.4, 0.5, 0.6}, []string{"missed", "missed", "missed"}, 3,
			[]string{"missed; every one of 3 attempts ran on a machine too busy to judge timing (the last gave 60% of a CPU, below 70% of a CPU)"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r recorder
			n := 0
			gauge := func() func() Share { share := tt.shares[n]; return func() Share { return share } }
			retry(&r, 3, gauge, func(k int) string { n = k; return tt.results[k-1] })
			if n != tt.attempts || len(r.logs) != tt.logs || len(r.errors) != min(len(tt.errs), 1) {
				t.Fatalf("%d attempts, logs %q, errors %q; want %d attempts, %d logs, errors like %q", n, r.logs, r.errors, tt.attempts, tt.logs, tt.errs)
			}
			for _, want := range tt.errs {
				if !strings.Contains(r.errors[0], want) {
					t.Errorf("error %q, want it to say %q", r.errors[0], want)
				}
			}
		})
	}
}

// TestGauge: an idle test machine gives the gauge's thread most of a CPU;
// the share is never above 1.
func TestGauge(t *testing.T) {
	g, err := StartGauge("")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * gaugeEvery) // a few rounds
	share := g.Stop()
	if share <= 0 || share > 1 {
		t.Errorf("share %v, want 0 < share <= 1", share)
	}
	t.Logf("this machine gave %s", share)
}

// TestKernelGaugeLeavesItsCgroup: a gauge whose thread joined a test's
// cgroup leaves it empty by the time Stop returns, so the test's cgroup can be
// removed. Many rounds on few threads give the gauge's goroutine the
// process's main thread now and then, which outlives its goroutine and so
// must never join.
func TestKernelGaugeLeavesItsCgroup(t *testing.T) {
	h := Require(t, Need{Modes: []Mode{V1}})
	r := h.NewRoot(t, Need{Modes: []Mode{V1}})
	tasks := filepath.Join(r.Path, "tasks")
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for i := range 50 {
		g, err := StartGauge(tasks)
		if err != nil {
			t.Fatal(err)
		}
		g.Stop()
		// At once: the test's cleanup removes its cgroup right after.
		b, err := os.ReadFile(tasks)
		if err != nil {
			t.Fatal(err)
		}
		left := strings.TrimSpace(string(b))
		if left != "" {
			t.Fatalf("round %d: threads %q of pid %d still in %s after the gauge stopped", i, left, os.Getpid(), r.Path)
		}
	}
}
