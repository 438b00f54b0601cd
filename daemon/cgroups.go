package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// HostCgroups is the daemon's cgroup work on this host: writes through
// cgroupfs (beneath the pool root), reads through observe. Calls are
// serialised, since the daemon places queries while it re-plans.
type HostCgroups struct {
	mu    sync.Mutex
	tree  *cgroupfs.Tree
	stats observe.Tree
	// empties tells when query cgroups empty (cgroup v2); nil on v1,
	// whose cgroups raise no such event, and emptiesErr says why when
	// it could not start.
	empties    *emptyWatcher
	emptiesErr error
}

// OpenHostCgroups opens the pool tree at root (see cgroupfs.Open).
func OpenHostCgroups(m cgroupfs.Mounts, root string) (*HostCgroups, error) {
	tree, err := cgroupfs.Open(m, root, cgroupfs.Options{})
	if err != nil {
		return nil, err
	}
	st := tree.Observe()
	h := &HostCgroups{tree: tree, stats: st}
	if tree.V2() {
		h.empties, h.emptiesErr = newEmptyWatcher(st.Root)
	} else {
		h.emptiesErr = errors.New("cgroup v1 raises no event when a cgroup empties")
	}
	return h, nil
}

// Close releases the pool tree.
func (h *HostCgroups) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var err error
	if h.empties != nil {
		err = h.empties.close()
	}
	return errors.Join(err, h.tree.Close())
}

// NotifyEmpty implements emptyNotifier on cgroup v2.
func (h *HostCgroups) NotifyEmpty(pool, query string, wake chan<- struct{}) (func(), error) {
	if h.empties == nil {
		return nil, h.emptiesErr
	}
	return h.empties.watch(pool, query, wake)
}

// Apply implements Cgroups with cgroupfs's reconcile.
func (h *HostCgroups) Apply(d planner.Desired) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := h.tree.Reconcile(d)
	return err
}

// PlaceQuery implements Cgroups.
func (h *HostCgroups) PlaceQuery(ps planner.PoolState, query string, pid int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tree.PlaceQuery(ps, query, pid)
}

// Populated implements Cgroups; a query cgroup that is gone is empty.
func (h *HostCgroups) Populated(pool, query string) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	busy, err := h.tree.QueryPopulated(pool, query)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return busy, err
}

// QueryStat implements Cgroups; a query cgroup that is gone reads as zero.
func (h *HostCgroups) QueryStat(pool, query string) (observe.CPUStat, error) {
	s, err := h.stats.Read(filepath.Join(pool, query))
	if errors.Is(err, fs.ErrNotExist) {
		return observe.CPUStat{}, nil
	}
	return s.CPU, err
}

// RemoveQuery implements Cgroups.
func (h *HostCgroups) RemoveQuery(pool, query string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tree.RemoveQuery(pool, query)
}

// Queries implements Cgroups: the cgroups two levels below the pool root.
func (h *HostCgroups) Queries() ([][2]string, error) {
	groups, err := h.stats.Groups()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for _, g := range groups {
		if parts := strings.Split(g, "/"); len(parts) == 2 {
			out = append(out, [2]string{parts[0], parts[1]})
		}
	}
	return out, nil
}

// PoolStats implements Cgroups; a pool without a cgroup is left out.
func (h *HostCgroups) PoolStats(pools []string) (map[string]observe.Sample, error) {
	out := map[string]observe.Sample{}
	for _, p := range pools {
		s, err := h.stats.Read(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("pool %s: %w", p, err)
		}
		out[p] = s
	}
	return out, nil
}
