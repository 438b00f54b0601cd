package sysview

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/planner"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const pools = `
CREATE RESOURCE POOL olap WITH (CONCURRENT_QUERY_LIMIT=10, QUEUE_SIZE=1000, DATABASE_LOAD_CPU_THRESHOLD=80,
    RESOURCES_WEIGHT=100, QUERY_CPU_LIMIT_PERCENT_PER_NODE=50, TOTAL_CPU_LIMIT_PERCENT_PER_NODE=70);
CREATE RESOURCE POOL adhoc WITH (CONCURRENT_QUERY_LIMIT=2, QUEUE_SIZE=3, RESOURCES_WEIGHT=20,
    TOTAL_CPU_LIMIT_PERCENT_PER_NODE=30, QUERY_CANCEL_AFTER_SECONDS=60, CPU_BURST_PERCENT=20, CPUS='0-3');
CREATE RESOURCE POOL shared WITH (CONCURRENT_QUERY_LIMIT=4, CONCURRENT_QUERY_LIMIT_PER_USER=3, QUEUE_SIZE_PER_USER=50,
    QUEUE_POLICY='fair', USAGE_HALF_LIFE_SECONDS=600);
CREATE RESOURCE POOL CLASSIFIER olap_classifier WITH (RESOURCE_POOL='olap', MEMBER_NAME='all-users@well-known');
CREATE RESOURCE POOL CLASSIFIER analysts WITH (RESOURCE_POOL='adhoc', MEMBER_NAME='%analysts', RANK=10);
CREATE RESOURCE POOL CLASSIFIER notebooks WITH (RESOURCE_POOL='adhoc', HAS_APP_NAME='jupyter', RANK=20);
CREATE RESOURCE POOL CLASSIFIER no_miners WITH (ACTION='reject', HAS_APP_NAME='xmrig', RANK=5);
`

func fixture(t *testing.T) (*planner.Model, []admission.PoolStats, planner.Desired) {
	t.Helper()
	m, _, err := planner.Load("pools.sql", []byte(pools))
	if err != nil {
		t.Fatal(err)
	}
	adm := []admission.PoolStats{
		{Name: "default", Running: 1},
		{Name: "olap", Running: 10, Queued: 4},
		{Name: "adhoc", Running: 2, Queued: 3},
		{Name: "etl", Running: 1, Dropped: true},
		{Name: "shared", Running: 4, Queued: 48, UsersRunning: 2, UsersQueued: 2,
			Limits: admission.Limits{Users: admission.UserLimits{Fair: true, HalfLife: 10 * time.Minute}},
			Users: []admission.UserStats{
				{User: "alice", Running: 3, Queued: 47, Usage: admission.Usage{Seconds: 240, At: viewTime.Add(-10 * time.Minute)}},
				{User: "bob", Running: 1, Queued: 1},
			}},
	}
	d, err := planner.Plan(m, planner.Node{CPUs: 10, MemoryBytes: 16 << 30, PeriodUsec: 100_000},
		planner.Activity{Active: []string{"default", "olap", "adhoc"}})
	if err != nil {
		t.Fatal(err)
	}
	return m, adm, d
}

var queries = []protocol.Query{
	{QueryId: "qt8k2a-7", ResourcePoolId: "olap", Classifier: "olap_classifier", State: protocol.StateRunning, User: "alice", Uid: 1001, ClientPid: 4242,
		QueuedTimeUs: 1_500_000, RunningTimeUs: 12_345_678, CpuLimitCores: 3.5,
		UsageUsec: 30_000_000, NrPeriods: 120, NrThrottled: 40, ThrottledUsec: 2_000_000,
		MemoryBytes: 268_435_456, PeakMemoryBytes: 536_870_912, OOMKills: 1},
	{QueryId: "qt8k2a-9", ResourcePoolId: "olap", Classifier: "olap_classifier", State: protocol.StateQueued, QueuePosition: 1, User: "bob", Uid: 1002, ClientPid: 4300,
		QueuedTimeUs: 800_000, CpuLimitCores: 3.5, Wait: &protocol.Wait{Reason: protocol.WaitLoad, HeadReason: protocol.WaitLoad,
			Running: 1, Limit: 10, LoadPercent: 72, ReservedPercent: 10, ThresholdPercent: 80}},
	{QueryId: "qt8k2a-12", ResourcePoolId: "olap", Classifier: "olap_classifier", State: protocol.StateQueued, QueuePosition: 2, User: "carol", Uid: 1003, ClientPid: 4310,
		QueuedTimeUs: 300_000, CpuLimitCores: 3.5, Wait: &protocol.Wait{Reason: protocol.WaitBehindHead, Ahead: 1, HeadReason: protocol.WaitLoad,
			Running: 1, Limit: 10, LoadPercent: 72, ReservedPercent: 10, ThresholdPercent: 80}},
	{QueryId: "qt8k00-3", ResourcePoolId: "default", State: protocol.StateRunning, Adopted: true, RunningTimeUs: 60_000_000, CpuLimitCores: -1, UsageUsec: 59_000_000},
	{QueryId: "qt8k2a-20", ResourcePoolId: "shared", State: protocol.StateQueued, QueuePosition: 2, User: "alice", Uid: 1001, ClientPid: 4400,
		UserRunning: 3, UserQueued: 47, QueuedTimeUs: 200_000, CpuLimitCores: -1, Wait: &protocol.Wait{Reason: protocol.WaitUserLimit, HeadReason: protocol.WaitConcurrency,
			Running: 4, Limit: 4, UserRunning: 3, UserLimit: 3}},
	{QueryId: "qt8k2a-30", ResourcePoolId: "shared", State: protocol.StateQueued, QueuePosition: 2, User: "carol", Uid: 1003, ClientPid: 4500,
		UserRunning: 0, UserQueued: 1, QueuedTimeUs: 100_000, CpuLimitCores: -1, Wait: &protocol.Wait{Reason: protocol.WaitFairOrder, Ahead: 1, UsersAhead: 1, HeadReason: protocol.WaitConcurrency,
			Running: 4, Limit: 4, UserLimit: 3}},
}

// viewTime is the moment the views are taken at.
var viewTime = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// fleetQueries is a fleet node n1's view: its own queries, and n0's as
// the cluster's keys show them.
var fleetQueries = []protocol.Query{
	{QueryId: "qt8k2a-7", Node: "n1", ResourcePoolId: "olap", State: protocol.StateRunning, User: "alice", Uid: 1001, ClientPid: 4242,
		QueuedTimeUs: 1_500_000, RunningTimeUs: 12_345_678, CpuLimitCores: -1, UsageUsec: 30_000_000},
	{QueryId: "n0.6b06a233c9949902.1", Node: "n0", ResourcePoolId: "olap", State: protocol.StateRunning, RunningTimeUs: 2_199_000, CpuLimitCores: -1},
	{QueryId: "n0.6b06a233c9949902.2", Node: "n0", ResourcePoolId: "olap", State: protocol.StateQueued, QueuePosition: 1, QueuedTimeUs: 1_858_000, CpuLimitCores: -1},
	{QueryId: "qt8k2a-9", Node: "n1", ResourcePoolId: "olap", State: protocol.StateQueued, QueuePosition: 2, User: "bob", Uid: 1002, ClientPid: 4300,
		QueuedTimeUs: 800_000, CpuLimitCores: -1, Wait: &protocol.Wait{Reason: protocol.WaitBehindHead, Ahead: 1, HeadReason: protocol.WaitConcurrency, Running: 2, Limit: 2}},
}

func TestViewsGolden(t *testing.T) {
	m, adm, d := fixture(t)
	fleetPools := Pools(m, adm, d, viewTime)
	for i, p := range fleetPools {
		// A pool without a global limit admits on each node alone.
		fleetPools[i].Node = "*"
		if p.ConcurrentQueryLimit < 0 && p.QueueSize < 0 {
			fleetPools[i].Node = "n1"
		}
	}
	tests := []struct {
		name  string
		write func(*bytes.Buffer) error
	}{
		{"pools.txt", func(b *bytes.Buffer) error { return WritePools(b, Pools(m, adm, d, viewTime), true) }},
		{"pools-narrow.txt", func(b *bytes.Buffer) error { return WritePools(b, Pools(m, adm, d, viewTime), false) }},
		{"pools.json", func(b *bytes.Buffer) error { return WriteJSON(b, Pools(m, adm, d, viewTime)) }},
		{"classifiers.txt", func(b *bytes.Buffer) error { return WriteClassifiers(b, Classifiers(m)) }},
		{"classifiers.json", func(b *bytes.Buffer) error { return WriteJSON(b, Classifiers(m)) }},
		{"queries.txt", func(b *bytes.Buffer) error { return WriteQueries(b, queries) }},
		{"queries.json", func(b *bytes.Buffer) error { return WriteJSON(b, queries) }},
		{"no-queries.json", func(b *bytes.Buffer) error { return WriteJSON[protocol.Query](b, nil) }},
		{"fleet-pools.txt", func(b *bytes.Buffer) error { return WritePools(b, fleetPools, true) }},
		{"fleet-pools-narrow.txt", func(b *bytes.Buffer) error { return WritePools(b, fleetPools, false) }},
		{"fleet-queries.txt", func(b *bytes.Buffer) error { return WriteQueries(b, fleetQueries) }},
		{"fleet-queries.json", func(b *bytes.Buffer) error { return WriteJSON(b, fleetQueries) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.write(&b); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tc.name)
			if *update {
				if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(b.Bytes(), want) {
				t.Errorf("%s differs (rerun with -update and review the diff):\n%s", golden, b.Bytes())
			}
			// A narrow table fits a terminal of 120 columns.
			for _, line := range strings.Split(b.String(), "\n") {
				if strings.Contains(tc.name, "narrow") && utf8.RuneCountInString(line) > 120 {
					t.Errorf("%s: a line of %d columns, more than 120: %q", tc.name, utf8.RuneCountInString(line), line)
				}
			}
		})
	}
}

func TestPoolsRowValues(t *testing.T) {
	m, adm, d := fixture(t)
	rows := Pools(m, adm, d, viewTime)
	byName := map[string]protocol.Pool{}
	for _, r := range rows {
		byName[r.Name] = r
	}
	if rows[0].Name != "default" {
		t.Errorf("first row %q, want default", rows[0].Name)
	}
	// The seed's numbers: olap gets 70% of 10 vCPU when the caps fit;
	// here olap (7) + adhoc (3) + default (weight -1, out) fit exactly.
	if got := byName["olap"].CpuLimitCores; got != 7 {
		t.Errorf("olap CpuLimitCores %v, want 7", got)
	}
	if got := byName["default"].CpuLimitCores; got != -1 {
		t.Errorf("default CpuLimitCores %v, want -1 (max)", got)
	}
	if r := byName["etl"]; !r.Dropped || r.RunningQueries != 1 {
		t.Errorf("dropped pool row %+v", r)
	}
	if r := byName["adhoc"]; r.QueryCancelAfterSeconds != 60 || r.CpuBurstPercent != 20 || r.Cpus != "0-3" || r.QueuedQueries != 3 {
		t.Errorf("adhoc row %+v", r)
	}
}

// TestMarkRunTime: a parameter a run-time change set is marked in the row
// and with "*" in the table, a pool created at run time by its name, a
// pool's state never; a table with no mark has no note under it.
func TestMarkRunTime(t *testing.T) {
	file := []protocol.Pool{
		{Name: "default", ConcurrentQueryLimit: -1, QueueSize: -1},
		{Name: "olap", ConcurrentQueryLimit: 2, QueueSize: 3},
	}
	now := []protocol.Pool{
		{Name: "default", ConcurrentQueryLimit: -1, QueueSize: -1, RunningQueries: 4},
		{Name: "olap", ConcurrentQueryLimit: 2, QueueSize: 100, QueuedQueries: 1, CpuLimitCores: 1.5},
		{Name: "etl", ConcurrentQueryLimit: 1, QueueSize: -1},
	}
	var plain bytes.Buffer
	if err := WritePools(&plain, now, true); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "*") {
		t.Errorf("a table without run-time changes shows a mark:\n%s", plain.String())
	}
	MarkRunTime(now, file)
	for i, want := range [][]string{nil, {"QueueSize"}, {"Name"}} {
		if !slices.Equal(now[i].RunTime, want) {
			t.Errorf("%s marked %v, want %v", now[i].Name, now[i].RunTime, want)
		}
	}
	var b bytes.Buffer
	if err := WritePools(&b, now, true); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[2], "olap     2                     100*") || !strings.HasPrefix(lines[3], "etl*") ||
		lines[4] != "* set at run time (poolagent sql), kept in the state directory and applied over the pool file" {
		t.Errorf("table:\n%s", b.String())
	}
	// A limit held back shows under the table, by pool.
	now[1].Pending = []string{"pending: usage 2 above new limit 1 of /p/olap/memory.max; memory.max kept at max until usage falls below it"}
	b.Reset()
	if err := WritePools(&b, now, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\nolap: pending: usage 2 above new limit 1 of /p/olap/memory.max;") {
		t.Errorf("no pending line for olap:\n%s", b.String())
	}
}
