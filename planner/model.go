package planner

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/poolagent/poolagent/internal/cpulimit"
)

// Pool is one resource pool with YDB's parameters and poolagent's
// extensions. -1 means "not set / no limit" for every parameter.
type Pool struct {
	Name string
	// ConcurrentQueryLimit is how many queries run at once; 0 refuses
	// every query. CONCURRENT_QUERY_LIMIT, -1 or 0..1000.
	ConcurrentQueryLimit int64
	// QueueSize is how many queries may wait. QUEUE_SIZE.
	QueueSize int64
	// DatabaseLoadCPUThresholdPercent admits queries only while host CPU
	// load is below it. DATABASE_LOAD_CPU_THRESHOLD, percent.
	DatabaseLoadCPUThresholdPercent float64
	// ResourcesWeight is the pool's weight in the max-min division of the
	// node's CPU; -1 keeps the pool out of it. RESOURCES_WEIGHT (also
	// RESOURCE_WEIGHT).
	ResourcesWeight int64
	// TotalCPULimitPercent caps the pool at this percent of the node's
	// vCPUs. TOTAL_CPU_LIMIT_PERCENT_PER_NODE.
	TotalCPULimitPercent float64
	// QueryCPULimitPercent caps each query at this percent of the pool's
	// allocation. QUERY_CPU_LIMIT_PERCENT_PER_NODE.
	QueryCPULimitPercent float64
	// QueryMemoryLimitPercent caps each query's memory at this percent of
	// the node's. QUERY_MEMORY_LIMIT_PERCENT_PER_NODE.
	QueryMemoryLimitPercent float64
	// TotalMemoryLimitPercent caps the pool's memory at this percent of
	// the node's. TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE.
	TotalMemoryLimitPercent float64
	// QueryMemoryHighPercent and TotalMemoryHighPercent are soft memory
	// limits, percents of the node's memory, for each query and for the
	// pool: above one the kernel reclaims the cgroup's memory and slows
	// its allocations (v2 memory.high; v1 memory.soft_limit_in_bytes,
	// which reclaims only when the host runs short), so a query is slowed
	// before its hard limit kills it. -1 and 0 set none.
	// QUERY_MEMORY_HIGH_PERCENT_PER_NODE and
	// TOTAL_MEMORY_HIGH_PERCENT_PER_NODE (poolagent's extensions), at most
	// the hard limit of the same scope when that is set.
	QueryMemoryHighPercent float64
	TotalMemoryHighPercent float64
	// TotalMemoryMinPercent and TotalMemoryLowPercent are the pool's
	// memory guarantees, percents of the node's memory: memory the
	// kernel does not reclaim from the pool while it uses less, even
	// under the node's memory pressure; min in every case (the kernel
	// OOM-kills elsewhere first, v2 memory.min), low unless nothing else
	// is left to reclaim (memory.low). The pool's queries share them in
	// proportion to what each uses (docs/pools.md). -1 and 0 set none.
	// TOTAL_MEMORY_MIN_PERCENT_PER_NODE and
	// TOTAL_MEMORY_LOW_PERCENT_PER_NODE (poolagent's extensions, cgroup
	// v2 only): min at most low, both at most the pool's hard limit, and
	// the guarantees of all pools at most 100 together.
	TotalMemoryMinPercent float64
	TotalMemoryLowPercent float64
	// GuaranteeAt is where the pool's memory guarantee was last set, for
	// the check of all pools' guarantees against the node.
	GuaranteeAt Pos
	// QueryPidsLimit and TotalPidsLimit cap the tasks (processes and
	// their threads) of each query and of the whole pool (pids.max, v1
	// the pids controller's pids.max): a fork or thread creation past
	// one fails with EAGAIN, so a fork bomb stays in its pool.
	// QUERY_PIDS_LIMIT and TOTAL_PIDS_LIMIT (poolagent's extensions), -1
	// or 1..MaxPidsLimit, a query's at most its pool's.
	QueryPidsLimit int64
	TotalPidsLimit int64
	// QueryCancelAfterSeconds fails a query that waited this long in the
	// queue; -1 and 0 wait forever. QUERY_CANCEL_AFTER_SECONDS.
	QueryCancelAfterSeconds int64
	// CPUPeriodUsec is the pool's bandwidth period in µs; -1 takes the
	// node's. CPU_PERIOD_USEC (poolagent's extension), 1000..1000000.
	CPUPeriodUsec int64
	// CPUBurstPercent is the burst allowance (cpu.max.burst) as a percent
	// of the quota. CPU_BURST_PERCENT (poolagent's extension), 0..100.
	CPUBurstPercent float64
	// CPUIdle 1 puts the pool's cgroup in SCHED_IDLE (cpu.idle 1): its
	// queries get only CPU that the other pools' do not want. CPU_IDLE
	// (poolagent's extension), -1 or 0..1; -1 and 0 are not idle. An idle
	// pool takes no part in the division (RESOURCES_WEIGHT -1).
	CPUIdle int64
	// CPUs confines the pool's queries to these CPUs (cpuset.cpus); the
	// empty set, CPUS=-1, does not confine them. CPUS (poolagent's
	// extension), a CPU list such as '0-3' or '0,2-3'; the pool's cap is
	// at most its count. CPUsAt is where it was last set, for the plan's
	// check against the node's online CPUs.
	CPUs   cpulimit.CPUSet
	CPUsAt Pos
	// ConcurrentQueryLimitPerUser is how many queries one user may run in
	// the pool at once; a user at it waits even when the pool has free
	// slots. CONCURRENT_QUERY_LIMIT_PER_USER (poolagent's extension), -1
	// or 1..CONCURRENT_QUERY_LIMIT.
	ConcurrentQueryLimitPerUser int64
	// QueueSizePerUser is how many queries of one user may wait; one more
	// is rejected. QUEUE_SIZE_PER_USER (poolagent's extension), -1 or
	// 0..QUEUE_SIZE.
	QueueSizePerUser int64
	// QueuePolicy orders the queue: QueueFIFO by arrival (YDB's rule),
	// QueueFair by the users' recent usage. QUEUE_POLICY (poolagent's
	// extension), 'fifo' or 'fair'.
	QueuePolicy string
	// UsageHalfLifeSeconds is the half-life of the CPU time a user used
	// in the pool, as the fair queue counts it; -1 takes
	// DefaultUsageHalfLifeSeconds, 0 counts running queries only.
	// USAGE_HALF_LIFE_SECONDS (poolagent's extension).
	UsageHalfLifeSeconds int64
	// GlobalSlots says what becomes of a fleet node's slots when the node
	// vanishes: SlotsLease, freed with its session lease (YDB's rule), or
	// SlotsStrict, kept until it comes back or an administrator releases
	// them. GLOBAL_SLOTS (poolagent's extension), 'lease' or 'strict'.
	GlobalSlots string
	// Created is where the pool was created; zero for `default`.
	Created Pos
}

// newPool returns a pool with every parameter -1.
func newPool(name string, at Pos) Pool {
	p := Pool{Name: name, Created: at}
	for _, pr := range params {
		pr.reset(&p)
	}
	return p
}

// Classifier routes matching queries to a pool, or rejects them. A query
// matches when every predicate the classifier has holds (YDB's AND; a
// classifier without predicates matches every query). Classifiers are
// tried by ascending Rank; the first that matches and either rejects or
// routes to a pool that exists and is usable wins.
type Classifier struct {
	Name string
	// Rank orders classifiers, lowest first; unique. RANK, 0..2^63-1;
	// omitted, it is the largest rank + 1000 (first 1000).
	Rank int64
	// MemberName is a user, %group or AllUsers; "" matches everyone.
	// MEMBER_NAME.
	MemberName string
	// AppName must equal the query's application name: the base name of
	// the command's executable, as the client gives it (not checked:
	// YDB's warning applies). "" matches every query. HAS_APP_NAME.
	AppName string
	// ResourcePool is the pool the classifier routes to; "" when Action
	// is ActionReject (exactly one of the two is set).
	ResourcePool string
	// Action is ActionReject for a classifier that refuses the queries it
	// matches, "" for one that routes them to ResourcePool. ACTION.
	Action string
	// Created is where the classifier was created; PoolAt where its
	// RESOURCE_POOL was last set.
	Created Pos
	PoolAt  Pos
}

// ActionReject is YDB's only classifier ACTION: the query is refused with
// [Classifier.RejectMessage].
const ActionReject = "reject"

// RejectMessage is YDB's refusal of a query by an ACTION='reject'
// classifier: "Request is rejected by classifier '<name>' (rank=<rank>)".
func (c Classifier) RejectMessage() string {
	return fmt.Sprintf("Request is rejected by classifier '%s' (rank=%d)", c.Name, c.Rank)
}

// Query is what classifiers test: who runs the query (from the kernel) and
// the application name its client gives.
type Query struct {
	Account
	// AppName is HAS_APP_NAME's subject: the base name of the command's
	// executable, symbolic links resolved, as the client names it; "" when
	// the client names none. Nothing checks it: a client can claim any
	// name, as a YDB client can send any x-ydb-application-name.
	AppName string
}

// matches reports whether every predicate of c holds for q.
func (c Classifier) matches(q Query) bool {
	return (c.MemberName == "" || q.matches(c.MemberName)) &&
		(c.AppName == "" || c.AppName == q.AppName)
}

// Model is the pools, classifiers and grants of a host: what a pool file
// and later run-time changes define. A Model is never changed in place;
// Apply returns a new one.
type Model struct {
	pools       map[string]Pool
	classifiers map[string]Classifier
	grants      map[grantKey]Pos
	// sorted is Pools' answer, kept once the model is done (NewModel,
	// Apply): every plan lists the pools, and sorting a thousand names
	// per plan was most of a plan's time. nil while Apply builds the
	// model.
	sorted []Pool
}

// NewModel returns the model of a host without a pool file: only the
// `default` pool, with every parameter -1.
func NewModel() *Model {
	m := &Model{
		pools:       map[string]Pool{DefaultPool: newPool(DefaultPool, Pos{})},
		classifiers: map[string]Classifier{},
		grants:      map[grantKey]Pos{},
	}
	m.sorted = m.sortPools()
	return m
}

// clone returns an independent copy, to be changed.
func (m *Model) clone() *Model {
	return &Model{pools: maps.Clone(m.pools), classifiers: maps.Clone(m.classifiers), grants: maps.Clone(m.grants)}
}

// Pool returns the pool called name.
func (m *Model) Pool(name string) (Pool, bool) {
	p, ok := m.pools[name]
	return p, ok
}

// Pools returns every pool, `default` first, then by name.
func (m *Model) Pools() []Pool {
	if m.sorted != nil {
		return slices.Clone(m.sorted)
	}
	return m.sortPools()
}

func (m *Model) sortPools() []Pool {
	names := make([]string, 0, len(m.pools))
	for n := range m.pools {
		if n != DefaultPool {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	out := make([]Pool, 0, len(m.pools))
	if p, ok := m.pools[DefaultPool]; ok {
		out = append(out, p)
	}
	for _, n := range names {
		out = append(out, m.pools[n])
	}
	return out
}

// Classifiers returns every classifier by ascending rank.
func (m *Model) Classifiers() []Classifier {
	out := slices.Collect(maps.Values(m.classifiers))
	slices.SortFunc(out, func(a, b Classifier) int { return cmp.Compare(a.Rank, b.Rank) })
	return out
}

// Classify returns the classifier that decides q's pool: the lowest-ranked
// one whose predicates all hold for q and that either rejects
// (ACTION='reject') or routes to a pool that exists and q's user may use.
// ok is false when none does: the query goes to `default`.
func (m *Model) Classify(q Query) (c Classifier, ok bool) {
	for _, c := range m.Classifiers() {
		if c.matches(q) && (c.Action == ActionReject || m.MayUse(q.Account, c.ResourcePool)) {
			return c, true
		}
	}
	return Classifier{}, false
}

// Load parses a pool file and applies it to a model with only `default`.
func Load(file string, src []byte) (*Model, []Warning, error) {
	stmts, err := Parse(file, src)
	if err != nil {
		return nil, nil, err
	}
	return Apply(NewModel(), stmts)
}

// Apply carries out stmts in order on m and returns the resulting model.
// It is all or nothing: when any statement is refused, the error (an
// ErrorList with every problem found) comes back with m itself, unchanged.
// Warnings report what was accepted but deserves attention.
func Apply(m *Model, stmts []Stmt) (*Model, []Warning, error) {
	a := &applier{m: m.clone()}
	for _, s := range stmts {
		switch s := s.(type) {
		case *createStmt:
			if s.classifier {
				a.createClassifier(s)
			} else {
				a.createPool(s)
			}
		case *alterStmt:
			if s.classifier {
				a.alterClassifier(s)
			} else {
				a.alterPool(s)
			}
		case *dropStmt:
			if s.classifier {
				a.dropClassifier(s)
			} else {
				a.dropPool(s)
			}
		case *grantStmt:
			a.grant(s)
		}
	}
	a.checkGuarantees()
	for _, c := range a.m.Classifiers() {
		if _, ok := a.m.pools[c.ResourcePool]; !ok && c.Action != ActionReject {
			a.warnf(c.PoolAt, "classifier %q routes to pool %q, which does not exist; it is skipped until the pool is created", c.Name, c.ResourcePool)
		}
	}
	if len(a.errs) > 0 {
		return m, a.warns, a.errs
	}
	a.m.sorted = a.m.sortPools()
	return a.m, a.warns, nil
}

// applier carries the model being built and what was found on the way.
// After a refused statement it goes on with the next, so one run reports
// every problem; a pool whose CREATE had a bad parameter is still created
// (with the good ones) so that later statements about it do not add
// follow-on errors.
type applier struct {
	m     *Model
	errs  ErrorList
	warns []Warning
	// guaranteed is the pool whose memory guarantee these statements set
	// last.
	guaranteed string
}

func (a *applier) warnf(pos Pos, format string, args ...any) {
	a.warns = append(a.warns, Warning{Pos: pos, Msg: fmt.Sprintf(format, args...)})
}

func (a *applier) createPool(s *createStmt) {
	name := s.name.text
	if why := checkName("pool", name); why != "" {
		a.errs.errorf(s.name.pos, "%s", why)
		return
	}
	if old, ok := a.m.pools[name]; ok {
		if name == DefaultPool {
			a.errs.errorf(s.name.pos, "pool %q always exists; change it with ALTER RESOURCE POOL %s SET (…)", name, name)
		} else {
			a.errs.errorf(s.name.pos, "pool %q already exists (created at %s)", name, old.Created)
		}
		return
	}
	p := newPool(name, s.name.pos)
	a.setPoolParams(&p, s.settings)
	a.checkPool(&p, s.name.pos, s.settings)
	a.m.pools[name] = p
}

func (a *applier) alterPool(s *alterStmt) {
	name := s.name.text
	p, ok := a.m.pools[name]
	if !ok {
		a.errs.errorf(s.name.pos, "ALTER: %s", a.m.noPool(name))
		return
	}
	if name == DefaultPool {
		keys := make([]word, 0, len(s.set)+len(s.reset))
		for _, st := range s.set {
			keys = append(keys, st.key)
		}
		keys = append(keys, s.reset...)
		for _, k := range keys {
			if pr := paramByName[strings.ToUpper(k.text)]; pr != nil && pr.lockedOnDefault {
				a.errs.errorf(k.pos, "pool %q: %s cannot be changed (as in YDB, admission to the default pool stays open so a bad setting cannot stall every query); accepted for %s: every parameter except CONCURRENT_QUERY_LIMIT, QUEUE_SIZE and DATABASE_LOAD_CPU_THRESHOLD", name, pr.name, name)
				return
			}
		}
	}
	a.setPoolParams(&p, s.set)
	seen := map[*param]bool{}
	for _, k := range s.reset {
		pr := paramByName[strings.ToUpper(k.text)]
		if pr == nil {
			a.errs.errorf(k.pos, "%s", unknownParam("pool", k.text, poolParamNames()))
			continue
		}
		if seen[pr] {
			a.errs.errorf(k.pos, "%s is reset twice", pr.name)
			continue
		}
		seen[pr] = true
		pr.reset(&p)
	}
	a.checkPool(&p, s.name.pos, s.set)
	a.m.pools[name] = p
}

func (a *applier) dropPool(s *dropStmt) {
	name := s.name.text
	if name == DefaultPool {
		a.errs.errorf(s.name.pos, "pool %q cannot be dropped: it always exists, every query not routed elsewhere runs in it", name)
		return
	}
	if _, ok := a.m.pools[name]; !ok {
		a.errs.errorf(s.name.pos, "DROP: %s", a.m.noPool(name))
		return
	}
	delete(a.m.pools, name)
	for k := range a.m.grants {
		if k.pool == name {
			delete(a.m.grants, k)
		}
	}
}

// setPoolParams applies KEY = VALUE settings to p, reporting unknown keys,
// keys given twice and refused values.
func (a *applier) setPoolParams(p *Pool, settings []setting) {
	seen := map[*param]word{}
	for _, st := range settings {
		pr := paramByName[strings.ToUpper(st.key.text)]
		if pr == nil {
			msg := unknownParam("pool", st.key.text, poolParamNames())
			if slices.Contains(classifierParamNames, strings.ToUpper(st.key.text)) {
				msg = fmt.Sprintf("%s is a classifier parameter, not a pool's; accepted for pools: %s", st.key.text, strings.Join(poolParamNames(), ", "))
			}
			a.errs.errorf(st.key.pos, "%s", msg)
			continue
		}
		if first, dup := seen[pr]; dup {
			a.errs.errorf(st.key.pos, "%s is given twice (first as %s at %s)", st.key.text, first.text, first.pos)
			continue
		}
		seen[pr] = st.key
		if !st.hasValue {
			a.errs.errorf(st.key.pos, "%s needs a value (%s = …); accepted: %s", pr.name, pr.name, pr.accepted())
			continue
		}
		if why := pr.set(p, st.val); why != "" {
			a.errs.errorf(st.val.pos, "%s", why)
			continue
		}
		if pr.name == "RESOURCES_WEIGHT" && p.ResourcesWeight > cpulimit.MaxWeight {
			a.warnf(st.val.pos, "RESOURCES_WEIGHT=%d is above cpu.weight's maximum %d: the allocation (cpu.max) uses the exact weight, but cpu.weight is written as %d, so between recomputations the kernel keeps a smaller ratio", p.ResourcesWeight, cpulimit.MaxWeight, cpulimit.MaxWeight)
		}
	}
}

// checkPool applies the rules between parameters of one pool. at is the
// statement's place; a rule broken by a setting of this statement is
// reported at that setting.
func (a *applier) checkPool(p *Pool, at Pos, settings []setting) {
	waits := p.ConcurrentQueryLimit != -1 || p.ConcurrentQueryLimitPerUser != -1 || p.DatabaseLoadCPUThresholdPercent >= 0
	if p.QueueSize != -1 && !waits {
		a.errs.errorf(settingAt(at, settings, "QUEUE_SIZE"), "pool %q: QUEUE_SIZE=%d needs CONCURRENT_QUERY_LIMIT, CONCURRENT_QUERY_LIMIT_PER_USER or DATABASE_LOAD_CPU_THRESHOLD (without one, no query ever waits); accepted: QUEUE_SIZE=-1, or set one of them", p.Name, p.QueueSize)
	}
	if p.QueueSizePerUser != -1 && !waits {
		a.errs.errorf(settingAt(at, settings, "QUEUE_SIZE_PER_USER"), "pool %q: QUEUE_SIZE_PER_USER=%d needs CONCURRENT_QUERY_LIMIT, CONCURRENT_QUERY_LIMIT_PER_USER or DATABASE_LOAD_CPU_THRESHOLD (without one, no query ever waits); accepted: QUEUE_SIZE_PER_USER=-1, or set one of them", p.Name, p.QueueSizePerUser)
	}
	// A pool disabled with CONCURRENT_QUERY_LIMIT=0 refuses every query
	// whatever its per-user limit, so the pair is no contradiction.
	if p.ConcurrentQueryLimitPerUser != -1 && p.ConcurrentQueryLimit > 0 && p.ConcurrentQueryLimitPerUser > p.ConcurrentQueryLimit {
		a.errs.errorf(settingAt(at, settings, "CONCURRENT_QUERY_LIMIT", "CONCURRENT_QUERY_LIMIT_PER_USER"), "pool %q: CONCURRENT_QUERY_LIMIT_PER_USER=%d is above the pool's CONCURRENT_QUERY_LIMIT=%d: no user could run that many; accepted: -1 or 1..%d", p.Name, p.ConcurrentQueryLimitPerUser, p.ConcurrentQueryLimit, p.ConcurrentQueryLimit)
	}
	if p.QueueSizePerUser != -1 && p.QueueSize != -1 && p.QueueSizePerUser > p.QueueSize {
		a.errs.errorf(settingAt(at, settings, "QUEUE_SIZE", "QUEUE_SIZE_PER_USER"), "pool %q: QUEUE_SIZE_PER_USER=%d is above the pool's QUEUE_SIZE=%d: no user could queue that many; accepted: -1 or 0..%d", p.Name, p.QueueSizePerUser, p.QueueSize, p.QueueSize)
	}
	for _, m := range []struct {
		high, limit   float64
		name, limitOf string
	}{
		{p.QueryMemoryHighPercent, p.QueryMemoryLimitPercent, "QUERY_MEMORY_HIGH_PERCENT_PER_NODE", "QUERY_MEMORY_LIMIT_PERCENT_PER_NODE"},
		{p.TotalMemoryHighPercent, p.TotalMemoryLimitPercent, "TOTAL_MEMORY_HIGH_PERCENT_PER_NODE", "TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE"},
	} {
		if m.high > 0 && m.limit >= 0 && m.high > m.limit {
			a.errs.errorf(settingAt(at, settings, m.name, m.limitOf), "pool %q: %s=%g is above %s=%g: the soft limit is to slow a query before the hard one kills it; accepted: -1 or 0..%g",
				p.Name, m.name, m.high, m.limitOf, m.limit, m.limit)
		}
	}
	a.checkGuarantee(p, at, settings)
	if p.QueryPidsLimit > 0 && p.TotalPidsLimit > 0 && p.QueryPidsLimit > p.TotalPidsLimit {
		a.errs.errorf(settingAt(at, settings, "QUERY_PIDS_LIMIT", "TOTAL_PIDS_LIMIT"), "pool %q: QUERY_PIDS_LIMIT=%d is above the pool's TOTAL_PIDS_LIMIT=%d: no query could have that many tasks; accepted: -1 or 1..%d",
			p.Name, p.QueryPidsLimit, p.TotalPidsLimit, p.TotalPidsLimit)
	}
	if p.CPUIdle == 1 && p.ResourcesWeight >= 0 {
		at := at
		for _, st := range settings {
			if pr := paramByName[strings.ToUpper(st.key.text)]; pr == paramByName["CPU_IDLE"] || pr == paramByName["RESOURCES_WEIGHT"] {
				at = st.key.pos
			}
		}
		a.errs.errorf(at, "pool %q: CPU_IDLE=1 with RESOURCES_WEIGHT=%d: an idle pool gets only CPU the others leave, so it takes no part in the division of the node (the kernel gives it the least weight and refuses any other); accepted: RESOURCES_WEIGHT=-1 with CPU_IDLE=1, or CPU_IDLE=-1", p.Name, p.ResourcesWeight)
	}
}

// checkGuarantee applies the rules of one pool's memory guarantees: min
// at most low, both at most the pool's hard limit. It notes where the
// guarantee was set, for checkGuarantees.
func (a *applier) checkGuarantee(p *Pool, at Pos, settings []setting) {
	const minName, lowName, limitName = "TOTAL_MEMORY_MIN_PERCENT_PER_NODE", "TOTAL_MEMORY_LOW_PERCENT_PER_NODE", "TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE"
	switch set := settingAt(Pos{}, settings, minName, lowName); {
	case p.Guarantee() <= 0:
		p.GuaranteeAt = Pos{}
	case set != Pos{}:
		p.GuaranteeAt, a.guaranteed = set, p.Name
	}
	if p.TotalMemoryMinPercent > 0 && p.TotalMemoryLowPercent > 0 && p.TotalMemoryMinPercent > p.TotalMemoryLowPercent {
		a.errs.errorf(settingAt(at, settings, minName, lowName), "pool %q: %s=%g is above %s=%g: memory.low protects all that memory.min does and more; accepted: %s -1 or 0..%g",
			p.Name, minName, p.TotalMemoryMinPercent, lowName, p.TotalMemoryLowPercent, minName, p.TotalMemoryLowPercent)
	}
	if p.TotalMemoryLimitPercent < 0 {
		return
	}
	for _, g := range []struct {
		name    string
		percent float64
	}{{minName, p.TotalMemoryMinPercent}, {lowName, p.TotalMemoryLowPercent}} {
		if g.percent > p.TotalMemoryLimitPercent {
			a.errs.errorf(settingAt(at, settings, g.name, limitName), "pool %q: %s=%g is above %s=%g: the pool can never use what it would be guaranteed; accepted: -1 or 0..%g",
				p.Name, g.name, g.percent, limitName, p.TotalMemoryLimitPercent, p.TotalMemoryLimitPercent)
		}
	}
}

// checkGuarantees refuses memory guarantees that together exceed the
// node: the kernel would scale every pool's down, so none would get what
// it was promised. The error is at the guarantee set last (by these
// statements, else the last pool's).
func (a *applier) checkGuarantees() {
	var sum float64
	var last Pool
	var parts []string
	for _, p := range a.m.sortPools() {
		if g := p.Guarantee(); g > 0 {
			sum += g
			parts = append(parts, fmt.Sprintf("%s %g", p.Name, g))
			if last.Name != a.guaranteed {
				last = p
			}
		}
	}
	if sum <= 100+1e-9 {
		return
	}
	a.errs.errorf(last.GuaranteeAt, "pool %q: the memory guarantees of all pools (the larger of TOTAL_MEMORY_MIN_PERCENT_PER_NODE and TOTAL_MEMORY_LOW_PERCENT_PER_NODE) add up to %g%% of the node (%s): above 100%%, they cannot all be kept; accepted for pool %q: a guarantee of at most %g",
		last.Name, sum, strings.Join(parts, ", "), last.Name, max(0, 100-(sum-last.Guarantee())))
}

// Guarantee is the share of the node's memory guaranteed to p, in
// percent: the larger of its min and low guarantees, 0 for none.
func (p Pool) Guarantee() float64 {
	return max(p.TotalMemoryMinPercent, p.TotalMemoryLowPercent, 0)
}

// settingAt is where the statement's settings last named one of the
// parameters, or at when none did: a rule between parameters is reported
// at the setting that broke it.
func settingAt(at Pos, settings []setting, names ...string) Pos {
	for _, st := range settings {
		pr := paramByName[strings.ToUpper(st.key.text)]
		for _, n := range names {
			if pr == paramByName[n] {
				at = st.key.pos
			}
		}
	}
	return at
}

func (a *applier) createClassifier(s *createStmt) {
	name := s.name.text
	if why := checkName("classifier", name); why != "" {
		a.errs.errorf(s.name.pos, "%s", why)
		return
	}
	if old, ok := a.m.classifiers[name]; ok {
		a.errs.errorf(s.name.pos, "classifier %q already exists (created at %s)", name, old.Created)
		return
	}
	c := Classifier{Name: name, Rank: -1, Created: s.name.pos}
	if !a.checkTarget(c, s.name.pos, a.setClassifierParams(&c, s.settings)) {
		return
	}
	if c.Rank == -1 {
		c.Rank = a.autoRank(s.name.pos, "")
	}
	a.m.classifiers[name] = c
}

func (a *applier) alterClassifier(s *alterStmt) {
	name := s.name.text
	c, ok := a.m.classifiers[name]
	if !ok {
		a.errs.errorf(s.name.pos, "ALTER: classifier %q does not exist", name)
		return
	}
	given := a.setClassifierParams(&c, s.set)
	at := s.name.pos
	for _, k := range s.reset {
		switch strings.ToUpper(k.text) {
		case paramRank:
			c.Rank = a.autoRank(k.pos, name)
		case paramMemberName:
			c.MemberName = ""
		case paramHasAppName:
			c.AppName = ""
		case paramResourcePool:
			c.ResourcePool, at = "", k.pos
		case paramAction:
			c.Action, at = "", k.pos
		default:
			a.errs.errorf(k.pos, "%s", unknownClassifierParam(k.text))
		}
	}
	a.checkTarget(c, at, given)
	a.m.classifiers[name] = c
}

// checkTarget applies YDB's rule that a classifier has exactly one of
// RESOURCE_POOL and ACTION, reporting a break at at. given is where the
// statement's SET named either: a value refused there was reported already.
func (a *applier) checkTarget(c Classifier, at Pos, given map[string]Pos) bool {
	const accepted = "accepted: exactly one of RESOURCE_POOL = 'pool' and ACTION = 'reject'"
	switch {
	case c.ResourcePool != "" && c.Action != "":
		if p, ok := given[paramAction]; ok {
			at = p
		} else if p, ok := given[paramResourcePool]; ok {
			at = p
		}
		a.errs.errorf(at, "classifier %q has both RESOURCE_POOL and ACTION, which exclude each other (as in YDB); %s", c.Name, accepted)
		return false
	case c.ResourcePool == "" && c.Action == "":
		if len(given) == 0 {
			a.errs.errorf(at, "classifier %q needs RESOURCE_POOL = 'pool' (where its queries go) or ACTION = 'reject'; %s", c.Name, accepted)
		}
		return false
	}
	return true
}

func (a *applier) dropClassifier(s *dropStmt) {
	if _, ok := a.m.classifiers[s.name.text]; !ok {
		a.errs.errorf(s.name.pos, "DROP: classifier %q does not exist", s.name.text)
		return
	}
	delete(a.m.classifiers, s.name.text)
}

// unknownClassifierParam is the message for a classifier parameter
// poolagent does not take: YDB's predicates without a host meaning with
// their reason, pool parameters, and typos.
func unknownClassifierParam(name string) string {
	key := strings.ToUpper(name)
	accepted := strings.Join(classifierParamNames, ", ")
	if why, ok := refusedClassifierParams[key]; ok {
		return fmt.Sprintf("%s is refused: %s; accepted: %s", name, why, accepted)
	}
	if paramByName[key] != nil {
		return fmt.Sprintf("%s is a pool parameter, not a classifier's; accepted: %s", name, accepted)
	}
	return unknownParam("classifier", name, classifierParamNames)
}

// setClassifierParams applies RESOURCE_POOL, ACTION, MEMBER_NAME,
// HAS_APP_NAME and RANK to c and returns where the settings name
// RESOURCE_POOL or ACTION, valid or not.
func (a *applier) setClassifierParams(c *Classifier, settings []setting) map[string]Pos {
	given := map[string]Pos{}
	seen := map[string]Pos{}
	for _, st := range settings {
		key := strings.ToUpper(st.key.text)
		if !slices.Contains(classifierParamNames, key) {
			a.errs.errorf(st.key.pos, "%s", unknownClassifierParam(st.key.text))
			continue
		}
		if key == paramResourcePool || key == paramAction {
			given[key] = st.key.pos
		}
		if first, dup := seen[key]; dup {
			a.errs.errorf(st.key.pos, "%s is given twice (first at %s)", key, first)
			continue
		}
		seen[key] = st.key.pos
		if !st.hasValue {
			a.errs.errorf(st.key.pos, "%s needs a value (%s = …)", key, key)
			continue
		}
		v := st.val
		switch key {
		case paramResourcePool:
			if a.textParam("RESOURCE_POOL", v, "a pool name such as 'olap'", func(s string) string { return checkName("pool", s) }) {
				c.ResourcePool, c.PoolAt = v.text, v.pos
			}
		case paramAction:
			if v.kind == tokNumber || !strings.EqualFold(v.text, ActionReject) {
				a.errs.errorf(v.pos, "ACTION=%s: unknown action; accepted: 'reject' (YDB's only action: refuse the queries the classifier matches)", v.shown())
				continue
			}
			c.Action = ActionReject
		case paramMemberName:
			if a.textParam("MEMBER_NAME", v, "a user or group such as '"+AllUsers+"'", checkMember) {
				c.MemberName = v.text
			}
		case paramHasAppName:
			if a.textParam("HAS_APP_NAME", v, "an executable's name in quotes such as 'make'", checkAppName) {
				c.AppName = v.text
			}
		case paramRank:
			a.setRank(c, v)
		}
	}
	return given
}

// textParam checks the text value of a classifier's parameter: a number
// is refused with what is expected instead (want), and check says what is
// wrong with the text ("" for nothing). It reports whether v is accepted.
func (a *applier) textParam(param string, v value, want string, check func(string) string) bool {
	if v.kind == tokNumber {
		a.errs.errorf(v.pos, "%s=%s: expected %s", param, v.text, want)
		return false
	}
	if why := check(v.text); why != "" {
		a.errs.errorf(v.pos, "%s: %s", param, why)
		return false
	}
	return true
}

// setRank checks an explicit RANK: a whole number 0..2^63-1 not taken by
// another classifier.
func (a *applier) setRank(c *Classifier, v value) {
	const accepted = "accepted: an unused rank 0..9223372036854775807, or omit RANK for the largest rank + 1000"
	text := strings.TrimSpace(v.text)
	if v.kind == tokIdent || v.kind == tokQuoted || !numberRE.MatchString(text) || strings.Contains(text, ".") {
		a.errs.errorf(v.pos, "RANK=%s: not a whole number; %s", v.shown(), accepted)
		return
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil || n < 0 {
		a.errs.errorf(v.pos, "RANK=%s: out of range; %s", v.shown(), accepted)
		return
	}
	for _, o := range a.m.classifiers {
		if o.Name != c.Name && o.Rank == n {
			a.errs.errorf(v.pos, "RANK=%d is taken by classifier %q (created at %s): ranks are unique; %s", n, o.Name, o.Created, accepted)
			return
		}
	}
	c.Rank = n
}

// autoRank is YDB's rank for a classifier without one: the largest rank
// of the other classifiers + 1000, or 1000 for the first.
func (a *applier) autoRank(at Pos, self string) int64 {
	var top int64 = -1
	for _, o := range a.m.classifiers {
		if o.Name != self && o.Rank > top {
			top = o.Rank
		}
	}
	if top < 0 {
		return 1000
	}
	if top > math.MaxInt64-1000 {
		a.errs.errorf(at, "no rank is left above %d for an automatic RANK; give RANK explicitly", top)
		return -1
	}
	return top + 1000
}
