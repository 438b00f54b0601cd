package cgroupfs

// The pids controller: its files, how a cgroup's task limit is read back
// and written, and its counters.

import (
	"errors"
	"fmt"
	"io/fs"

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

// pidsController manages a cgroup's task limit (pids.max).
var pidsController = controller{
	name:      HierPids,
	need:      func(s settings, use *uses) { use.pids = use.pids || s.pidsMax > 0 },
	in:        func(use uses) bool { return use.pids },
	unmounted: "TOTAL_PIDS_LIMIT or QUERY_PIDS_LIMIT set: %w: no v1 pids hierarchy is mounted beside the cpu hierarchy; accepted here: -1 for both",
	desired:   func(c planner.Cgroup, s *settings) { s.pidsMax = max(c.PidsMax, 0) },
	check: func(c planner.Cgroup) error {
		if c.PidsMax > planner.MaxPidsLimit {
			return fmt.Errorf("task limit %d: want 0 or -1 (none) or 1..%d", c.PidsMax, planner.MaxPidsLimit)
		}
		return nil
	},
	read: func(f FS, cg string, _ bool, dir string, s *settings) (err error) {
		s.pidsMax, err = readPidsMax(f, cg, dir)
		return err
	},
	values: (*builder).pidsValues,
	stat: func(r *Reader, group string, s *observe.Sample) (err error) {
		s.Pids, err = r.Pids(group)
		return err
	},
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
