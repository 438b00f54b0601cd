package protocol

// The rows of the system views, as the daemon sends them in an
// [AdminReply] and the CLI prints them (package sysview builds and renders
// them). Columns that exist in YDB's views keep YDB's names; poolagent's
// own follow them.

// Pool is one row of `poolagent pools`. The first eight columns are YDB's
// .sys/resource_pools; -1 means "not set", as there.
type Pool struct {
	Name                           string  `json:"Name"`
	ConcurrentQueryLimit           int64   `json:"ConcurrentQueryLimit"`
	QueueSize                      int64   `json:"QueueSize"`
	DatabaseLoadCpuThreshold       float64 `json:"DatabaseLoadCpuThreshold"`
	ResourceWeight                 int64   `json:"ResourceWeight"`
	TotalCpuLimitPercentPerNode    float64 `json:"TotalCpuLimitPercentPerNode"`
	QueryCpuLimitPercentPerNode    float64 `json:"QueryCpuLimitPercentPerNode"`
	QueryMemoryLimitPercentPerNode float64 `json:"QueryMemoryLimitPercentPerNode"`
	// TotalMemoryLimitPercentPerNode and QueryCancelAfterSeconds are YDB
	// parameters its view does not show; CpuPeriodUsec, CpuBurstPercent
	// and Cpus (CPUS, a CPU list; "" when not set) are poolagent's
	// extensions.
	TotalMemoryLimitPercentPerNode float64 `json:"TotalMemoryLimitPercentPerNode"`
	QueryCancelAfterSeconds        int64   `json:"QueryCancelAfterSeconds"`
	CpuPeriodUsec                  int64   `json:"CpuPeriodUsec"`
	CpuBurstPercent                float64 `json:"CpuBurstPercent"`
	Cpus                           string  `json:"Cpus,omitempty"`
	// RunningQueries and QueuedQueries are the queries in the pool now.
	RunningQueries int `json:"RunningQueries"`
	QueuedQueries  int `json:"QueuedQueries"`
	// Active is whether the last plan counted the pool as active.
	Active bool `json:"Active"`
	// CpuLimitCores is the pool cgroup's cpu.max in vCPUs as planned now
	// (quota/period); -1 when it is "max".
	CpuLimitCores float64 `json:"CpuLimitCores"`
	// CpuWeight is the pool cgroup's cpu.weight (1..10000).
	CpuWeight int64 `json:"CpuWeight"`
	// Dropped pools are gone from the model but still have queries
	// running; they disappear when the last one ends.
	Dropped bool `json:"Dropped,omitempty"`
	// Node, in fleet mode, is whose queries RunningQueries and
	// QueuedQueries count: "*" for the whole cluster (a globally limited
	// pool), else this node's name (a pool without a global limit, or a
	// view asked with Local); "" on a single host.
	Node string `json:"Node,omitempty"`
	// ConcurrentQueryLimitPerUser, QueueSizePerUser, QueuePolicy ("fifo"
	// or "fair") and UsageHalfLifeSeconds are poolagent's per-user
	// parameters, as configured (-1: not set).
	ConcurrentQueryLimitPerUser int64  `json:"ConcurrentQueryLimitPerUser"`
	QueueSizePerUser            int64  `json:"QueueSizePerUser"`
	QueuePolicy                 string `json:"QueuePolicy"`
	UsageHalfLifeSeconds        int64  `json:"UsageHalfLifeSeconds"`
	// UsersRunning and UsersQueued count the distinct users with running
	// and with queued queries; Users has each, by name.
	UsersRunning int        `json:"UsersRunning"`
	UsersQueued  int        `json:"UsersQueued"`
	Users        []PoolUser `json:"Users,omitempty"`
	// RunTime names the columns whose value a run-time change (`poolagent
	// sql`, kept in the state directory) set over the pool file; "Name"
	// when the pool itself was created at run time.
	RunTime []string `json:"RunTime,omitempty"`
	// Pending are the pool's lowered memory limits (its own or its
	// queries') held back because their cgroups use more, as lines
	// "pending: usage X above new limit Y of FILE; ...".
	Pending []string `json:"Pending,omitempty"`
}

// PoolUser is one user's queries in a pool, a part of a [Pool] row.
type PoolUser struct {
	User           string `json:"User"`
	RunningQueries int    `json:"RunningQueries"`
	QueuedQueries  int    `json:"QueuedQueries"`
	// UsageSeconds is the user's CPU time in the pool as the fair order
	// counts it, decayed with the pool's half-life; 0 in a FIFO pool.
	UsageSeconds float64 `json:"UsageSeconds"`
}

// Classifier is one row of `poolagent classifiers`: YDB's
// .sys/resource_pool_classifiers.
type Classifier struct {
	Name       string `json:"Name"`
	Rank       int64  `json:"Rank"`
	MemberName string `json:"MemberName"`
	// HasAppName is HAS_APP_NAME: the executable's base name the query's
	// client must give; "" matches every query.
	HasAppName   string `json:"HasAppName,omitempty"`
	ResourcePool string `json:"ResourcePool"`
	// Action is "reject" for a classifier that refuses what it matches
	// (ResourcePool is then "").
	Action string `json:"Action,omitempty"`
}

// Query states: the State column of a [Query].
const (
	StateQueued  = "QUEUED"
	StateRunning = "RUNNING"
)

// Query is one row of `poolagent queries`. ResourcePoolId and QueuedTimeUs
// are named as in YDB's query statistics; the CPU columns are the query
// cgroup's cpu.stat (µs).
type Query struct {
	// QueryId is the query's id, the name of its cgroup below the pool
	// once admitted.
	QueryId        string `json:"QueryId"`
	ResourcePoolId string `json:"ResourcePoolId"`
	// Classifier is the classifier that chose the pool; "" when named
	// explicitly or none matched.
	Classifier string `json:"Classifier,omitempty"`
	State      string `json:"State"`
	// QueuePosition counts from 1 while QUEUED; 0 once running.
	QueuePosition int `json:"QueuePosition,omitempty"`
	// Wait says why a QUEUED query is not running; nil once running.
	Wait *Wait  `json:"Wait,omitempty"`
	User string `json:"User"`
	Uid  uint32 `json:"Uid"`
	// ClientPid is the `poolagent run` process that asked for the query.
	ClientPid int `json:"ClientPid"`
	// UserRunning and UserQueued are the queries of the query's user in
	// its pool, running and queued, this one included.
	UserRunning int `json:"UserRunning"`
	UserQueued  int `json:"UserQueued"`
	// QueuedTimeUs is the time spent queued: so far while QUEUED, in total
	// once RUNNING.
	QueuedTimeUs int64 `json:"QueuedTimeUs"`
	// RunningTimeUs is the time since admission; 0 while queued.
	RunningTimeUs int64 `json:"RunningTimeUs"`
	// CpuLimitCores is the query's cpu.max in vCPUs; -1 when uncapped.
	CpuLimitCores float64 `json:"CpuLimitCores"`
	UsageUsec     uint64  `json:"UsageUsec"`
	NrPeriods     uint64  `json:"NrPeriods"`
	NrThrottled   uint64  `json:"NrThrottled"`
	ThrottledUsec uint64  `json:"ThrottledUsec"`
	// MemoryBytes and PeakMemoryBytes are the query cgroup's memory and
	// its peak (memory.current, memory.peak; v1 usage_in_bytes,
	// max_usage_in_bytes), OOMKills the processes the OOM killer ended
	// in it; 0 where the memory controller is not there.
	MemoryBytes     uint64 `json:"MemoryBytes"`
	PeakMemoryBytes uint64 `json:"PeakMemoryBytes"`
	OOMKills        uint64 `json:"OOMKills"`
	// Adopted queries were running when the daemon started; their client
	// belongs to an earlier daemon, so User and ClientPid are unknown.
	Adopted bool `json:"Adopted,omitempty"`
	// Node, in fleet mode, is the node the query runs or waits on; ""
	// on a single host. A query of another node has only its id (its
	// registration in etcd), pool, state, position and times: its user,
	// client and CPU figures are that node's to show, and its running
	// time counts from its arrival.
	Node string `json:"Node,omitempty"`
}
