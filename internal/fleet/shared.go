package fleet

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/poolagent/poolagent/internal/state"
	"github.com/poolagent/poolagent/planner"
)

// Shared is the cluster's pool definitions as a daemon's model source:
// reloads read them, run-time changes go into them (daemon.Sources.Shared).
type Shared struct {
	Backend *Backend
	// note says how the definitions came to be in force, for STATUS= and
	// the log (see Seed); it changes when a node that started while etcd
	// was unreachable joins (seedLater).
	note atomic.Pointer[string]
}

// Note says how the definitions in force came to be.
func (s *Shared) Note() string {
	if n := s.note.Load(); n != nil {
		return *n
	}
	return ""
}

func (s *Shared) setNote(format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	s.note.Store(&n)
}

// Status says where the definitions in force come from, and whether this
// node reaches etcd.
func (s *Shared) Status() string {
	h := s.Backend.Health()
	if !h.Connected {
		return s.Note() + "; etcd unreachable: globally limited pools do not admit on this node"
	}
	return s.Note()
}

// Where names where a change is saved.
func (s *Shared) Where() string {
	return fmt.Sprintf("cluster %s's definitions in etcd, for every node", s.Backend.cfg.Cluster)
}

// Load reads the cluster's definitions and makes their model.
func (s *Shared) Load() (*planner.Model, []planner.Warning, error) {
	d, ok, err := s.Backend.Definitions(context.Background())
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, fmt.Errorf("cluster %s has no pool definitions (a daemon seeds them from its pool file when it joins)", s.Backend.cfg.Cluster)
	}
	return d.Model()
}

// Change applies statements to the cluster's definitions as they are now
// and writes them back in one transaction guarded by the revision they were
// read at: when another change came in between, ErrConflict and nothing is
// written. It returns the model in force after the change.
func (s *Shared) Change(c state.Change, apply func(*planner.Model) (*planner.Model, []planner.Warning, error)) (*planner.Model, state.Change, []planner.Warning, error) {
	ctx := context.Background()
	d, ok, err := s.Backend.Definitions(ctx)
	if err != nil {
		return nil, state.Change{}, nil, fmt.Errorf("change not applied, nothing changed: %w", err)
	}
	if !ok {
		return nil, state.Change{}, nil, fmt.Errorf("cluster %s has no pool definitions; nothing changed", s.Backend.cfg.Cluster)
	}
	m, _, err := d.Model()
	if err != nil {
		return nil, state.Change{}, nil, fmt.Errorf("the cluster's pool definitions do not load; nothing changed: %w", err)
	}
	m, warns, err := apply(m)
	if err != nil {
		return nil, state.Change{}, warns, err
	}
	c.Seq = uint64(len(d.Changes)) + 1
	c.Time = time.Now().UTC()
	d.Changes = append(d.Changes, c)
	if _, err := s.Backend.Update(ctx, d); err != nil {
		return nil, state.Change{}, warns, err
	}
	return m, c, warns, nil
}

// Seed joins the daemon's pool file to the cluster's definitions: an empty
// cluster takes the file (and its run-time changes) as its definitions; a
// cluster that has definitions keeps them, and they are in force on this
// node whatever the file says. It returns the model in force and sets Note
// when the file and the cluster disagree.
func (s *Shared) Seed(source string, src []byte, changes []state.Change) (*planner.Model, []planner.Warning, error) {
	return s.seed(context.Background(), source, src, changes)
}

func (s *Shared) seed(ctx context.Context, source string, src []byte, changes []state.Change) (*planner.Model, []planner.Warning, error) {
	d, seeded, err := s.Backend.Seed(ctx, source, src, changes)
	if err != nil {
		return nil, nil, err
	}
	switch {
	// A seed whose answer was lost (etcd took it, the reply did not come
	// back) reads, when tried again, as a cluster this node seeded.
	case seeded || d.Seed == s.Backend.cfg.Node+":"+source && d.PoolFile == string(src) && len(d.Changes) == len(changes):
		s.setNote("cluster %s seeded from %s", s.Backend.cfg.Cluster, source)
	case d.PoolFile != string(src) || len(d.Changes) != len(changes):
		s.setNote("cluster %s definitions in force (seeded by %s, %d run-time changes); they differ from %s, which is not used",
			s.Backend.cfg.Cluster, d.Seed, len(d.Changes), source)
	default:
		s.setNote("cluster %s definitions in force, as %s", s.Backend.cfg.Cluster, source)
	}
	return d.Model()
}

// seedLater is Seed for a node that started while etcd was unreachable:
// it tries again every renewal interval until etcd answers (or the backend
// closes), then hands the cluster's definitions to cfg.Definitions, as a
// change of them would be, so that the daemon reloads from the cluster.
func (s *Shared) seedLater(source string, src []byte, changes []state.Change) {
	b := s.Backend
	t := time.NewTicker(renewInterval(b.cfg.TTL))
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		}
		if _, _, err := s.seed(b.ctx, source, src, changes); err != nil {
			if b.ctx.Err() != nil {
				return
			}
			if !transient(err) {
				b.log.Error("cluster pool definitions", "err", err)
			}
			continue
		}
		b.log.Info("etcd answers: the node joined the cluster", "definitions", s.Note())
		d, ok, err := b.Definitions(b.ctx)
		if err == nil && ok && b.cfg.Definitions != nil {
			b.cfg.Definitions(d)
		}
		return
	}
}
