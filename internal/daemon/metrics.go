package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/poolagent/poolagent/internal/history"
	"github.com/poolagent/poolagent/internal/metrics"
	"github.com/poolagent/poolagent/observe"
)

// MetricsSnapshot implements metrics.Source: admission state and counters,
// the pool cgroups as last planned, and each pool cgroup's cpu.stat read
// now.
func (s *Server) MetricsSnapshot() (metrics.Snapshot, error) {
	pools := s.reg.pools()
	names := make([]string, len(pools))
	for i, p := range pools {
		names[i] = p.Name
	}
	stats, err := s.cg.PoolStats(names)
	if err != nil {
		return metrics.Snapshot{}, err
	}
	d := s.rp.desired()
	load := s.reg.load()
	snap := metrics.Snapshot{Host: metrics.Host{
		CPUs:          d.Node.CPUs,
		LoadRatio:     load.AveragePercent / 100,
		ReservedRatio: load.ReservedPercent / 100,
		RepairWrites:  s.rp.repairs.Load(),
		ModelCaveats:  s.modelCaveats,
	}}
	planned := map[string]int{}
	for i, p := range d.Pools {
		planned[p.Name] = i
	}
	var local map[string][2]int
	if c := s.cfg.Cluster; c != nil {
		// Fleet mode: the pool series count this node's queries, the
		// cluster series the whole cluster's.
		local = s.views.localCounts()
		h := c.Health()
		snap.Cluster = &metrics.Cluster{
			Connected: h.Connected, RoundTripSeconds: h.RoundTrip.Seconds(),
			WatchLagSeconds: h.WatchLag.Seconds(), Sessions: h.Sessions,
			WatchEvents: h.WatchEvents, WatchBytes: h.WatchBytes,
		}
		for _, p := range pools {
			if p.Limits.Global() {
				snap.Cluster.Pools = append(snap.Cluster.Pools, metrics.ClusterPool{Name: p.Name, Running: p.Running, Queued: p.Queued})
			}
		}
	}
	pending := map[string]map[string]int{} // pool -> file -> cgroups
	for _, p := range s.cg.Pending() {
		if pending[p.Pool()] == nil {
			pending[p.Pool()] = map[string]int{}
		}
		pending[p.Pool()][p.File]++
	}
	for _, p := range pools {
		if local != nil {
			p.Running, p.Queued = local[p.Name][0], local[p.Name][1]
		}
		mp := metrics.Pool{
			Name: p.Name, Running: p.Running, Queued: p.Queued,
			ConcurrentQueryLimit: p.Limits.ConcurrentQueryLimit, QueueSize: p.Limits.QueueSize,
			Admitted: p.Admitted, Rejected: p.Rejected, TimedOut: p.TimedOut,
			QueryForksRefused:      s.hits.refused.count(p.Name),
			QueueWait:              s.waits(p.Name).Snapshot(),
			PredictedThrottledUsec: s.prediction.predictor.ThrottledUsec(p.Name),
			Starved:                s.prediction.starvation.Starved(p.Name),
			UsersRunning:           p.UsersRunning, UsersQueued: p.UsersQueued,
			LimitsPending: pending[p.Name],
		}
		if s.cfg.MetricsPerUser {
			for _, u := range p.Users {
				mp.Users = append(mp.Users, metrics.User{Name: u.User, Running: u.Running, Queued: u.Queued})
			}
		}
		if i, ok := planned[p.Name]; ok {
			mp.CPULimitCores = d.Pools[i].Pool.CPU.VCPU()
			mp.CPUWeight = d.Pools[i].Pool.CPU.Weight
			mp.CPUIdle = d.Pools[i].Pool.CPU.Idle
			mp.CPUs = d.Pools[i].Pool.CPU.CPUs.Count()
		}
		if st, ok := stats[p.Name]; ok {
			mp.CPU, mp.Pressure, mp.Memory, mp.Pids = &st.CPU, st.Pressure, st.Memory, st.Pids
		}
		snap.Pools = append(snap.Pools, mp)
	}
	return snap, nil
}

// RunPredictor closes a prediction interval every period until ctx ends:
// each pool's measured usage over the interval is run through the
// simulator under the pool's cpu.max (metrics.Predictor), so the predicted
// throttled seconds accumulate beside the measured ones; the same
// intervals count each pool's starved time (metrics.Starvation).
func (s *Server) RunPredictor(ctx context.Context, every time.Duration) {
	everyTick(ctx, every, func(now time.Time) {
		s.prediction.closeInterval(now, every+history.IdleInterval)
	})
}

// prediction is the throttling each pool's cpu.max would cause as the
// kernel-faithful model predicts it, and each pool's starved time, both
// stepped once an interval on the pools' counters (RunPredictor). It
// reads the plan in force, the running queries and the counters (those
// the history read, where it keeps them) and holds no lock of the lock
// order (the predictor's and starvation's own are leaves). took is only
// RunPredictor's.
type prediction struct {
	cg      Cgroups
	rp      *replanner
	reg     *registry
	history *history.Rolling // nil when no history is kept
	log     *slog.Logger

	predictor  *metrics.Predictor
	starvation *metrics.Starvation
	// took is the counters each pool's last step took, and when they were
	// read.
	took map[string]tookCounters
}

// tookCounters is a pool's counters as a step took them, read at at.
type tookCounters struct {
	at  time.Time
	cpu observe.CPUStat
}

// closeInterval is one step of RunPredictor at now: each pool's counters
// (counters) close its interval since those its last step took. A pool
// whose counters are the same read as last time adds nothing this step.
func (p *prediction) closeInterval(now time.Time, keep time.Duration) {
	d := p.rp.desired()
	running := map[string]int{}
	for _, ps := range p.reg.pools() {
		running[ps.Name] = ps.Running
	}
	names := make([]string, len(d.Pools))
	for i, p := range d.Pools {
		names[i] = p.Name
	}
	took, err := p.counters(names, now, keep)
	if err != nil {
		p.log.Warn("read pool CPU accounting for the throttling prediction", "err", err)
		return
	}
	p.took = took
	var samples []metrics.PoolSample
	for _, ps := range d.Pools {
		c, ok := took[ps.Name]
		if !ok {
			continue
		}
		samples = append(samples, metrics.PoolSample{Name: ps.Name, Limit: ps.Pool.CPU, Running: running[ps.Name], CPU: c.cpu, At: c.at})
	}
	p.starvation.Step(samples)
	if err := p.predictor.Step(d.Node.CPUs, samples); err != nil {
		p.log.Warn("throttling prediction", "err", err)
	}
}

// counters is the CPU accounting and throttling of the named pools at a
// step at now: for each, the counters the history read last, where it
// read the pool since the counters the last step took (the history reads
// a pool whose usage grew once an interval, a quiet one at least once a
// history.IdleInterval); else those the last step took, while they are
// younger than keep (a later step takes the history's next read); else a
// CPU-only read of the pool, taken as read at now. The history and the
// prediction so share one read of a pool's files, whichever of the two
// wakes first each interval. A pool without a cgroup is left out.
func (p *prediction) counters(names []string, now time.Time, keep time.Duration) (map[string]tookCounters, error) {
	var read map[string]history.Read
	if p.history != nil {
		read = p.history.Counters(names)
	}
	out := make(map[string]tookCounters, len(names))
	var missing []string
	for _, n := range names {
		last, took := p.took[n]
		switch r, ok := read[n]; {
		case ok && (!took || r.At.After(last.at)):
			out[n] = tookCounters{at: r.At, cpu: r.Sample.CPU}
		case ok && took && now.Sub(last.at) < keep:
			out[n] = last
		default:
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	stats, err := p.cg.PoolCPUStats(missing)
	if err != nil {
		return nil, err
	}
	for n, s := range stats {
		out[n] = tookCounters{at: now, cpu: s.CPU}
	}
	return out, nil
}
