package planner

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/internal/suggest"
)

// Limits of the pool parameters.
const (
	// MaxConcurrentQueryLimit is YDB's cap on CONCURRENT_QUERY_LIMIT.
	MaxConcurrentQueryLimit = 1000
	// MaxPidsLimit is the highest QUERY_PIDS_LIMIT and TOTAL_PIDS_LIMIT:
	// the kernel's PID_MAX_LIMIT on 64-bit hosts, the most tasks a host
	// can ever have.
	MaxPidsLimit = 4 << 20
)

// maxInt32 is the largest value of YDB's Int32 parameters.
const maxInt32 = math.MaxInt32

// param describes one pool parameter: its DDL name, the values it
// accepts and where it is stored in a Pool. Integer parameters accept -1
// or min..max; percent parameters accept -1 or 0..100 with decimals, as
// YDB's Double percents do.
type param struct {
	name    string
	aliases []string
	percent bool
	min     int64  // integer parameters: lowest value besides -1
	max     int64  // integer parameters: highest value
	unset   string // what -1 means, for "accepted:" texts
	// above explains a value over max; "" gives the generic "above max".
	above string
	// lockedOnDefault marks parameters ALTER may not change on `default`.
	lockedOnDefault bool
	intField        func(*Pool) *int64
	pctField        func(*Pool) *float64
	// cpus marks CPUS, whose value is a CPU list (Pool.CPUs).
	cpus bool
	// words are the values of a parameter that takes one of a few words
	// (QUEUE_POLICY), the first its default; wordField stores it.
	words     []string
	wordField func(*Pool) *string
}

// Queue policies, the values of QUEUE_POLICY.
const (
	// QueueFIFO starts queued queries in arrival order, YDB's rule.
	QueueFIFO = "fifo"
	// QueueFair gives the next free slot to the user with the least
	// recent usage of the pool (docs/pools.md).
	QueueFair = "fair"
)

// Global slot policies, the values of GLOBAL_SLOTS.
const (
	// SlotsLease: a node's slots go with its session lease, so a node
	// that vanishes frees them after the TTL (YDB's liveness first).
	SlotsLease = "lease"
	// SlotsStrict: a node's slots stay until it comes back and adopts
	// what still runs, or an administrator releases them (docs/fleet.md).
	SlotsStrict = "strict"
)

// DefaultUsageHalfLifeSeconds is the half-life of the CPU time a user
// used in a pool, as the fair queue counts it, when
// USAGE_HALF_LIFE_SECONDS is -1.
const DefaultUsageHalfLifeSeconds = 3600

// params is every pool parameter, YDB's first and then poolagent's own
// extensions (the soft memory limits, the memory guarantees, the process limits, CPU_PERIOD_USEC, CPU_BURST_PERCENT,
// CPU_IDLE, CPUS, the per-user limits and queue policy, and
// GLOBAL_SLOTS).
var params = []*param{
	{name: "CONCURRENT_QUERY_LIMIT", max: MaxConcurrentQueryLimit, unset: "no limit", lockedOnDefault: true,
		above:    fmt.Sprintf("above YDB's limit of %d concurrent queries", MaxConcurrentQueryLimit),
		intField: func(p *Pool) *int64 { return &p.ConcurrentQueryLimit }},
	{name: "QUEUE_SIZE", max: maxInt32, unset: "no limit", lockedOnDefault: true,
		intField: func(p *Pool) *int64 { return &p.QueueSize }},
	{name: "DATABASE_LOAD_CPU_THRESHOLD", percent: true, unset: "no threshold", lockedOnDefault: true,
		pctField: func(p *Pool) *float64 { return &p.DatabaseLoadCPUThresholdPercent }},
	{name: "RESOURCES_WEIGHT", aliases: []string{"RESOURCE_WEIGHT"}, max: maxInt32, unset: "not in the fair division",
		intField: func(p *Pool) *int64 { return &p.ResourcesWeight }},
	{name: "TOTAL_CPU_LIMIT_PERCENT_PER_NODE", percent: true, unset: "no limit",
		pctField: func(p *Pool) *float64 { return &p.TotalCPULimitPercent }},
	{name: "QUERY_CPU_LIMIT_PERCENT_PER_NODE", percent: true, unset: "no limit",
		pctField: func(p *Pool) *float64 { return &p.QueryCPULimitPercent }},
	{name: "QUERY_MEMORY_LIMIT_PERCENT_PER_NODE", percent: true, unset: "no limit",
		pctField: func(p *Pool) *float64 { return &p.QueryMemoryLimitPercent }},
	{name: "TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE", percent: true, unset: "no limit",
		pctField: func(p *Pool) *float64 { return &p.TotalMemoryLimitPercent }},
	{name: "QUERY_MEMORY_HIGH_PERCENT_PER_NODE", percent: true, unset: "no soft limit; 0 too",
		pctField: func(p *Pool) *float64 { return &p.QueryMemoryHighPercent }},
	{name: "TOTAL_MEMORY_HIGH_PERCENT_PER_NODE", percent: true, unset: "no soft limit; 0 too",
		pctField: func(p *Pool) *float64 { return &p.TotalMemoryHighPercent }},
	{name: "TOTAL_MEMORY_MIN_PERCENT_PER_NODE", percent: true, unset: "no guarantee; 0 too",
		pctField: func(p *Pool) *float64 { return &p.TotalMemoryMinPercent }},
	{name: "TOTAL_MEMORY_LOW_PERCENT_PER_NODE", percent: true, unset: "no guarantee; 0 too",
		pctField: func(p *Pool) *float64 { return &p.TotalMemoryLowPercent }},
	{name: "QUERY_PIDS_LIMIT", min: 1, max: MaxPidsLimit, unset: "no limit",
		intField: func(p *Pool) *int64 { return &p.QueryPidsLimit }},
	{name: "TOTAL_PIDS_LIMIT", min: 1, max: MaxPidsLimit, unset: "no limit",
		intField: func(p *Pool) *int64 { return &p.TotalPidsLimit }},
	{name: "QUERY_CANCEL_AFTER_SECONDS", max: maxInt32, unset: "no timeout; 0 too, as in YDB",
		intField: func(p *Pool) *int64 { return &p.QueryCancelAfterSeconds }},
	{name: "CPU_PERIOD_USEC", min: cpulimit.MinPeriodUsec, max: cpulimit.MaxPeriodUsec, unset: "the node's period",
		above:    "outside 1 ms..1 s, the periods the kernel accepts",
		intField: func(p *Pool) *int64 { return &p.CPUPeriodUsec }},
	{name: "CPU_BURST_PERCENT", percent: true, unset: "no burst",
		above:    "burst above the quota: the kernel refuses a cpu.max.burst larger than the quota",
		pctField: func(p *Pool) *float64 { return &p.CPUBurstPercent }},
	{name: "CPU_IDLE", min: 0, max: 1, unset: "not idle; 0 too",
		intField: func(p *Pool) *int64 { return &p.CPUIdle }},
	{name: "CPUS", cpus: true, unset: "every CPU of the node"},
	{name: "CONCURRENT_QUERY_LIMIT_PER_USER", min: 1, max: MaxConcurrentQueryLimit, unset: "no limit per user",
		intField: func(p *Pool) *int64 { return &p.ConcurrentQueryLimitPerUser }},
	{name: "QUEUE_SIZE_PER_USER", max: maxInt32, unset: "no limit per user",
		intField: func(p *Pool) *int64 { return &p.QueueSizePerUser }},
	{name: "QUEUE_POLICY", words: []string{QueueFIFO, QueueFair}, unset: "fifo",
		wordField: func(p *Pool) *string { return &p.QueuePolicy }},
	{name: "USAGE_HALF_LIFE_SECONDS", max: maxInt32, unset: fmt.Sprintf("%d s", DefaultUsageHalfLifeSeconds),
		intField: func(p *Pool) *int64 { return &p.UsageHalfLifeSeconds }},
	{name: "GLOBAL_SLOTS", words: []string{SlotsLease, SlotsStrict}, unset: SlotsLease, lockedOnDefault: true,
		wordField: func(p *Pool) *string { return &p.GlobalSlots }},
}

// paramByName finds a pool parameter by any spelling, case-insensitively.
var paramByName = func() map[string]*param {
	m := map[string]*param{}
	for _, p := range params {
		m[p.name] = p
		for _, a := range p.aliases {
			m[a] = p
		}
	}
	return m
}()

// accepted says which values the parameter takes.
func (p *param) accepted() string {
	if p.cpus {
		return fmt.Sprintf("-1 (%s) or a CPU list in quotes: CPU numbers 0..%d and ranges LO-HI, such as '0-3' or '0,2-3'", p.unset, cpulimit.MaxCPU)
	}
	if p.words != nil {
		return fmt.Sprintf("-1 (%s) or one of '%s' in quotes", p.unset, strings.Join(p.words, "', '"))
	}
	if p.percent {
		s := "-1 (" + p.unset + ") or 0..100"
		if p.name == "CPU_BURST_PERCENT" {
			s += ", percent of the quota"
		}
		return s
	}
	return fmt.Sprintf("-1 (%s) or %d..%d", p.unset, p.min, p.max)
}

// numberRE is the accepted spelling of a numeric value, also inside quotes
// (YDB accepts CONCURRENT_QUERY_LIMIT = "100").
var numberRE = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)

// shown renders a value as the user wrote it, for messages; a value too
// long to read is cut after 64 bytes with "…".
func (v value) shown() string {
	if r := []rune(v.text); len(r) > 64 {
		v.text = string(r[:64]) + "…"
	}
	if v.kind == tokString {
		return "'" + v.text + "'"
	}
	if v.kind == tokQuoted {
		return "`" + v.text + "`"
	}
	return v.text
}

// set checks v and stores it in pool. It returns the problem, or "".
func (p *param) set(pool *Pool, v value) string {
	text := strings.TrimSpace(v.text)
	if p.cpus {
		return p.setCPUs(pool, v, text)
	}
	if p.words != nil {
		return p.setWord(pool, v, text)
	}
	if v.kind == tokIdent || v.kind == tokQuoted || !numberRE.MatchString(text) {
		return p.refuse(v, "not a number")
	}
	if p.percent {
		f, err := strconv.ParseFloat(text, 64)
		switch {
		case err != nil:
			return p.refuse(v, "not a number")
		case f < -1:
			return p.refuse(v, "below -1")
		case f > 100:
			return p.refuse(v, p.aboveMax("above 100 percent"))
		case f != -1 && f < 0:
			return p.refuse(v, "between -1 and 0")
		}
		*p.pctField(pool) = f
		return ""
	}
	if strings.Contains(text, ".") {
		return p.refuse(v, "not a whole number")
	}
	n, err := strconv.ParseInt(text, 10, 64)
	switch {
	case err != nil && strings.HasPrefix(text, "-"), err == nil && n < -1:
		return p.refuse(v, "below -1")
	case err != nil, n > p.max:
		return p.refuse(v, p.aboveMax(fmt.Sprintf("above %d", p.max)))
	case n != -1 && n < p.min:
		return p.refuse(v, p.aboveMax(fmt.Sprintf("below %d", p.min)))
	}
	*p.intField(pool) = n
	return ""
}

// setCPUs checks and stores CPUS: -1 (in quotes or not) for every CPU,
// a CPU number, or a CPU list in quotes.
func (p *param) setCPUs(pool *Pool, v value, text string) string {
	if text == "-1" && v.kind != tokIdent && v.kind != tokQuoted {
		pool.CPUs, pool.CPUsAt = cpulimit.CPUSet{}, Pos{}
		return ""
	}
	if v.kind == tokIdent || v.kind == tokQuoted {
		return p.refuse(v, "not a CPU list")
	}
	set, err := cpulimit.ParseCPUSet(text)
	var bad *cpulimit.CPUListError
	switch {
	case errors.As(err, &bad):
		return p.refuse(v, bad.Problem)
	case set.IsEmpty():
		return p.refuse(v, "no CPUs: the pool's queries could never run")
	}
	pool.CPUs, pool.CPUsAt = set, v.pos
	return ""
}

// setWord checks and stores a parameter that takes one of p.words (any
// case, in quotes or bare) or -1 for the first.
func (p *param) setWord(pool *Pool, v value, text string) string {
	if text == "-1" && v.kind != tokIdent && v.kind != tokQuoted {
		*p.wordField(pool) = p.words[0]
		return ""
	}
	if v.kind != tokString && v.kind != tokIdent {
		return p.refuse(v, "not one of the words")
	}
	for _, w := range p.words {
		if strings.EqualFold(text, w) {
			*p.wordField(pool) = w
			return ""
		}
	}
	return p.refuse(v, "unknown value")
}

// aboveMax is the parameter's own explanation of an out-of-range value,
// or generic when it has none.
func (p *param) aboveMax(generic string) string {
	if p.above != "" {
		return p.above
	}
	return generic
}

// refuse formats "NAME=value: why; accepted: …".
func (p *param) refuse(v value, why string) string {
	return fmt.Sprintf("%s=%s: %s; accepted: %s", p.name, v.shown(), why, p.accepted())
}

// reset gives the parameter its default, -1.
func (p *param) reset(pool *Pool) {
	switch {
	case p.cpus:
		pool.CPUs, pool.CPUsAt = cpulimit.CPUSet{}, Pos{}
	case p.words != nil:
		*p.wordField(pool) = p.words[0]
	case p.percent:
		*p.pctField(pool) = -1
	default:
		*p.intField(pool) = -1
	}
}

// poolParamNames lists the canonical pool parameter names, for messages.
func poolParamNames() []string {
	out := make([]string, len(params))
	for i, p := range params {
		out[i] = p.name
	}
	return out
}

// classifier parameter names.
const (
	paramResourcePool = "RESOURCE_POOL"
	paramAction       = "ACTION"
	paramMemberName   = "MEMBER_NAME"
	paramHasAppName   = "HAS_APP_NAME"
	paramRank         = "RANK"
)

// classifierParamNames are the classifier parameters poolagent supports.
var classifierParamNames = []string{paramResourcePool, paramAction, paramMemberName, paramHasAppName, paramRank}

// refusedClassifierParams are YDB's classifier predicates that have no
// faithful meaning on a host, each with the reason. YDB evaluates them on
// the compiled query plan; a command has no plan, and what it will touch is
// known only while it runs, after its pool was chosen.
var refusedClassifierParams = map[string]string{
	"HAS_PATH": "YDB matches it against the objects in the query's plan, known before the query runs; " +
		"a command has no plan (the files it will open are known only once it runs, after its pool was chosen), " +
		"its executable is HAS_APP_NAME's subject, and its working directory is not an object it touches",
	"HAS_FULL_SCAN": "a full scan is a table read without a key range in YDB's query plan; " +
		"a command reads no tables through poolagent and has no plan",
	"HAS_STREAM": "YDB's streaming queries are a kind of query (continuous reads and writes over topics) declared to the server; " +
		"a command has no such kind, and how long it will run is not known when it is classified",
}

// unknownParam builds the message for a parameter name that is not in
// known: the nearest known name when it is close, the accepted list
// otherwise.
func unknownParam(kind, name string, known []string) string {
	if best, ok := nearest(strings.ToUpper(name), known); ok {
		return fmt.Sprintf("unknown %s parameter %s; did you mean %s?", kind, name, best)
	}
	return fmt.Sprintf("unknown %s parameter %s; accepted: %s", kind, name, strings.Join(known, ", "))
}

// nearest returns the candidate closest to s in edit distance, if it is
// close enough to be a likely typo: at most a third of s's length, and at
// least 2 edits allowed. A candidate that s is the start of (MEMBER for
// MEMBER_NAME) counts as one edit away.
func nearest(s string, candidates []string) (string, bool) {
	best, bestD := "", math.MaxInt
	for _, c := range candidates {
		d := suggest.Distance(s, c)
		if len(s) >= 4 && strings.HasPrefix(c, s) {
			d = 1
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	return best, best != "" && bestD <= max(2, len([]rune(s))/3)
}
