package cgroupfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
)

// The end of a query's life, for the admission daemon: a query holds its
// slot until its cgroup is empty, then the cgroup goes.

// QueryPopulated reports whether the query cgroup <pool>/<query>, or any
// cgroup below it, still holds a process, by reading cgroup.procs in the
// hierarchy of the cpu controller (exited processes, zombies included,
// are not listed there in v1 or v2).
func (t *Tree) QueryPopulated(pool, query string) (bool, error) {
	cg, err := queryPath(pool, query)
	if err != nil {
		return false, err
	}
	f, err := t.fs(t.order[0])
	if err != nil {
		return false, err
	}
	return populated(f, cg)
}

func populated(f FS, cg string) (bool, error) {
	pids, err := readProcs(f, cg)
	if err != nil {
		return false, fmt.Errorf("query cgroup %s: %w", cg, err)
	}
	if len(pids) > 0 {
		return true, nil
	}
	subs, err := f.ReadDir(cg)
	if err != nil {
		return false, fmt.Errorf("query cgroup %s: %w", cg, err)
	}
	for _, s := range subs {
		if busy, err := populated(f, path.Join(cg, s)); busy || err != nil {
			return busy, err
		}
	}
	return false, nil
}

// RemoveQuery removes the query cgroup <pool>/<query>, and any cgroup
// below it, from every hierarchy the tree uses (on v1 the memory
// hierarchy only when poolagent's root exists there). The cgroups must be empty
// (the kernel refuses to remove a populated one: EBUSY). A hierarchy
// where the query cgroup does not exist is skipped.
func (t *Tree) RemoveQuery(pool, query string) error {
	cg, err := queryPath(pool, query)
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range t.hiers(false) {
		f, err := t.fs(h)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := removeTree(f, cg); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeTree removes cg after the cgroups below it.
func removeTree(f FS, cg string) error {
	subs, err := f.ReadDir(cg)
	if err != nil {
		return err
	}
	slices.Sort(subs)
	for _, s := range subs {
		if err := removeTree(f, path.Join(cg, s)); err != nil {
			return err
		}
	}
	return f.Rmdir(cg)
}

func queryPath(pool, query string) (string, error) {
	if err := checkName(pool); err != nil {
		return "", fmt.Errorf("%w: pool: %v", ErrInvalid, err)
	}
	if err := checkName(query); err != nil {
		return "", fmt.Errorf("%w: query: %v", ErrInvalid, err)
	}
	return path.Join(pool, query), nil
}
