// Package metrics exposes the daemon's pools to Prometheus: admission state
// and counters, the CPU limits written, the kernel's CPU bandwidth counters
// read back, and the simulator's predicted throttled time beside the
// measured. The collector reads everything from a [Source] at scrape time,
// so it is tested with a fixed snapshot and no daemon. docs/metrics.md lists
// every metric.
package metrics

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/poolagent/poolagent/internal/version"
	"github.com/poolagent/poolagent/observe"
)

// Source gives the collector the state to expose. It is called once per
// scrape; an error fails the scrape (HTTP 500 with the error) rather than
// exposing partial numbers.
type Source interface {
	MetricsSnapshot() (Snapshot, error)
}

// SourceFunc adapts a function to [Source].
type SourceFunc func() (Snapshot, error)

// MetricsSnapshot calls f.
func (f SourceFunc) MetricsSnapshot() (Snapshot, error) { return f() }

// Snapshot is the daemon's state at one moment.
type Snapshot struct {
	Host  Host
	Pools []Pool
	// Cluster is the node's part in a fleet (daemon --etcd); nil on a
	// single host: the cluster series are then not exposed.
	Cluster *Cluster
}

// Cluster is a fleet node's view of the cluster and its connection to
// etcd.
type Cluster struct {
	// Pools are the globally limited pools' running and queued queries
	// across the cluster, as the node's watch last showed them.
	Pools []ClusterPool
	// Connected: the node holds a live session lease.
	Connected bool
	// RoundTripSeconds is the latest successful etcd request's duration.
	RoundTripSeconds float64
	// WatchLagSeconds is the time since the watch on the cluster last
	// delivered (each node writes its record every load refresh, so a
	// healthy watch delivers at least that often).
	WatchLagSeconds float64
	// Sessions counts the session leases the node has taken.
	Sessions int
	// WatchEvents and WatchBytes count the key events the node's watch
	// has delivered and their encoded size.
	WatchEvents, WatchBytes int64
}

// ClusterPool is one globally limited pool across the cluster.
type ClusterPool struct {
	Name            string
	Running, Queued int
}

// Host is the node-wide state of CPU-load admission.
type Host struct {
	// CPUs is the node's vCPUs as the planner sees them.
	CPUs float64
	// LoadRatio is the moving average of host CPU busy time, 0..1 of all
	// CPUs, taken at the last load refresh.
	LoadRatio float64
	// ReservedRatio is what queries admitted since the last refresh reserve
	// (0.1 each), 0..1 of the host.
	ReservedRatio float64
	// RepairWrites counts the writes made to bring the pool tree back to
	// the plan after it drifted (another writer removed a pool cgroup or
	// changed a value), found by the daemon's periodic reconcile or on
	// SIGHUP.
	RepairWrites uint64
	// ModelCaveats are the throttling model's assumptions that do not
	// hold on this host (observe.ModelHost.Caveats: a sched_ext BPF
	// scheduler, no CFS bandwidth control, ...), so the predicted throttled
	// time may not either; none when they all hold.
	ModelCaveats observe.ModelCaveats
}

// Pool is one pool's state. Limits use -1 for "no limit", as in the DDL.
type Pool struct {
	Name string
	// Running and Queued are the queries in the pool now.
	Running, Queued int
	// ConcurrentQueryLimit and QueueSize are the pool's CONCURRENT_QUERY_LIMIT
	// and QUEUE_SIZE; -1 = none (the series is then not exposed).
	ConcurrentQueryLimit, QueueSize int
	// Admitted counts queries started; Rejected queries refused on arrival
	// (queue full, pool refusing all); TimedOut queries that left the queue
	// at QUERY_CANCEL_AFTER_SECONDS.
	Admitted, Rejected, TimedOut uint64
	// QueryForksRefused counts the forks and thread creations a task
	// limit refused in the pool's ended queries (each query cgroup's
	// pids.events max at its end).
	QueryForksRefused uint64
	// QueueWait is the distribution of time admitted queries spent queued.
	QueueWait Histogram
	// CPULimitCores is the pool cgroup's cpu.max as vCPUs (quota/period);
	// 0 = "max", unlimited (the series is then not exposed).
	CPULimitCores float64
	// CPUWeight is the pool cgroup's cpu.weight (1..10000); 0 = not set.
	CPUWeight int64
	// CPUIdle is whether the pool cgroup is idle (cpu.idle 1, CPU_IDLE=1).
	CPUIdle bool
	// CPUs is how many CPUs the pool's queries may run on, its CPUS
	// (cpuset.cpus); 0 = not confined (the series is then not exposed).
	CPUs int
	// Starved is the time the pool had queries running and used under
	// StarvedBelow of one CPU (see [Starvation]).
	Starved time.Duration
	// CPU is the pool cgroup's cpu.stat, cumulative; nil when the cgroup is
	// not there (yet): the CPU series are then not exposed.
	CPU *observe.CPUStat
	// Pressure is the pool cgroup's cpu.pressure (PSI); nil where the
	// kernel keeps none for it (cgroup v1, PSI off): the pressure series
	// are then not exposed.
	Pressure *observe.Pressure
	// Memory is the pool cgroup's memory; nil where the memory
	// controller is not there for it: the memory series are then not
	// exposed.
	Memory *observe.Memory
	// Pids is the pool cgroup's tasks; nil where the pids controller is
	// not there for it: the task series are then not exposed.
	Pids *observe.Pids
	// LimitsPending counts, by limit file (memory.max, v1
	// memory.limit_in_bytes), the pool's cgroups (its own and its
	// queries') whose lowered limit is held back because they use more.
	LimitsPending map[string]int
	// PredictedThrottledUsec is the simulator's throttled time for the same
	// intervals the measured counters cover, cumulative, microseconds.
	PredictedThrottledUsec uint64
	// UsersRunning and UsersQueued count the distinct users with running
	// and with queued queries in the pool.
	UsersRunning, UsersQueued int
	// Users are each user's queries in the pool, exposed with a user label;
	// nil unless the daemon was asked for them (--metrics-per-user: one
	// series per user and pool can be many).
	Users []User
}

// User is one user's queries in a pool.
type User struct {
	Name            string
	Running, Queued int
}

// Collector is a prometheus.Collector over a [Source].
type Collector struct {
	src Source

	hostCPUs, hostLoad, hostReserved, repairWrites *prometheus.Desc
	modelApplies                                   *prometheus.Desc

	running, queued, concurrencyLimit, queueSize *prometheus.Desc
	admitted, rejected, timedOut, queueWait      *prometheus.Desc
	cpuLimit, cpuWeight, cpuIdle, starved        *prometheus.Desc
	cpus                                         *prometheus.Desc
	usersRunning, usersQueued                    *prometheus.Desc
	userRunning, userQueued                      *prometheus.Desc
	usage, periods, throttledPeriods, throttled  *prometheus.Desc
	bursts, burst, predictedThrottled            *prometheus.Desc
	pressureSome, pressureFull                   *prometheus.Desc

	memory, memoryLimit, memoryHigh, memoryPeak, memorySwap *prometheus.Desc
	memoryMin, memoryLow                                    *prometheus.Desc
	memoryOOMKills, memoryEvents                            *prometheus.Desc
	memoryPressureSome, memoryPressureFull                  *prometheus.Desc
	pidsTasks, pidsLimit, pidsRefused, queryForksRefused    *prometheus.Desc
	limitPending                                            *prometheus.Desc

	clusterRunning, clusterQueued              *prometheus.Desc
	etcdConnected, etcdRoundTrip, etcdWatchLag *prometheus.Desc
	etcdSessions, etcdWatchEvents              *prometheus.Desc
	etcdWatchBytes                             *prometheus.Desc

	// cAdvisor's names for the same cpu.stat counters, so its dashboards
	// and alerts (kubernetes-mixin's CPUThrottlingHigh) work on pools.
	cadvisorUsage, cadvisorPeriods, cadvisorThrottledPeriods, cadvisorThrottled         *prometheus.Desc
	cadvisorMemoryUsage, cadvisorMemoryLimit, cadvisorMemoryMaxUsage, cadvisorOOMEvents *prometheus.Desc
}

// NewCollector builds the metric descriptors once; every scrape reads src.
func NewCollector(src Source) *Collector {
	pool := []string{"pool"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc("poolagent_"+name, help, labels, nil)
	}
	c := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, cadvisorLabels, nil) }
	return &Collector{
		src: src,

		hostCPUs:     d("host_cpus", "vCPUs of the node as the planner sees them.", nil),
		hostLoad:     d("host_cpu_load_ratio", "Moving average of host CPU busy time (0..1 of all CPUs) at the last load refresh.", nil),
		hostReserved: d("host_cpu_reserved_ratio", "Host CPU reserved by queries admitted since the last load refresh (0.1 each, 0..1).", nil),
		modelApplies: d("throttling_model_applies",
			"1 when every assumption the throttling prediction makes of this host holds, 0 when one does not: reason names those that do not (sched_ext, no_cfs_bandwidth, kernel_release, nohz_full, skew_tick, tick_slice), and pool_cpu_predicted_throttled_seconds_total may not hold.", []string{"reason"}),
		repairWrites: d("tree_repair_writes_total", "Writes made to bring the pool tree back to the plan after another writer changed it (a pool cgroup removed, a value changed), by the periodic reconcile or on SIGHUP.", nil),

		running:          d("pool_running_queries", "Queries running in the pool.", pool),
		queued:           d("pool_queued_queries", "Queries waiting in the pool's queue.", pool),
		concurrencyLimit: d("pool_concurrent_query_limit", "The pool's CONCURRENT_QUERY_LIMIT (absent when unlimited).", pool),
		queueSize:        d("pool_queue_size", "The pool's QUEUE_SIZE (absent when unlimited).", pool),
		admitted:         d("pool_admitted_queries_total", "Queries started in the pool, at once or from the queue.", pool),
		rejected:         d("pool_rejected_queries_total", "Queries refused on arrival: queue full or the pool refusing all.", pool),
		timedOut:         d("pool_timed_out_queries_total", "Queries that left the queue at QUERY_CANCEL_AFTER_SECONDS.", pool),
		queueWait:        d("pool_queue_wait_seconds", "Time admitted queries spent in the queue.", pool),
		cpuLimit:         d("pool_cpu_limit_cores", "The pool cgroup's CPU bandwidth limit in vCPUs, cpu.max quota/period (absent when max).", pool),
		cpuWeight:        d("pool_cpu_weight", "The pool cgroup's cpu.weight (1..10000).", pool),
		cpus:             d("pool_cpus", "CPUs the pool's queries may run on, the count of its cpuset.cpus (CPUS; absent when not confined).", pool),
		cpuIdle:          d("pool_cpu_idle", "1 when the pool cgroup is idle (cpu.idle 1, CPU_IDLE=1): it gets only CPU the other pools leave.", pool),
		starved: d("pool_starved_seconds_total",
			"Wall time in which the pool had queries running but used under 1% of one CPU: admitted queries making no progress, as an idle pool's do beside busy pools.", pool),
		usage:            d("pool_cpu_usage_seconds_total", "CPU time used by the pool cgroup (cpu.stat usage_usec).", pool),
		periods:          d("pool_cpu_periods_total", "Enforcement periods with activity (cpu.stat nr_periods).", pool),
		throttledPeriods: d("pool_cpu_throttled_periods_total", "Periods in which the pool was throttled (cpu.stat nr_throttled).", pool),
		throttled:        d("pool_cpu_throttled_seconds_total", "Time the pool's threads were throttled, summed over CPUs (cpu.stat throttled_usec).", pool),
		bursts:           d("pool_cpu_bursts_total", "Periods in which the pool used burst (cpu.stat nr_bursts).", pool),
		burst:            d("pool_cpu_burst_seconds_total", "CPU time used beyond the quota from burst (cpu.stat burst_usec).", pool),
		predictedThrottled: d("pool_cpu_predicted_throttled_seconds_total",
			"Throttled time the simulator predicts for the pool over the same intervals as pool_cpu_throttled_seconds_total.", pool),
		pressureSome: d("pool_cpu_pressure_some_seconds_total",
			"Time in which at least one of the pool's runnable threads waited for a CPU, throttling included (cpu.pressure some total).", pool),
		pressureFull: d("pool_cpu_pressure_full_seconds_total",
			"Time in which all of the pool's non-idle threads waited for a CPU at once (cpu.pressure full total).", pool),

		memory:      d("pool_memory_bytes", "Memory the pool cgroup uses (memory.current; v1 memory.usage_in_bytes).", pool),
		memoryLimit: d("pool_memory_limit_bytes", "The pool cgroup's memory limit, memory.max (v1 memory.limit_in_bytes; absent when unlimited).", pool),
		memoryHigh:  d("pool_memory_high_bytes", "The pool cgroup's soft memory limit, memory.high (v1 memory.soft_limit_in_bytes; absent when unlimited).", pool),
		memoryMin:   d("pool_memory_min_bytes", "The pool cgroup's hard memory guarantee, memory.min (v2; absent without one).", pool),
		memoryLow:   d("pool_memory_low_bytes", "The pool cgroup's best-effort memory guarantee, memory.low (v2; absent without one).", pool),
		memoryPeak:  d("pool_memory_peak_bytes", "The most memory the pool cgroup has used (memory.peak, Linux 5.19 on; v1 memory.max_usage_in_bytes; absent where the kernel keeps none).", pool),
		memorySwap:  d("pool_memory_swap_bytes", "Swap the pool cgroup uses (memory.swap.current; absent without swap accounting).", pool),
		memoryOOMKills: d("pool_memory_oom_kills_total",
			"Processes of the pool's queries the OOM killer ended, whatever the cause (memory.events oom_kill; v1 memory.oom_control oom_kill).", pool),
		memoryEvents: d("pool_memory_events_total",
			"memory.events of the pool cgroup: high (reclaim forced by memory.high), max (usage about to pass memory.max), oom (memory.max reached, reclaim failed: the OOM killer was called for the pool), low (reclaimed below memory.low, the guarantee, as nothing unprotected was left; v2 only); v1: max is memory.failcnt.", []string{"pool", "event"}),
		memoryPressureSome: d("pool_memory_pressure_some_seconds_total",
			"Time in which at least one of the pool's threads waited for memory (memory.pressure some total).", pool),
		memoryPressureFull: d("pool_memory_pressure_full_seconds_total",
			"Time in which all of the pool's non-idle threads waited for memory at once (memory.pressure full total).", pool),

		pidsTasks: d("pool_tasks", "Tasks (processes and threads) in the pool cgroup and its queries (pids.current).", pool),
		pidsLimit: d("pool_tasks_limit", "The pool cgroup's task limit, pids.max (TOTAL_PIDS_LIMIT; absent when unlimited).", pool),
		pidsRefused: d("pool_forks_refused_total",
			"Forks and thread creations refused at a task limit (pids.events max of the pool cgroup: see docs/metrics.md for which refusals a kernel counts there).", pool),
		limitPending: d("pool_limit_pending",
			"Cgroups of the pool (its own and its queries') whose lowered limit in file is held back because they use more: the old limit stays until usage allows (absent when none).", []string{"pool", "file"}),
		queryForksRefused: d("pool_query_forks_refused_total",
			"Forks and thread creations refused at a task limit in the pool's ended queries (each query cgroup's pids.events max at its end).", pool),

		usersRunning: d("pool_users_running", "Distinct users with queries running in the pool.", pool),
		usersQueued:  d("pool_users_queued", "Distinct users with queries waiting in the pool's queue.", pool),
		userRunning:  d("pool_user_running_queries", "Queries of one user running in the pool (only with poolagent daemon --metrics-per-user).", []string{"pool", "user"}),
		userQueued:   d("pool_user_queued_queries", "Queries of one user waiting in the pool's queue (only with poolagent daemon --metrics-per-user).", []string{"pool", "user"}),

		clusterRunning:  d("cluster_pool_running_queries", "Fleet mode: queries running in a globally limited pool across the cluster.", pool),
		clusterQueued:   d("cluster_pool_queued_queries", "Fleet mode: queries waiting in a globally limited pool's queue across the cluster.", pool),
		etcdConnected:   d("etcd_session_up", "Fleet mode: 1 while the node holds a live etcd session lease, else 0.", nil),
		etcdRoundTrip:   d("etcd_round_trip_seconds", "Fleet mode: duration of the node's latest successful etcd request.", nil),
		etcdWatchLag:    d("etcd_watch_lag_seconds", "Fleet mode: time since the node's watch on the cluster last delivered.", nil),
		etcdSessions:    d("etcd_sessions_total", "Fleet mode: etcd session leases the node has taken (1 + each time it lost one).", nil),
		etcdWatchEvents: d("etcd_watch_events_total", "Fleet mode: key events the node's watch on the cluster has delivered (every node sees every key write).", nil),
		etcdWatchBytes:  d("etcd_watch_bytes_total", "Fleet mode: encoded size of the key events the node's watch on the cluster has delivered.", nil),

		cadvisorUsage:            c("container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds (cAdvisor's name; the pool's usage_usec)."),
		cadvisorPeriods:          c("container_cpu_cfs_periods_total", "Number of elapsed enforcement period intervals (cAdvisor's name; the pool's nr_periods)."),
		cadvisorThrottledPeriods: c("container_cpu_cfs_throttled_periods_total", "Number of throttled period intervals (cAdvisor's name; the pool's nr_throttled)."),
		cadvisorThrottled:        c("container_cpu_cfs_throttled_seconds_total", "Total time duration the container has been throttled (cAdvisor's name; the pool's throttled_usec)."),
		cadvisorMemoryUsage:      c("container_memory_usage_bytes", "Current memory usage in bytes (cAdvisor's name; the pool's memory.current)."),
		cadvisorMemoryLimit:      c("container_spec_memory_limit_bytes", "Memory limit for the container (cAdvisor's name; the pool's memory.max, absent when unlimited)."),
		cadvisorMemoryMaxUsage:   c("container_memory_max_usage_bytes", "Maximum memory usage recorded in bytes (cAdvisor's name; the pool's memory.peak)."),
		cadvisorOOMEvents:        c("container_oom_events_total", "Count of out of memory events observed for the container (cAdvisor's name; the pool's oom_kill count)."),
	}
}

// cadvisorLabels are the labels of the cAdvisor-named series: container is
// the pool's name (what cAdvisor's dashboards and alerts group by, and
// filter on with container!=""), pool the same name as on poolagent's own.
var cadvisorLabels = []string{"container", "pool"}

// Describe sends every descriptor.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.hostCPUs, c.hostLoad, c.hostReserved, c.repairWrites, c.modelApplies,
		c.running, c.queued, c.concurrencyLimit, c.queueSize,
		c.admitted, c.rejected, c.timedOut, c.queueWait,
		c.cpuLimit, c.cpuWeight, c.cpuIdle, c.starved, c.cpus,
		c.usersRunning, c.usersQueued, c.userRunning, c.userQueued,
		c.usage, c.periods, c.throttledPeriods, c.throttled,
		c.bursts, c.burst, c.predictedThrottled,
		c.pressureSome, c.pressureFull,
		c.memory, c.memoryLimit, c.memoryHigh, c.memoryMin, c.memoryLow, c.memoryPeak, c.memorySwap, c.memoryOOMKills, c.memoryEvents,
		c.memoryPressureSome, c.memoryPressureFull,
		c.pidsTasks, c.pidsLimit, c.pidsRefused, c.queryForksRefused, c.limitPending,
		c.cadvisorUsage, c.cadvisorPeriods, c.cadvisorThrottledPeriods, c.cadvisorThrottled,
		c.cadvisorMemoryUsage, c.cadvisorMemoryLimit, c.cadvisorMemoryMaxUsage, c.cadvisorOOMEvents,
		c.clusterRunning, c.clusterQueued, c.etcdConnected, c.etcdRoundTrip, c.etcdWatchLag, c.etcdSessions, c.etcdWatchEvents, c.etcdWatchBytes,
	} {
		ch <- d
	}
}

// Collect reads one snapshot and sends its metrics, pools by name.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s, err := c.src.MetricsSnapshot()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.hostCPUs, err)
		return
	}
	out := sink(ch)
	out.gauge(c.hostCPUs, s.Host.CPUs)
	out.gauge(c.hostLoad, s.Host.LoadRatio)
	out.gauge(c.hostReserved, s.Host.ReservedRatio)
	out.counter(c.repairWrites, float64(s.Host.RepairWrites))
	applies := 1.0
	if len(s.Host.ModelCaveats) > 0 {
		applies = 0
	}
	out.gauge(c.modelApplies, applies, s.Host.ModelCaveats.Reasons())
	pools := slices.Clone(s.Pools)
	slices.SortFunc(pools, func(a, b Pool) int { return cmp.Compare(a.Name, b.Name) })
	for _, p := range pools {
		c.collectAdmission(out, p)
		c.collectCPU(out, p)
		if m := p.Memory; m != nil {
			c.collectMemory(out, p.Name, m)
		}
		if t := p.Pids; t != nil {
			out.gauge(c.pidsTasks, float64(t.CurrentTasks), p.Name)
			if t.Limit >= 0 {
				out.gauge(c.pidsLimit, float64(t.Limit), p.Name)
			}
			out.counter(c.pidsRefused, float64(t.Events.Max), p.Name)
		}
	}
	if cl := s.Cluster; cl != nil {
		c.collectCluster(out, cl)
	}
}

// sink sends constant metrics to a Collect channel.
type sink chan<- prometheus.Metric

func (out sink) gauge(d *prometheus.Desc, v float64, labels ...string) {
	out <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func (out sink) counter(d *prometheus.Desc, v float64, labels ...string) {
	out <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

// collectAdmission sends pool p's admission series: its queries running
// and queued (also per user), its limits, its decisions and its queue
// wait.
func (c *Collector) collectAdmission(out sink, p Pool) {
	out.gauge(c.running, float64(p.Running), p.Name)
	out.gauge(c.queued, float64(p.Queued), p.Name)
	if p.ConcurrentQueryLimit >= 0 {
		out.gauge(c.concurrencyLimit, float64(p.ConcurrentQueryLimit), p.Name)
	}
	if p.QueueSize >= 0 {
		out.gauge(c.queueSize, float64(p.QueueSize), p.Name)
	}
	out.gauge(c.usersRunning, float64(p.UsersRunning), p.Name)
	out.gauge(c.usersQueued, float64(p.UsersQueued), p.Name)
	for _, u := range p.Users {
		out.gauge(c.userRunning, float64(u.Running), p.Name, u.Name)
		out.gauge(c.userQueued, float64(u.Queued), p.Name, u.Name)
	}
	out.counter(c.admitted, float64(p.Admitted), p.Name)
	out.counter(c.rejected, float64(p.Rejected), p.Name)
	out.counter(c.timedOut, float64(p.TimedOut), p.Name)
	out.counter(c.queryForksRefused, float64(p.QueryForksRefused), p.Name)
	for _, file := range slices.Sorted(maps.Keys(p.LimitsPending)) {
		out.gauge(c.limitPending, float64(p.LimitsPending[file]), p.Name, file)
	}
	out <- prometheus.MustNewConstHistogram(c.queueWait, p.QueueWait.Count, p.QueueWait.SumSeconds, p.QueueWait.buckets(), p.Name)
}

// collectCPU sends pool p's CPU series: the planned limit, weight, idle
// flag and CPU set, the time it starved, its cpu.stat counters (also
// under cAdvisor's names) and its CPU pressure.
func (c *Collector) collectCPU(out sink, p Pool) {
	if p.CPULimitCores > 0 {
		out.gauge(c.cpuLimit, p.CPULimitCores, p.Name)
	}
	if p.CPUWeight > 0 {
		out.gauge(c.cpuWeight, float64(p.CPUWeight), p.Name)
	}
	idle := 0.0
	if p.CPUIdle {
		idle = 1
	}
	out.gauge(c.cpuIdle, idle, p.Name)
	if p.CPUs > 0 {
		out.gauge(c.cpus, float64(p.CPUs), p.Name)
	}
	out.counter(c.starved, p.Starved.Seconds(), p.Name)
	if st := p.CPU; st != nil {
		out.counter(c.usage, seconds(st.UsageUsec), p.Name)
		out.counter(c.periods, float64(st.NrPeriods), p.Name)
		out.counter(c.throttledPeriods, float64(st.NrThrottled), p.Name)
		out.counter(c.throttled, seconds(st.ThrottledUsec), p.Name)
		out.counter(c.bursts, float64(st.NrBursts), p.Name)
		out.counter(c.burst, seconds(st.BurstUsec), p.Name)
		out.counter(c.predictedThrottled, seconds(p.PredictedThrottledUsec), p.Name)
		out.counter(c.cadvisorUsage, seconds(st.UsageUsec), p.Name, p.Name)
		out.counter(c.cadvisorPeriods, float64(st.NrPeriods), p.Name, p.Name)
		out.counter(c.cadvisorThrottledPeriods, float64(st.NrThrottled), p.Name, p.Name)
		out.counter(c.cadvisorThrottled, seconds(st.ThrottledUsec), p.Name, p.Name)
	}
	if ps := p.Pressure; ps != nil {
		out.counter(c.pressureSome, seconds(ps.Some.TotalUsec), p.Name)
		if ps.Full != nil {
			out.counter(c.pressureFull, seconds(ps.Full.TotalUsec), p.Name)
		}
	}
}

// collectMemory sends the memory series of pool, whose memory is m.
func (c *Collector) collectMemory(out sink, pool string, m *observe.Memory) {
	out.gauge(c.memory, float64(m.CurrentBytes), pool)
	out.gauge(c.cadvisorMemoryUsage, float64(m.CurrentBytes), pool, pool)
	if m.LimitBytes >= 0 {
		out.gauge(c.memoryLimit, float64(m.LimitBytes), pool)
		out.gauge(c.cadvisorMemoryLimit, float64(m.LimitBytes), pool, pool)
	}
	if m.HighBytes >= 0 {
		out.gauge(c.memoryHigh, float64(m.HighBytes), pool)
	}
	if m.MinBytes > 0 {
		out.gauge(c.memoryMin, float64(m.MinBytes), pool)
	}
	if m.LowBytes > 0 {
		out.gauge(c.memoryLow, float64(m.LowBytes), pool)
	}
	if m.PeakBytes != nil {
		out.gauge(c.memoryPeak, float64(*m.PeakBytes), pool)
		out.gauge(c.cadvisorMemoryMaxUsage, float64(*m.PeakBytes), pool, pool)
	}
	if m.SwapBytes != nil {
		out.gauge(c.memorySwap, float64(*m.SwapBytes), pool)
	}
	out.counter(c.memoryOOMKills, float64(m.Events.OOMKill), pool)
	out.counter(c.cadvisorOOMEvents, float64(m.Events.OOMKill), pool, pool)
	for _, e := range []struct {
		name  string
		count uint64
	}{{"high", m.Events.High}, {"max", m.Events.Max}, {"oom", m.Events.OOM}} {
		out.counter(c.memoryEvents, float64(e.count), pool, e.name)
	}
	if !m.V1 { // v1 has no guarantee to breach
		out.counter(c.memoryEvents, float64(m.Events.Low), pool, "low")
	}
	if ps := m.Pressure; ps != nil {
		out.counter(c.memoryPressureSome, seconds(ps.Some.TotalUsec), pool)
		if ps.Full != nil {
			out.counter(c.memoryPressureFull, seconds(ps.Full.TotalUsec), pool)
		}
	}
}

// collectCluster sends the fleet's series: the etcd connection and each
// pool's queries across the fleet.
func (c *Collector) collectCluster(out sink, cl *Cluster) {
	up := 0.0
	if cl.Connected {
		up = 1
	}
	out.gauge(c.etcdConnected, up)
	out.gauge(c.etcdRoundTrip, cl.RoundTripSeconds)
	out.gauge(c.etcdWatchLag, cl.WatchLagSeconds)
	out.counter(c.etcdSessions, float64(cl.Sessions))
	out.counter(c.etcdWatchEvents, float64(cl.WatchEvents))
	out.counter(c.etcdWatchBytes, float64(cl.WatchBytes))
	cps := slices.Clone(cl.Pools)
	slices.SortFunc(cps, func(a, b ClusterPool) int { return cmp.Compare(a.Name, b.Name) })
	for _, p := range cps {
		out.gauge(c.clusterRunning, float64(p.Running), p.Name)
		out.gauge(c.clusterQueued, float64(p.Queued), p.Name)
	}
}

// seconds converts microseconds to seconds.
func seconds(usec uint64) float64 { return float64(usec) / 1e6 }

// NewBuildInfo is the collector of poolagent_build_info, a gauge of 1 whose
// labels say which build serves the metrics, as Prometheus' own
// prometheus_build_info does.
func NewBuildInfo(info version.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "poolagent_build_info",
		Help: "A metric with a constant '1' value labeled by version, revision and goversion of the poolagent binary.",
		ConstLabels: prometheus.Labels{
			"version": info.Version, "revision": info.Revision, "goversion": info.GoVersion,
		},
	})
	g.Set(1)
	return g
}
