package cgroupfs

// The pids controller: its files, how a cgroup's task limit is read back
// and written, and its counters.

import (
	"errors"
	"io/fs"
	"slices"

	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// The pids controller's files, the same on v2 and v1 ([observe.Pids]
// says what each holds).
//
//	pids.max           "max" | tasks
//	pids.current       tasks
//	pids.peak          tasks (v2, Linux >= 6.2)
//	pids.events        "max N"
//	pids.events.local  "max N" (v2, kernels whose pids.events is hierarchical)
const (
	filePidsMax         = "pids.max"
	filePidsCurrent     = "pids.current"
	filePidsPeak        = "pids.peak"
	filePidsEvents      = "pids.events"
	filePidsEventsLocal = "pids.events.local"
)

// pidsHier is the hierarchy holding the pids files of the tree: v2's
// unified one, v1's pids hierarchy when hiers (the hierarchies a change
// touches) has it, else "".
func (t *Tree) pidsHier(hiers []string) string {
	switch {
	case t.v2:
		return HierUnified
	case slices.Contains(hiers, HierPids):
		return HierPids
	}
	return ""
}

// readPidsMax reads cgroup cg's task limit beneath f, 0 for none: a
// missing file (the controller not enabled there) is none. dir is f's
// directory, for messages.
func readPidsMax(f FS, cg, dir string) (int64, error) {
	v, err := readValue(f, cg, filePidsMax, dir, func(s string) (int64, error) { return observe.ParsePidsMax([]byte(s)) })
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	return max(v, 0), err
}

// pidsValues writes tg's task limit when it differs: pids.max, "max" for
// none. The kernel takes any limit below a parent's, so no order between
// a pool and its queries is needed.
func (b *builder) pidsValues(tg target) {
	if tg.want.pidsMax == tg.cur.pidsMax {
		return
	}
	h := HierUnified
	if !b.cur.v2 {
		h = HierPids
	}
	b.add(h, tg.path, OpWrite, filePidsMax, planner.Cgroup{PidsMax: tg.want.pidsMax}.PidsMaxValue())
}

// usesPids reports whether any cgroup in d sets a task limit.
func usesPids(d planner.Desired) bool {
	for _, p := range d.Pools {
		if p.Pool.PidsMax > 0 || p.Query.PidsMax > 0 {
			return true
		}
	}
	return false
}

// Pids reads group's tasks ([observe.Pids]); nil when the pids
// controller is not there for it: v2 without pids.current (the parent
// does not enable pids), v1 without a pids twin of the tree or of the
// group.
func (r *Reader) Pids(group string) (*observe.Pids, error) {
	h := HierUnified
	if !r.v2 {
		if h = HierPids; r.dirs[h] == "" {
			return nil, nil
		}
	}
	cur, err := read(r, h, group, filePidsCurrent, observe.ParseBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p := &observe.Pids{CurrentTasks: cur}
	if p.PeakTasks, err = optional(read(r, h, group, filePidsPeak, observe.ParseBytes)); err != nil {
		return nil, err
	}
	if p.Limit, err = read(r, h, group, filePidsMax, observe.ParsePidsMax); err != nil {
		return nil, err
	}
	if p.Events, err = read(r, h, group, filePidsEvents, observe.ParsePidsEvents); err != nil {
		return nil, err
	}
	local, err := optional(read(r, h, group, filePidsEventsLocal, observe.ParsePidsEvents))
	if err != nil {
		return nil, err
	}
	p.Hierarchical = r.v2 && local != nil
	return p, nil
}
