package cgroupfs

import (
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/planner"
)

// Result is what an apply did.
type Result struct {
	// Done lists the ops made, in the order they were made (a burst
	// refused before the quota appears after it).
	Done []Op
	// Writes counts the writes made: mkdir, rmdir, file writes and one per
	// process moved. A second apply of the same desired state makes none.
	Writes int
	// Pending are the lowered memory limits held back ([Changes.Pending]).
	Pending []Pending
}

// ApplyError reports an apply that stopped at a failed op: what was
// applied and what was not. The tree is left as the applied ops made it;
// the next apply reads it and converges from there.
type ApplyError struct {
	Failed  Op
	Err     error
	Done    []Op
	NotDone []Op // starts with Failed
}

func (e *ApplyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apply stopped at %s: %v\napplied %d of %d changes", e.Failed, e.Err, len(e.Done), len(e.Done)+len(e.NotDone))
	for _, o := range e.Done {
		b.WriteString("\n  done:     " + o.String())
	}
	for _, o := range e.NotDone {
		b.WriteString("\n  not done: " + o.String())
	}
	return b.String()
}

func (e *ApplyError) Unwrap() error { return e.Err }

// Reconcile works out and applies the changes to d: the tree ends as d describes, and only
// what differs is written.
func (t *Tree) Reconcile(d planner.Desired) (Result, error) {
	c, err := t.Changes(d)
	if err != nil {
		return Result{}, err
	}
	res, err := t.Apply(c)
	res.Pending = c.Pending
	return res, err
}

// ReconcilePools is Reconcile confined to the named pools of d: it reads
// and writes only their cgroups and those below them (and what the pools
// share: the pool root and above it), and leaves every other cgroup below
// the root as it is, unread. It is for a change of those pools' desired
// state where the others' is the one last reconciled; Reconcile alone
// finds drift in the others, removes dropped pools and empty query
// cgroups there. A name d does not have is refused before anything is
// read. When the shared parts are not ready for d (a controller coming
// into use), the whole tree is reconciled.
func (t *Tree) ReconcilePools(d planner.Desired, pools []string) (Result, error) {
	only := make(map[string]bool, len(pools))
	for _, p := range pools {
		only[p] = true
	}
	found := 0
	for _, p := range d.Pools {
		if only[p.Name] {
			found++
		}
	}
	if found < len(only) {
		return Result{}, fmt.Errorf("%w: reconcile pools %v, not all of which the desired state has", ErrInvalid, pools)
	}
	c, err := t.changes(d, only)
	if err != nil {
		return Result{}, err
	}
	res, err := t.Apply(c)
	res.Pending = c.Pending
	return res, err
}

// Apply makes the ops of c in order. On failure it returns an
// *ApplyError; the ops before the failed one stay applied.
func (t *Tree) Apply(c Changes) (Result, error) {
	var res Result
	var pending []Op // a burst refused before its quota, to write after it
	fail := func(at Op, rest []Op, err error) (Result, error) {
		notDone := append(append([]Op{at}, pending...), rest...)
		return res, &ApplyError{Failed: at, Err: err, Done: res.Done, NotDone: notDone}
	}
	for i, op := range c.Ops {
		err := t.do(op, &res.Writes)
		if err != nil && op.RetryAfterMax && errors.Is(err, unix.EINVAL) && isBandwidthOf(c.Ops, i+1, op) {
			pending = append(pending, op)
			continue
		}
		if err != nil {
			return fail(op, c.Ops[i+1:], err)
		}
		res.Done = append(res.Done, op)
		if len(pending) > 0 && isBandwidthOf(c.Ops, i, pending[0]) && !isBandwidthOf(c.Ops, i+1, pending[0]) {
			burst := pending[0]
			pending = nil
			if err := t.do(burst, &res.Writes); err != nil {
				return fail(burst, c.Ops[i+1:], err)
			}
			res.Done = append(res.Done, burst)
		}
	}
	return res, nil
}

// isBandwidthOf reports whether ops[i] writes the quota or period of the
// cgroup that op is for.
func isBandwidthOf(ops []Op, i int, op Op) bool {
	if i >= len(ops) {
		return false
	}
	o := ops[i]
	return o.Kind == OpWrite && o.Hier == op.Hier && o.Path == op.Path &&
		(o.File == fileCPUMax || o.File == fileCFSQuota || o.File == fileCFSPeriod)
}

// do makes one op, counting its writes.
func (t *Tree) do(op Op, writes *int) error {
	if op.Kind == OpMkdir && op.Path == "." {
		// The pool root itself is made in its parent: the one directory
		// named by the operator rather than beneath the root.
		f, err := t.openFS(filepath.Dir(op.Dir))
		if err != nil {
			return err
		}
		if c, ok := f.(io.Closer); ok {
			defer c.Close()
		}
		if err := f.Mkdir(filepath.Base(op.Dir)); err != nil {
			return err
		}
		*writes++
		return nil
	}
	f, err := t.fs(op.Hier)
	if err != nil {
		return err
	}
	switch op.Kind {
	case OpMkdir:
		err = f.Mkdir(op.Path)
	case OpRmdir:
		err = f.Rmdir(op.Path)
	case OpWrite:
		err = f.WriteFile(path.Join(op.Path, op.File), op.Value)
	case OpMove:
		return moveAll(f, op.Path, op.To, op.PIDs, writes)
	default:
		return fmt.Errorf("unknown op kind %d", op.Kind)
	}
	if err == nil {
		*writes++
	}
	return err
}

// maxMoveRounds bounds how often moveAll re-reads a cgroup for processes
// forked while it was being emptied.
const maxMoveRounds = 5

// moveAll writes each PID into to/cgroup.procs, then moves any process
// that appeared in from meanwhile. A process that exits first is not an
// error (ESRCH): it is gone, not lost. A move with from == to brings
// processes of the same cgroup in another hierarchy in (on v1 a query's
// cpuset twin), so there is nothing to empty.
func moveAll(f FS, from, to string, pids []int, writes *int) error {
	for range maxMoveRounds {
		for _, pid := range pids {
			err := f.WriteFile(path.Join(to, fileProcs), strconv.Itoa(pid))
			if errors.Is(err, unix.ESRCH) {
				continue
			}
			if err != nil {
				return err
			}
			*writes++
		}
		if from == to {
			return nil
		}
		var err error
		if pids, err = readProcs(f, from); err != nil || len(pids) == 0 {
			return err
		}
	}
	return fmt.Errorf("move processes from %s to %s: %d still there after %d rounds", from, to, len(pids), maxMoveRounds)
}
