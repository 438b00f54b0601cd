package observe

import (
	"fmt"
	"testing"
)

// Literal files as a 6.18 kernel writes them (v2) and as a v1 memory
// hierarchy does.
const (
	memoryEventsV2 = "low 0\nhigh 12\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n"
	memoryStatV2   = "anon 1052672\nfile 4096\nkernel 262144\nkernel_stack 16384\npagetables 45056\nsock 0\nshmem 0\n" +
		"file_mapped 0\nfile_dirty 0\nanon_thp 0\npgfault 611\npgmajfault 0\nworkingset_refault_anon 0\n"
	memoryStatV1 = "cache 8192\nrss 2097152\nrss_huge 0\nshmem 0\nmapped_file 0\nswap 0\npgpgin 700\n" +
		"hierarchical_memory_limit 536870912\ntotal_cache 8192\ntotal_rss 2097152\n"
	oomControlV1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"
)

func TestParseMemoryEvents(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     MemoryEvents
		err      string
	}{
		{"v2", memoryEventsV2, MemoryEvents{High: 12, Max: 3, OOM: 1, OOMKill: 1}, ""},
		{"older kernel, no oom_group_kill", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n", MemoryEvents{}, ""},
		{"unknown key skipped", "sock_throttled 4\nmax 2\n", MemoryEvents{Max: 2}, ""},
		{"bad count", "oom_kill x\n", MemoryEvents{}, `line 1: oom_kill value "x"`},
		{"two values", "oom 1 2\n", MemoryEvents{}, `line 1: "oom 1 2": want "oom <unsigned integer>"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMemoryEvents([]byte(tc.in))
			checkErr(t, err, tc.err)
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseMemoryStat(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     MemoryStat
		err      string
	}{
		{"v2", memoryStatV2, MemoryStat{AnonBytes: 1052672, FileBytes: 4096, KernelBytes: 262144}, ""},
		{"v1", memoryStatV1, MemoryStat{AnonBytes: 2097152, FileBytes: 8192}, ""},
		{"negative", "anon -1\n", MemoryStat{}, `line 1: anon value "-1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMemoryStat([]byte(tc.in))
			checkErr(t, err, tc.err)
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseOOMKills(t *testing.T) {
	for _, tc := range []struct {
		in    string
		kills uint64
		ok    bool
		err   string
	}{
		{oomControlV1, 2, true, ""},
		{"oom_kill_disable 0\nunder_oom 0\n", 0, false, ""}, // before Linux 4.13
		{"oom_kill many\n", 0, false, `line 1: oom_kill value "many"`},
	} {
		kills, ok, err := ParseOOMKills([]byte(tc.in))
		checkErr(t, err, tc.err)
		if kills != tc.kills || ok != tc.ok {
			t.Errorf("%q: %d, %v; want %d, %v", tc.in, kills, ok, tc.kills, tc.ok)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		err  string
	}{
		{"1060864\n", 1060864, ""},
		{"0\n", 0, ""},
		{"max\n", 0, `"max": want one unsigned integer`},
		{"", 0, `"": want one unsigned integer`},
	} {
		got, err := ParseBytes([]byte(tc.in))
		checkErr(t, err, tc.err)
		if got != tc.want {
			t.Errorf("%q: %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestMemorySub: events and pressure totals are deltas, gauges are the
// newer reading's, and a counter that went back reads 0.
func TestMemorySub(t *testing.T) {
	peak := uint64(900)
	prev := Memory{CurrentBytes: 100, Events: MemoryEvents{High: 5, OOMKill: 1}, Pressure: &Pressure{Some: PressureLine{TotalUsec: 10}}}
	cur := Memory{CurrentBytes: 700, PeakBytes: &peak, LimitBytes: 1000, HighBytes: -1, Events: MemoryEvents{High: 9, OOMKill: 0},
		Pressure: &Pressure{Some: PressureLine{Avg10Percent: 2, TotalUsec: 25}}}
	d := cur.Sub(prev)
	if d.CurrentBytes != 700 || *d.PeakBytes != 900 || d.LimitBytes != 1000 || d.Events.High != 4 || d.Events.OOMKill != 0 ||
		d.Pressure.Some.TotalUsec != 15 || d.Pressure.Some.Avg10Percent != 2 {
		t.Errorf("delta %+v (pressure %+v)", d, d.Pressure)
	}
}

func FuzzParseMemoryEvents(f *testing.F) {
	f.Add([]byte(memoryEventsV2))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseMemoryEvents(b)
		if err != nil {
			return
		}
		text := fmt.Sprintf("low %d\nhigh %d\nmax %d\noom %d\noom_kill %d\noom_group_kill %d\n", e.Low, e.High, e.Max, e.OOM, e.OOMKill, e.OOMGroupKill)
		again, err := ParseMemoryEvents([]byte(text))
		if err != nil || again != e {
			t.Fatalf("%+v printed as\n%s\nparsed back as %+v, %v", e, text, again, err)
		}
	})
}

func FuzzParseMemoryStat(f *testing.F) {
	f.Add([]byte(memoryStatV2))
	f.Add([]byte(memoryStatV1))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ParseMemoryStat(b)
		if err != nil {
			return
		}
		text := fmt.Sprintf("anon %d\nfile %d\nkernel %d\n", st.AnonBytes, st.FileBytes, st.KernelBytes)
		again, err := ParseMemoryStat([]byte(text))
		if err != nil || again != st {
			t.Fatalf("%+v printed as\n%s\nparsed back as %+v, %v", st, text, again, err)
		}
	})
}

func FuzzParseOOMKills(f *testing.F) {
	f.Add([]byte(oomControlV1))
	f.Fuzz(func(t *testing.T, b []byte) {
		kills, ok, err := ParseOOMKills(b)
		if err != nil {
			return
		}
		if !ok && kills != 0 {
			t.Fatalf("no oom_kill line but %d kills", kills)
		}
		again, ok2, err := ParseOOMKills([]byte(fmt.Sprintf("under_oom 0\noom_kill %d\n", kills)))
		if err != nil || !ok2 || again != kills {
			t.Fatalf("%d parsed back as %d, %v, %v", kills, again, ok2, err)
		}
	})
}

func FuzzParseBytes(f *testing.F) {
	f.Add([]byte("1060864\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseBytes(b)
		if err != nil {
			return
		}
		again, err := ParseBytes([]byte(fmt.Sprintf("%d\n", v)))
		if err != nil || again != v {
			t.Fatalf("%d parsed back as %d, %v", v, again, err)
		}
	})
}

// TestOOMLimit: which limit an OOM kill in a query enforced, on v2 from
// the "oom" events of the query and its pool, on v1 from failcnt; a kill
// with neither (the host's OOM killer, a signal) is no limit's.
func TestOOMLimit(t *testing.T) {
	v2 := func(oom, kills uint64) *Memory {
		return &Memory{LimitBytes: 1 << 20, Events: MemoryEvents{OOM: oom, OOMKill: kills}}
	}
	v1 := func(limit int64, failcnt, kills uint64) *Memory {
		return &Memory{V1: true, LimitBytes: limit, Events: MemoryEvents{Max: failcnt, OOMKill: kills}}
	}
	for _, tc := range []struct {
		name             string
		q, before, after *Memory
		want             string
	}{
		{"no memory controller", nil, nil, nil, ""},
		{"no kill", v2(1, 0), v2(0, 0), v2(1, 0), ""},
		{"query's limit", v2(1, 1), v2(0, 0), v2(1, 1), "query"},
		{"pool's limit", v2(0, 1), v2(3, 0), v2(4, 1), "pool"},
		{"pool's limit long before: the host's", v2(0, 1), v2(3, 0), v2(3, 1), ""},
		{"host OOM, no limit reached", v2(0, 1), v2(0, 0), v2(0, 1), ""},
		{"pool unread at the start", v2(0, 1), nil, v2(4, 1), ""},
		{"v1 query's limit", v1(1<<20, 7, 1), v1(-1, 0, 0), v1(-1, 0, 1), "query"},
		{"v1 pool's limit", v1(-1, 0, 1), v1(1<<30, 2, 0), v1(1<<30, 9, 1), "pool"},
		{"v1 unlimited query", v1(-1, 7, 1), v1(-1, 0, 0), v1(-1, 0, 1), ""},
	} {
		if got := OOMLimit(tc.q, tc.before, tc.after); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
