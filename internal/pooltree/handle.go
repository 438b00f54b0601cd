// Package pooltree is poolagent's pool tree on this host as one handle:
// the pool root found once from the cgroup mounts, written and read
// through package cgroupfs (beneath the root), its manager for the
// daemon and compare.
// The daemon, `poolagent stat` and compare open it; its query-cgroup calls
// (queries.go) are what the daemon does with each query's cgroup, and its
// notices of a query cgroup emptying (empty.go) spare the daemon polling.
package pooltree

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// Handle is one pool root: its writer and its reader. Its methods are safe
// for concurrent use: writes are serialised (the daemon places queries
// while it re-plans), reads are not.
type Handle struct {
	mu     sync.Mutex // serialises every call that writes
	writer *cgroupfs.Tree
	reader *cgroupfs.Reader
	// empties tells when query cgroups empty (cgroup v2), and emptiesErr
	// says why when it could not start; on v1, whose cgroups raise no
	// such event, exits tells when their processes exit.
	empties    *emptyWatcher
	emptiesErr error
	exits      *exitWatcher
	// owned are the query cgroups (pool/query) placed through the handle
	// and not removed through it yet: their owner reads and removes them,
	// so Apply and Repair leave them even when empty.
	owned map[string]bool
	// pending are the memory limits held back, as the reconciles since
	// the last of the whole tree left them.
	pending []cgroupfs.Pending
	// applied is the plan the tree was last made to match (Apply,
	// Repair); nil before the first and after a failed one, when the
	// next Apply reconciles the whole tree.
	applied *planner.Desired
	// unified is the cgroup2 mount point when the pool root is on cgroup
	// v2, "" otherwise (QueryCgroup).
	unified string
}

// Root is the pool root to use: given when not "", else the default
// below the cpu controller's hierarchy ([cgroupfs.Mounts.DefaultRoot]).
// The error names the --root flag that would settle it.
func Root(m cgroupfs.Mounts, given string) (string, error) {
	if given != "" {
		return given, nil
	}
	root, err := m.DefaultRoot()
	if err != nil {
		return "", fmt.Errorf("find the default pool root: %w", err)
	}
	return root, nil
}

// Open opens the pool tree at root, a directory inside the mount that
// carries the cpu controller (see [cgroupfs.Open]; opt as there). It
// neither creates nor writes anything. On cgroup v2 it starts watching for
// query cgroups that empty; Close ends that.
func Open(m cgroupfs.Mounts, root string, opt cgroupfs.Options) (*Handle, error) {
	w, err := cgroupfs.Open(m, root, opt)
	if err != nil {
		return nil, err
	}
	h := &Handle{writer: w, reader: w.Reader()}
	if w.V2() {
		h.unified = m.Unified
		h.empties, h.emptiesErr = newEmptyWatcher(h.reader.Root())
	} else {
		h.exits = newExitWatcher(h)
	}
	return h, nil
}

// Close ends the watching and releases the pool root.
func (h *Handle) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var err error
	if h.empties != nil {
		err = h.empties.close()
	}
	return errors.Join(err, h.reader.Close(), h.writer.Close())
}

// RootInPlace reports an error wrapping cgroupfs.ErrRootGone when the
// pool root was removed while the handle had it open
// ([cgroupfs.Tree.RootsInPlace]): only opening it anew (a restart of the
// daemon) writes to the directory at its path again.
func (h *Handle) RootInPlace() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.writer.RootsInPlace()
}

// Reader is the tree's reader ([cgroupfs.Tree.Reader]).
func (h *Handle) Reader() *cgroupfs.Reader { return h.reader }

// Writer is the tree's writer, for what the calls below do not cover
// (plans shown before they are made, compare's own set-up). It is not
// safe for concurrent use: a caller that shares the Handle goes through
// the Handle's methods.
func (h *Handle) Writer() *cgroupfs.Tree { return h.writer }

// Apply makes the pool cgroups match d, writing only what differs. After
// a plan of the same pools was applied through the handle, it reads and
// writes only the pools whose cgroups d asks for differently
// ([planner.Changed]) and those with a memory limit held back
// ([cgroupfs.Tree.ReconcilePools]): the others are as that plan left
// them, unless something else changed them, which Repair finds. Otherwise
// it reconciles the whole tree, as Repair does.
func (h *Handle) Apply(d planner.Desired) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	changed, whole := toApply(h.applied, d, h.pending)
	if whole {
		_, err := h.reconcile(d)
		return err
	}
	if len(changed) > 0 {
		h.writer.Keep(h.owned)
		res, err := h.writer.ReconcilePools(d, changed)
		if err != nil {
			h.applied = nil
			return err
		}
		h.pending = res.Pending // every pool that had one was among changed
	}
	h.applied = &d
	return nil
}

// toApply names the pools an Apply of d reads and writes after applied
// (nil: none yet) left the memory limits pending held back: those whose
// cgroups d asks for differently, and those with a limit held back. whole
// is true when the whole tree is to be reconciled instead: no plan
// applied, or one of other pools or for another node.
func toApply(applied *planner.Desired, d planner.Desired, pending []cgroupfs.Pending) (pools []string, whole bool) {
	if applied == nil {
		return nil, true
	}
	pools, same := planner.Changed(*applied, d)
	if !same {
		return nil, true
	}
	for _, p := range pending {
		if !slices.Contains(pools, p.Pool()) {
			pools = append(pools, p.Pool())
		}
	}
	return pools, false
}

// Repair reconciles the whole tree with d ([cgroupfs.Tree.Reconcile]),
// drift in every pool included, and returns how many writes it made.
// With queries false it does not read the values of the query cgroups the
// handle made, when d is the plan it last applied with nothing held back:
// each was made with d's template and kept to it since, by Apply, so only
// another writer could have changed it ([cgroupfs.Tree.Trust]); they are
// still listed, and one removed or emptied is found.
func (h *Handle) Repair(d planner.Desired, queries bool) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !queries && len(h.pending) == 0 && h.applied != nil {
		if changed, same := planner.Changed(*h.applied, d); same && len(changed) == 0 {
			h.writer.Trust(h.owned)
			defer h.writer.Trust(nil)
		}
	}
	return h.reconcile(d)
}

// reconcile is Repair of every cgroup with h.mu held.
func (h *Handle) reconcile(d planner.Desired) (int, error) {
	h.writer.Keep(h.owned)
	res, err := h.writer.Reconcile(d)
	h.pending = res.Pending
	h.applied = nil
	if err == nil {
		h.applied = &d
	}
	return res.Writes, err
}

// Pending are the lowered memory limits the last Apply or Repair held
// back, their cgroups using more ([cgroupfs.Changes.Pending]).
func (h *Handle) Pending() []cgroupfs.Pending {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.pending)
}

// PoolStats reads the counters of the named pools' cgroups
// ([cgroupfs.Reader.Read]): CPU accounting and, where the kernel keeps
// them, CPU pressure and memory. A pool without a cgroup is left out.
func (h *Handle) PoolStats(pools []string) (map[string]observe.Sample, error) {
	return h.poolStats(pools, h.reader.Read)
}

// PoolCPUStats is PoolStats of CPU accounting and throttling alone
// ([cgroupfs.Reader.ReadCPU]), for a reader of those counters only.
func (h *Handle) PoolCPUStats(pools []string) (map[string]observe.Sample, error) {
	return h.poolStats(pools, h.reader.ReadCPU)
}

// PoolCPUPressure reads the CPU pressure of the named pools' cgroups
// ([cgroupfs.Reader.CPUPressure]); a pool without a cgroup, or without
// pressure (cgroup v1), is left out.
func (h *Handle) PoolCPUPressure(pools []string) (map[string]*observe.Pressure, error) {
	out := map[string]*observe.Pressure{}
	for _, p := range pools {
		psi, err := h.reader.CPUPressure(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("pool %s: %w", p, err)
		}
		if psi != nil {
			out[p] = psi
		}
	}
	return out, nil
}

// poolStats reads each pool's cgroup with read, leaving out a pool
// without a cgroup.
func (h *Handle) poolStats(pools []string, read func(group string) (observe.Sample, error)) (map[string]observe.Sample, error) {
	out := map[string]observe.Sample{}
	for _, p := range pools {
		s, err := read(p)
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

// Threads lists the threads in the pool and its queries, at most limit
// of them ([cgroupfs.Reader.Threads]); truncated reports that more were
// there.
func (h *Handle) Threads(pool string, limit int) (tids []int, truncated bool, err error) {
	return h.reader.Threads(pool, limit)
}

// ThreadsExcept lists the threads in the pool and its cgroups but the
// query cgroups except names, at most limit of them
// ([cgroupfs.Reader.ThreadsExcept]).
func (h *Handle) ThreadsExcept(pool string, except map[string]bool, limit int) (tids []int, truncated bool, err error) {
	return h.reader.ThreadsExcept(pool, except, limit)
}

// Procs lists the processes in group (a pool or <pool>/<query>) and every
// cgroup below it, at most limit of them ([cgroupfs.Reader.Procs]).
func (h *Handle) Procs(group string, limit int) (pids []int, truncated bool, err error) {
	return h.reader.Procs(group, limit)
}

// Own marks the pool root as this process's ([cgroupfs.Tree.Own]).
func (h *Handle) Own() (release func() error, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.writer.Own()
}
