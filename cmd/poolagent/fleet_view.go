package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/poolagent/poolagent/internal/daemon"
	"github.com/poolagent/poolagent/internal/fleet"
)

// reloader reloads the server when the cluster's definitions change; a
// change that comes before the server exists (a node that started while
// etcd was unreachable and joined at once) is reloaded when it does.
type reloader struct {
	log     *slog.Logger
	mu      sync.Mutex
	srv     *daemon.Server
	pending bool
}

func (r *reloader) reload() {
	r.mu.Lock()
	s := r.srv
	r.pending = s == nil
	r.mu.Unlock()
	if s != nil {
		r.run(s)
	}
}

// serve hands the reloader the server, and reloads it if a change came
// before.
func (r *reloader) serve(s *daemon.Server) {
	r.mu.Lock()
	r.srv = s
	pending := r.pending
	r.mu.Unlock()
	if pending {
		r.run(s)
	}
}

func (r *reloader) run(s *daemon.Server) {
	warns, err := s.Reload()
	for _, w := range warns {
		r.log.Warn("cluster pool definitions", "warning", w.String())
	}
	if err != nil {
		r.log.Error("cluster pool definitions changed; reload refused, the running pools are kept", "err", err)
	}
}

// clusterView is a fleet backend as the daemon's views and metrics see it.
type clusterView struct{ b *fleet.Backend }

func (v clusterView) Node() string { return v.b.Node() }

func (v clusterView) ReleaseNode(node string) (int, error) {
	return v.b.ReleaseNode(context.Background(), node)
}

func (v clusterView) Queries() []daemon.ClusterQuery {
	var out []daemon.ClusterQuery
	for _, q := range v.b.Queries() {
		out = append(out, daemon.ClusterQuery{ID: q.Token, Pool: q.Pool, Node: q.Node, Running: q.Running, Position: q.Position, Arrived: q.Arrived})
	}
	return out
}

func (v clusterView) Health() daemon.ClusterHealth {
	h := v.b.Health()
	return daemon.ClusterHealth{Connected: h.Connected, RoundTrip: h.LastRoundTrip, WatchLag: time.Since(h.WatchAt), Sessions: h.Sessions,
		WatchEvents: h.WatchEvents, WatchBytes: h.WatchBytes}
}
