package metrics

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/poolagent/poolagent/observe"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/metrics")

const golden = "../../testdata/metrics/exposition.txt"

func u64(v uint64) *uint64 { return &v }

// fixture is a daemon with three pools: default (unlimited, idle), olap
// (limits, queue, throttled) and adhoc (just created: no cgroup read yet).
func fixture() Snapshot {
	var olapWaits WaitRecorder
	for _, w := range []time.Duration{0, 3 * time.Millisecond, 40 * time.Millisecond, 2 * time.Second, 400 * time.Second} {
		olapWaits.Observe(w)
	}
	return Snapshot{
		Host: Host{CPUs: 10, LoadRatio: 0.4125, ReservedRatio: 0.2, RepairWrites: 3,
			ModelCaveats: observe.ModelCaveats{{Reason: "sched_ext", Text: `sched_ext is enabled: the BPF scheduler "rusty" schedules every task and enforces cpu.max its own way`}, {Reason: "skew_tick"}}},
		Pools: []Pool{
			{
				Name: "olap", Running: 10, Queued: 3, ConcurrentQueryLimit: 10, QueueSize: 100,
				Admitted: 57, Rejected: 5, TimedOut: 2, QueueWait: olapWaits.Snapshot(), QueryForksRefused: 1234,
				LimitsPending: map[string]int{"memory.max": 2},
				CPULimitCores: 7, CPUWeight: 100, CPUs: 8,
				CPU: &observe.CPUStat{
					UsageUsec: 93_500_000, UserUsec: 90_000_000, SystemUsec: 3_500_000,
					NrPeriods: 1200, NrThrottled: 310, ThrottledUsec: 41_250_000,
					NrBursts: 4, BurstUsec: 120_000,
				},
				PredictedThrottledUsec: 39_800_000,
				UsersRunning:           3, UsersQueued: 1,
				Users: []User{{Name: "alice", Running: 8, Queued: 3}, {Name: "bob", Running: 1}, {Name: "carol", Running: 1}},
				Pressure: &observe.Pressure{
					Some: observe.PressureLine{Avg10Percent: 12.5, Avg60Percent: 10.25, Avg300Percent: 8, TotalUsec: 57_300_000},
					Full: &observe.PressureLine{Avg10Percent: 3.5, Avg60Percent: 2.75, Avg300Percent: 2, TotalUsec: 15_125_000},
				},
				// One query killed at the pool's 8 GiB, a soft limit at 6 GiB.
				Memory: &observe.Memory{
					CurrentBytes: 5_368_709_120, PeakBytes: u64(8_589_934_592), LimitBytes: 8_589_934_592, HighBytes: 6_442_450_944, MinBytes: 1 << 30, LowBytes: 4 << 30,
					SwapBytes: u64(0), Events: observe.MemoryEvents{High: 120, Max: 37, OOM: 1, OOMKill: 1},
					Pressure: &observe.Pressure{Some: observe.PressureLine{TotalUsec: 2_500_000}, Full: &observe.PressureLine{TotalUsec: 1_000_000}},
				},
				// A fork bomb held at the pool's 512 tasks.
				Pids: &observe.Pids{CurrentTasks: 512, Limit: 512, Events: observe.PidsEvents{Max: 1234}},
			},
			{
				Name: "default", ConcurrentQueryLimit: -1, QueueSize: -1, Admitted: 3,
				CPUWeight: 100,
				CPU:       &observe.CPUStat{UsageUsec: 1_000_000, NrPeriods: 0},
				// A kernel before 5.13: cpu.pressure without a full line.
				Pressure: &observe.Pressure{Some: observe.PressureLine{TotalUsec: 250_000}},
				// cgroup v1: no peak of the kernel's, no swap, no pressure.
				Memory: &observe.Memory{V1: true, CurrentBytes: 1 << 20, LimitBytes: -1, HighBytes: -1, Events: observe.MemoryEvents{Max: 2}},
				// No task limit: no limit series.
				Pids: &observe.Pids{CurrentTasks: 3, Limit: -1},
			},
			{Name: "adhoc", ConcurrentQueryLimit: 0, QueueSize: -1, CPULimitCores: 2.5, CPUWeight: 200},
		},
		// A fleet node: olap's limits are the cluster's, its counts above
		// this node's.
		Cluster: &Cluster{
			Pools:     []ClusterPool{{Name: "olap", Running: 10, Queued: 24}},
			Connected: true, RoundTripSeconds: 0.0042, WatchLagSeconds: 1.5, Sessions: 2,
			WatchEvents: 1200, WatchBytes: 116000,
		},
	}
}

func TestExpositionGolden(t *testing.T) {
	src := SourceFunc(func() (Snapshot, error) { return fixture(), nil })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, ln, src) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	url := "http://" + ln.Addr().String() + "/metrics"

	all := scrape(t, url)
	for _, family := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes"} {
		if !bytes.Contains(all, []byte("\n# TYPE "+family+" ")) {
			t.Errorf("the exposition has no %s (the client library's Go and process collectors)", family)
		}
	}
	got := ownFamilies(all)
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("exposition differs from %s (rerun with -update and review the diff):\n%s", golden, got)
	}

	// The same with the curl an operator would run (scripts/test.sh
	// installs it).
	t.Run("curl", func(t *testing.T) {
		curl, err := exec.LookPath("curl")
		if err != nil {
			t.Skip("curl is not installed")
		}
		out, err := exec.Command(curl, "-sS", "--fail", url).Output()
		if err != nil {
			t.Fatalf("curl %s: %v", url, err)
		}
		if out = ownFamilies(out); !bytes.Equal(out, want) {
			t.Errorf("curl output differs from %s:\n%s", golden, out)
		}
	})
}

// ownFamilies keeps the metric families of poolagent's own collectors:
// it drops the go_* and process_* families, whose values change from
// scrape to scrape, and writes the Go release in poolagent_build_info as
// GOVERSION, so the golden file does not change with the toolchain.
func ownFamilies(exposition []byte) []byte {
	var out bytes.Buffer
	for _, line := range strings.SplitAfter(string(exposition), "\n") {
		name := strings.TrimPrefix(strings.TrimPrefix(line, "# HELP "), "# TYPE ")
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		out.WriteString(strings.ReplaceAll(line, `goversion="`+runtime.Version()+`"`, `goversion="GOVERSION"`))
	}
	return out.Bytes()
}

// scrape GETs url asking for the text format, as Prometheus' text parser
// and curl do.
func scrape(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want the text format", ct)
	}
	return body
}

// TestCollectorIsConsistent runs the client library's pedantic checks
// (descriptors match metrics, no duplicates, valid names) and lint (naming
// conventions: base units, _total on counters).
func TestCollectorIsConsistent(t *testing.T) {
	c := NewCollector(SourceFunc(func() (Snapshot, error) { return fixture(), nil }))
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("pedantic gather: %v", err)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestScrapeErrorIsHTTP500(t *testing.T) {
	h := Handler(SourceFunc(func() (Snapshot, error) {
		return Snapshot{}, errors.New("read /sys/fs/cgroup/poolagent/olap/cpu.stat: no such device")
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	defer srv.Close()
	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "olap/cpu.stat") {
		t.Fatalf("GET with a failing source: %s %q, want 500 naming the file", resp.Status, body)
	}
}

func TestWaitRecorderBuckets(t *testing.T) {
	tests := []struct {
		name string
		wait time.Duration
		want int // index in QueueWaitBuckets, -1 = above the last
	}{
		{"zero", 0, 0},
		{"on a bound", time.Second, 5},
		{"just above a bound", time.Second + time.Nanosecond, 6},
		{"above the last", time.Hour, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r WaitRecorder
			r.Observe(tc.wait)
			h := r.Snapshot()
			if h.Count != 1 || h.SumSeconds != tc.wait.Seconds() {
				t.Fatalf("count %d sum %v, want 1 and %v", h.Count, h.SumSeconds, tc.wait.Seconds())
			}
			for i, n := range h.Counts {
				if want := uint64(0); i == tc.want {
					if n != 1 {
						t.Errorf("bucket %v has %d, want 1", QueueWaitBuckets[i], n)
					}
				} else if n != want {
					t.Errorf("bucket %v has %d, want 0", QueueWaitBuckets[i], n)
				}
			}
		})
	}
}

// TestModelApplies: on a host where every assumption of the throttling
// model holds, the gauge is 1 with no reason (the golden exposition has
// the other case: 0 and the reasons).
func TestModelApplies(t *testing.T) {
	srv := httptest.NewServer(Handler(SourceFunc(func() (Snapshot, error) { return Snapshot{Host: Host{CPUs: 2}}, nil })))
	defer srv.Close()
	if got := scrape(t, srv.URL+"/metrics"); !bytes.Contains(got, []byte("\npoolagent_throttling_model_applies{reason=\"\"} 1\n")) {
		t.Errorf("no poolagent_throttling_model_applies{reason=\"\"} 1 in\n%s", got)
	}
}
