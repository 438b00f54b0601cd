package pooltree

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// A query cgroup is <root>/<pool>/<query>: made with its pool's query
// template when the query is admitted, holding the query's processes until
// they have all exited, then removed. The calls below are the whole life
// of one, the QueryTree a [Query] works through; names are checked by
// cgroupfs (one path component, no interface file prefix).

var (
	_ QueryTree     = (*Handle)(nil)
	_ EmptyNotifier = (*Handle)(nil)
)

// PlaceQuery creates the query cgroup <pool>/<query> with ps's query
// template and moves process pid into it, in every hierarchy
// ([cgroupfs.Tree.PlaceQuery]: on failure the cgroup is removed again
// unless the process entered it).
func (h *Handle) PlaceQuery(ps planner.PoolState, query string, pid int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.own(ps.Name + "/" + query)
	return h.writer.PlaceQuery(ps, query, pid)
}

// MakeQuery creates the query cgroup <pool>/<query> with ps's query
// template, in every hierarchy ([cgroupfs.Tree.MakeQuery]); it is the
// caller's until RemoveQuery, kept by Apply and Repair while empty.
func (h *Handle) MakeQuery(ps planner.PoolState, query string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.own(ps.Name + "/" + query)
	return h.writer.MakeQuery(ps, query)
}

// MoveToQuery moves process pid into the query cgroup MakeQuery made with
// ps ([cgroupfs.Tree.MoveToQuery]).
func (h *Handle) MoveToQuery(ps planner.PoolState, query string, pid int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.writer.MoveToQuery(ps, query, pid)
}

// own marks a query cgroup as the caller's until RemoveQuery; h.mu is
// held.
func (h *Handle) own(group string) {
	if h.owned == nil {
		h.owned = map[string]bool{}
	}
	h.owned[group] = true
}

// Populated reports whether the query cgroup still holds a process; one
// that is gone is empty.
func (h *Handle) Populated(pool, query string) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	busy, err := h.writer.QueryPopulated(pool, query)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return busy, err
}

// NotifyEmpty sends on wake, without blocking, whenever the query cgroup
// <pool>/<query> may have changed from populated to empty, until stop is
// called; a notice only says "look" (see [Handle.Populated]). On cgroup v2
// the kernel's cgroup.events says when (empty.go); on v1, which raises no
// such event, the exits of the query's processes do (exits.go). An error
// means no notice will come.
func (h *Handle) NotifyEmpty(pool, query string, wake chan<- struct{}) (stop func(), err error) {
	if h.exits != nil {
		return h.exits.watch(pool, query, wake)
	}
	if h.empties == nil {
		return nil, h.emptiesErr
	}
	return h.empties.watch(pool, query, wake)
}

// ErrNotUnified: the pool root is not on cgroup v2, so no query cgroup
// has a path another program's cgroup v2 code could be given.
var ErrNotUnified = errors.New("the pool root is not on cgroup v2")

// QueryCgroup is the path of the query cgroup <pool>/<query> as
// /proc/PID/cgroup names it on cgroup v2 ("/system.slice/x/pools/p/q"):
// below the cgroup2 mount, "/"-rooted, what an OCI runtime takes as
// linux.cgroupsPath. It wraps ErrNotUnified on cgroup v1.
func (h *Handle) QueryCgroup(pool, query string) (string, error) {
	if h.unified == "" {
		return "", fmt.Errorf("query %s/%s: %w", pool, query, ErrNotUnified)
	}
	rel, err := filepath.Rel(h.unified, h.reader.Root())
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("pool root %s is not below the cgroup2 mount %s", h.reader.Root(), h.unified)
	}
	return path.Join("/", rel, pool, query), nil
}

// QueryStat reads the query cgroup's CPU accounting and memory
// ([cgroupfs.Reader.Read]); one that is gone reads as zero.
func (h *Handle) QueryStat(pool, query string) (observe.Sample, error) {
	group := path.Join(pool, query)
	s, err := h.reader.Read(group)
	if errors.Is(err, fs.ErrNotExist) {
		return observe.Sample{Group: group}, nil
	}
	return s, err
}

// QueryUsage reads the CPU time (µs) the query cgroup <pool>/<query> has
// used, from one file ([cgroupfs.Reader.Usage]); known is false where the
// kernel keeps none for it, or the query is gone.
func (h *Handle) QueryUsage(pool, query string) (usec uint64, known bool, err error) {
	usec, known, err = h.reader.Usage(path.Join(pool, query))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	return usec, known, err
}

// QueryThrottling reads the query cgroup's cpu.stat alone
// ([cgroupfs.Reader.CPUStat]): its throttling (and on v2 its usage); one
// that is gone reads as zero.
func (h *Handle) QueryThrottling(pool, query string) (observe.CPUStat, error) {
	st, err := h.reader.CPUStat(path.Join(pool, query))
	if errors.Is(err, fs.ErrNotExist) {
		return observe.CPUStat{}, nil
	}
	return st, err
}

// PoolPids reads the pool cgroup's tasks ([cgroupfs.Reader.Pids]); nil
// where the pids controller is not there or the pool is gone.
func (h *Handle) PoolPids(pool string) (*observe.Pids, error) {
	p, err := h.reader.Pids(pool)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return p, err
}

// PoolMemory reads the pool cgroup's memory ([cgroupfs.Reader.Memory]);
// nil where the memory controller is not there or the pool is gone.
func (h *Handle) PoolMemory(pool string) (*observe.Memory, error) {
	m, err := h.reader.Memory(pool)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return m, err
}

// RemoveQuery removes the query cgroup, which must be empty
// ([cgroupfs.Tree.RemoveQuery]).
func (h *Handle) RemoveQuery(pool, query string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.owned, pool+"/"+query)
	return h.writer.RemoveQuery(pool, query)
}

// KillQuery kills every process in the query cgroup at once
// ([cgroupfs.Tree.KillQuery]).
func (h *Handle) KillQuery(pool, query string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.writer.KillQuery(pool, query)
}

// Queries lists the query cgroups that exist, the cgroups two levels
// below the pool root; none when the root is not there.
func (h *Handle) Queries() ([]QueryKey, error) {
	groups, err := h.reader.Groups()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []QueryKey
	for _, g := range groups {
		if parts := strings.Split(g, "/"); len(parts) == 2 {
			out = append(out, QueryKey{Pool: parts[0], Name: parts[1]})
		}
	}
	return out, nil
}
