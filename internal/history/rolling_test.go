package history

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/internal/pooltree"
	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// statCgroups is a Reader whose pools and query cgroups have counters
// the test sets.
type statCgroups struct {
	mu      sync.Mutex
	pools   map[string]observe.Sample
	queries map[[2]string]observe.CPUStat
	// usageReads counts QueryUsage calls, queryReads QueryThrottling
	// calls; poolReads counts each pool's reads in PoolCPUStats.
	usageReads, queryReads int
	poolReads              map[string]int
}

func newStatCgroups() *statCgroups {
	return &statCgroups{pools: map[string]observe.Sample{}, queries: map[[2]string]observe.CPUStat{}, poolReads: map[string]int{}}
}

func (c *statCgroups) PoolCPUStats(names []string) (map[string]observe.Sample, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]observe.Sample{}
	for _, n := range names {
		c.poolReads[n]++
		if s, ok := c.pools[n]; ok {
			out[n] = observe.Sample{Group: s.Group, UsageKnown: s.UsageKnown, CPU: s.CPU}
		}
	}
	return out, nil
}

func (c *statCgroups) PoolCPUPressure(names []string) (map[string]*observe.Pressure, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]*observe.Pressure{}
	for _, n := range names {
		if s, ok := c.pools[n]; ok && s.Pressure != nil {
			out[n] = s.Pressure
		}
	}
	return out, nil
}

func (c *statCgroups) QueryUsage(pool, query string) (uint64, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.usageReads++
	st, ok := c.queries[[2]string{pool, query}]
	return st.UsageUsec, ok, nil // unknown where its cgroup is not there
}

func (c *statCgroups) QueryThrottling(pool, query string) (observe.CPUStat, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queryReads++
	return c.queries[[2]string{pool, query}], nil
}

// add adds to the usage and throttled time of each query of pool (by
// name: µs used, µs throttled, 10 ms a period), and their sum to the
// pool's usage.
func (c *statCgroups) add(pool string, queries map[string][2]uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pools[pool]
	p.UsageKnown = true
	for q, u := range queries {
		st := c.queries[[2]string{pool, q}]
		st.UsageUsec += u[0]
		st.ThrottledUsec += u[1]
		st.NrThrottled += u[1] / 10_000
		c.queries[[2]string{pool, q}] = st
		p.CPU.UsageUsec += u[0]
	}
	c.pools[pool] = p
}

// threadCgroups is statCgroups whose pools hold threads: their run time
// is in a /proc tree the test writes.
type threadCgroups struct {
	*statCgroups
	procRoot string
	tids     map[string][]int
	// ownLists counts ThreadsExcept calls, queryLists Threads calls for
	// a query's threads.
	ownLists, queryLists int
}

// Threads lists the threads of group: a pool's own or a query's
// (<pool>/<query>).
func (c *threadCgroups) Threads(group string, limit int) ([]int, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if strings.Contains(group, "/") {
		c.queryLists++
	}
	return c.tids[group], false, nil
}

// ThreadsExcept lists the pool's own threads: it has no cgroups but its
// queries'.
func (c *threadCgroups) ThreadsExcept(pool string, except map[string]bool, limit int) ([]int, bool, error) {
	c.mu.Lock()
	c.ownLists++
	c.mu.Unlock()
	return c.Threads(pool, limit)
}

// setThread writes thread tid's /proc files: its run time and state.
func (c *threadCgroups) setThread(t *testing.T, tid int, runUsec uint64, state byte) {
	dir := filepath.Join(c.procRoot, fmt.Sprint(tid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "schedstat"), fmt.Appendf(nil, "%d 0 1\n", runUsec*1000), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stat"), fmt.Appendf(nil, "%d (sh) %c 1 1\n", tid, state), 0o644); err != nil {
		t.Fatal(err)
	}
}

// testPools is the plan and the running queries a test sets.
type testPools struct {
	mu      sync.Mutex
	desired planner.Desired
	running map[string][]string
	ended   map[string]Ended
	changed chan struct{}
}

func (p *testPools) Desired() planner.Desired {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.desired
}

func (p *testPools) Running() (map[string][]string, map[string]Ended) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.running), maps.Clone(p.ended)
}

// Changed is changed, nil (never) unless a test made it.
func (p *testPools) Changed() <-chan struct{} { return p.changed }

// plan makes the plan of pools (DDL) on a node of 2 CPUs the one in force.
func (p *testPools) plan(t testing.TB, pools string) {
	t.Helper()
	m, _, err := planner.Load("test.sql", []byte(pools))
	if err != nil {
		t.Fatal(err)
	}
	d, err := planner.Plan(m, planner.Node{CPUs: 2, MemoryBytes: 1 << 30, PeriodUsec: 100000}, planner.Activity{})
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.desired = d
}

// run makes query run in pool.
func (p *testPools) run(pool, query string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running[pool] = append(p.running[pool], query)
}

// historyOf is a minute of history on a v2 host of 2 CPUs of the pools
// (DDL) read through r.
func historyOf(t testing.TB, r Reader, pools string) (*Rolling, *testPools) {
	src := &testPools{running: map[string][]string{}}
	src.plan(t, pools)
	cfg := Config{Window: time.Minute, Cgroup: "v2", CPUs: 2, SliceUsec: 5000, TickUsec: 4000}
	return New(cfg, r, src, "/proc", slog.New(slog.NewTextHandler(io.Discard, nil))), src
}

// TestHistory samples a pool on its schedule: a sample is what the pool's
// counters and its queries' grew by, a late read is shared among the
// intervals it covers, idle intervals come back as zeros, a limit change
// starts a new trace, and the window and --since bound what is returned.
func TestHistory(t *testing.T) {
	cg := newStatCgroups()
	hist, src := historyOf(t, cg, "CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 20);")
	set := func(usage, periods, throttled, throttledUsec, queryThrottled, queryThrottledUsec uint64) {
		cg.mu.Lock()
		defer cg.mu.Unlock()
		cg.pools["olap"] = observe.Sample{CPU: observe.CPUStat{UsageUsec: usage, NrPeriods: periods, NrThrottled: throttled, ThrottledUsec: throttledUsec},
			Pressure: &observe.Pressure{}}
		cg.queries[[2]string{"olap", "q1"}] = observe.CPUStat{UsageUsec: usage, NrThrottled: queryThrottled, ThrottledUsec: queryThrottledUsec}
	}
	// A query the daemon admitted, whose cgroup the history reads.
	src.run("olap", "q1")
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	set(0, 0, 0, 0, 0, 0)
	hist.Sample(at(0)) // the baseline
	set(40_000, 1, 1, 60_000, 1, 20_000)
	if next := hist.Sample(at(100)); !next.Equal(at(200)) {
		t.Errorf("next due %v, want %v", next, at(200))
	}
	hist.Sample(at(200)) // idle
	set(100_000, 4, 1, 60_000, 1, 20_000)
	hist.Sample(at(520)) // two intervals late: shared among three
	ts, ok := hist.traces("olap", 0, at(520))
	if !ok || len(ts) != 1 {
		t.Fatalf("traces %v, %v", ts, ok)
	}
	tr := ts[0]
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	if tr.Limit.QuotaUsec != 40_000 || tr.IntervalUsec != 100_000 || tr.StartUnixUsec != t0.UnixMicro() || len(tr.Samples) != 5 {
		t.Fatalf("trace %+v", tr)
	}
	want := []Sample{
		{UsageUsec: 40_000, NrPeriods: 1, NrThrottled: 1, ThrottledUsec: 60_000, QueryNrThrottled: 1, QueryThrottledUsec: 20_000},
		{}, {UsageUsec: 20_000, NrPeriods: 1}, {UsageUsec: 20_000, NrPeriods: 1}, {UsageUsec: 20_000, NrPeriods: 1},
	}
	for i, w := range want {
		w.Threads, w.Ran, w.Runnable = -1, -1, -1
		got := tr.Samples[i]
		if got.PressureSomeUsec == nil {
			t.Errorf("sample %d has no pressure on a v2 host", i)
		}
		got.PressureSomeUsec = nil
		if got != w {
			t.Errorf("sample %d %+v\nwant      %+v", i, got, w)
		}
	}
	if ts, _ := hist.traces("olap", 250*time.Millisecond, at(520)); len(ts) != 1 || len(ts[0].Samples) != 2 {
		t.Errorf("since 250ms: %d samples, want the 2 whole intervals", len(ts[0].Samples))
	}
	if _, ok := hist.traces("nosuch", 0, at(520)); ok {
		t.Error("a pool that does not exist has a history")
	}

	// A limit change starts a new trace; the old one stays in the window
	// until it has passed.
	src.plan(t, "CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 30);")
	hist.Sample(at(600))
	set(130_000, 5, 1, 60_000, 1, 20_000)
	hist.Sample(at(700))
	ts, _ = hist.traces("olap", 0, at(700))
	if len(ts) != 2 || ts[1].Limit.QuotaUsec != 60_000 || len(ts[1].Samples) != 1 || ts[1].Samples[0].UsageUsec != 30_000 {
		t.Fatalf("after the change: %d traces, the last %+v", len(ts), ts[len(ts)-1])
	}
	hist.Sample(at(700).Add(time.Minute))
	if ts, _ = hist.traces("olap", 0, at(700).Add(time.Minute)); len(ts) != 1 {
		t.Errorf("a minute later %d traces, want the one under the current limit", len(ts))
	}

	reply, release := hist.Reply(1000, protocol.Request{Op: protocol.OpHistory, Pool: strings.Repeat("x", 1<<20)})
	release()
	if reply.Code != protocol.CodeUnknownPool || len(reply.Error) > 300 {
		t.Errorf("unknown pool: %s %.300s (%d bytes)", reply.Code, reply.Error, len(reply.Error))
	}
	if reply, release := hist.Reply(1000, protocol.Request{Op: protocol.OpHistory}); reply.Code != protocol.CodeBadRequest {
		t.Errorf("no pool named: %+v", reply)
	} else {
		release()
	}
	// One reply per uid at a time: the uid's next is built once the
	// first is sent; another uid's at once.
	first, release := hist.Reply(1000, protocol.Request{Op: protocol.OpHistory, Pool: "olap"})
	if first.Type != protocol.ReplyDone {
		t.Fatalf("history of olap: %+v", first)
	}
	if r, done := hist.Reply(1001, protocol.Request{Op: protocol.OpHistory, Pool: "olap"}); r.Type != protocol.ReplyDone {
		t.Errorf("another uid's reply while the first is being written: %+v", r)
	} else {
		done()
	}
	got := make(chan protocol.AdminReply, 1)
	go func() {
		r, done := hist.Reply(1000, protocol.Request{Op: protocol.OpHistory, Pool: "olap"})
		done()
		got <- r
	}()
	select {
	case r := <-got:
		t.Fatalf("a second reply of the uid while the first is being written: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	release()
	if r := <-got; r.Type != protocol.ReplyDone {
		t.Errorf("the second reply, once the first was sent: %+v", r)
	}
	if n := len(hist.replying.turns); n != 0 {
		t.Errorf("%d uids' turns kept after their replies were sent", n)
	}
}

// TestHistorySleepingQueries: the queries of a pool whose usage did not
// grow are not read again (they ran no thread); once the pool runs their
// usage is, and the throttling of those whose usage grew: what they were
// throttled since their last read is counted.
func TestHistorySleepingQueries(t *testing.T) {
	cg := newStatCgroups()
	hist, src := historyOf(t, cg, "CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 20);")
	// set sets the pool's usage and, of each query, its usage and
	// throttled time (10 ms a period).
	set := func(usage uint64, queries map[string][2]uint64) {
		cg.mu.Lock()
		defer cg.mu.Unlock()
		cg.pools["olap"] = observe.Sample{CPU: observe.CPUStat{UsageUsec: usage}}
		for q, c := range queries {
			cg.queries[[2]string{"olap", q}] = observe.CPUStat{UsageUsec: c[0], NrThrottled: c[1] / 10_000, ThrottledUsec: c[1]}
		}
	}
	for _, q := range []string{"q1", "q2"} {
		src.run("olap", q)
	}
	reads := func() [2]int { cg.mu.Lock(); defer cg.mu.Unlock(); return [2]int{cg.usageReads, cg.queryReads} }
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	set(50_000, map[string][2]uint64{"q1": {25_000, 10_000}, "q2": {25_000, 10_000}})
	hist.Sample(at(0)) // the baseline reads both
	if n := reads(); n != [2]int{2, 2} {
		t.Fatalf("baseline: %v usage and throttling reads, want both of both queries", n)
	}
	for ms := 100; ms <= 300; ms += 100 {
		hist.Sample(at(ms)) // the pool's usage does not grow
	}
	if n := reads(); n != [2]int{2, 2} {
		t.Errorf("three intervals of a pool that ran nothing: %v usage and throttling reads in all, want the baseline's", n)
	}
	set(90_000, map[string][2]uint64{"q1": {45_000, 30_000}, "q2": {45_000, 30_000}})
	hist.Sample(at(400))
	if n := reads(); n != [2]int{4, 4} {
		t.Errorf("the pool and both queries ran: %v usage and throttling reads in all, want [4 4]", n)
	}
	ts, _ := hist.traces("olap", 0, at(400))
	last := ts[0].Samples[len(ts[0].Samples)-1]
	if last.UsageUsec != 40_000 || last.QueryThrottledUsec != 40_000 || last.QueryNrThrottled != 2 {
		t.Errorf("the interval the pool ran in: %+v, want usage 40000 µs, its queries throttled 2 × 20000 µs, 2 periods", last)
	}
	// Only q1 runs: q2's usage is read, its throttling is not, and
	// what it had stays its baseline.
	set(110_000, map[string][2]uint64{"q1": {65_000, 40_000}})
	hist.Sample(at(500))
	if n := reads(); n != [2]int{6, 5} {
		t.Errorf("the pool and q1 ran: %v usage and throttling reads in all, want [6 5]", n)
	}
	set(130_000, map[string][2]uint64{"q1": {75_000, 40_000}, "q2": {55_000, 50_000}})
	hist.Sample(at(600))
	ts, _ = hist.traces("olap", 0, at(600))
	s5, s6 := ts[0].Samples[len(ts[0].Samples)-2], ts[0].Samples[len(ts[0].Samples)-1]
	if s5.QueryThrottledUsec != 10_000 || s6.QueryThrottledUsec != 20_000 {
		t.Errorf("query throttling of the last two intervals: %d and %d µs, want 10000 (q1) and 20000 (q2)", s5.QueryThrottledUsec, s6.QueryThrottledUsec)
	}
}

// TestHistoryHotQueries reads, of a pool that ran, only the queries whose
// usage grew at the last read while what they grew by accounts for what
// the pool did (to within 1% of an interval); the others are read once it
// does not and on the grid of FullInterval, and a query that arrives is
// read with the hot ones. What the pool ran and its queries' throttling
// are counted whichever was read.
func TestHistoryHotQueries(t *testing.T) {
	cg := newStatCgroups()
	hist, src := historyOf(t, cg, "CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 20);")
	for _, q := range []string{"q1", "q2", "q3"} {
		src.run("olap", q)
	}
	add := func(queries map[string][2]uint64) { cg.add("olap", queries) }
	t0 := time.Unix(1_000_000, 0)
	busy := map[string][2]uint64{"q1": {30_000, 0}}
	steps := []struct {
		ms    int
		add   map[string][2]uint64
		reads int // usage reads in the step
		why   string
	}{
		{0, map[string][2]uint64{"q2": {100, 0}, "q3": {100, 0}}, 3, "the baseline"},
		{100, busy, 3, "every query of the baseline's is hot"},
		{200, map[string][2]uint64{"q1": {30_000, 0}, "q3": {500, 0}}, 1, "q1 accounts for the pool to within 1 ms"},
		{300, map[string][2]uint64{"q1": {30_000, 0}, "q2": {20_000, 10_000}}, 3, "q1 does not account for the pool"},
		{400, busy, 3, "q1, q2 and q3 (its 500 µs of 200 ms read at 300) grew at the last read"},
		{500, busy, 1, "q1 alone is hot"},
		{900, busy, 1, "q1 alone is hot"},
		{1000, busy, 1, "q1 alone is hot on the second's grid too"},
		{1100, busy, 1, "q1 alone is hot"},
	}
	for _, st := range steps {
		add(st.add)
		before := cg.usageReads
		hist.Sample(t0.Add(time.Duration(st.ms) * time.Millisecond))
		if n := cg.usageReads - before; n != st.reads {
			t.Errorf("at %d ms: %d query usage reads, want %d: %s", st.ms, n, st.reads, st.why)
		}
	}
	src.run("olap", "q4")
	add(busy)
	add(map[string][2]uint64{"q4": {}}) // its cgroup is made
	before := cg.usageReads
	hist.Sample(t0.Add(1200 * time.Millisecond))
	if n := cg.usageReads - before; n != 2 {
		t.Errorf("a query arrived: %d query usage reads, want 2 (q1, hot, and q4)", n)
	}
	// q2 ends: a new list without it (the history keeps a list it was
	// given unchanged), and its counters are forgotten at the next read.
	src.mu.Lock()
	src.running["olap"] = []string{"q1", "q3", "q4"}
	src.mu.Unlock()
	add(busy)
	hist.Sample(t0.Add(1300 * time.Millisecond))
	hist.mu.Lock()
	kept := slices.Sorted(maps.Keys(hist.pools["olap"].prevQueries))
	hist.mu.Unlock()
	if !slices.Equal(kept, []string{"q1", "q3", "q4"}) {
		t.Errorf("after q2 ended the history keeps the counters of %q", kept)
	}
	ts, _ := hist.traces("olap", 0, t0.Add(1300*time.Millisecond))
	if len(ts) != 1 || len(ts[0].Samples) != 13 {
		t.Fatalf("traces %+v", ts)
	}
	for i, want := range map[int]Sample{
		1: {UsageUsec: 30_500},
		2: {UsageUsec: 50_000, QueryNrThrottled: 1, QueryThrottledUsec: 10_000},
		3: {UsageUsec: 30_000},
	} {
		got := ts[0].Samples[i]
		if got.UsageUsec != want.UsageUsec || got.QueryNrThrottled != want.QueryNrThrottled || got.QueryThrottledUsec != want.QueryThrottledUsec {
			t.Errorf("interval %d: %+v, want usage %d µs, queries throttled %d times for %d µs", i, got, want.UsageUsec, want.QueryNrThrottled, want.QueryThrottledUsec)
		}
	}
	// Every period after the read in full at 300 ms, q1 alone, until the
	// grid of FullInterval.
	for ms := 1400; ms <= 10_000; ms += 100 {
		add(busy)
		before := cg.usageReads
		hist.Sample(t0.Add(time.Duration(ms) * time.Millisecond))
		want := 1
		if ms == 10_000 {
			want = 3 // q1, q3 and q4
		}
		if n := cg.usageReads - before; n != want {
			t.Errorf("at %d ms: %d query usage reads, want %d", ms, n, want)
		}
	}
}

// TestHistoryQueriesComeAndGo reads, of a pool of sleepers and one busy
// query to which short queries come and go, the hot queries and those
// that arrived since its last read, while they and what the queries that
// ended since ran (Ended, what the daemon read at each query's end, less
// what the last read found they had used) account for what the pool ran;
// a sleeper that runs, or an end whose usage was not read, makes it read
// every query.
func TestHistoryQueriesComeAndGo(t *testing.T) {
	cg := newStatCgroups()
	hist, src := historyOf(t, cg, "CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 20);")
	sleepers := []string{"s01", "s02", "s03", "s04", "s05", "s06", "s07", "s08", "s09", "s10"}
	for _, q := range append([]string{"b"}, sleepers...) {
		src.run("olap", q)
	}
	add := func(queries map[string][2]uint64) { cg.add("olap", queries) }
	for _, q := range sleepers {
		add(map[string][2]uint64{q: {}}) // their cgroups are made
	}
	// end ends query q as the daemon does: its final usage, read once
	// its cgroup is empty (read false: not read), goes to the pool's
	// Ended, and it leaves the running list.
	end := func(q string, read bool) {
		cg.mu.Lock()
		final := cg.queries[[2]string{"olap", q}].UsageUsec
		delete(cg.queries, [2]string{"olap", q})
		cg.mu.Unlock()
		src.mu.Lock()
		defer src.mu.Unlock()
		if src.ended == nil {
			src.ended = map[string]Ended{}
		}
		e := src.ended["olap"]
		if read {
			e.Usec += final
		} else {
			e.Unread++
		}
		src.ended["olap"] = e
		src.running["olap"] = slices.DeleteFunc(slices.Clone(src.running["olap"]), func(r string) bool { return r == q })
	}
	busy := [2]uint64{30_000, 0}
	steps := []struct {
		ms    int
		do    func()
		reads int // usage reads in the step
		why   string
	}{
		{0, func() { add(map[string][2]uint64{"b": busy}) }, 11, "the baseline"},
		{100, func() { add(map[string][2]uint64{"b": busy}) }, 11, "every query of the baseline's is hot"},
		{200, func() { add(map[string][2]uint64{"b": busy}) }, 1, "b alone is hot"},
		{300, func() { src.run("olap", "f1"); add(map[string][2]uint64{"b": busy}) }, 2,
			"b, and f1, which arrived (its cgroup not made yet)"},
		{400, func() {
			add(map[string][2]uint64{"f1": {5_000, 0}})
			end("f1", true)
			src.run("olap", "f2")
			add(map[string][2]uint64{"b": busy, "f2": {3_000, 10_000}})
		}, 2, "b and f2, which arrived; f1 ran what its end read"},
		{500, func() {
			src.run("olap", "f3")
			add(map[string][2]uint64{"f3": {4_000, 0}, "f2": {2_000, 0}, "b": busy})
			end("f3", true)
			end("f2", true)
		}, 1, "b alone: f3 came and went, f2 went, and their ends tell what they ran"},
		{600, func() {
			src.run("olap", "f4")
			add(map[string][2]uint64{"f4": {2_000, 0}, "s03": {5_000, 5_000}, "b": busy})
			end("f4", true)
		}, 11, "s03 ran: b and the ends do not account for the pool"},
		{700, func() { add(map[string][2]uint64{"b": busy}) }, 2, "b and s03, hot"},
		{800, func() {
			src.run("olap", "f5")
			end("f5", false)
			add(map[string][2]uint64{"b": busy})
		}, 11, "f5's end was not read"},
		{900, func() { add(map[string][2]uint64{"b": busy}) }, 1, "b alone is hot"},
		{1000, func() { src.run("olap", "f6"); add(map[string][2]uint64{"b": busy, "f6": {3_000, 0}}) }, 2, "b and f6, which arrived"},
		{1100, func() {
			add(map[string][2]uint64{"b": busy, "f6": {2_000, 0}, "s05": {3_000, 0}})
			end("f6", true)
		}, 11, "s05 ran: f6 ran 2 ms of the 5 its end read since the last read"},
		{1200, func() { src.run("olap", "h"); add(map[string][2]uint64{"b": busy, "h": {2_000, 0}}) }, 3,
			"b and s05, hot, and h, which arrived"},
		{1300, func() { end("h", true) }, 0, "the pool did not run; h, hot, went"},
		{1400, func() { add(map[string][2]uint64{"b": busy}) }, 1, "b alone: h went"},
		{1500, func() { src.run("olap", "f7") }, 0, "the pool did not run; f7 arrived"},
		{1600, func() { add(map[string][2]uint64{"b": busy, "f7": {4_000, 0}}) }, 2,
			"b, and f7, which arrived when the pool did not run"},
		{1700, func() { add(map[string][2]uint64{"b": busy}) }, 2, "b and f7, hot"},
	}
	at := func(ms int) time.Time { return time.Unix(1_000_000, 0).Add(time.Duration(ms) * time.Millisecond) }
	for _, st := range steps {
		st.do()
		before := cg.usageReads
		hist.Sample(at(st.ms))
		if n := cg.usageReads - before; n != st.reads {
			t.Errorf("at %d ms: %d query usage reads, want %d: %s", st.ms, n, st.reads, st.why)
		}
	}
	ts, _ := hist.traces("olap", 0, at(1700))
	if len(ts) != 1 || len(ts[0].Samples) != 17 {
		t.Fatalf("traces %+v", ts)
	}
	for i, want := range map[int]Sample{
		3: {UsageUsec: 38_000, QueryNrThrottled: 1, QueryThrottledUsec: 10_000},
		4: {UsageUsec: 36_000},
		5: {UsageUsec: 37_000, QueryThrottledUsec: 5_000},
		6: {UsageUsec: 30_000},
	} {
		got := ts[0].Samples[i]
		if got.UsageUsec != want.UsageUsec || got.QueryNrThrottled != want.QueryNrThrottled || got.QueryThrottledUsec != want.QueryThrottledUsec {
			t.Errorf("interval %d: %+v, want usage %d µs, queries throttled %d times for %d µs", i, got, want.UsageUsec, want.QueryNrThrottled, want.QueryThrottledUsec)
		}
	}
	hist.mu.Lock()
	kept := slices.Sorted(maps.Keys(hist.pools["olap"].prevQueries))
	hist.mu.Unlock()
	if want := append([]string{"b", "f7"}, sleepers...); !slices.Equal(kept, want) {
		t.Errorf("after f1 to f6 and h ended the history keeps the counters of %q, want %q", kept, want)
	}
}

// TestHistoryPinned reads a pool throttled in every period each period
// for a second, then once a second while it stays so and no query comes
// or goes, its reads shared among the intervals they cover; a read that
// finds a period in which it was not throttled, or a query that comes,
// makes it read each period again.
func TestHistoryPinned(t *testing.T) {
	cg, hist, src := pinnedPool(t)
	period := func(throttled bool) { addPeriod(cg, throttled) }
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// look makes the history look every 100 ms from ms to to, each
	// period after the first throttled unless it is in free, and
	// returns how many times it read the pool.
	look := func(from, to int, free ...int) int {
		before := cg.poolReads["olap"]
		for ms := from; ms <= to; ms += 100 {
			if ms > 0 {
				period(!slices.Contains(free, ms))
			}
			hist.Sample(at(ms))
		}
		return cg.poolReads["olap"] - before
	}
	if n := look(0, 1000); n != 11 {
		t.Errorf("the first second: %d reads, want 11 (the baseline and each period)", n)
	}
	if n := look(1100, 2000); n != 1 {
		t.Errorf("pinned for a second: %d reads in the next, want 1", n)
	}
	if n := look(2100, 3000, 2500); n != 1 {
		t.Errorf("%d reads in the second the pool left its cap, want 1", n)
	}
	if n := look(3100, 3500); n != 5 {
		t.Errorf("after a read found a period not throttled: %d reads in 5 periods, want 5", n)
	}
	look(3600, 4100)
	src.run("olap", "q2")
	if n := look(4200, 4200); n != 1 {
		t.Errorf("a query arrived at a pinned pool: %d reads at the next look, want 1", n)
	}
	samples, throttled := periodsOf(t, hist, at(4200), 42)
	for i, s := range samples {
		if i >= 10 && i < 20 && (s.NrThrottled != 1 || s.ThrottledUsec != 60_000) {
			t.Errorf("interval %d of the pinned second: %+v, want it throttled for 60 ms", i, s)
		}
	}
	if throttled != 41 {
		t.Errorf("%d intervals throttled, want 41 (all but one)", throttled)
	}
	// Bursts read late (a stalled host): each read covers a second whose
	// first five periods ran, throttled in each, and whose last five were
	// idle, so that every period the kernel counted was throttled.
	cg2 := newStatCgroups()
	late, src2 := historyOf(t, cg2, "CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 20);")
	src2.run("olap", "q1")
	burst := observe.Sample{UsageKnown: true}
	for s := range 15 {
		cg2.mu.Lock()
		cg2.pools["olap"] = burst
		cg2.mu.Unlock()
		late.Sample(t0.Add(time.Duration(s) * time.Second))
		burst.CPU.UsageUsec += 5 * 40_000
		burst.CPU.NrPeriods += 5
		burst.CPU.NrThrottled += 5
	}
	late.mu.Lock()
	n := late.pools["olap"].pinnedReads
	late.mu.Unlock()
	if n != 0 {
		t.Errorf("bursts with idle periods between them, read late: %d reads in a row found the pool pinned, want 0", n)
	}

	// Over a second of 100 ms periods.
	for _, c := range []struct {
		s    Sample
		want bool
	}{
		{Sample{NrPeriods: 10, NrThrottled: 10}, true},
		{Sample{NrPeriods: 9, NrThrottled: 9}, true}, // the read fell just before a period's end
		{Sample{NrPeriods: 10, NrThrottled: 10, QueryNrThrottled: 10}, true},
		{Sample{NrPeriods: 10, NrThrottled: 10, QueryNrThrottled: 4}, false},
		{Sample{NrPeriods: 10, NrThrottled: 9}, false},
		// A burst throttled in each of its five periods, idle between.
		{Sample{NrPeriods: 5, NrThrottled: 5}, false},
		{Sample{}, false},
	} {
		if got := pinnedSample(c.s, 1_000_000, 100_000); got != c.want {
			t.Errorf("pinnedSample(%+v) over a second = %v, want %v", c.s, got, c.want)
		}
	}
}

// TestHistoryThreads counts a pool's threads in every interval it ran:
// threads whose run time grew by 1% of the interval, at least the CPUs'
// worth of its usage (threads that started and ended between two reads),
// and none read in an interval in which the pool did not run. Of its
// queries, only those whose usage grew have their threads read again: a
// query that did not run keeps the threads it had, and the pool's own
// threads are not listed again while its queries account for what it ran
// (TestHistoryHotQueries).
func TestHistoryThreads(t *testing.T) {
	if unsafe.Sizeof(histSample{}) != SampleBytes {
		t.Errorf("a stored interval takes %d bytes, SampleBytes says %d", unsafe.Sizeof(histSample{}), SampleBytes)
	}
	cg := &threadCgroups{statCgroups: newStatCgroups(),
		procRoot: t.TempDir(), tids: map[string][]int{}}
	hist, src := historyOf(t, cg, "CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 20);")
	hist.threads = func(pool string, running, ran []string, own map[int]uint64) threadRead {
		return readThreads(cg, cg.procRoot, pool, running, ran, own)
	}
	src.run("olap", "q1")
	src.run("olap", "q2")
	usage := func(pool, q1 uint64) {
		cg.mu.Lock()
		defer cg.mu.Unlock()
		cg.pools["olap"] = observe.Sample{UsageKnown: true, CPU: observe.CPUStat{UsageUsec: pool, NrPeriods: 1}}
		cg.queries[[2]string{"olap", "q1"}] = observe.CPUStat{UsageUsec: q1}
		cg.queries[[2]string{"olap", "q2"}] = observe.CPUStat{UsageUsec: 1_000}
	}
	threads := func(group string, tids ...int) {
		cg.mu.Lock()
		defer cg.mu.Unlock()
		cg.tids[group] = tids
	}
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	threads("olap/q1", 10)
	cg.setThread(t, 10, 5_000, 'S') // a thread that ran before: not this interval's
	threads("olap/q2", 20)
	cg.setThread(t, 20, 1_000, 'S')
	usage(0, 5_000)
	hist.Sample(at(0))
	// Two threads of q1 run 30 ms each, a third runs 500 µs (< 1%: a
	// runtime thread), and the first sleeps on. q2 did not run: its
	// thread is not read again (were it, it would count as one that ran).
	threads("olap/q1", 10, 11, 12, 13)
	cg.setThread(t, 11, 30_000, 'R')
	cg.setThread(t, 12, 30_000, 'S')
	cg.setThread(t, 13, 500, 'S')
	cg.setThread(t, 20, 90_000, 'R')
	usage(60_500, 65_500)
	hist.Sample(at(100))
	usage(60_500, 65_500) // idle: the threads are not read
	threads("olap/q1")
	hist.Sample(at(200))
	// 150 ms of usage by q1's threads that ended before the read: at
	// least two, beside q2's one.
	usage(210_500, 215_500)
	hist.Sample(at(300))
	// q2 ends, having used what it had (its end read 1 ms), and q1's
	// new thread runs 10 ms: q2's thread is forgotten.
	threads("olap/q1", 14)
	cg.setThread(t, 14, 10_000, 'R')
	src.mu.Lock()
	src.running["olap"] = []string{"q1"}
	src.ended = map[string]Ended{"olap": {Usec: 1_000}}
	src.mu.Unlock()
	usage(220_500, 225_500)
	hist.Sample(at(400))
	ts, _ := hist.traces("olap", 0, at(400))
	if len(ts) != 1 || len(ts[0].Samples) != 4 {
		t.Fatalf("traces %+v", ts)
	}
	want := [][3]int{{5, 2, 1}, {-1, -1, -1}, {2, 2, 0}, {1, 1, 1}}
	for i, w := range want {
		s := ts[0].Samples[i]
		if got := [3]int{s.Threads, s.Ran, s.Runnable}; got != w {
			t.Errorf("sample %d: threads, ran, runnable %v, want %v", i, got, w)
		}
	}
	if err := ts[0].Validate(); err != nil {
		t.Error(err)
	}
	if cg.ownLists != 1 {
		t.Errorf("the pool's own threads listed %d times, want once: its queries accounted for what it ran after the first", cg.ownLists)
	}
}

// pinnedPool is a history of pool olap, capped at 40 ms in each 100 ms
// period, running query q1.
func pinnedPool(t *testing.T) (*statCgroups, *Rolling, *testPools) {
	cg := newStatCgroups()
	hist, src := historyOf(t, cg, "CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 20);")
	src.run("olap", "q1")
	cg.pools["olap"] = observe.Sample{UsageKnown: true}
	return cg, hist, src
}

// addPeriod adds one period of 100 ms to pool olap and its query q1: 40
// ms of usage (its quota), throttled for 60 ms when throttled.
func addPeriod(cg *statCgroups, throttled bool) {
	cg.mu.Lock()
	defer cg.mu.Unlock()
	pool := cg.pools["olap"]
	pool.UsageKnown = true
	pool.CPU.UsageUsec += 40_000
	pool.CPU.NrPeriods++
	if throttled {
		pool.CPU.NrThrottled++
		pool.CPU.ThrottledUsec += 60_000
	}
	cg.pools["olap"] = pool
	q := cg.queries[[2]string{"olap", "q1"}]
	q.UsageUsec += 40_000
	cg.queries[[2]string{"olap", "q1"}] = q
}

// periodsOf returns the n samples of pool olap's one trace up to at, each
// of which must hold one period of 40 ms (addPeriod's), and how many of
// them were throttled.
func periodsOf(t *testing.T, hist *Rolling, at time.Time, n int) (samples []Sample, throttled int) {
	t.Helper()
	ts, _ := hist.traces("olap", 0, at)
	if len(ts) != 1 || len(ts[0].Samples) != n {
		t.Fatalf("traces %+v, want one of %d samples", ts, n)
	}
	for i, s := range ts[0].Samples {
		if s.UsageUsec != 40_000 || s.NrPeriods != 1 {
			t.Errorf("interval %d: %+v, want one period of 40 ms", i, s)
		}
		throttled += int(s.NrThrottled)
	}
	return ts[0].Samples, throttled
}

// TestHistoryPinnedLong reads a pool held at its cap once a second, and
// once a PinnedInterval once its reads have found it so for PinnedAfter;
// a read that finds a period in which it was not throttled makes it read
// each period again, and what it ran since the read before is shared
// among the intervals that read covers.
func TestHistoryPinnedLong(t *testing.T) {
	cg, hist, _ := pinnedPool(t)
	period := func(throttled bool) { addPeriod(cg, throttled) }
	t0 := time.Unix(1_000_000, 0)
	var reads []int
	for ms := 0; ms <= 30_500; ms += 100 {
		if ms > 0 {
			period(ms != 27_000) // one period free, read at 30 s
		}
		before := cg.poolReads["olap"]
		hist.Sample(t0.Add(time.Duration(ms) * time.Millisecond))
		if cg.poolReads["olap"] > before {
			reads = append(reads, ms)
		}
	}
	// Each period of the first second; then each second, the first
	// pinned read at 100 ms; then from 11 s every 5 s on that grid; each
	// period again once a read found the free period.
	var want []int
	for ms := 0; ms <= 1000; ms += 100 {
		want = append(want, ms)
	}
	for ms := 2000; ms <= 11_000; ms += 1000 {
		want = append(want, ms)
	}
	want = append(want, 15_000, 20_000, 25_000, 30_000)
	for ms := 30_100; ms <= 30_500; ms += 100 {
		want = append(want, ms)
	}
	if !slices.Equal(reads, want) {
		t.Errorf("read at %v ms, want %v", reads, want)
	}
	if _, throttled := periodsOf(t, hist, t0.Add(30_500*time.Millisecond), 305); throttled != 304 {
		t.Errorf("%d intervals throttled, want 304 (all but one)", throttled)
	}
}

// TestHistoryPinnedThreads: a pool held at its cap has its busy query's
// threads read each period until it is pinned, then only with its read in
// full, once a FullInterval; its samples in between keep the thread counts
// the last read found, so a thread that comes in between is counted from
// the next read in full.
func TestHistoryPinnedThreads(t *testing.T) {
	cg := &threadCgroups{statCgroups: newStatCgroups(), procRoot: t.TempDir(), tids: map[string][]int{}}
	hist, src := historyOf(t, cg, "CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 20);")
	hist.threads = func(pool string, running, ran []string, own map[int]uint64) threadRead {
		return readThreads(cg, cg.procRoot, pool, running, ran, own)
	}
	src.run("olap", "q1")
	cg.pools["olap"] = observe.Sample{UsageKnown: true}
	run := map[int]uint64{}
	// period adds one period of 100 ms, its quota of 40 ms run by q1's
	// threads in equal parts, throttled for 60 ms.
	period := func() {
		addPeriod(cg.statCgroups, true)
		cg.mu.Lock()
		tids := cg.tids["olap/q1"]
		cg.mu.Unlock()
		for _, tid := range tids {
			run[tid] += 40_000 / uint64(len(tids))
			cg.setThread(t, tid, run[tid], 'R')
		}
	}
	cg.tids["olap/q1"] = []int{10, 11}
	t0 := time.Unix(1_000_000, 0)
	lists := map[int]int{} // thread lists of q1 by the second they fell in
	for ms := 0; ms <= 11_000; ms += 100 {
		if ms == 5_000 {
			cg.mu.Lock()
			cg.tids["olap/q1"] = []int{10, 11, 12}
			cg.mu.Unlock()
		}
		if ms > 0 {
			period()
		}
		before := cg.queryLists
		hist.Sample(t0.Add(time.Duration(ms) * time.Millisecond))
		if n := cg.queryLists - before; n > 0 {
			lists[(ms+999)/1000] += n
		}
	}
	// Each period of the first second and its start; none while pinned
	// but at the read in full at 10 s.
	want := map[int]int{0: 1, 1: 10, 10: 1}
	if !maps.Equal(lists, want) {
		t.Errorf("q1's threads listed %v times by second, want %v", lists, want)
	}
	ts, _ := hist.traces("olap", 0, t0.Add(11*time.Second))
	if len(ts) != 1 || len(ts[0].Samples) != 110 {
		t.Fatalf("traces %+v", ts)
	}
	for i, s := range ts[0].Samples {
		ran := 2
		if i >= 90 {
			ran = 3 // read at 10 s, and kept: a third thread since 5 s
		}
		if s.Threads != ran || s.Ran != ran || s.Runnable != ran {
			t.Errorf("interval %d: threads, ran, runnable %d, %d, %d, want %d each", i, s.Threads, s.Ran, s.Runnable, ran)
		}
	}
}

// countingCgroups is statCgroups that counts the reads of each pool.
type countingCgroups struct {
	*statCgroups
	reads map[string]int
}

func (c *countingCgroups) PoolCPUStats(names []string) (map[string]observe.Sample, error) {
	for _, n := range names {
		c.reads[n]++
	}
	return c.statCgroups.PoolCPUStats(names)
}

// TestHistoryQuiet reads a pool that did not run and runs no query once a
// second, not once a period; a query admitted to it makes it read at the
// next look, and what it ran is the last interval's: the intervals not
// read were idle.
func TestHistoryQuiet(t *testing.T) {
	cg := &countingCgroups{statCgroups: newStatCgroups(),
		reads: map[string]int{}}
	hist, src := historyOf(t, cg, "CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 20);")
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	cg.mu.Lock()
	cg.pools["olap"] = observe.Sample{CPU: observe.CPUStat{UsageUsec: 1000}}
	cg.mu.Unlock()
	for ms := 0; ms <= 1150; ms += 50 {
		hist.Sample(at(ms))
	}
	// The baseline at 0, a read at 100 that finds it idle, the next on
	// the second's grid, at 1000.
	if got := cg.reads["olap"]; got != 3 {
		t.Errorf("a quiet pool was read %d times in 1.15 s, want 3 (at 0, 100 and 1000 ms)", got)
	}
	src.run("olap", "q1")
	cg.mu.Lock()
	cg.pools["olap"] = observe.Sample{CPU: observe.CPUStat{UsageUsec: 41_000, NrPeriods: 1}}
	cg.mu.Unlock()
	hist.Sample(at(1150)) // the query came: read at this look, its period's due at 1100
	hist.Sample(at(1200))
	hist.Sample(at(1300))
	if got := cg.reads["olap"]; got != 6 {
		t.Errorf("with a query the pool was read %d times, want 6 (at once, then each period again)", got)
	}
	ts, _ := hist.traces("olap", 0, at(1300))
	if len(ts) != 1 || len(ts[0].Samples) != 13 {
		t.Fatalf("traces %+v", ts)
	}
	for i, s := range ts[0].Samples {
		want := uint64(0)
		if i == 10 {
			want = 40_000
		}
		if s.UsageUsec != want {
			t.Errorf("interval %d: usage %d µs, want %d", i, s.UsageUsec, want)
		}
	}
}

// callCounting counts the looks that read pools' counters.
type callCounting struct {
	*statCgroups
	calls [][]string
}

func (c *callCounting) PoolCPUStats(names []string) (map[string]observe.Sample, error) {
	c.calls = append(c.calls, slices.Clone(names))
	return c.statCgroups.PoolCPUStats(names)
}

// TestHistoryGrid reads every pool on one grid from the first look: a
// pool planned at a look between two intervals has its baseline then and
// is read with the others from the next interval on, in one look each, and
// quiet pools are read together on the second's grid.
func TestHistoryGrid(t *testing.T) {
	cg := &callCounting{statCgroups: newStatCgroups()}
	for _, p := range []string{"default", "etl", "olap"} {
		cg.pools[p] = observe.Sample{CPU: observe.CPUStat{UsageUsec: 1000}}
	}
	hist, src := historyOf(t, cg, "CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 20);")
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	if next := hist.Sample(at(0)); !next.Equal(at(100)) {
		t.Fatalf("after the first look the next is at %v, want 100 ms", next.Sub(t0))
	}
	src.plan(t, "CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 20); CREATE RESOURCE POOL etl;")
	if next := hist.Sample(at(130)); !next.Equal(at(200)) {
		t.Fatalf("after etl's baseline at 130 ms the next look is at %v, want 200 ms (the grid)", next.Sub(t0))
	}
	cg.calls = nil
	for next := at(200); next.Before(at(2500)); {
		next = hist.Sample(next)
	}
	// None ran: default and olap were found idle at 100 ms, etl is at
	// 200 ms, its interval's end on the grid; then all three are quiet
	// and read together at 1 and 2 s.
	want := [][]string{{"etl"}, {"default", "etl", "olap"}, {"default", "etl", "olap"}}
	for i := range cg.calls {
		slices.Sort(cg.calls[i])
	}
	if !slices.EqualFunc(cg.calls, want, slices.Equal) {
		t.Errorf("the looks from 200 ms to 2.5 s read %v, want %v", cg.calls, want)
	}
}

// TestHistoryQuietBackoff reads a pool whose queries all sleep each
// period until it has been idle for a QuietInterval, then once a
// QuietInterval; a query that comes makes it read at its next period's
// end again.
func TestHistoryQuietBackoff(t *testing.T) {
	cg := &countingCgroups{statCgroups: newStatCgroups(), reads: map[string]int{}}
	hist, src := historyOf(t, cg, "CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 20);")
	src.run("olap", "q1")
	cg.pools["olap"] = observe.Sample{CPU: observe.CPUStat{UsageUsec: 1000}}
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var readAt []int
	for ms := 0; ms <= 3500; ms += 50 {
		before := cg.reads["olap"]
		hist.Sample(at(ms))
		if cg.reads["olap"] != before {
			readAt = append(readAt, ms)
		}
	}
	if want := []int{0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 2000, 3000}; !slices.Equal(readAt, want) {
		t.Errorf("a pool whose query sleeps was read at %v ms, want %v", readAt, want)
	}
	src.run("olap", "q2")
	hist.Sample(at(3600)) // the period's end after the query came, not 4500
	if cg.reads["olap"] != len(readAt)+1 {
		t.Error("a query that came did not make the pool read at its period's end")
	}
}

// BenchmarkHistoryMemory is what the history holds for 100 pools busy in
// every interval for an hour at the 100 ms default period: the heap it
// takes, in bytes per pool per hour.
func BenchmarkHistoryMemory(b *testing.B) {
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		h := New(Config{Window: time.Hour, CPUs: 2}, nil, nil, "", nil)
		busy := Sample{UsageUsec: 40_000, NrPeriods: 1, NrThrottled: 1, ThrottledUsec: 60_000, Threads: 2, Ran: 2, Runnable: 1}
		for p := range 100 {
			seg := &segment{limit: cpulimit.Limit{QuotaUsec: 40_000, PeriodUsec: 100_000}, intervalUsec: 100_000, start: time.Now()}
			h.pools[fmt.Sprintf("pool%d", p)] = &poolHistory{segs: []*segment{seg}}
			for range 36_000 {
				h.add(seg, busy, 1)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/100, "bytes/pool-hour")
		runtime.KeepAlive(h)
	}
}

// BenchmarkHistoryLook is the history's own work in one interval at the
// size of the daemon's BenchmarkCostAtScale, without the reads' system
// calls (the counters are in memory): 100 pools, 10 sleeping queries in
// each, and in 20 of them an eleventh query that runs every interval.
// Reported: time and allocations per interval.
func BenchmarkHistoryLook(b *testing.B) {
	cg := newStatCgroups()
	var ddl strings.Builder
	for i := range 100 {
		fmt.Fprintf(&ddl, "CREATE RESOURCE POOL p%03d WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = %d);\n", i, 1+i%90)
	}
	hist, src := historyOf(b, cg, ddl.String())
	for i := range 100 {
		pool := fmt.Sprintf("p%03d", i)
		cg.pools[pool] = observe.Sample{UsageKnown: true}
		for q := range 10 {
			src.run(pool, fmt.Sprintf("sleep%d", q))
		}
		if i < 20 {
			src.run(pool, "burn")
		}
	}
	clock := time.Unix(1_000_000, 0)
	busy := make([]string, 20)
	for i := range busy {
		busy[i] = fmt.Sprintf("p%03d", i)
	}
	step := func() {
		for _, pool := range busy {
			st := cg.queries[[2]string{pool, "burn"}]
			st.UsageUsec += 2_000
			st.NrThrottled++
			cg.queries[[2]string{pool, "burn"}] = st
			s := cg.pools[pool]
			s.CPU.UsageUsec += 2_000
			cg.pools[pool] = s
		}
		hist.Sample(clock)
		clock = clock.Add(100 * time.Millisecond)
	}
	for range 20 { // past the baselines and the first full reads
		step()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		step()
	}
}

// BenchmarkKernelHistorySample is what sampling costs the daemon on the
// real kernel: 100 pools, each with one query cgroup holding a sleeping
// process. "quiet": no query of this daemon runs in the pools, which did
// not run, so each is read once a QuietInterval; "idle": each runs
// a query of this daemon and is read once an interval, its query cgroup
// too, but not its threads (the pool did not run); "ran": its threads are
// read too, as for a pool that ran in every interval. Reported: CPU time
// per pool per hour at the 100 ms default period.
//
//	go test -run '^$' -bench KernelHistorySample -benchtime 100x ./internal/history
func BenchmarkKernelHistorySample(b *testing.B) {
	need := kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1, kerneltest.V2}, Controllers: []string{"cpuacct"}}
	h := kerneltest.Require(b, need)
	root := h.NewRoot(b, need)
	cg, err := pooltree.Open(h.Mounts, root.Path, cgroupfs.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cg.Close() })
	var pools strings.Builder
	for p := range 100 {
		fmt.Fprintf(&pools, "CREATE RESOURCE POOL p%d WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 1);\n", p)
	}
	hist, src := historyOf(b, cg, pools.String())
	if err := cg.Apply(src.Desired()); err != nil {
		b.Fatal(err)
	}
	for _, ps := range src.Desired().Pools {
		sleeper := exec.Command("sleep", "600")
		if err := sleeper.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
		for _, dir := range append([]string{root.Path}, root.Twins...) {
			if err := os.Mkdir(filepath.Join(dir, ps.Name, "q1"), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, ps.Name, "q1", "cgroup.procs"), []byte(fmt.Sprint(sleeper.Process.Pid)), 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The clock the sampling sees: 100 ms later at every round, across
	// the runs of every sub-benchmark, so that every pool is due.
	clock := time.Now()
	hist.Sample(clock)
	for _, mode := range []string{"quiet", "idle", "ran"} {
		if mode == "idle" {
			// From here every pool runs a query of this daemon.
			for _, ps := range src.Desired().Pools {
				src.run(ps.Name, "q1")
			}
		}
		b.Run(mode, func(b *testing.B) {
			cpu0 := kerneltest.ProcessCPU(b, os.Getpid())
			for range b.N {
				clock = clock.Add(100 * time.Millisecond)
				hist.Sample(clock)
				if mode == "ran" {
					for _, ps := range src.Desired().Pools {
						if tr := hist.threads(ps.Name, []string{"q1"}, []string{"q1"}, nil); len(tr.queries["q1"]) == 0 {
							b.Fatalf("pool %s: no threads read", ps.Name)
						}
					}
				}
			}
			cpu := kerneltest.ProcessCPU(b, os.Getpid()) - cpu0
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/100*36_000/1e6, "ms-cpu/pool-hour")
		})
	}
}

// BenchmarkHistoryRSS is the daemon's resident memory (VmRSS, not only
// the Go heap) for the history of 100 pools busy in every 100 ms interval
// for an hour: a server with 100 pools whose segments the sampling path
// starts, filled with an hour of intervals each (the path a read takes
// into the store). Reported: the growth of VmRSS, in bytes per pool per
// hour, and the reply to `advise --pool` for one of them.
//
//	go test -run '^$' -bench HistoryRSS -benchtime 1x ./internal/history
func BenchmarkHistoryRSS(b *testing.B) {
	for range b.N {
		cg := newStatCgroups()
		var pools strings.Builder
		for p := range 100 {
			fmt.Fprintf(&pools, "CREATE RESOURCE POOL p%d WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 1);\n", p)
			cg.pools[fmt.Sprintf("p%d", p)] = observe.Sample{}
		}
		hist, _ := historyOf(b, cg, pools.String())
		hist.cfg.Window = time.Hour
		start := time.Now().Add(-time.Hour)
		hist.Sample(start) // every pool's segment and baseline
		runtime.GC()
		debug.FreeOSMemory()
		before := kerneltest.ProcessRSSMiB(b, os.Getpid())
		busy := Sample{UsageUsec: 4_000, NrPeriods: 1, NrThrottled: 1, ThrottledUsec: 6_000, QueryNrThrottled: 1, QueryThrottledUsec: 6_000,
			Threads: 3, Ran: 2, Runnable: 1}
		hist.mu.Lock()
		for _, ph := range hist.pools {
			for range 36_000 {
				hist.add(ph.last(), busy, 1)
			}
		}
		hist.mu.Unlock()
		runtime.GC()
		debug.FreeOSMemory()
		after := kerneltest.ProcessRSSMiB(b, os.Getpid())
		b.ReportMetric((after-before)*(1<<20)/100, "rss-bytes/pool-hour")
		b.ReportMetric(after-before, "rss-MiB/100-pool-hours")
		reply, release := hist.Reply(1000, protocol.Request{Op: protocol.OpHistory, Pool: "p0"})
		release()
		if reply.Type != protocol.ReplyDone || len(reply.Traces) != 1 {
			b.Fatalf("history of p0: %+v", reply.Error)
		}
		enc, err := json.Marshal(reply)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(enc)), "reply-bytes/pool-hour")
		runtime.KeepAlive(hist)
	}
}

// pressureCgroups is statCgroups that counts the reads of each pool's CPU
// pressure.
type pressureCgroups struct {
	*statCgroups
	psiReads map[string]int
}

func (c *pressureCgroups) PoolCPUPressure(names []string) (map[string]*observe.Pressure, error) {
	for _, n := range names {
		c.psiReads[n]++
	}
	return c.statCgroups.PoolCPUPressure(names)
}

// TestHistoryPressureWhenRan reads a pool's CPU pressure only in an
// interval in which its usage grew (and at the baseline): an idle pool
// costs one read of its CPU counters, and its pressure is the last read's
// until it runs again, when the growth since counts.
func TestHistoryPressureWhenRan(t *testing.T) {
	cg := &pressureCgroups{statCgroups: newStatCgroups(), psiReads: map[string]int{}}
	hist, src := historyOf(t, cg, "CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 20);")
	src.run("olap", "q1") // read every period, not once a QuietInterval
	set := func(usage, someUsec uint64) {
		cg.mu.Lock()
		defer cg.mu.Unlock()
		cg.pools["olap"] = observe.Sample{CPU: observe.CPUStat{UsageUsec: usage, NrPeriods: 1}, Pressure: &observe.Pressure{Some: observe.PressureLine{TotalUsec: someUsec}}}
	}
	t0 := time.Unix(1_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	set(1000, 500)
	hist.Sample(at(0))
	for ms := 100; ms <= 300; ms += 100 {
		hist.Sample(at(ms)) // idle
	}
	if n := cg.psiReads["olap"]; n != 1 {
		t.Errorf("pressure read %d times in three idle intervals and the baseline, want the baseline's 1", n)
	}
	set(31_000, 8_500)
	hist.Sample(at(400))
	if n := cg.psiReads["olap"]; n != 2 {
		t.Errorf("pressure read %d times once the pool ran, want 2", n)
	}
	ts, _ := hist.traces("olap", 0, at(400))
	s := ts[0].Samples
	if len(s) != 4 || s[3].UsageUsec != 30_000 || s[3].PressureSomeUsec == nil || *s[3].PressureSomeUsec != 8_000 {
		t.Fatalf("samples %+v, want the last with 30000 µs of usage and 8000 µs of pressure", s)
	}
	for i, p := range s[:3] {
		if p.PressureSomeUsec == nil || *p.PressureSomeUsec != 0 {
			t.Errorf("idle interval %d: pressure %v, want 0", i, p.PressureSomeUsec)
		}
	}
}

// timedCgroups is statCgroups that records when each read of the pools'
// counters came, from the start, whichever pools it read.
type timedCgroups struct {
	*statCgroups
	start time.Time
	at    []time.Duration
}

func (c *timedCgroups) PoolCPUStats(names []string) (map[string]observe.Sample, error) {
	c.statCgroups.mu.Lock()
	c.at = append(c.at, time.Since(c.start))
	c.statCgroups.mu.Unlock()
	return c.statCgroups.PoolCPUStats(names)
}

func (c *timedCgroups) reads() []time.Duration {
	c.statCgroups.mu.Lock()
	defer c.statCgroups.mu.Unlock()
	return slices.Clone(c.at)
}

// TestRunLooks runs the history on a testing/synctest bubble's clock. A
// daemon whose pools are quiet looks once a QuietInterval, not each
// MinInterval; a query that comes (Pools.Changed) has the pool read at
// the next step of the MinInterval grid, not at its next quiet read.
func TestRunLooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cg := &timedCgroups{statCgroups: newStatCgroups(), start: time.Now()}
		hist, src := historyOf(t, cg, "CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 20);")
		src.changed = make(chan struct{}, 1)
		for _, pool := range []string{"default", "olap"} {
			cg.pools[pool] = observe.Sample{UsageKnown: true, CPU: observe.CPUStat{UsageUsec: 1000}}
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go hist.Run(ctx)
		ms := func(n ...int) []time.Duration {
			out := make([]time.Duration, len(n))
			for i, v := range n {
				out[i] = time.Duration(v) * time.Millisecond
			}
			return out
		}
		time.Sleep(3050 * time.Millisecond)
		synctest.Wait()
		// The baseline, the read that finds it idle, then once a second.
		if got, want := cg.reads(), ms(0, 100, 1000, 2000, 3000); !slices.Equal(got, want) {
			t.Errorf("quiet pools were read at %v, want %v", got, want)
		}
		hist.mu.Lock()
		looks := hist.looks
		hist.mu.Unlock()
		if looks != 5 {
			t.Errorf("the history looked %d times in 3.05 s with its pools quiet, want 5", looks)
		}
		src.run("olap", "q1")
		src.changed <- struct{}{}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if got, want := cg.reads(), ms(0, 100, 1000, 2000, 3000, 3100); !slices.Equal(got, want) {
			t.Errorf("after a query came to olap at 3.05 s the pools were read at %v, want %v", got, want)
		}
	})
}

// TestHistoryIdle reads a quiet pool once a QuietInterval until it has
// been idle for IdleAfter, then once an IdleInterval; a query that comes
// has it read at once and each period for a QuietInterval, and a read
// that finds it ran, each period from then on.
func TestHistoryIdle(t *testing.T) {
	cg := &countingCgroups{statCgroups: newStatCgroups(), reads: map[string]int{}}
	hist, src := historyOf(t, cg, "CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = 20);")
	cg.pools["olap"] = observe.Sample{UsageKnown: true, CPU: observe.CPUStat{UsageUsec: 1000}}
	t0 := time.Unix(1_000_000, 0)
	var readAt []int
	look := func(from, to int) {
		for ms := from; ms <= to; ms += 100 {
			before := cg.reads["olap"]
			hist.Sample(t0.Add(time.Duration(ms) * time.Millisecond))
			if cg.reads["olap"] != before {
				readAt = append(readAt, ms)
			}
		}
	}
	look(0, 25_000)
	want := []int{0, 100, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10_000, 15_000, 20_000, 25_000}
	if !slices.Equal(readAt, want) {
		t.Errorf("an idle pool was read at %v ms, want %v", readAt, want)
	}
	readAt = nil
	src.run("olap", "q1") // sleeps
	look(25_100, 36_000)
	want = []int{25_100, 25_200, 25_300, 25_400, 25_500, 25_600, 25_700, 25_800, 25_900, 26_000, 26_100, 27_000, 28_000,
		29_000, 30_000, 31_000, 32_000, 33_000, 34_000, 35_000, 36_000}
	if !slices.Equal(readAt, want) {
		t.Errorf("after a sleeping query came at 25 s the pool was read at %v ms, want %v", readAt, want)
	}
	readAt = nil
	cg.mu.Lock()
	cg.pools["olap"] = observe.Sample{UsageKnown: true, CPU: observe.CPUStat{UsageUsec: 41_000}}
	cg.mu.Unlock()
	look(36_100, 41_300)
	if want := []int{40_000, 40_100, 40_200, 40_300}; !slices.Equal(readAt[:min(4, len(readAt))], want) {
		t.Errorf("a pool idle for 11 s that ran was read at %v ms, want %v first", readAt, want)
	}
}
