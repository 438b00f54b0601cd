package cgroupfs

import (
	"errors"
	"io/fs"
	"slices"

	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
)

// controller is one cgroup controller as the pool tree manages it. Its
// own file (cpu.go, memory.go, cpuset.go, pids.go) holds the whole of it:
// its interface files, how it reads its part of a cgroup's settings back,
// the ops that take that part from the current values to the wanted ones,
// and its counters. Checking a desired state ([validate]), reading a
// tree ([Tree.readSettings], [Tree.readCurrent]), deciding a change
// ([diff]) and sampling a group ([Reader.Read]) iterate [controllers]; a
// nil hook is nothing to do. A new controller is one new file and its
// entry in the table, with its values in [settings] and its flag in
// [uses].
type controller struct {
	// name is the controller's name in cgroup.controllers and
	// cgroup.subtree_control, and that of the cgroup v1 hierarchy holding
	// its files (HierCPU, HierMemory, ...).
	name string
	// need notes in use what a cgroup with settings s needs of the
	// controller, and in reports whether a change with use needs it
	// (nil: always, cpu).
	need func(s settings, use *uses)
	in   func(use uses) bool
	// poolsOnly: enabled in the pool root's cgroup.subtree_control only,
	// so the pools get its files and their queries inherit their values.
	poolsOnly bool
	// unmounted is the error, a format wrapping ErrNoController, when
	// the controller is used on v1 and its hierarchy is not mounted: what
	// asked for it, and what would be accepted.
	unmounted string
	// desired sets the controller's part of s to what c asks for; check
	// refuses what the kernel would refuse of it.
	desired func(c planner.Cgroup, s *settings)
	check   func(c planner.Cgroup) error
	// refuse refuses a desired state the controller cannot carry on this
	// host, after the controllers in use were found available.
	refuse func(t *Tree, d planner.Desired, use uses) error
	// read reads cg's values beneath f into s; f is the pool root of the
	// hierarchy holding the controller's files, dir its path (for
	// messages).
	read func(f FS, cg string, v2 bool, dir string, s *settings) error
	// top reads what the controller needs of the pool root and above it
	// into cur, once the tree and its values are read.
	top func(t *Tree, cur *current, d planner.Desired) error
	// before writes, for the whole tree, what goes before any cgroup's
	// values; values writes one cgroup's values that differ; after
	// writes, for the whole tree, what goes after every cgroup's values.
	before func(b *builder, pools, queries []target)
	values func(b *builder, tg target)
	after  func(b *builder, d planner.Desired, queries []target)
	// stat reads group's counters into s.
	stat func(r *Reader, group string, s *observe.Sample) error
}

// controllers are the controllers poolagent manages, cpu's first. Their
// order is the order of their values in a cgroup's ops, of their names in
// cgroup.subtree_control and of their v1 hierarchies.
var controllers = []*controller{&cpuController, &memoryController, &cpusetController, &pidsController}

// uses says which of the controllers a tree may do without a change (or
// a query) needs: a flag per controller but cpu, which every tree needs,
// and memory's guarantees, which v1 cannot carry. A controller's need
// sets its flag and its in reads it.
type uses struct{ memory, guarantee, cpuset, pids bool }

// usesOf is what cgroups with settings ss need, each controller noting
// its own.
func usesOf(ss ...settings) uses {
	var use uses
	for _, c := range controllers {
		if c.need == nil {
			continue
		}
		for _, s := range ss {
			c.need(s, &use)
		}
	}
	return use
}

// usesIn is what the cgroups of d need: what any pool or query template
// needs.
func usesIn(d planner.Desired) uses {
	var ss []settings
	for _, p := range d.Pools {
		ss = append(ss, fromDesired(p.Pool), fromDesired(p.Query))
	}
	return usesOf(ss...)
}

// fromDesired is the settings c asks for, each controller its part.
func fromDesired(c planner.Cgroup) settings {
	var s settings
	for _, ctl := range controllers {
		if ctl.desired != nil {
			ctl.desired(c, &s)
		}
	}
	return s
}

// checkCgroup applies the kernel's rules for one cgroup's values, each
// controller's to its part.
func checkCgroup(c planner.Cgroup) error {
	for _, ctl := range controllers {
		if ctl.check == nil {
			continue
		}
		if err := ctl.check(c); err != nil {
			return err
		}
	}
	return nil
}

// used reports whether a change with use needs c.
func (c *controller) used(use uses) bool { return c.in == nil || c.in(use) }

// controllerOf is the controller whose v1 hierarchy is h; nil for
// cpuacct, which only follows cpu.
func controllerOf(h string) *controller {
	for _, c := range controllers {
		if c.name == h {
			return c
		}
	}
	return nil
}

// enabled are the controllers a change with use enables in the
// cgroup.subtree_control of the pool root (top) and of each pool (pools).
func enabled(use uses) (top, pools []string) {
	var only []string
	for _, c := range controllers {
		switch {
		case !c.used(use):
		case c.poolsOnly:
			only = append(only, c.name)
		default:
			pools = append(pools, c.name)
		}
	}
	return append(slices.Clone(pools), only...), pools
}

// hierOf is the hierarchy holding c's files in a change that touches
// hiers: v2's unified one, on v1 c's own when hiers has it, else "".
func (t *Tree) hierOf(c *controller, hiers []string) string {
	switch {
	case t.v2:
		return HierUnified
	case slices.Contains(hiers, c.name):
		return c.name
	}
	return ""
}

// readSettings reads the managed values of cgroup cg (which exists in
// the cpu hierarchy), each controller its own, in the hierarchies of
// hiers. On v1, a controller whose pool root is not there yet (its
// hierarchy just came into use) reads as a new cgroup's defaults.
func (t *Tree) readSettings(cg string, hiers []string) (settings, error) {
	s := defaults() // what a file a kernel lacks reads as
	for _, c := range controllers {
		h := t.hierOf(c, hiers)
		if h == "" {
			continue
		}
		f, err := t.fs(h)
		if errors.Is(err, fs.ErrNotExist) && h != t.order[0] {
			continue
		}
		if err != nil {
			return s, err
		}
		if err := c.read(f, cg, t.v2, t.roots[h], &s); err != nil {
			return s, err
		}
	}
	return s, nil
}

// checkControllers refuses a tree where a controller the change uses
// (cpu always; memory when a limit is set, cpuset when a pool has CPUS,
// pids when a task limit is set) will not be available to the pools, or
// that a controller cannot carry here.
func (t *Tree) checkControllers(d planner.Desired, use uses, hiers []string) error {
	if err := t.checkAvailable(use, hiers); err != nil {
		return err
	}
	for _, c := range controllers {
		if c.refuse == nil {
			continue
		}
		if err := c.refuse(t, d, use); err != nil {
			return err
		}
	}
	return nil
}
