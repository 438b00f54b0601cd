// Package protocol is the poolagent daemon's socket protocol: the
// messages both ends exchange, imported by the daemon (package daemon) and
// by its clients (package client, the CLI). It imports only the standard
// library, so the slim `poolagent-run` binary links it (docs/performance.md
// "Admission"), and its reply types carry only their own
// fields, never the daemon's internal types.
//
// The protocol: JSON objects, one per line, over the daemon's Unix socket.
// docs/admission.md shows a whole exchange. The caller's identity is never
// part of a message: the daemon takes it from the socket's peer
// credentials.
package protocol

import (
	"errors"
	"math"
	"strconv"
)

// DefaultSocket is where the daemon listens unless told otherwise.
const DefaultSocket = "/run/poolagent/agent.sock"

// MaxMessageBytes is the longest message the daemon reads, its newline
// included: 256 KiB. The largest message is a run-time change (OpSQL),
// whose DDL of a thousand pools and classifiers stays well below it; a
// longer one is refused (CodeBadRequest) as soon as the limit is passed,
// so a client cannot make the daemon buffer more.
const MaxMessageBytes = 256 << 10

// Client operations.
const (
	// OpRun asks to run a query: the first message of a connection.
	OpRun = "run"
	// OpExec asks to run a query in place, the first message of a
	// connection instead of OpRun: once the query is admitted the daemon
	// moves the client process itself (the socket's peer) into the query
	// cgroup and answers ReplyStarted, and the client execs the command.
	// The client names no process and sends nothing more; the query ends
	// when its cgroup is empty.
	OpExec = "exec"
	// OpPlace asks for a query whose processes another program places
	// (an OCI runtime, for poolagent-oci): the first message of a
	// connection, instead of OpRun. Only root may ask: the query cgroup
	// is root's. Once the query is admitted the daemon makes its cgroup
	// and answers ReplyStarted with Cgroup; the client's program then
	// creates its processes in a cgroup below that one. The client sends
	// OpExited when that program has returned, and is answered ReplyDone
	// once the cgroup is empty; or it hangs up, and the query ends when
	// the cgroup is empty, told to no one but the daemon's log.
	OpPlace = "place"
	// OpStart names the process that is to become the query, once the
	// query was admitted.
	OpStart = "start"
	// OpExited says the client's child has exited, so the daemon checks
	// at once whether the query cgroup is empty.
	OpExited = "exited"
	// OpSignal asks the daemon to send Signal to every process of a
	// started query (OpRun): a client that is a service's process passes
	// on the stop and kill signals systemd sends it, which its unit's
	// cgroup no longer reaches. A process the client could not signal
	// itself (kill(2)'s rule) is left alone.
	OpSignal = "signal"
)

// Daemon replies.
const (
	// ReplyQueued: the query waits; Position is its place in the queue
	// and Wait says why. Sent on arrival and, when Progress was asked for,
	// whenever the position or the reason changes.
	ReplyQueued = "queued"
	// ReplyAdmitted: the query holds a slot in its pool; the client starts
	// its process and names it with OpStart, and only then does the daemon
	// create the query cgroup and move the process into it.
	ReplyAdmitted = "admitted"
	// ReplyStarted: the process named by OpStart is in the query cgroup
	// and may exec the command. To OpExec it is the only answer after the
	// queue: the client itself is in the query cgroup, and the reply
	// carries what ReplyAdmitted would (Pool, Classifier, Query,
	// CPULimit).
	ReplyStarted = "started"
	// ReplyDone: the query cgroup is empty and removed; Stats are final.
	// Never sent to OpExec, whose client is the command by then.
	ReplyDone = "done"
	// ReplyError: the query failed; Error says why, Code says how.
	ReplyError = "error"
)

// Error codes of a ReplyError.
const (
	CodeQueueFull     = "queue_full"
	CodePoolDisabled  = "pool_disabled"
	CodeDelayDeadline = "delay_deadline"
	CodePoolDropped   = "pool_dropped"
	CodeUnknownPool   = "unknown_pool"
	CodeAccessDenied  = "access_denied"
	CodeBadRequest    = "bad_request"
	CodeInternal      = "internal"
	// CodeRejected: a classifier with ACTION='reject' matched the query.
	CodeRejected = "rejected"
	// CodeConfined: the process is held by a CPU or memory limit an
	// administrator set, which the query would leave.
	CodeConfined = "confined"
	// CodeLimit: one of the daemon's limits on what a user may hold
	// (connections, queries admitted and not started, unread view
	// replies, file descriptors) refused the request; Error names the
	// limit (docs/security.md).
	CodeLimit = "limit"
	// CodeTimeout: the client did not send in time (its first request,
	// a whole message, or OpStart after admission); Error says which.
	CodeTimeout = "timeout"
)

// Operator operations: the first and only request of a connection,
// answered by one [AdminReply]. The views are open
// to every local user; OpSQL needs an administrator (root, the admin
// group, or an admin grant), identified like a query's caller by the
// socket's peer credentials.
const (
	// OpSQL carries DDL in Request.SQL; Request.Source names it in error
	// positions ("-e" or the file's name).
	OpSQL = "sql"
	// OpPools, OpClassifiers and OpQueries read the system views.
	OpPools       = "pools"
	OpClassifiers = "classifiers"
	OpQueries     = "queries"
	// OpHistory reads the daemon's history of a pool (Request.Pool)
	// since Request.SinceUsec ago (the whole window when 0), as traces of
	// `poolagent record` (AdminReply.Traces). Open to every local user,
	// like the views: it shows the pools' counters, which `poolagent
	// stat` shows anyone. One reply is written at a time in the daemon
	// (docs/security.md).
	OpHistory = "history"
	// OpReleaseNode releases, in fleet mode, the strict slots of the node
	// named in Request.Node (administrators only; docs/fleet.md).
	OpReleaseNode = "release-node"
	// OpKill kills the running query named in Request.Query, every
	// process in its cgroup at once (administrators only; `poolagent
	// queries --kill`).
	OpKill = "kill"
)

// Error codes of operator replies and of queries cut short by a stop.
const (
	// CodeInvalidDDL: the DDL was refused; Error lists every problem as
	// source:line:col: message.
	CodeInvalidDDL = "invalid_ddl"
	// CodeStopping: the daemon is shutting down; a queued query left the
	// queue without running.
	CodeStopping = "stopping"
)

// ErrStopping is what queued clients are told (the Error of a ReplyError
// with CodeStopping) when the daemon stops.
var ErrStopping = errors.New("poolagent is stopping: the query left the queue without running; run it again once the daemon is back")

// Request is a message from the client.
type Request struct {
	Op string `json:"op"`
	// Pool is the pool the caller names (OpRun); empty: classify.
	Pool string `json:"pool,omitempty"`
	// Progress asks for a ReplyQueued on every change of position or of
	// the reason for waiting (OpRun).
	Progress bool `json:"progress,omitempty"`
	// App is the application name classifiers match with HAS_APP_NAME
	// (OpRun): the base name of the command's executable, symbolic links
	// resolved. The client's claim; nothing checks it.
	App string `json:"app,omitempty"`
	// Bound asks that the query end with the client (OpRun): when the
	// client's connection closes before the query cgroup is empty, the
	// daemon kills the query's processes (SIGKILL), as systemd kills what
	// is left of a unit whose main process was killed.
	Bound bool `json:"bound,omitempty"`
	// PID is the client's child that waits to exec the command (OpStart).
	PID int `json:"pid,omitempty"`
	// Signal is the signal number of an OpSignal, 1 to 64.
	Signal int `json:"signal,omitempty"`
	// SQL is the DDL of an OpSQL request; Source names it in error
	// positions.
	SQL    string `json:"sql,omitempty"`
	Source string `json:"source,omitempty"`
	// Local asks a view (OpPools, OpQueries) for this node alone; in
	// fleet mode the views show the cluster otherwise. A single host is
	// its own cluster.
	Local bool `json:"local,omitempty"`
	// SinceUsec is how far back OpHistory reads, µs; 0: all it keeps.
	SinceUsec int64 `json:"since_usec,omitempty"`
	// Node is the fleet node an OpReleaseNode names.
	Node string `json:"node,omitempty"`
	// Query is the query an OpKill names, its id (QueryId).
	Query string `json:"query,omitempty"`
}

// Reply is a message from the daemon.
type Reply struct {
	Type string `json:"type"`
	Pool string `json:"pool,omitempty"`
	// Classifier that chose the pool, if one did.
	Classifier string `json:"classifier,omitempty"`
	Position   int    `json:"position,omitempty"`
	// Query is the query's id and the name of its cgroup below the pool.
	Query string `json:"query,omitempty"`
	// CPULimit is the query's CPU cap in vCPUs (its cpu.max quota over
	// period) as planned when the query was admitted; every query cgroup
	// has a quota, so a daemon always sends it.
	CPULimit float64 `json:"cpu_limit,omitempty"`
	// Cgroup is the query cgroup's path as /proc/PID/cgroup names it on
	// cgroup v2 (below the unified hierarchy's root, "/"-rooted): the
	// ReplyStarted of an OpPlace.
	Cgroup string `json:"cgroup,omitempty"`
	// Wait says why a queued query is not running (ReplyQueued).
	Wait  *Wait  `json:"wait,omitempty"`
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
	Stats *Stats `json:"stats,omitempty"`
}

// Stats is what a finished query reports: YDB's plan statistics
// (ResourcePoolId, QueuedTimeUs, TotalDurationUs, spelled as YDB spells
// them), the query cgroup's cpu.stat counters (microseconds) and its
// memory: the peak (memory.peak, v1 max_usage_in_bytes; 0 where the
// kernel keeps none), the memory.events counts (v1: failcnt as
// MemoryMaxEvents) and the processes the OOM killer ended, with the limit
// that made it when it was the query's or its pool's (OOM); and the forks
// and thread creations a task limit refused (pids.events max,
// ForksRefused), with the limit when it was one of poolagent's (Fork).
type Stats struct {
	ResourcePoolID string `json:"ResourcePoolId"`
	// QueuedTimeUs is the time from arrival to admission, µs.
	QueuedTimeUs int64 `json:"QueuedTimeUs"`
	// TotalDurationUs is the time from arrival until the query cgroup was
	// empty, queue included, µs.
	TotalDurationUs  int64        `json:"TotalDurationUs"`
	UsageUsec        uint64       `json:"usage_usec"`
	NrPeriods        uint64       `json:"nr_periods"`
	NrThrottled      uint64       `json:"nr_throttled"`
	ThrottledUsec    uint64       `json:"throttled_usec"`
	PeakMemoryBytes  uint64       `json:"peak_memory_bytes"`
	MemoryHighEvents uint64       `json:"memory_high_events"`
	MemoryMaxEvents  uint64       `json:"memory_max_events"`
	OOMKills         uint64       `json:"oom_kills"`
	OOM              *OOMKill     `json:"oom,omitempty"`
	ForksRefused     uint64       `json:"forks_refused"`
	Fork             *ForkRefused `json:"fork,omitempty"`
}

// ForkRefused is a task limit of poolagent's that refused forks (or
// thread creations) of a query: the query's own (QUERY_PIDS_LIMIT), its
// pool's (TOTAL_PIDS_LIMIT), or one of the two where the kernel's counts
// cannot tell which (docs/pools.md, "Process limits").
type ForkRefused struct {
	// Limit is "query", "pool" or "query or pool".
	Limit string `json:"limit"`
	// Refused counts the refusals.
	Refused uint64 `json:"refused"`
	// QueryLimit and PoolLimit are QUERY_PIDS_LIMIT and TOTAL_PIDS_LIMIT
	// as the query ran with them; 0 = none.
	QueryLimit int64 `json:"query_limit,omitempty"`
	PoolLimit  int64 `json:"pool_limit,omitempty"`
	// InPool says Refused counts the pool's refusals while the query ran,
	// its own and its neighbours' (a kernel that counts refusals at the
	// limit reached keeps no count of the query's at its pool's limit).
	InPool bool `json:"in_pool,omitempty"`
}

// Message is what the client says about the refusals, prog being its
// name:
//
//	poolagent: query Q in pool P could not start a process or thread 3 times: the query's task limit 64 (QUERY_PIDS_LIMIT) was reached
func (f ForkRefused) Message(prog, query, pool string) string {
	ofQuery := "the query's task limit " + strconv.FormatInt(f.QueryLimit, 10) + " (QUERY_PIDS_LIMIT)"
	ofPool := "the pool's task limit " + strconv.FormatInt(f.PoolLimit, 10) + " (TOTAL_PIDS_LIMIT)"
	which := ofQuery
	switch f.Limit {
	case OOMLimitPool:
		which = ofPool
	case ForkLimitEither:
		which = ofQuery + " or " + ofPool
	}
	times := strconv.FormatUint(f.Refused, 10) + " times"
	if f.Refused == 1 {
		times = "once"
	}
	if f.InPool {
		return prog + ": query " + query + " ran while pool " + pool + "'s queries could not start a process or thread " + times + ": " + which + " was reached"
	}
	return prog + ": query " + query + " in pool " + pool + " could not start a process or thread " + times + ": " + which + " was reached"
}

// ForkLimitEither is ForkRefused.Limit where either limit may have
// refused the forks.
const ForkLimitEither = "query or pool"

// OOMKill is a memory limit of poolagent's that the kernel's OOM killer
// enforced on a query: the query's own (QUERY_MEMORY_LIMIT_PERCENT_PER_NODE)
// or its pool's (TOTAL_MEMORY_LIMIT_PERCENT_PER_NODE). A kill for another
// reason (the host's own OOM killer, a signal) has none.
type OOMKill struct {
	// Limit is "query" or "pool".
	Limit string `json:"limit"`
	// LimitBytes is the limit reached (memory.max, v1
	// memory.limit_in_bytes).
	LimitBytes int64 `json:"limit_bytes"`
	// Parameter is the pool parameter that set it, Percent its value and
	// NodeBytes the node's memory it is a percent of.
	Parameter string `json:"parameter"`
	Percent   int64  `json:"percent"`
	NodeBytes int64  `json:"node_bytes"`
}

// OOM limits.
const (
	OOMLimitQuery = "query"
	OOMLimitPool  = "pool"
)

// Message is what the client says about the kill, prog being its name:
//
//	poolagent: query Q in pool P was killed by the kernel's OOM killer: the query's memory limit 512 MiB (QUERY_MEMORY_LIMIT_PERCENT_PER_NODE=5 of 10 GiB) was reached
func (o OOMKill) Message(prog, query, pool string) string {
	return prog + ": query " + query + " in pool " + pool + " was killed by the kernel's OOM killer: the " + o.Limit +
		"'s memory limit " + FormatBytes(o.LimitBytes) + " (" + o.Parameter + "=" + strconv.FormatInt(o.Percent, 10) +
		" of " + FormatBytes(o.NodeBytes) + ") was reached"
}

// FormatBytes renders a byte count in binary units: "512 MiB", "10 GiB",
// "99.6 MiB", "4 KiB", "100 B".
func FormatBytes(b int64) string {
	v, unit := float64(b), "B"
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) + " " + unit
}
