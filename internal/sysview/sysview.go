// Package sysview is the host's version of YDB's system views: the rows of
// `poolagent pools` (YDB's .sys/resource_pools), `poolagent classifiers`
// (.sys/resource_pool_classifiers) and `poolagent queries` (queries running
// and queued), built from the pool model and the daemon's state, and
// rendered as tables for people or JSON for scripts. Columns that exist in
// YDB's views keep YDB's names; poolagent's own follow them.
package sysview

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/planner"
)

// Pools builds the pools view: every pool of m (default first, then by
// name) with its admission state from adm and its cgroup from d, then the
// dropped pools adm still holds. Users' usage is decayed to now.
func Pools(m *planner.Model, adm []admission.PoolStats, d planner.Desired, now time.Time) []protocol.Pool {
	stats := map[string]admission.PoolStats{}
	for _, s := range adm {
		stats[s.Name] = s
	}
	planned := map[string]*planner.PoolState{}
	for _, p := range d.Pools {
		planned[p.Name] = p
	}
	var rows []protocol.Pool
	for _, p := range m.Pools() {
		st := stats[p.Name]
		delete(stats, p.Name)
		row := protocol.Pool{
			Name:                           p.Name,
			ConcurrentQueryLimit:           p.ConcurrentQueryLimit,
			QueueSize:                      p.QueueSize,
			DatabaseLoadCpuThreshold:       p.DatabaseLoadCPUThresholdPercent,
			ResourceWeight:                 p.ResourcesWeight,
			TotalCpuLimitPercentPerNode:    p.TotalCPULimitPercent,
			QueryCpuLimitPercentPerNode:    p.QueryCPULimitPercent,
			QueryMemoryLimitPercentPerNode: p.QueryMemoryLimitPercent,
			TotalMemoryLimitPercentPerNode: p.TotalMemoryLimitPercent,
			QueryCancelAfterSeconds:        p.QueryCancelAfterSeconds,
			CpuPeriodUsec:                  p.CPUPeriodUsec,
			CpuBurstPercent:                p.CPUBurstPercent,
			Cpus:                           p.CPUs.String(),
			RunningQueries:                 st.Running,
			QueuedQueries:                  st.Queued,
			CpuLimitCores:                  -1,
			ConcurrentQueryLimitPerUser:    p.ConcurrentQueryLimitPerUser,
			QueueSizePerUser:               p.QueueSizePerUser,
			QueuePolicy:                    p.QueuePolicy,
			UsageHalfLifeSeconds:           p.UsageHalfLifeSeconds,
		}
		withUsers(&row, st, now)
		if ps, ok := planned[p.Name]; ok {
			row.Active = ps.Active
			if ps.Pool.CPU.Limited() {
				row.CpuLimitCores = ps.Pool.CPU.VCPU()
			}
			row.CpuWeight = ps.Pool.CPU.Weight
		}
		rows = append(rows, row)
	}
	var dropped []string
	for name := range stats {
		dropped = append(dropped, name)
	}
	slices.Sort(dropped)
	for _, name := range dropped {
		st := stats[name]
		rows = append(rows, protocol.Pool{
			Name: name, ConcurrentQueryLimit: -1, QueueSize: -1, DatabaseLoadCpuThreshold: -1, ResourceWeight: -1,
			TotalCpuLimitPercentPerNode: -1, QueryCpuLimitPercentPerNode: -1, QueryMemoryLimitPercentPerNode: -1,
			TotalMemoryLimitPercentPerNode: -1, QueryCancelAfterSeconds: -1, CpuPeriodUsec: -1, CpuBurstPercent: -1,
			RunningQueries: st.Running, QueuedQueries: st.Queued, CpuLimitCores: -1, Dropped: true,
			ConcurrentQueryLimitPerUser: -1, QueueSizePerUser: -1, QueuePolicy: planner.QueueFIFO, UsageHalfLifeSeconds: -1,
		})
		withUsers(&rows[len(rows)-1], st, now)
	}
	return rows
}

// withUsers fills a pool row's per-user columns from its admission state.
func withUsers(row *protocol.Pool, st admission.PoolStats, now time.Time) {
	row.UsersRunning, row.UsersQueued = st.UsersRunning, st.UsersQueued
	for _, u := range st.Users {
		row.Users = append(row.Users, protocol.PoolUser{User: u.User, RunningQueries: u.Running, QueuedQueries: u.Queued,
			UsageSeconds: u.Usage.Now(now, st.Limits.Users.HalfLife)})
	}
}

// Classifiers builds the classifiers view, by ascending rank.
func Classifiers(m *planner.Model) []protocol.Classifier {
	var rows []protocol.Classifier
	for _, c := range m.Classifiers() {
		rows = append(rows, protocol.Classifier{Name: c.Name, Rank: c.Rank, MemberName: c.MemberName, HasAppName: c.AppName,
			ResourcePool: c.ResourcePool, Action: c.Action})
	}
	return rows
}

// WriteJSON writes rows as an indented JSON array ([] when empty).
func WriteJSON[T any](w io.Writer, rows []T) error {
	if rows == nil {
		rows = []T{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

// poolColumn is one column of the pools table: its YDB name (the
// .sys/resource_pools column, and the name run-time changes are marked
// by), the short label of the narrow table ("" when only the wide table
// has it) and its cell.
type poolColumn struct {
	ydb, short string
	cell       func(protocol.Pool) string
}

// poolColumns are the pools table's columns, in order.
var poolColumns = []poolColumn{
	{"ConcurrentQueryLimit", "Concurrent", func(r protocol.Pool) string { return itoa(r.ConcurrentQueryLimit) }},
	{"QueueSize", "Queue", func(r protocol.Pool) string { return itoa(r.QueueSize) }},
	{"DatabaseLoadCpuThreshold", "LoadCpu%", func(r protocol.Pool) string { return ftoa(r.DatabaseLoadCpuThreshold) }},
	{"ResourceWeight", "Weight", func(r protocol.Pool) string { return itoa(r.ResourceWeight) }},
	{"TotalCpuLimitPercentPerNode", "TotalCpu%", func(r protocol.Pool) string { return ftoa(r.TotalCpuLimitPercentPerNode) }},
	{"QueryCpuLimitPercentPerNode", "QueryCpu%", func(r protocol.Pool) string { return ftoa(r.QueryCpuLimitPercentPerNode) }},
	{"QueryMemoryLimitPercentPerNode", "", func(r protocol.Pool) string { return ftoa(r.QueryMemoryLimitPercentPerNode) }},
	{"RunningQueries", "Running", func(r protocol.Pool) string { return strconv.Itoa(r.RunningQueries) }},
	{"QueuedQueries", "Queued", func(r protocol.Pool) string { return strconv.Itoa(r.QueuedQueries) }},
	{"CpuLimitCores", "Cores", func(r protocol.Pool) string { return cores(r.CpuLimitCores) }},
	{"PerUser", "PerUser", func(r protocol.Pool) string {
		return itoa(r.ConcurrentQueryLimitPerUser) + "/" + itoa(r.QueueSizePerUser)
	}},
	{"QueuePolicy", "", func(r protocol.Pool) string { return r.QueuePolicy }},
	{"UsersRunning", "Users", func(r protocol.Pool) string { return strconv.Itoa(r.UsersRunning) }},
	{"UsersQueued", "", func(r protocol.Pool) string { return strconv.Itoa(r.UsersQueued) }},
}

// narrowLegend explains the narrow table's labels under it.
const narrowLegend = "Concurrent: ConcurrentQueryLimit, Queue: QueueSize, LoadCpu%: DatabaseLoadCpuThreshold, Weight: ResourceWeight,\n" +
	"TotalCpu%/QueryCpu%: Total/QueryCpuLimitPercentPerNode, Cores: CpuLimitCores (max = none), PerUser: concurrent/queued\n" +
	"per user, Users: users with queries running; -1 = not set. --wide: YDB's names and every column.\n"

// WritePools writes the pools view as a table; in fleet mode a Node
// column says whose queries the counts are ("*": the cluster's). Narrow,
// it fits 120 columns: short labels, explained under the table, and not
// QueryMemoryLimitPercentPerNode, QueuePolicy or UsersQueued; wide, it has
// every column under YDB's name. A value a run-time change set (RunTime)
// is marked with "*", said under the table.
func WritePools(w io.Writer, rows []protocol.Pool, wide bool) error {
	fleet := slices.ContainsFunc(rows, func(r protocol.Pool) bool { return r.Node != "" })
	header := []string{"Name"}
	var cols []poolColumn
	for _, c := range poolColumns {
		switch {
		case wide:
			header = append(header, c.ydb)
		case c.short != "":
			header = append(header, c.short)
		default:
			continue
		}
		cols = append(cols, c)
	}
	t := newTable(w, nodeColumn(fleet, header...)...)
	marked := false
	for _, r := range rows {
		name := r.Name
		if r.Dropped {
			name += " (dropped)"
		}
		if slices.Contains(r.RunTime, "Name") {
			name += "*"
			marked = true
		}
		cells := []string{name}
		for _, c := range cols {
			cell := c.cell(r)
			if slices.ContainsFunc(r.RunTime, func(set string) bool { return set == c.ydb || c.ydb == "PerUser" && strings.HasSuffix(set, "PerUser") }) {
				cell += "*"
				marked = true
			}
			cells = append(cells, cell)
		}
		t.row(nodeCell(fleet, r.Node, cells...)...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if !wide {
		fmt.Fprint(w, narrowLegend)
	}
	if marked {
		fmt.Fprintln(w, "* set at run time (poolagent sql), kept in the state directory and applied over the pool file")
	}
	for _, r := range rows {
		for _, p := range r.Pending {
			fmt.Fprintf(w, "%s: %s\n", r.Name, p)
		}
	}
	return writePoolUsers(w, rows)
}

// writePoolUsers writes, below the pools, each user's queries in each
// pool that has any: nothing when no pool has.
func writePoolUsers(w io.Writer, rows []protocol.Pool) error {
	if !slices.ContainsFunc(rows, func(r protocol.Pool) bool { return len(r.Users) > 0 }) {
		return nil
	}
	fmt.Fprintln(w)
	t := newTable(w, "Pool", "User", "RunningQueries", "QueuedQueries", "UsageSeconds")
	for _, r := range rows {
		for _, u := range r.Users {
			t.row(r.Name, u.User, strconv.Itoa(u.RunningQueries), strconv.Itoa(u.QueuedQueries), strconv.FormatFloat(u.UsageSeconds, 'f', 1, 64))
		}
	}
	return t.flush()
}

// MarkRunTime marks in rows, the pools view of the model in force, the
// parameters whose value differs from fileRows, the view of the pool file
// alone: what run-time changes set. A pool the file does not have is
// marked by its name. Every column of the view is compared but a pool's
// state (queries, plan, users), so a parameter added to the view is
// covered without a change here.
func MarkRunTime(rows, fileRows []protocol.Pool) {
	file := map[string]map[string]json.RawMessage{}
	for _, r := range fileRows {
		file[r.Name] = columns(r)
	}
	for i, r := range rows {
		if r.Dropped {
			continue
		}
		was, ok := file[r.Name]
		if !ok {
			rows[i].RunTime = []string{"Name"}
			continue
		}
		now := columns(r)
		var set []string
		for col, v := range now {
			if !stateColumns[col] && string(was[col]) != string(v) {
				set = append(set, col)
			}
		}
		slices.Sort(set)
		rows[i].RunTime = set
	}
}

// stateColumns are the columns of a pool row that are its state, not its
// parameters.
var stateColumns = map[string]bool{"Name": true, "RunningQueries": true, "QueuedQueries": true, "Active": true,
	"CpuLimitCores": true, "CpuWeight": true, "Dropped": true, "Node": true, "RunTime": true,
	"UsersRunning": true, "UsersQueued": true, "Users": true}

// columns is a pool row as its JSON columns.
func columns(r protocol.Pool) map[string]json.RawMessage {
	b, _ := json.Marshal(r)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	return m
}

// nodeColumn puts a Node column after the first when fleet is set.
func nodeColumn(fleet bool, header ...string) []string { return nodeCell(fleet, "Node", header...) }

// nodeCell puts node after the first cell when fleet is set.
func nodeCell(fleet bool, node string, cells ...string) []string {
	if !fleet {
		return cells
	}
	return slices.Insert(cells, 1, node)
}

// WriteClassifiers writes the classifiers view as a table.
func WriteClassifiers(w io.Writer, rows []protocol.Classifier) error {
	t := newTable(w, "Name", "Rank", "MemberName", "HasAppName", "ResourcePool", "Action")
	for _, r := range rows {
		t.row(r.Name, itoa(r.Rank), r.MemberName, r.HasAppName, r.ResourcePool, r.Action)
	}
	return t.flush()
}

// WriteQueries writes the queries view as a table, times in seconds,
// memory in MiB (MemMiB, PeakMiB; OOM the OOM kills in the query); in
// fleet mode a Node column says where each query is, and another node's
// queries show only what the cluster knows of them.
func WriteQueries(w io.Writer, rows []protocol.Query) error {
	fleet := slices.ContainsFunc(rows, func(r protocol.Query) bool { return r.Node != "" })
	t := newTable(w, nodeColumn(fleet, "QueryId", "ResourcePoolId", "State", "Pos", "User", "UserRun/Q", "ClientPid",
		"Queued", "Running", "CpuLimitCores", "Usage", "NrThrottled", "Throttled", "MemMiB", "PeakMiB", "OOM", "Waiting")...)
	for _, r := range rows {
		pos, user, pid := "", r.User, strconv.Itoa(r.ClientPid)
		if r.QueuePosition > 0 {
			pos = strconv.Itoa(r.QueuePosition)
		}
		remote := r.Node != "" && !r.Adopted && r.User == "" && r.ClientPid == 0
		switch {
		case r.Adopted:
			user, pid = "(adopted)", "-"
		case remote:
			user, pid = "-", "-"
		case user == "":
			user = strconv.FormatUint(uint64(r.Uid), 10)
		}
		running, limit, why := usec(r.RunningTimeUs), cores(r.CpuLimitCores), ""
		if r.Wait != nil {
			why = r.Wait.String()
		}
		if r.State == protocol.StateQueued || remote {
			limit = "-"
		}
		if r.State == protocol.StateQueued {
			running = "-"
		}
		used, nrThrottled, throttled := usec(int64(r.UsageUsec)), strconv.FormatUint(r.NrThrottled, 10), usec(int64(r.ThrottledUsec))
		mem, peak, oom := mib(r.MemoryBytes), mib(r.PeakMemoryBytes), strconv.FormatUint(r.OOMKills, 10)
		userRQ := strconv.Itoa(r.UserRunning) + "/" + strconv.Itoa(r.UserQueued)
		if remote || r.State == protocol.StateQueued {
			mem, peak, oom = "-", "-", "-"
		}
		if remote {
			used, nrThrottled, throttled = "-", "-", "-"
		}
		if remote || r.Adopted {
			userRQ = "-"
		}
		t.row(nodeCell(fleet, r.Node, r.QueryId, r.ResourcePoolId, r.State, pos, user, userRQ, pid,
			usec(r.QueuedTimeUs), running, limit, used, nrThrottled, throttled, mem, peak, oom, why)...)
	}
	return t.flush()
}

// mib formats bytes as MiB with one decimal.
func mib(b uint64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) }

// table is a tabwriter whose first row is the header.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) table {
	t := table{tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")) }
func (t table) flush() error        { return t.tw.Flush() }

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func ftoa(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// cores shows a vCPU limit, "max" for none.
func cores(v float64) string {
	if v < 0 {
		return "max"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// usec shows microseconds as seconds with millisecond precision.
func usec(v int64) string {
	return (time.Duration(v) * time.Microsecond).Round(time.Millisecond).String()
}
