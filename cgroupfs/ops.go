package cgroupfs

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// OpKind is the kind of change an [Op] makes.
type OpKind int

const (
	// OpMkdir creates a cgroup.
	OpMkdir OpKind = iota
	// OpWrite writes Value to File in the cgroup.
	OpWrite
	// OpMove moves every process of the cgroup into To; with To the
	// cgroup itself, it moves PIDs in from elsewhere in the hierarchy.
	OpMove
	// OpRmdir removes an empty cgroup.
	OpRmdir
)

// Op is one change to the cgroup filesystem.
type Op struct {
	Kind OpKind
	// Hier is the hierarchy: HierUnified, HierCPU, HierCPUAcct, HierMemory
	// or HierCPUSet.
	Hier string
	// Dir is the hierarchy's pool root.
	Dir string
	// Path is the cgroup, relative to Dir; "." is the pool root.
	Path string
	// File and Value: for OpWrite, the interface file and what is written.
	File, Value string
	// To and PIDs: for OpMove, the destination cgroup and the processes
	// seen when the changes were worked out. Processes that appear in Path before the move is
	// done (forks) are moved too.
	To   string
	PIDs []int
	// RetryAfterMax marks a burst write: if the kernel refuses it (EINVAL:
	// burst above the current quota), it is written again after the
	// cgroup's quota.
	RetryAfterMax bool
}

// String renders the op for --dry-run and error reports, with full paths.
func (o Op) String() string {
	p := filepath.Join(o.Dir, filepath.FromSlash(o.Path))
	switch o.Kind {
	case OpMkdir:
		return "mkdir " + p
	case OpWrite:
		s := fmt.Sprintf("write %q to %s", o.Value, filepath.Join(p, o.File))
		if o.RetryAfterMax {
			s += " (again after the quota if refused)"
		}
		return s
	case OpMove:
		pids := make([]string, len(o.PIDs))
		for i, pid := range o.PIDs {
			pids[i] = strconv.Itoa(pid)
		}
		if o.To == o.Path {
			return fmt.Sprintf("move pids [%s] into %s", strings.Join(pids, " "), p)
		}
		return fmt.Sprintf("move pids [%s] from %s to %s", strings.Join(pids, " "), p, filepath.Join(o.Dir, filepath.FromSlash(o.To)))
	case OpRmdir:
		return "rmdir " + p
	}
	return fmt.Sprintf("op %d on %s", o.Kind, p)
}

// Changes is the ordered list of ops that turns the current tree into the
// desired one, and the lowered memory limits left out of it (Pending).
type Changes struct {
	Ops []Op
	// Pending are the memory limits the change would lower below what
	// their cgroups use: not written (the kernel would reclaim at once
	// and OOM-kill what it cannot), kept at their old value until usage
	// allows, or the tree is told to force them ([Tree.Force]).
	Pending []Pending
}

// Pending is a lowered memory limit held back: the cgroup uses more than
// the new limit.
type Pending struct {
	// Dir is the cgroup's directory, File its limit file (memory.max,
	// v1 memory.limit_in_bytes).
	Dir, File string
	// Path is the cgroup below the pool root: a pool ("olap") or a
	// query ("olap/q-7").
	Path string
	// UsageBytes is what the cgroup used when the change was worked out
	// (memory.current, v1 memory.usage_in_bytes), LimitBytes the new
	// limit and KeptBytes the limit kept meanwhile (-1: none).
	UsageBytes, LimitBytes, KeptBytes int64
}

// Pool is the pool whose cgroup (its own or a query's) the limit is of.
func (p Pending) Pool() string {
	pool, _, _ := strings.Cut(p.Path, "/")
	return pool
}

// String is the pending line of plan and apply: "pending: usage X above
// new limit Y ...".
func (p Pending) String() string {
	kept := strconv.FormatInt(p.KeptBytes, 10)
	if p.KeptBytes < 0 {
		kept = "max"
	}
	return fmt.Sprintf("pending: usage %d above new limit %d of %s; %s kept at %s until usage falls below it", p.UsageBytes, p.LimitBytes,
		filepath.Join(p.Dir, p.File), p.File, kept)
}

// Writes is how many writes the changes make: one per mkdir, rmdir and file
// write, and one per process moved.
func (c Changes) Writes() int {
	n := 0
	for _, o := range c.Ops {
		if o.Kind == OpMove {
			n += len(o.PIDs)
		} else {
			n++
		}
	}
	return n
}

// String lists the ops, one per line, then the pending limits.
func (c Changes) String() string {
	var b strings.Builder
	for _, o := range c.Ops {
		b.WriteString(o.String())
		b.WriteByte('\n')
	}
	for _, p := range c.Pending {
		b.WriteString(p.String())
		b.WriteByte('\n')
	}
	return b.String()
}
