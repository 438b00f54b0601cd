package history

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

const validTrace = `{"format": "poolagent-trace", "version": 1, "pool": "olap", "cgroup": "v2", "cpus": 2, "node_cpus": 2,
 "slice_usec": 5000, "tick_usec": 4000, "limit": {"quota_usec": 40000, "period_usec": 100000, "burst_usec": 0},
 "interval_usec": 100000, "samples": [
  {"usage_usec": 40000, "nr_periods": 1, "nr_throttled": 1, "throttled_usec": 60000, "threads": 2, "ran": 2, "runnable": 1, "pressure_some_usec": 60000},
  {"usage_usec": 20000, "nr_periods": 1, "threads": 2, "ran": 1, "runnable": 0, "pressure_some_usec": 0}
]}`

// historyTrace is validTrace as the daemon's history writes it: both
// levels, the query limit and the start time.
var historyTrace = strings.Replace(strings.Replace(validTrace, `"interval_usec": 100000,`,
	`"interval_usec": 100000, "start_unix_usec": 1796200027799371, "query_limit": {"quota_usec": 40000, "period_usec": 100000, "burst_usec": 0},`, 1),
	`"pressure_some_usec": 60000}`, `"pressure_some_usec": 60000, "query_nr_throttled": 1, "query_throttled_usec": 20000}`, 1)

// TestParseHistoryTrace reads and writes back the fields of the daemon's
// history.
func TestParseHistoryTrace(t *testing.T) {
	tr, err := ParseTrace("history.json", strings.NewReader(historyTrace))
	if err != nil {
		t.Fatal(err)
	}
	if tr.QueryLimit == nil || tr.QueryLimit.QuotaUsec != 40000 || tr.StartUnixUsec != 1796200027799371 ||
		tr.Samples[0].QueryNrThrottled != 1 || tr.Samples[0].QueryThrottledUsec != 20000 {
		t.Fatalf("parsed %+v", tr)
	}
	var b bytes.Buffer
	if err := WriteTrace(&b, tr); err != nil {
		t.Fatal(err)
	}
	again, err := ParseTrace("again.json", &b)
	if err != nil || !reflect.DeepEqual(again, tr) {
		t.Fatalf("written and read back: %+v, %v\nwant %+v", again, err, tr)
	}
}

func TestParseTrace(t *testing.T) {
	tr, err := ParseTrace("ok.json", strings.NewReader(validTrace))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Pool != "olap" || len(tr.Samples) != 2 || tr.Samples[0].ThrottledUsec != 60000 || *tr.Samples[1].PressureSomeUsec != 0 {
		t.Fatalf("parsed %+v", tr)
	}
	var b bytes.Buffer
	if err := WriteTrace(&b, tr); err != nil {
		t.Fatal(err)
	}
	again, err := ParseTrace("again.json", &b)
	if err != nil || !reflect.DeepEqual(again, tr) {
		t.Fatalf("written and read back: %+v, %v\nwant %+v", again, err, tr)
	}
}

func TestParseTraceErrors(t *testing.T) {
	swap := func(old, new string) string {
		if !strings.Contains(validTrace, old) {
			t.Fatalf("%q is not in the valid trace", old)
		}
		return strings.Replace(validTrace, old, new, 1)
	}
	for _, c := range []struct{ name, src, want string }{
		{"empty", "  \n", "bad.json: empty (accepted: a JSON trace written by poolagent record)"},
		{"truncated", validTrace[:len(validTrace)/2], "bad.json: line 4, column 4: the trace ends early, it was cut off"},
		{"not json", "samples: []", "bad.json: line 1, column 1: not JSON"},
		{"trailing", validTrace + "{}", "text after the trace's closing brace"},
		{"wrong type", swap(`"cpus": 2`, `"cpus": "two"`), "bad.json: cpus: a JSON string where a int belongs"},
		{"other format", swap(`"poolagent-trace"`, `"perf"`), `bad.json: format: "perf" is not a poolagent trace (accepted: "poolagent-trace")`},
		{"newer version", swap(`"version": 1`, `"version": 2`), "bad.json: version: 2 is not a version this poolagent reads (accepted: 1)"},
		{"pool path", swap(`"olap"`, `"../etc"`), `bad.json: pool: "../etc" is not a pool name`},
		{"period", swap(`"period_usec": 100000`, `"period_usec": 999`), "bad.json: limit.period_usec: 999 (accepted: 1000..1000000"},
		{"burst above quota", swap(`"burst_usec": 0`, `"burst_usec": 50000`), "bad.json: limit.burst_usec: 50000 (accepted: 0..quota_usec"},
		{"usage beyond the cpus", swap(`"usage_usec": 40000`, `"usage_usec": 400001`), "bad.json: samples[0].usage_usec: 400001 is more than 2 CPUs can run in two intervals"},
		{"throttled above periods", swap(`"nr_throttled": 1`, `"nr_throttled": 2`), "bad.json: samples[0].nr_throttled: 2 is more than nr_periods 1"},
		{"ran above threads", swap(`"ran": 2`, `"ran": 3`), "bad.json: samples[0].ran: 3 (accepted: -1 for unknown, or 0..threads)"},
		{"threads", swap(`"threads": 2, "ran": 1`, `"threads": -2, "ran": 1`), "bad.json: samples[1].threads: -2 (accepted: -1 for unknown, or 0..4096)"},
		{"no samples", validTrace[:strings.Index(validTrace, "[")+1] + "]}", "bad.json: samples: none (accepted: at least one interval; record for longer)"},
		{"tick no kernel has", swap(`"tick_usec": 4000`, `"tick_usec": 100`), "bad.json: tick_usec: 100 (accepted: 10000, 4000, 3333 or 1000: 1e6/CONFIG_HZ for HZ 100, 250, 300 or 1000)"},
		{"tiny node", swap(`"node_cpus": 2`, `"node_cpus": 5e-324`), "bad.json: node_cpus: 5e-324 (accepted: a number of vCPUs from 0.01 to 1024)"},
		{"cap above the node", swap(`"quota_usec": 40000`, `"quota_usec": 300000`), "bad.json: limit.quota_usec: 300000 per 100000 µs is 3 vCPUs, more than the node's node_cpus 2"},
		{"huge pool name", swap(`"olap"`, `"`+strings.Repeat("a", 30<<20)+`"`), `bad.json: pool: "` + strings.Repeat("a", 64) + `"… (31457280 bytes) is not a pool name`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseTrace("bad.json", strings.NewReader(c.src))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %.300v, want it to contain %q", err, c.want)
			}
			if len(err.Error()) > 1000 {
				t.Errorf("the error is %d bytes long: it quotes too much of the file", len(err.Error()))
			}
		})
	}
}

func TestParseTraceTooLarge(t *testing.T) {
	big := strings.Repeat(" ", MaxTraceBytes) + validTrace
	_, err := ParseTrace("big.json", strings.NewReader(big))
	if err == nil || !strings.Contains(err.Error(), "big.json: larger than 32 MiB") {
		t.Fatalf("error %v", err)
	}
}

// The fuzz target replays its corpus in testdata/fuzz/ on every go test;
// run it longer with go test ./internal/history -fuzz FuzzParseTrace.
func FuzzParseTrace(f *testing.F) {
	f.Add([]byte(validTrace))
	f.Add([]byte(historyTrace))
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := ParseTrace("fuzz.json", bytes.NewReader(b))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := WriteTrace(&out, tr); err != nil {
			t.Fatal(err)
		}
		again, err := ParseTrace("again.json", &out)
		if err != nil || !reflect.DeepEqual(again, tr) {
			t.Fatalf("%+v written and read back as %+v, %v", tr, again, err)
		}
	})
}
