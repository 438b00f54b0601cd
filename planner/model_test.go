package planner

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// setupSrc is a model most validation cases start from.
const setupSrc = `CREATE RESOURCE POOL olap WITH (CONCURRENT_QUERY_LIMIT=10, QUEUE_SIZE=100);
CREATE RESOURCE POOL CLASSIFIER olap_classifier WITH (RESOURCE_POOL='olap', MEMBER_NAME='all-users@well-known');`

func TestNewModelDefaultPool(t *testing.T) {
	m := NewModel()
	pools := m.Pools()
	if len(pools) != 1 {
		t.Fatalf("%d pools, want only default", len(pools))
	}
	want := Pool{
		Name: DefaultPool, ConcurrentQueryLimit: -1, QueueSize: -1, DatabaseLoadCPUThresholdPercent: -1,
		ResourcesWeight: -1, TotalCPULimitPercent: -1, QueryCPULimitPercent: -1, QueryMemoryLimitPercent: -1,
		TotalMemoryLimitPercent: -1, QueryMemoryHighPercent: -1, TotalMemoryHighPercent: -1, TotalMemoryMinPercent: -1, TotalMemoryLowPercent: -1, QueryPidsLimit: -1, TotalPidsLimit: -1, QueryCancelAfterSeconds: -1, CPUPeriodUsec: -1, CPUBurstPercent: -1, CPUIdle: -1,
		ConcurrentQueryLimitPerUser: -1, QueueSizePerUser: -1, QueuePolicy: QueueFIFO, UsageHalfLifeSeconds: -1, GlobalSlots: SlotsLease,
	}
	if pools[0] != want {
		t.Errorf("default = %+v\nwant %+v", pools[0], want)
	}
	if got := pools[0].Created.String(); got != "built in" {
		t.Errorf("default created at %q", got)
	}
}

func TestLoadSeed(t *testing.T) {
	m := loadFiles(t, "seed.sql")
	olap, ok := m.Pool("olap")
	if !ok {
		t.Fatal("no olap")
	}
	want := Pool{
		Name: "olap", ConcurrentQueryLimit: 10, QueueSize: 1000, DatabaseLoadCPUThresholdPercent: 80,
		ResourcesWeight: 100, TotalCPULimitPercent: 70, QueryCPULimitPercent: 50, QueryMemoryLimitPercent: -1,
		TotalMemoryLimitPercent: -1, QueryMemoryHighPercent: -1, TotalMemoryHighPercent: -1, TotalMemoryMinPercent: -1, TotalMemoryLowPercent: -1, QueryPidsLimit: -1, TotalPidsLimit: -1, QueryCancelAfterSeconds: -1, CPUPeriodUsec: -1, CPUBurstPercent: -1, CPUIdle: -1,
		ConcurrentQueryLimitPerUser: -1, QueueSizePerUser: -1, QueuePolicy: QueueFIFO, UsageHalfLifeSeconds: -1, GlobalSlots: SlotsLease,
		Created: Pos{File: "../testdata/pools/seed.sql", Line: 12, Col: 22},
	}
	if olap != want {
		t.Errorf("olap = %+v\nwant %+v", olap, want)
	}
	cs := m.Classifiers()
	if len(cs) != 1 || cs[0].Name != "olap_classifier" || cs[0].Rank != 1000 || cs[0].ResourcePool != "olap" || cs[0].MemberName != AllUsers {
		t.Errorf("classifiers = %+v", cs)
	}
	var grants []string
	for _, g := range m.Grants() {
		grants = append(grants, fmt.Sprintf("%s %q %s", g.Right, g.Pool, g.Member))
	}
	if got, want := strings.Join(grants, "; "), `admin "" user1; use "" user1; use "olap" all-users@well-known`; got != want {
		t.Errorf("grants: %s\nwant:   %s", got, want)
	}
	if c, ok := m.Classify(Query{Account: Account{User: "bob"}}); !ok || c.ResourcePool != "olap" || c.Name != "olap_classifier" {
		t.Errorf("bob goes to %s via %q, want olap via olap_classifier", c.ResourcePool, c.Name)
	}
	if !m.IsAdmin(Account{User: "user1"}) || m.IsAdmin(Account{User: "bob"}) {
		t.Error("user1 should be the only administrator")
	}
}

// TestApplyErrors tries every refused input: the exact message and
// place, and that nothing of the file is applied.
func TestApplyErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		// Values.
		{"integer below -1", "CREATE RESOURCE POOL p WITH (QUEUE_SIZE=-2, CONCURRENT_QUERY_LIMIT=1);",
			"f.sql:1:41: QUEUE_SIZE=-2: below -1; accepted: -1 (no limit) or 0..2147483647"},
		{"integer above Int32", "CREATE RESOURCE POOL p WITH (RESOURCES_WEIGHT=2147483648);",
			"f.sql:1:47: RESOURCES_WEIGHT=2147483648: above 2147483647; accepted: -1 (not in the fair division) or 0..2147483647"},
		{"integer overflowing int64", "CREATE RESOURCE POOL p WITH (QUERY_CANCEL_AFTER_SECONDS=99999999999999999999);",
			"f.sql:1:57: QUERY_CANCEL_AFTER_SECONDS=99999999999999999999: above 2147483647; accepted: -1 (no timeout; 0 too, as in YDB) or 0..2147483647"},
		{"decimal for an integer", "CREATE RESOURCE POOL p WITH (CONCURRENT_QUERY_LIMIT=1.5);",
			"f.sql:1:53: CONCURRENT_QUERY_LIMIT=1.5: not a whole number; accepted: -1 (no limit) or 0..1000"},
		{"text for a number", "CREATE RESOURCE POOL p WITH (CONCURRENT_QUERY_LIMIT='ten');",
			"f.sql:1:53: CONCURRENT_QUERY_LIMIT='ten': not a number; accepted: -1 (no limit) or 0..1000"},
		{"word for a number", "CREATE RESOURCE POOL p WITH (CONCURRENT_QUERY_LIMIT=max);",
			"f.sql:1:53: CONCURRENT_QUERY_LIMIT=max: not a number; accepted: -1 (no limit) or 0..1000"},
		{"percent above 100", "CREATE RESOURCE POOL p WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=120);",
			"f.sql:1:63: TOTAL_CPU_LIMIT_PERCENT_PER_NODE=120: above 100 percent; accepted: -1 (no limit) or 0..100"},
		{"percent below -1", "CREATE RESOURCE POOL p WITH (QUERY_CPU_LIMIT_PERCENT_PER_NODE=-5);",
			"f.sql:1:63: QUERY_CPU_LIMIT_PERCENT_PER_NODE=-5: below -1; accepted: -1 (no limit) or 0..100"},
		{"percent between -1 and 0", "CREATE RESOURCE POOL p WITH (TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE=-0.5);",
			"f.sql:1:66: TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE=-0.5: between -1 and 0; accepted: -1 (no limit) or 0..100"},
		{"threshold above 100", "CREATE RESOURCE POOL p WITH (DATABASE_LOAD_CPU_THRESHOLD=101);",
			"f.sql:1:58: DATABASE_LOAD_CPU_THRESHOLD=101: above 100 percent; accepted: -1 (no threshold) or 0..100"},
		{"query memory above 100", "CREATE RESOURCE POOL p WITH (QUERY_MEMORY_LIMIT_PERCENT_PER_NODE=100.5);",
			"f.sql:1:66: QUERY_MEMORY_LIMIT_PERCENT_PER_NODE=100.5: above 100 percent; accepted: -1 (no limit) or 0..100"},
		{"concurrency above YDB's cap", "CREATE RESOURCE POOL p WITH (CONCURRENT_QUERY_LIMIT=1001);",
			"f.sql:1:53: CONCURRENT_QUERY_LIMIT=1001: above YDB's limit of 1000 concurrent queries; accepted: -1 (no limit) or 0..1000"},
		{"queue without concurrency limit or threshold", "CREATE RESOURCE POOL p WITH (RESOURCES_WEIGHT=1, QUEUE_SIZE=10);",
			`f.sql:1:50: pool "p": QUEUE_SIZE=10 needs CONCURRENT_QUERY_LIMIT, CONCURRENT_QUERY_LIMIT_PER_USER or DATABASE_LOAD_CPU_THRESHOLD (without one, no query ever waits); accepted: QUEUE_SIZE=-1, or set one of them`},
		{"queue left alone by a RESET", setupSrc + "\nALTER RESOURCE POOL olap RESET (CONCURRENT_QUERY_LIMIT);",
			`f.sql:3:21: pool "olap": QUEUE_SIZE=100 needs CONCURRENT_QUERY_LIMIT, CONCURRENT_QUERY_LIMIT_PER_USER or DATABASE_LOAD_CPU_THRESHOLD (without one, no query ever waits); accepted: QUEUE_SIZE=-1, or set one of them`},
		{"burst above the quota", "CREATE RESOURCE POOL p WITH (CPU_BURST_PERCENT=150);",
			"f.sql:1:48: CPU_BURST_PERCENT=150: burst above the quota: the kernel refuses a cpu.max.burst larger than the quota; accepted: -1 (no burst) or 0..100, percent of the quota"},
		{"period below 1 ms", "CREATE RESOURCE POOL p WITH (CPU_PERIOD_USEC=999);",
			"f.sql:1:46: CPU_PERIOD_USEC=999: outside 1 ms..1 s, the periods the kernel accepts; accepted: -1 (the node's period) or 1000..1000000"},
		{"period above 1 s", "CREATE RESOURCE POOL p WITH (CPU_PERIOD_USEC=1000001);",
			"f.sql:1:46: CPU_PERIOD_USEC=1000001: outside 1 ms..1 s, the periods the kernel accepts; accepted: -1 (the node's period) or 1000..1000000"},
		{"idle out of range", "CREATE RESOURCE POOL p WITH (CPU_IDLE=2);",
			"f.sql:1:39: CPU_IDLE=2: above 1; accepted: -1 (not idle; 0 too) or 0..1"},
		{"idle as a word", "CREATE RESOURCE POOL p WITH (CPU_IDLE='yes');",
			"f.sql:1:39: CPU_IDLE='yes': not a number; accepted: -1 (not idle; 0 too) or 0..1"},
		{"idle with a weight", "CREATE RESOURCE POOL p WITH (RESOURCES_WEIGHT=10, CPU_IDLE=1);",
			`f.sql:1:51: pool "p": CPU_IDLE=1 with RESOURCES_WEIGHT=10: an idle pool gets only CPU the others leave, so it takes no part in the division of the node (the kernel gives it the least weight and refuses any other); accepted: RESOURCES_WEIGHT=-1 with CPU_IDLE=1, or CPU_IDLE=-1`},
		{"weight given to an idle pool", "CREATE RESOURCE POOL p WITH (CPU_IDLE=1);\nALTER RESOURCE POOL p SET (RESOURCE_WEIGHT=5);",
			`f.sql:2:28: pool "p": CPU_IDLE=1 with RESOURCES_WEIGHT=5: an idle pool gets only CPU the others leave, so it takes no part in the division of the node (the kernel gives it the least weight and refuses any other); accepted: RESOURCES_WEIGHT=-1 with CPU_IDLE=1, or CPU_IDLE=-1`},
		{"cpus empty", "CREATE RESOURCE POOL p WITH (CPUS='');",
			"f.sql:1:35: CPUS='': no CPUs: the pool's queries could never run; accepted: -1 (every CPU of the node) or a CPU list in quotes: CPU numbers 0..8191 and ranges LO-HI, such as '0-3' or '0,2-3'"},
		{"cpus reversed range", "CREATE RESOURCE POOL p WITH (CPUS='0,3-1');",
			`f.sql:1:35: CPUS='0,3-1': CPU list "0,3-1", byte 2: range "3-1" runs backwards; accepted: -1 (every CPU of the node) or a CPU list in quotes: CPU numbers 0..8191 and ranges LO-HI, such as '0-3' or '0,2-3'`},
		{"cpus huge number", "CREATE RESOURCE POOL p WITH (CPUS='0-99999999999999999999');",
			`f.sql:1:35: CPUS='0-99999999999999999999': CPU list "0-99999999999999999999", byte 0: CPU 99999999999999999999 is above 8191, the highest CPU number a kernel has; accepted: -1 (every CPU of the node) or a CPU list in quotes: CPU numbers 0..8191 and ranges LO-HI, such as '0-3' or '0,2-3'`},
		{"cpus above the highest CPU", "CREATE RESOURCE POOL p\n  WITH (CPUS = '8192');",
			`f.sql:2:16: CPUS='8192': CPU list "8192", byte 0: CPU 8192 is above 8191, the highest CPU number a kernel has; accepted: -1 (every CPU of the node) or a CPU list in quotes: CPU numbers 0..8191 and ranges LO-HI, such as '0-3' or '0,2-3'`},
		{"cpus junk", "CREATE RESOURCE POOL p WITH (CPUS='all');",
			`f.sql:1:35: CPUS='all': CPU list "all", byte 0: "all" is not a CPU number; accepted: -1 (every CPU of the node) or a CPU list in quotes: CPU numbers 0..8191 and ranges LO-HI, such as '0-3' or '0,2-3'`},
		{"cpus as a word", "CREATE RESOURCE POOL p WITH (CPUS=all);",
			"f.sql:1:35: CPUS=all: not a CPU list; accepted: -1 (every CPU of the node) or a CPU list in quotes: CPU numbers 0..8191 and ranges LO-HI, such as '0-3' or '0,2-3'"},
		{"cpus as a decimal", "CREATE RESOURCE POOL p WITH (CPUS=1.5);",
			`f.sql:1:35: CPUS=1.5: CPU list "1.5", byte 0: "1.5" is not a CPU number; accepted: -1 (every CPU of the node) or a CPU list in quotes: CPU numbers 0..8191 and ranges LO-HI, such as '0-3' or '0,2-3'`},
		{"cpus too long", "CREATE RESOURCE POOL p WITH (CPUS='" + strings.Repeat("0,", 20000) + "0');",
			"f.sql:1:35: CPUS='" + strings.Repeat("0,", 32) + "…': CPU list of 40001 bytes: longer than 32768; accepted: -1 (every CPU of the node) or a CPU list in quotes: CPU numbers 0..8191 and ranges LO-HI, such as '0-3' or '0,2-3'"},
		{"per-user concurrency of 0", "CREATE RESOURCE POOL p WITH (CONCURRENT_QUERY_LIMIT_PER_USER=0);",
			"f.sql:1:62: CONCURRENT_QUERY_LIMIT_PER_USER=0: below 1; accepted: -1 (no limit per user) or 1..1000"},
		{"per-user concurrency above the pool's", "CREATE RESOURCE POOL p WITH (CONCURRENT_QUERY_LIMIT=4,\n  CONCURRENT_QUERY_LIMIT_PER_USER=5);",
			`f.sql:2:3: pool "p": CONCURRENT_QUERY_LIMIT_PER_USER=5 is above the pool's CONCURRENT_QUERY_LIMIT=4: no user could run that many; accepted: -1 or 1..4`},
		{"pool's concurrency lowered below a user's", "CREATE RESOURCE POOL p WITH (CONCURRENT_QUERY_LIMIT=4, CONCURRENT_QUERY_LIMIT_PER_USER=3);\nALTER RESOURCE POOL p SET (CONCURRENT_QUERY_LIMIT=2);",
			`f.sql:2:28: pool "p": CONCURRENT_QUERY_LIMIT_PER_USER=3 is above the pool's CONCURRENT_QUERY_LIMIT=2: no user could run that many; accepted: -1 or 1..2`},
		{"per-user queue above the pool's", "CREATE RESOURCE POOL p WITH (CONCURRENT_QUERY_LIMIT=4, QUEUE_SIZE=10, QUEUE_SIZE_PER_USER=11);",
			`f.sql:1:71: pool "p": QUEUE_SIZE_PER_USER=11 is above the pool's QUEUE_SIZE=10: no user could queue that many; accepted: -1 or 0..10`},
		{"per-user queue without anything that waits", "CREATE RESOURCE POOL p WITH (QUEUE_SIZE_PER_USER=3);",
			`f.sql:1:30: pool "p": QUEUE_SIZE_PER_USER=3 needs CONCURRENT_QUERY_LIMIT, CONCURRENT_QUERY_LIMIT_PER_USER or DATABASE_LOAD_CPU_THRESHOLD (without one, no query ever waits); accepted: QUEUE_SIZE_PER_USER=-1, or set one of them`},
		{"per-user queue below -1", "CREATE RESOURCE POOL p WITH (CONCURRENT_QUERY_LIMIT=1, QUEUE_SIZE_PER_USER=-2);",
			"f.sql:1:76: QUEUE_SIZE_PER_USER=-2: below -1; accepted: -1 (no limit per user) or 0..2147483647"},
		{"queue policy unknown", "CREATE RESOURCE POOL p WITH (QUEUE_POLICY='lifo');",
			"f.sql:1:43: QUEUE_POLICY='lifo': unknown value; accepted: -1 (fifo) or one of 'fifo', 'fair' in quotes"},
		{"queue policy a number", "CREATE RESOURCE POOL p WITH (QUEUE_POLICY=1);",
			"f.sql:1:43: QUEUE_POLICY=1: not one of the words; accepted: -1 (fifo) or one of 'fifo', 'fair' in quotes"},
		{"half-life a decimal", "CREATE RESOURCE POOL p WITH (USAGE_HALF_LIFE_SECONDS=1.5);",
			"f.sql:1:54: USAGE_HALF_LIFE_SECONDS=1.5: not a whole number; accepted: -1 (3600 s) or 0..2147483647"},
		{"parameter without a value", "CREATE RESOURCE POOL p WITH (RESOURCES_WEIGHT);",
			"f.sql:1:30: RESOURCES_WEIGHT needs a value (RESOURCES_WEIGHT = …); accepted: -1 (not in the fair division) or 0..2147483647"},

		{"soft memory limit above the hard one", "CREATE RESOURCE POOL p WITH (QUERY_MEMORY_LIMIT_PERCENT_PER_NODE=5, QUERY_MEMORY_HIGH_PERCENT_PER_NODE=8);",
			`f.sql:1:69: pool "p": QUERY_MEMORY_HIGH_PERCENT_PER_NODE=8 is above QUERY_MEMORY_LIMIT_PERCENT_PER_NODE=5: the soft limit is to slow a query before the hard one kills it; accepted: -1 or 0..5`},

		{"query process limit above the pool's", "CREATE RESOURCE POOL p WITH (TOTAL_PIDS_LIMIT=64, QUERY_PIDS_LIMIT=100);",
			`f.sql:1:51: pool "p": QUERY_PIDS_LIMIT=100 is above the pool's TOTAL_PIDS_LIMIT=64: no query could have that many tasks; accepted: -1 or 1..64`},
		{"memory min above low", "CREATE RESOURCE POOL p WITH (TOTAL_MEMORY_LOW_PERCENT_PER_NODE=10, TOTAL_MEMORY_MIN_PERCENT_PER_NODE=20);",
			`f.sql:1:68: pool "p": TOTAL_MEMORY_MIN_PERCENT_PER_NODE=20 is above TOTAL_MEMORY_LOW_PERCENT_PER_NODE=10: memory.low protects all that memory.min does and more; accepted: TOTAL_MEMORY_MIN_PERCENT_PER_NODE -1 or 0..10`},
		{"memory guarantee above the pool's limit", "CREATE RESOURCE POOL p WITH (TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE=30);\nALTER RESOURCE POOL p SET (TOTAL_MEMORY_LOW_PERCENT_PER_NODE=40);",
			`f.sql:2:28: pool "p": TOTAL_MEMORY_LOW_PERCENT_PER_NODE=40 is above TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE=30: the pool can never use what it would be guaranteed; accepted: -1 or 0..30`},
		{"memory guarantees above the node", "CREATE RESOURCE POOL a WITH (TOTAL_MEMORY_LOW_PERCENT_PER_NODE=60);\nCREATE RESOURCE POOL b WITH (TOTAL_MEMORY_MIN_PERCENT_PER_NODE=50);\nCREATE RESOURCE POOL c WITH (TOTAL_MEMORY_LOW_PERCENT_PER_NODE=5);",
			`f.sql:3:30: pool "c": the memory guarantees of all pools (the larger of TOTAL_MEMORY_MIN_PERCENT_PER_NODE and TOTAL_MEMORY_LOW_PERCENT_PER_NODE) add up to 115% of the node (a 60, b 50, c 5): above 100%, they cannot all be kept; accepted for pool "c": a guarantee of at most 0`},
		{"process limit of 0", "CREATE RESOURCE POOL p WITH (TOTAL_PIDS_LIMIT=0);",
			"f.sql:1:47: TOTAL_PIDS_LIMIT=0: below 1; accepted: -1 (no limit) or 1..4194304"},
		{"process limit above the kernel's", "CREATE RESOURCE POOL p WITH (QUERY_PIDS_LIMIT=5000000);",
			"f.sql:1:47: QUERY_PIDS_LIMIT=5000000: above 4194304; accepted: -1 (no limit) or 1..4194304"},

		// Parameter names.
		{"unknown parameter, near a known one", "CREATE RESOURCE POOL p WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODES=10);",
			"f.sql:1:30: unknown pool parameter TOTAL_CPU_LIMIT_PERCENT_PER_NODES; did you mean TOTAL_CPU_LIMIT_PERCENT_PER_NODE?"},
		{"unknown parameter, nothing near", "ALTER RESOURCE POOL default SET (FOO=1);",
			"f.sql:1:34: unknown pool parameter FOO; accepted: CONCURRENT_QUERY_LIMIT, QUEUE_SIZE, DATABASE_LOAD_CPU_THRESHOLD, RESOURCES_WEIGHT, TOTAL_CPU_LIMIT_PERCENT_PER_NODE, QUERY_CPU_LIMIT_PERCENT_PER_NODE, QUERY_MEMORY_LIMIT_PERCENT_PER_NODE, TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE, QUERY_MEMORY_HIGH_PERCENT_PER_NODE, TOTAL_MEMORY_HIGH_PERCENT_PER_NODE, TOTAL_MEMORY_MIN_PERCENT_PER_NODE, TOTAL_MEMORY_LOW_PERCENT_PER_NODE, QUERY_PIDS_LIMIT, TOTAL_PIDS_LIMIT, QUERY_CANCEL_AFTER_SECONDS, CPU_PERIOD_USEC, CPU_BURST_PERCENT, CPU_IDLE, CPUS, CONCURRENT_QUERY_LIMIT_PER_USER, QUEUE_SIZE_PER_USER, QUEUE_POLICY, USAGE_HALF_LIFE_SECONDS, GLOBAL_SLOTS"},
		{"unknown parameter in RESET", setupSrc + "\nALTER RESOURCE POOL olap RESET (QUEUESIZE);",
			"f.sql:3:33: unknown pool parameter QUEUESIZE; did you mean QUEUE_SIZE?"},
		{"classifier parameter on a pool", "CREATE RESOURCE POOL p WITH (RANK=1);",
			"f.sql:1:30: RANK is a classifier parameter, not a pool's; accepted for pools: CONCURRENT_QUERY_LIMIT, QUEUE_SIZE, DATABASE_LOAD_CPU_THRESHOLD, RESOURCES_WEIGHT, TOTAL_CPU_LIMIT_PERCENT_PER_NODE, QUERY_CPU_LIMIT_PERCENT_PER_NODE, QUERY_MEMORY_LIMIT_PERCENT_PER_NODE, TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE, QUERY_MEMORY_HIGH_PERCENT_PER_NODE, TOTAL_MEMORY_HIGH_PERCENT_PER_NODE, TOTAL_MEMORY_MIN_PERCENT_PER_NODE, TOTAL_MEMORY_LOW_PERCENT_PER_NODE, QUERY_PIDS_LIMIT, TOTAL_PIDS_LIMIT, QUERY_CANCEL_AFTER_SECONDS, CPU_PERIOD_USEC, CPU_BURST_PERCENT, CPU_IDLE, CPUS, CONCURRENT_QUERY_LIMIT_PER_USER, QUEUE_SIZE_PER_USER, QUEUE_POLICY, USAGE_HALF_LIFE_SECONDS, GLOBAL_SLOTS"},
		{"both weight spellings", "CREATE RESOURCE POOL p WITH (RESOURCES_WEIGHT=1, RESOURCE_WEIGHT=2);",
			"f.sql:1:50: RESOURCE_WEIGHT is given twice (first as RESOURCES_WEIGHT at f.sql:1:30)"},

		// Pools.
		{"duplicate pool", "CREATE RESOURCE POOL p;\nCREATE RESOURCE POOL p;",
			`f.sql:2:22: pool "p" already exists (created at f.sql:1:22)`},
		{"creating default", "CREATE RESOURCE POOL default WITH (RESOURCES_WEIGHT=-1);",
			`f.sql:1:22: pool "default" always exists; change it with ALTER RESOURCE POOL default SET (…)`},
		{"dropping default", "DROP RESOURCE POOL default;",
			`f.sql:1:20: pool "default" cannot be dropped: it always exists, every query not routed elsewhere runs in it`},
		{"locked parameter of default", "ALTER RESOURCE POOL default SET (RESOURCES_WEIGHT=10, CONCURRENT_QUERY_LIMIT=5);",
			`f.sql:1:55: pool "default": CONCURRENT_QUERY_LIMIT cannot be changed (as in YDB, admission to the default pool stays open so a bad setting cannot stall every query); accepted for default: every parameter except CONCURRENT_QUERY_LIMIT, QUEUE_SIZE and DATABASE_LOAD_CPU_THRESHOLD`},
		{"locked parameter of default in RESET", "ALTER RESOURCE POOL default RESET (database_load_cpu_threshold);",
			`f.sql:1:36: pool "default": DATABASE_LOAD_CPU_THRESHOLD cannot be changed (as in YDB, admission to the default pool stays open so a bad setting cannot stall every query); accepted for default: every parameter except CONCURRENT_QUERY_LIMIT, QUEUE_SIZE and DATABASE_LOAD_CPU_THRESHOLD`},
		{"altering a missing pool", setupSrc + "\nALTER RESOURCE POOL olapp SET (QUEUE_SIZE=1);",
			`f.sql:3:21: ALTER: pool "olapp" does not exist; did you mean "olap"?`},
		{"dropping a missing pool", "DROP RESOURCE POOL nope;", `f.sql:1:20: DROP: pool "nope" does not exist`},

		// Names.
		{"name ..", "CREATE RESOURCE POOL `..`;",
			`f.sql:1:22: pool name ".." is refused: it names a directory itself or its parent; accepted: 1 to 64 of A-Z a-z 0-9 _ -, not starting with '-'`},
		{"name .", "CREATE RESOURCE POOL '.';",
			`f.sql:1:22: pool name "." is refused: it names a directory itself or its parent; accepted: 1 to 64 of A-Z a-z 0-9 _ -, not starting with '-'`},
		{"name with /", "CREATE RESOURCE POOL `../etc`;",
			`f.sql:1:22: pool name "../etc" is refused: it contains '/', which would address another directory; accepted: 1 to 64 of A-Z a-z 0-9 _ -, not starting with '-'`},
		{"name with a control character", "CREATE RESOURCE POOL `a\nb`;",
			`f.sql:1:22: pool name "a\nb" is refused: it contains a control character; accepted: 1 to 64 of A-Z a-z 0-9 _ -, not starting with '-'`},
		{"empty name", "CREATE RESOURCE POOL ``;",
			`f.sql:1:22: pool name "" is refused: it is empty; accepted: 1 to 64 of A-Z a-z 0-9 _ -, not starting with '-'`},
		{"cgroup core file", "CREATE RESOURCE POOL `cgroup.procs`;",
			`f.sql:1:22: pool name "cgroup.procs" is refused: names starting with "cgroup." are the kernel's cgroup files; accepted: 1 to 64 of A-Z a-z 0-9 _ -, not starting with '-'`},
		{"controller prefix", "CREATE RESOURCE POOL `memory.high`;",
			`f.sql:1:22: pool name "memory.high" is refused: names starting with "memory." are the kernel's cgroup files; accepted: 1 to 64 of A-Z a-z 0-9 _ -, not starting with '-'`},
		{"v1 kernel file", "CREATE RESOURCE POOL tasks;",
			`f.sql:1:22: pool name "tasks" is refused: "tasks" is a cgroup v1 kernel file; accepted: 1 to 64 of A-Z a-z 0-9 _ -, not starting with '-'`},
		{"too long", "CREATE RESOURCE POOL " + strings.Repeat("a", 65) + ";",
			`f.sql:1:22: pool name "` + strings.Repeat("a", 65) + `" is refused: it is longer than 64 characters; accepted: 1 to 64 of A-Z a-z 0-9 _ -, not starting with '-'`},
		{"other characters", "CREATE RESOURCE POOL `olap v2`;",
			`f.sql:1:22: pool name "olap v2" is refused: it has characters outside the accepted set; accepted: 1 to 64 of A-Z a-z 0-9 _ -, not starting with '-'`},
		{"leading dash", "CREATE RESOURCE POOL `-rf`;",
			`f.sql:1:22: pool name "-rf" is refused: it has characters outside the accepted set; accepted: 1 to 64 of A-Z a-z 0-9 _ -, not starting with '-'`},

		// Classifiers.
		{"duplicate classifier", setupSrc + "\nCREATE RESOURCE POOL CLASSIFIER olap_classifier WITH (RESOURCE_POOL='olap');",
			`f.sql:3:33: classifier "olap_classifier" already exists (created at f.sql:2:33)`},
		{"rank taken", setupSrc + "\nCREATE RESOURCE POOL CLASSIFIER c2 WITH (RESOURCE_POOL='olap', RANK=1000);",
			`f.sql:3:69: RANK=1000 is taken by classifier "olap_classifier" (created at f.sql:2:33): ranks are unique; accepted: an unused rank 0..9223372036854775807, or omit RANK for the largest rank + 1000`},
		{"rank taken by ALTER", setupSrc + "\nCREATE RESOURCE POOL CLASSIFIER c2 WITH (RESOURCE_POOL='olap');\nALTER RESOURCE POOL CLASSIFIER c2 SET (RANK=1000);",
			`f.sql:4:45: RANK=1000 is taken by classifier "olap_classifier" (created at f.sql:2:33): ranks are unique; accepted: an unused rank 0..9223372036854775807, or omit RANK for the largest rank + 1000`},
		{"negative rank", "CREATE RESOURCE POOL CLASSIFIER c WITH (RESOURCE_POOL='default', RANK=-1);",
			"f.sql:1:71: RANK=-1: out of range; accepted: an unused rank 0..9223372036854775807, or omit RANK for the largest rank + 1000"},
		{"rank overflow", "CREATE RESOURCE POOL CLASSIFIER c WITH (RESOURCE_POOL='default', RANK=9223372036854775808);",
			"f.sql:1:71: RANK=9223372036854775808: out of range; accepted: an unused rank 0..9223372036854775807, or omit RANK for the largest rank + 1000"},
		{"no rank left for auto", "CREATE RESOURCE POOL CLASSIFIER a WITH (RESOURCE_POOL='default', RANK=9223372036854775000);\nCREATE RESOURCE POOL CLASSIFIER b WITH (RESOURCE_POOL='default');",
			"f.sql:2:33: no rank is left above 9223372036854775000 for an automatic RANK; give RANK explicitly"},
		{"classifier without pool", "CREATE RESOURCE POOL CLASSIFIER c WITH (MEMBER_NAME='alice');",
			`f.sql:1:33: classifier "c" needs RESOURCE_POOL = 'pool' (where its queries go) or ACTION = 'reject'; accepted: exactly one of RESOURCE_POOL = 'pool' and ACTION = 'reject'`},
		{"classifier with pool and action", "CREATE RESOURCE POOL CLASSIFIER c WITH (RESOURCE_POOL='default', ACTION='reject');",
			`f.sql:1:66: classifier "c" has both RESOURCE_POOL and ACTION, which exclude each other (as in YDB); accepted: exactly one of RESOURCE_POOL = 'pool' and ACTION = 'reject'`},
		{"action on a routing classifier", setupSrc + "\nALTER RESOURCE POOL CLASSIFIER olap_classifier SET (ACTION='reject');",
			`f.sql:3:53: classifier "olap_classifier" has both RESOURCE_POOL and ACTION, which exclude each other (as in YDB); accepted: exactly one of RESOURCE_POOL = 'pool' and ACTION = 'reject'`},
		{"unknown action", "CREATE RESOURCE POOL CLASSIFIER c WITH (ACTION='drop');",
			"f.sql:1:48: ACTION='drop': unknown action; accepted: 'reject' (YDB's only action: refuse the queries the classifier matches)"},
		{"app name with a path", "CREATE RESOURCE POOL CLASSIFIER c WITH (RESOURCE_POOL='default', HAS_APP_NAME='/usr/bin/make');",
			`f.sql:1:79: HAS_APP_NAME: app name "/usr/bin/make" contains '/': it is compared with the base name of the executable, never a path; accepted: the base name of an executable, such as 'make' or 'python3.11', 1 to 255 bytes without '/' or control characters`},
		{"empty app name", "CREATE RESOURCE POOL CLASSIFIER c WITH (RESOURCE_POOL='default', HAS_APP_NAME='');",
			"f.sql:1:79: HAS_APP_NAME: app name is empty; accepted: the base name of an executable, such as 'make' or 'python3.11', 1 to 255 bytes without '/' or control characters"},
		{"app name as a number", "CREATE RESOURCE POOL CLASSIFIER c WITH (RESOURCE_POOL='default', HAS_APP_NAME=7);",
			"f.sql:1:79: HAS_APP_NAME=7: expected an executable's name in quotes such as 'make'"},
		{"classifier pool name refused", "CREATE RESOURCE POOL CLASSIFIER c WITH (RESOURCE_POOL='../x');",
			`f.sql:1:55: RESOURCE_POOL: pool name "../x" is refused: it contains '/', which would address another directory; accepted: 1 to 64 of A-Z a-z 0-9 _ -, not starting with '-'`},
		{"classifier member refused", "CREATE RESOURCE POOL CLASSIFIER c WITH (RESOURCE_POOL='default', MEMBER_NAME='a b');",
			`f.sql:1:78: MEMBER_NAME: member "a b" is refused; accepted: a Unix user name (alice, user1@domain), %group for a Unix group (%analysts), or all-users@well-known`},
		{"YDB predicate without a host meaning", "CREATE RESOURCE POOL CLASSIFIER c WITH (RESOURCE_POOL='default', HAS_STREAM=true);",
			"f.sql:1:66: HAS_STREAM is refused: YDB's streaming queries are a kind of query (continuous reads and writes over topics) declared to the server; " +
				"a command has no such kind, and how long it will run is not known when it is classified; accepted: RESOURCE_POOL, ACTION, MEMBER_NAME, HAS_APP_NAME, RANK"},
		{"pool parameter on a classifier", "CREATE RESOURCE POOL CLASSIFIER c WITH (RESOURCE_POOL='default', QUEUE_SIZE=1);",
			"f.sql:1:66: QUEUE_SIZE is a pool parameter, not a classifier's; accepted: RESOURCE_POOL, ACTION, MEMBER_NAME, HAS_APP_NAME, RANK"},
		{"unknown classifier parameter", "CREATE RESOURCE POOL CLASSIFIER c WITH (RESOURCE_POOL='default', MEMBER='x');",
			"f.sql:1:66: unknown classifier parameter MEMBER; did you mean MEMBER_NAME?"},
		{"resetting a classifier's pool", setupSrc + "\nALTER RESOURCE POOL CLASSIFIER olap_classifier RESET (RESOURCE_POOL);",
			`f.sql:3:55: classifier "olap_classifier" needs RESOURCE_POOL = 'pool' (where its queries go) or ACTION = 'reject'; accepted: exactly one of RESOURCE_POOL = 'pool' and ACTION = 'reject'`},
		{"altering a missing classifier", "ALTER RESOURCE POOL CLASSIFIER nope SET (RANK=1);",
			`f.sql:1:32: ALTER: classifier "nope" does not exist`},
		{"dropping a missing classifier", "DROP RESOURCE POOL CLASSIFIER nope;",
			`f.sql:1:31: DROP: classifier "nope" does not exist`},

		// Grants.
		{"grant on a missing pool", "GRANT SELECT ROW ON `.metadata/workload_manager/pools/olap` TO bob;",
			`f.sql:1:21: pool "olap" does not exist`},
		{"grant on a missing pool, host form", setupSrc + "\nGRANT USE ON RESOURCE POOL olpa TO bob;",
			`f.sql:3:28: pool "olpa" does not exist; did you mean "olap"?`},
		{"grant on something else", "GRANT SELECT ON `/shop_db/orders/2024` TO bob;",
			"f.sql:1:17: `/shop_db/orders/2024` is neither a resource pool nor a database; accepted: `.metadata/workload_manager/pools/NAME`, `.metadata/workload_manager/pools`, a database such as `/my_db`, or RESOURCE POOL NAME"},
		{"grant below a pool", setupSrc + "\nGRANT SELECT ON `.metadata/workload_manager/pools/olap/x` TO bob;",
			"f.sql:3:17: `.metadata/workload_manager/pools/olap/x` is neither a resource pool nor a database; accepted: `.metadata/workload_manager/pools/NAME`, `.metadata/workload_manager/pools`, a database such as `/my_db`, or RESOURCE POOL NAME"},
		{"unknown right", "GRANT SELECT ROWS ON `/db` TO bob;",
			`f.sql:1:7: unknown right "SELECT ROWS"; did you mean SELECT ROW?`},
		{"bad member", "GRANT SELECT ROW ON `/db` TO `bob smith`;",
			`f.sql:1:30: member "bob smith" is refused; accepted: a Unix user name (alice, user1@domain), %group for a Unix group (%analysts), or all-users@well-known`},

		// Several problems at once, in file order.
		{"every problem of a file is reported", "CREATE RESOURCE POOL a WITH (QUEUE_SIZE=-5);\nCREATE RESOURCE POOL `b/c`;\nDROP RESOURCE POOL default;\nALTER RESOURCE POOL a SET (CONCURRENT_QUERY_LIMIT=2000);",
			"f.sql:1:41: QUEUE_SIZE=-5: below -1; accepted: -1 (no limit) or 0..2147483647\n" +
				`f.sql:2:22: pool name "b/c" is refused: it contains '/', which would address another directory; accepted: 1 to 64 of A-Z a-z 0-9 _ -, not starting with '-'` + "\n" +
				`f.sql:3:20: pool "default" cannot be dropped: it always exists, every query not routed elsewhere runs in it` + "\n" +
				"f.sql:4:51: CONCURRENT_QUERY_LIMIT=2000: above YDB's limit of 1000 concurrent queries; accepted: -1 (no limit) or 0..1000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The statements apply onto a model that already holds a file:
			// a refused change must leave it exactly as it was.
			base := mustApply(t, NewModel(), "CREATE RESOURCE POOL existing WITH (RESOURCES_WEIGHT=5);\nGRANT USE ON RESOURCE POOL existing TO alice;")
			before := snapshot(base)
			stmts, err := Parse("f.sql", []byte(tc.src))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			m, _, err := Apply(base, stmts)
			if err == nil {
				t.Fatal("applied without error")
			}
			if err.Error() != tc.want {
				t.Errorf("error:\n%v\nwant:\n%s", err, tc.want)
			}
			if m != base || !reflect.DeepEqual(snapshot(base), before) {
				t.Errorf("the model changed although the file was refused")
			}
		})
	}
}

// snapshot captures everything a model holds.
func snapshot(m *Model) []any {
	return []any{m.Pools(), m.Classifiers(), m.Grants()}
}

// TestApplyWarnings checks what is accepted with a warning.
func TestApplyWarnings(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"classifier to a missing pool", "CREATE RESOURCE POOL CLASSIFIER c WITH (RESOURCE_POOL='olap1', MEMBER_NAME='user1@domain');",
			`f.sql:1:55: warning: classifier "c" routes to pool "olap1", which does not exist; it is skipped until the pool is created`},
		{"classifier whose pool is dropped", setupSrc + "\nDROP RESOURCE POOL olap;",
			`f.sql:2:69: warning: classifier "olap_classifier" routes to pool "olap", which does not exist; it is skipped until the pool is created`},
		{"classifier whose pool comes later is fine", "CREATE RESOURCE POOL CLASSIFIER c WITH (RESOURCE_POOL='later');\nCREATE RESOURCE POOL later;", ""},
		{"weight above cpu.weight's range", "CREATE RESOURCE POOL p WITH (RESOURCES_WEIGHT=20000);",
			"f.sql:1:47: warning: RESOURCES_WEIGHT=20000 is above cpu.weight's maximum 10000: the allocation (cpu.max) uses the exact weight, but cpu.weight is written as 10000, so between recomputations the kernel keeps a smaller ratio"},
		{"right without host meaning", "GRANT UPDATE ROW ON `/db` TO bob;",
			"f.sql:1:7: warning: GRANT UPDATE ROW has no meaning for resource pools on a host; it is ignored"},
		{"companion right is silent", "GRANT DESCRIBE SCHEMA, SELECT ROW ON `/db` TO bob;", ""},
		{"administration of one pool", setupSrc + "\nGRANT 'ALTER SCHEMA' ON `.metadata/workload_manager/pools/olap` TO bob;",
			"f.sql:3:25: warning: GRANT ALTER SCHEMA on a single pool grants nothing on a host: administration covers all pools; to make an administrator, grant it on `.metadata/workload_manager/pools` or the database"},
		{"revoking what was not granted", "REVOKE SELECT ROW ON `/db` FROM bob;",
			"f.sql:1:33: warning: REVOKE: bob has no use grant on every pool; nothing to revoke"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stmts, err := Parse("f.sql", []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			_, warns, err := Apply(NewModel(), stmts)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range warns {
				got = append(got, w.String())
			}
			if g := strings.Join(got, "\n"); g != tc.want {
				t.Errorf("warnings:\n%s\nwant:\n%s", g, tc.want)
			}
		})
	}
}

// TestClassifierRanks follows YDB's rank rules.
func TestClassifierRanks(t *testing.T) {
	m := loadFiles(t, "seed_ranks.sql")
	ranks := func(m *Model) string {
		var out []string
		for _, c := range m.Classifiers() {
			out = append(out, fmt.Sprintf("%s=%d", c.Name, c.Rank))
		}
		return strings.Join(out, " ")
	}
	if got := ranks(m); got != "olap1_classifier=1000 olap2_classifier=2000" {
		t.Fatalf("seed ranks: %s", got)
	}
	steps := []struct{ src, want string }{
		{"CREATE RESOURCE POOL CLASSIFIER first WITH (RESOURCE_POOL='default', RANK=0);",
			"first=0 olap1_classifier=1000 olap2_classifier=2000"},
		{"CREATE RESOURCE POOL CLASSIFIER next WITH (RESOURCE_POOL='default');",
			"first=0 olap1_classifier=1000 olap2_classifier=2000 next=3000"},
		{"ALTER RESOURCE POOL CLASSIFIER olap1_classifier SET (RANK=2500);",
			"first=0 olap2_classifier=2000 olap1_classifier=2500 next=3000"},
		{"ALTER RESOURCE POOL CLASSIFIER first RESET (RANK);",
			"olap2_classifier=2000 olap1_classifier=2500 next=3000 first=4000"},
		{"DROP RESOURCE POOL CLASSIFIER next; CREATE RESOURCE POOL CLASSIFIER again WITH (RESOURCE_POOL='default', RANK=3000);",
			"olap2_classifier=2000 olap1_classifier=2500 again=3000 first=4000"},
	}
	for _, s := range steps {
		m = mustApply(t, m, s.src)
		if got := ranks(m); got != s.want {
			t.Errorf("after %s\nranks %s\nwant  %s", s.src, got, s.want)
		}
	}
}

// TestGrantMapping checks what each accepted GRANT/REVOKE form gives.
func TestGrantMapping(t *testing.T) {
	const pools = "CREATE RESOURCE POOL olap; CREATE RESOURCE POOL etl;\n"
	tests := []struct {
		name string
		src  string
		want string // Grants(), "right pool member" joined by "; "
	}{
		{"SELECT ROW on a pool", "GRANT SELECT ROW ON `.metadata/workload_manager/pools/olap` TO bob;", `use "olap" bob`},
		{"with a database prefix and ydb.* name", "GRANT 'ydb.granular.select_row' ON `/Root/.metadata/workload_manager/pools/olap` TO `user1@domain`;", `use "olap" user1@domain`},
		{"host form", "GRANT USE ON RESOURCE POOL olap, etl TO alice, '%analysts';",
			`use "etl" %analysts; use "etl" alice; use "olap" %analysts; use "olap" alice`},
		{"use on the pools directory is every pool", "GRANT SELECT ON `.metadata/workload_manager/pools` TO bob;", `use "" bob`},
		{"CREATE TABLE on the pools directory is admin", "GRANT CREATE TABLE ON `.metadata/workload_manager/pools` TO user1;", `admin "" user1`},
		{"ALL on the database is admin and use", "GRANT ALL ON `/my_db` TO user1;", `admin "" user1; use "" user1`},
		{"ALL on one pool is use", "GRANT ALL PRIVILEGES ON RESOURCE POOL olap TO bob;", `use "olap" bob`},
		{"grant option is admin", "GRANT SELECT ROW ON `/my_db` TO bob WITH GRANT OPTION;", `admin "" bob; use "" bob`},
		{"REVOKE takes back", "GRANT ALL ON `/my_db` TO user1; REVOKE SELECT ROW ON `/my_db` FROM user1;", `admin "" user1`},
		{"REVOKE GRANT OPTION FOR keeps the use", "GRANT ALL ON `/my_db` TO user1; REVOKE GRANT OPTION FOR ALL ON `/my_db` FROM user1;", `use "" user1`},
		{"DROP takes the pool's grants", "GRANT USE ON RESOURCE POOL olap TO bob; GRANT USE ON RESOURCE POOL etl TO bob; DROP RESOURCE POOL olap; CREATE RESOURCE POOL olap;", `use "etl" bob`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := mustApply(t, NewModel(), pools+tc.src)
			var got []string
			for _, g := range m.Grants() {
				got = append(got, fmt.Sprintf("%s %q %s", g.Right, g.Pool, g.Member))
			}
			if g := strings.Join(got, "; "); g != tc.want {
				t.Errorf("grants %s\nwant   %s", g, tc.want)
			}
		})
	}
}

// TestClassifyAndAccess checks pool choice: lowest rank first, skipping
// classifiers whose pool is missing or not usable, default otherwise.
func TestClassifyAndAccess(t *testing.T) {
	m := mustApply(t, NewModel(), `
		CREATE RESOURCE POOL olap; CREATE RESOURCE POOL etl; CREATE RESOURCE POOL vip;
		CREATE RESOURCE POOL CLASSIFIER gone WITH (RESOURCE_POOL='missing', RANK=10);
		CREATE RESOURCE POOL CLASSIFIER ceo WITH (RESOURCE_POOL='vip', MEMBER_NAME='carol', RANK=100);
		CREATE RESOURCE POOL CLASSIFIER etl_group WITH (RESOURCE_POOL='etl', MEMBER_NAME='%etl', RANK=200);
		CREATE RESOURCE POOL CLASSIFIER everyone WITH (RESOURCE_POOL='olap', RANK=300);
		GRANT USE ON RESOURCE POOL etl TO '%etl';
		GRANT SELECT ROW ON `+"`.metadata/workload_manager/pools/olap`"+` TO `+"`all-users@well-known`"+`;
		GRANT SELECT ROW ON `+"`.metadata/workload_manager/pools/vip`"+` TO dave;`)
	tests := []struct {
		id               Account
		pool, classifier string
	}{
		{Account{User: "carol"}, "olap", "everyone"}, // ceo classifier matches, but carol may not use vip
		{Account{User: "bob", Groups: []string{"etl"}}, "etl", "etl_group"},
		{Account{User: "eve"}, "olap", "everyone"},
	}
	for _, tc := range tests {
		c, _ := m.Classify(Query{Account: tc.id})
		if c.ResourcePool != tc.pool || c.Name != tc.classifier {
			t.Errorf("%+v → %s via %q, want %s via %q", tc.id, c.ResourcePool, c.Name, tc.pool, tc.classifier)
		}
	}
	m = mustApply(t, m, "DROP RESOURCE POOL CLASSIFIER everyone;")
	if c, ok := m.Classify(Query{Account: Account{User: "eve"}}); ok {
		t.Errorf("no classifier should match eve, %q did", c.Name)
	}
	if !m.MayUse(Account{User: "eve"}, DefaultPool) {
		t.Error("everyone may use default")
	}
	if m.MayUse(Account{User: "eve"}, "vip") || !m.MayUse(Account{User: "dave"}, "vip") {
		t.Error("only dave may use vip")
	}
	if m.MayUse(Account{User: "eve"}, "missing") {
		t.Error("a missing pool is never usable")
	}
}

// TestApplyInOrder applies a file and then run-time changes, each on the
// model the previous one produced.
func TestApplyInOrder(t *testing.T) {
	m0 := loadFiles(t, "seed.sql")
	m1 := mustApply(t, m0, "ALTER RESOURCE POOL olap SET (QUEUE_SIZE=100), RESET (DATABASE_LOAD_CPU_THRESHOLD);")
	p0, _ := m0.Pool("olap")
	p1, _ := m1.Pool("olap")
	if p0.QueueSize != 1000 || p0.DatabaseLoadCPUThresholdPercent != 80 {
		t.Errorf("the earlier model changed: %+v", p0)
	}
	if p1.QueueSize != 100 || p1.DatabaseLoadCPUThresholdPercent != -1 {
		t.Errorf("after ALTER: %+v", p1)
	}
	m2 := mustApply(t, m1, "DROP RESOURCE POOL olap; ALTER RESOURCE POOL default SET (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=50, RESOURCE_WEIGHT=10);")
	if _, ok := m2.Pool("olap"); ok {
		t.Error("olap not dropped")
	}
	if d, _ := m2.Pool(DefaultPool); d.TotalCPULimitPercent != 50 || d.ResourcesWeight != 10 {
		t.Errorf("default after ALTER: %+v", d)
	}
}

// TestErrorListUnwrap lets callers pick out one problem with errors.As.
func TestErrorListUnwrap(t *testing.T) {
	stmts, err := Parse("f.sql", []byte("DROP RESOURCE POOL default; DROP RESOURCE POOL nope;"))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = Apply(NewModel(), stmts)
	var first *Error
	if !errors.As(err, &first) || first.Pos != (Pos{File: "f.sql", Line: 1, Col: 20}) {
		t.Errorf("errors.As gave %v", first)
	}
	if list, ok := err.(ErrorList); !ok || len(list) != 2 {
		t.Errorf("err = %#v, want an ErrorList of 2", err)
	}
	if got := (Pos{Line: 3, Col: 4}).String(); got != "3:4" {
		t.Errorf("Pos without a file = %q", got)
	}
}

// TestPerUserParameters: the per-user limits and the queue policy are
// stored as given, in any spelling YDB's values take, and RESET or -1
// gives back FIFO and no limits.
func TestPerUserParameters(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		running   int64
		queue     int64
		policy    string
		halfLife  int64
	}{
		{"all four", "CREATE RESOURCE POOL p WITH (CONCURRENT_QUERY_LIMIT=10, QUEUE_SIZE=100, CONCURRENT_QUERY_LIMIT_PER_USER=3, QUEUE_SIZE_PER_USER=\"20\", QUEUE_POLICY='FAIR', USAGE_HALF_LIFE_SECONDS=600);",
			3, 20, QueueFair, 600},
		{"policy as a bare word", "CREATE RESOURCE POOL p WITH (QUEUE_POLICY=fair);", -1, -1, QueueFair, -1},
		{"per-user limits without pool limits", "CREATE RESOURCE POOL p WITH (CONCURRENT_QUERY_LIMIT_PER_USER=2, QUEUE_SIZE_PER_USER=0);", 2, 0, QueueFIFO, -1},
		{"a disabled pool keeps its per-user limit", "CREATE RESOURCE POOL p WITH (CONCURRENT_QUERY_LIMIT=4, CONCURRENT_QUERY_LIMIT_PER_USER=3);\nALTER RESOURCE POOL p SET (CONCURRENT_QUERY_LIMIT=0);",
			3, -1, QueueFIFO, -1},
		{"-1 is fifo", "CREATE RESOURCE POOL p WITH (QUEUE_POLICY='fair');\nALTER RESOURCE POOL p SET (QUEUE_POLICY=-1);", -1, -1, QueueFIFO, -1},
		{"RESET", "CREATE RESOURCE POOL p WITH (CONCURRENT_QUERY_LIMIT_PER_USER=1, QUEUE_POLICY='fair', USAGE_HALF_LIFE_SECONDS=0);\nALTER RESOURCE POOL p RESET (CONCURRENT_QUERY_LIMIT_PER_USER, QUEUE_POLICY, USAGE_HALF_LIFE_SECONDS);",
			-1, -1, QueueFIFO, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := mustApply(t, NewModel(), tc.src).Pool("p")
			if !ok {
				t.Fatal("no pool p")
			}
			if p.ConcurrentQueryLimitPerUser != tc.running || p.QueueSizePerUser != tc.queue || p.QueuePolicy != tc.policy || p.UsageHalfLifeSeconds != tc.halfLife {
				t.Errorf("per user %d running, %d queued, policy %q, half-life %d; want %d, %d, %q, %d",
					p.ConcurrentQueryLimitPerUser, p.QueueSizePerUser, p.QueuePolicy, p.UsageHalfLifeSeconds, tc.running, tc.queue, tc.policy, tc.halfLife)
			}
		})
	}
}
