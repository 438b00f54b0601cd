package daemon

import (
	"time"

	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/internal/sysview"
	"github.com/poolagent/poolagent/planner"
)

// views builds the views an operator reads (`poolagent pools`,
// `poolagent queries`): the model, plan and admission state in force, the
// query cgroups' counters and, in fleet mode, the cluster's queries. It
// only reads, and holds no lock of its own.
type views struct {
	cg      Cgroups
	reg     *registry
	rp      *replanner
	changes *changes
	// cluster is the cluster's side in fleet mode; nil on a single host.
	cluster ClusterView
	names   *queryNames
}

// pools is the pools view: each pool's settings, admission state and
// plan, the values a run-time change set marked, and the memory limits
// held back; local keeps a fleet node's counts to its own queries.
func (v *views) pools(local bool) []protocol.Pool {
	rows := sysview.Pools(v.rp.policy().Model, v.reg.pools(), v.rp.desired(), time.Now())
	if file := v.changes.file.Load(); file != nil {
		sysview.MarkRunTime(rows, sysview.Pools(file, nil, planner.Desired{}, time.Now()))
	}
	v.clusterPools(rows, local)
	v.pendingPools(rows)
	return rows
}

// queries is the queries view: this daemon's and, unless local, the
// cluster's.
func (v *views) queries(local bool) []protocol.Query {
	return v.clusterQueries(v.queryRows(), local)
}

// pendingPools adds to each pool row its lowered memory limits held back
// (the pool's own and its queries').
func (v *views) pendingPools(rows []protocol.Pool) {
	by := map[string][]string{}
	for _, p := range v.cg.Pending() {
		by[p.Pool()] = append(by[p.Pool()], p.String())
	}
	for i := range rows {
		rows[i].Pending = by[rows[i].Name]
	}
}
