package cgroupfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"

	"github.com/poolagent/poolagent/internal/cpulimit"
)

// FavourRoot gives the pool root the largest CPU weight against its
// siblings: cgroup v2 cpu.weight 10000, v1 cpu.shares 262144 (v1's
// maximum, above the 102400 that a weight of 10000 converts to). A
// throttled group's throttled time per period is the period less the wall
// time its quota took to spend, which other load stretches; with the top
// weight the pools run whenever their quotas allow. compare measures so.
func (t *Tree) FavourRoot() error {
	op := Op{Kind: OpWrite, Hier: HierCPU, Dir: t.roots[HierCPU], Path: ".", File: fileShares, Value: strconv.Itoa(cpulimit.MaxShares)}
	if t.v2 {
		op = Op{Kind: OpWrite, Hier: HierUnified, Dir: t.roots[HierUnified], Path: ".", File: fileCPUWeight, Value: strconv.Itoa(cpulimit.MaxWeight)}
	}
	if _, err := t.Apply(Changes{Ops: []Op{op}}); err != nil {
		return fmt.Errorf("favour pool root: %w", err)
	}
	return nil
}

// RemoveAll removes the pool root and every cgroup below it, children
// first, in every hierarchy; what is already gone is skipped. The kernel
// refuses to remove a cgroup that holds a process (EBUSY): move or end the
// processes first. For a root that is poolagent's alone, such as
// compare's.
func (t *Tree) RemoveAll() error {
	_, err := t.remove(true)
	return err
}

// Leftovers are the cgroups [Tree.RemoveMade] left, as full paths.
type Leftovers struct {
	// Foreign are cgroups poolagent did not make (no mark), each with
	// whatever is below it.
	Foreign []string
	// Kept are cgroups poolagent made that hold a foreign one.
	Kept []string
}

// RemoveMade removes the cgroups poolagent made (those Mkdir marked) at
// and below the pool root, children first, in every hierarchy, and
// returns the ones it left: a cgroup poolagent did not make (by hand,
// another program's, or one of an older poolagent that made no marks),
// with everything below it, and the cgroups of poolagent's above one. As
// RemoveAll, it stops at a cgroup that holds a process (EBUSY).
func (t *Tree) RemoveMade() (Leftovers, error) {
	return t.remove(false)
}

// remove is RemoveAll (all) or RemoveMade.
func (t *Tree) remove(all bool) (Leftovers, error) {
	var left Leftovers
	var errs []error
	made := func(f FS, cg string) (bool, error) {
		if all {
			return true, nil
		}
		return f.Marked(cg)
	}
	for _, h := range t.order {
		mf, err := t.mountFS(h)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rel := t.inMount(h, t.roots[h])
		if ok, err := isDir(mf, rel); err != nil || !ok {
			if err != nil {
				errs = append(errs, err)
			}
			continue
		}
		// Below the root through the root, the root itself in its mount.
		f, err := t.fs(h)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		w := walk{made: made, root: t.roots[h], left: &left}
		// The pool root: what is below it first, whoever made it.
		emptied, err := w.below(f, ".")
		if err == nil {
			_, err = w.remove(mf, rel, t.roots[h], emptied)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return left, errors.Join(errs...)
}

// walk removes what made says is poolagent's, noting in left what it
// leaves.
type walk struct {
	made func(f FS, cg string) (bool, error)
	root string // the pool root's full path, to name cgroups by
	left *Leftovers
}

// below removes the cgroups of poolagent's below cg (f's name) and
// reports whether none is left. A cgroup poolagent did not make is not
// looked into.
func (w walk) below(f FS, cg string) (bool, error) {
	subs, err := f.ReadDir(cg)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	slices.Sort(subs)
	emptied := true
	for _, s := range subs {
		sub := path.Join(cg, s)
		made, err := w.made(f, sub)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return false, err
		case !made:
			w.left.Foreign = append(w.left.Foreign, path.Join(w.root, sub))
			emptied = false
			continue
		}
		subEmptied, err := w.below(f, sub)
		if err != nil {
			return false, err
		}
		gone, err := w.remove(f, sub, path.Join(w.root, sub), subEmptied)
		if err != nil {
			return false, err
		}
		emptied = emptied && gone
	}
	return emptied, nil
}

// remove removes cgroup cg (f's name; full, its full path) if poolagent
// made it and nothing was left below it (emptied), noting it in left
// otherwise, and reports whether it is gone.
func (w walk) remove(f FS, cg, full string, emptied bool) (bool, error) {
	made, err := w.made(f, cg)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return true, nil
	case err != nil:
		return false, err
	case !made:
		w.left.Foreign = append(w.left.Foreign, full)
		return false, nil
	case !emptied:
		w.left.Kept = append(w.left.Kept, full)
		return false, nil
	}
	if err := f.Rmdir(cg); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, nil
}
