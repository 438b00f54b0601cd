package cgroupfs

import (
	"errors"
	"fmt"
	"io/fs"
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
	var errs []error
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
		if err == nil {
			var subs []string
			if subs, err = f.ReadDir("."); err == nil {
				for _, s := range subs {
					if err = removeTree(f, s); err != nil && !errors.Is(err, fs.ErrNotExist) {
						break
					}
					err = nil
				}
			}
		}
		if err == nil {
			if err = mf.Rmdir(rel); errors.Is(err, fs.ErrNotExist) {
				err = nil
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
