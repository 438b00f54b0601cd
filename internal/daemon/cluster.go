package daemon

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/poolagent/poolagent/internal/protocol"
)

// ClusterView is what fleet mode adds to the views and the metrics: the
// queries of the other nodes and the node's connection to etcd (package
// fleet's Backend, wired by cmd/poolagent). Nil on a single host.
type ClusterView interface {
	// Node names this node in the cluster.
	Node() string
	// Queries returns the queries of the globally limited pools on every
	// node, as the cluster's keys last showed them.
	Queries() []ClusterQuery
	// Health is the node's connection to etcd.
	Health() ClusterHealth
	// ReleaseNode releases the strict slots another node holds (it
	// vanished and will not come back), returning how many.
	ReleaseNode(node string) (int, error)
}

// ClusterQuery is one query of a globally limited pool somewhere in the
// cluster.
type ClusterQuery struct {
	// ID names its registration in the cluster.
	ID, Pool, Node string
	Running        bool
	// Position is a queued query's place in its pool's queue, from 1.
	Position int
	Arrived  time.Time
}

// ClusterHealth is a node's connection to etcd.
type ClusterHealth struct {
	// Connected: the node holds a live session lease.
	Connected bool
	// RoundTrip is the latest successful request's duration.
	RoundTrip time.Duration
	// WatchLag is how long ago the watch on the cluster last delivered.
	WatchLag time.Duration
	// Sessions counts the leases the node has held.
	Sessions int
	// WatchEvents and WatchBytes count the key events the watch has
	// delivered and their encoded size.
	WatchEvents, WatchBytes int64
}

// clusterPools marks the pools view in fleet mode: a globally limited
// pool's counts are the cluster's ("*"); with local, and for a pool
// without a global limit (which admits on each node alone), they are this
// node's own, counted from its clients' queries.
func (v *views) clusterPools(rows []protocol.Pool, local bool) {
	c := v.cluster
	if c == nil {
		return
	}
	global := map[string]bool{}
	for _, p := range v.reg.pools() {
		global[p.Name] = p.Limits.Global()
	}
	counts := v.localCounts()
	for i := range rows {
		if global[rows[i].Name] && !local {
			rows[i].Node = "*"
			continue
		}
		n := counts[rows[i].Name]
		rows[i].Node, rows[i].RunningQueries, rows[i].QueuedQueries = c.Node(), n[0], n[1]
	}
}

// localCounts returns the running and queued queries of this node's
// clients, by pool.
func (v *views) localCounts() map[string][2]int {
	counts := map[string][2]int{}
	for _, t := range v.reg.submitted() {
		n := counts[t.pool]
		if t.name != "" {
			n[0]++
		} else {
			n[1]++
		}
		counts[t.pool] = n
	}
	return counts
}

// clusterQueries adds the node to this node's query rows and, unless
// local, the other nodes' queries of globally limited pools.
func (v *views) clusterQueries(rows []protocol.Query, local bool) []protocol.Query {
	c := v.cluster
	if c == nil {
		return rows
	}
	node := c.Node()
	for i := range rows {
		rows[i].Node = node
	}
	if local {
		return rows
	}
	now := time.Now()
	for _, q := range c.Queries() {
		if q.Node == node {
			continue
		}
		r := protocol.Query{QueryId: q.ID, ResourcePoolId: q.Pool, Node: q.Node, CpuLimitCores: -1}
		if q.Running {
			r.State, r.RunningTimeUs = protocol.StateRunning, now.Sub(q.Arrived).Microseconds()
		} else {
			r.State, r.QueuePosition, r.QueuedTimeUs = protocol.StateQueued, q.Position, now.Sub(q.Arrived).Microseconds()
		}
		rows = append(rows, r)
	}
	// Running first, longest first; then the queue in its order.
	slices.SortStableFunc(rows, func(a, b protocol.Query) int {
		switch {
		case a.State != b.State:
			return strings.Compare(b.State, a.State)
		case a.State == protocol.StateRunning:
			return cmp.Compare(b.RunningTimeUs, a.RunningTimeUs)
		}
		return cmp.Compare(a.QueuePosition, b.QueuePosition)
	})
	return rows
}
