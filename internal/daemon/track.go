package daemon

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/metrics"
	"github.com/poolagent/poolagent/internal/pooltree"
	"github.com/poolagent/poolagent/internal/protocol"
)

// decided records an admission decision about a query in pool (qid, 0
// before it was submitted) and logs it at debug level: "started", "queued"
// or "rejected" on arrival, "refused" by classification, and at the end of
// a wait "started" or "failed" (err says why). Queue waits of started
// queries feed the wait histogram.
func (s *Server) decided(pool string, qid admission.QueryID, decision string, queuedFor time.Duration, err error) {
	if decision == "started" {
		s.waits(pool).Observe(queuedFor)
	}
	args := []any{"pool", pool, "decision", decision}
	if qid != 0 {
		args = append(args, "query", s.names.name(qid))
	}
	if queuedFor > 0 {
		args = append(args, "queued", queuedFor)
	}
	if err != nil {
		args = append(args, "reason", strings.ReplaceAll(err.Error(), "\n", " "))
	}
	s.cfg.Log.Debug("admission", args...)
}

// waits is pool's queue wait histogram.
func (s *Server) waits(pool string) *metrics.WaitRecorder {
	w, _ := s.waitHists.LoadOrStore(pool, &metrics.WaitRecorder{})
	return w.(*metrics.WaitRecorder)
}

// queryRows builds the queries view: the queries of connected clients,
// and the query cgroups no client of this daemon owns (queries adopted at
// start), running first, oldest first.
func (v *views) queryRows() []protocol.Query {
	all := v.reg.submitted()
	now := time.Now()
	var rows []protocol.Query
	owned := map[pooltree.QueryKey]bool{}
	for _, t := range all {
		r := protocol.Query{
			QueryId: v.names.name(t.qid), ResourcePoolId: t.pool, Classifier: t.classifier,
			User: t.id.User, Uid: t.id.UID, ClientPid: t.clientPID, CpuLimitCores: -1,
			UserRunning: t.userRunning, UserQueued: t.userQueued,
		}
		if t.name == "" {
			r.QueuePosition = t.position
			if t.position > 0 {
				why := t.why
				r.Wait = &why
			}
			r.State, r.QueuedTimeUs = protocol.StateQueued, now.Sub(t.arrived).Microseconds()
		} else {
			owned[pooltree.QueryKey{Pool: t.pool, Name: t.name}] = true
			r.State, r.QueuedTimeUs, r.RunningTimeUs = protocol.StateRunning, t.queuedFor.Microseconds(), now.Sub(t.admitted).Microseconds()
			if t.cpuLimit > 0 {
				r.CpuLimitCores = t.cpuLimit
			}
			v.readQueryStat(&r)
		}
		rows = append(rows, r)
	}
	if cgs, err := v.cg.Queries(); err == nil {
		for _, k := range cgs {
			if owned[k] {
				continue
			}
			if busy, err := pooltree.NewQuery(v.cg, k).Populated(); err != nil || !busy {
				continue
			}
			r := protocol.Query{QueryId: k.Name, ResourcePoolId: k.Pool, State: protocol.StateRunning, CpuLimitCores: -1, Adopted: true}
			v.readQueryStat(&r)
			rows = append(rows, r)
		}
	}
	slices.SortStableFunc(rows, func(a, b protocol.Query) int {
		if a.State != b.State {
			return strings.Compare(b.State, a.State) // RUNNING before QUEUED
		}
		return cmp.Compare(b.QueuedTimeUs+b.RunningTimeUs, a.QueuedTimeUs+a.RunningTimeUs)
	})
	return rows
}

// readQueryStat fills r's CPU and memory columns from its query cgroup; a
// cgroup just removed leaves them zero.
func (v *views) readQueryStat(r *protocol.Query) {
	sample, err := pooltree.NewQuery(v.cg, pooltree.QueryKey{Pool: r.ResourcePoolId, Name: r.QueryId}).Stat()
	if err != nil {
		return
	}
	st := sample.CPU
	r.UsageUsec, r.NrPeriods, r.NrThrottled, r.ThrottledUsec = st.UsageUsec, st.NrPeriods, st.NrThrottled, st.ThrottledUsec
	if m := sample.Memory; m != nil {
		r.MemoryBytes, r.OOMKills = m.CurrentBytes, m.Events.OOMKill
		if m.PeakBytes != nil {
			r.PeakMemoryBytes = *m.PeakBytes
		}
	}
}
