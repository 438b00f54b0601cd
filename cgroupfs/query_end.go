package cgroupfs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
)

// The end of a query's life, for the admission daemon: a query holds its
// slot until its cgroup is empty, then the cgroup goes.

// QueryPopulated reports whether the query cgroup <pool>/<query>, or any
// cgroup below it, still holds a live thread, by reading the thread list
// of the cpu controller's hierarchy: v1 "tasks", v2 "cgroup.threads", one
// TID per line.
//
// NOTE: cgroup.procs is not enough: it hides a thread-group leader that
// has exited while another of its threads is still on its way out, and
// that thread keeps the cgroup populated (rmdir fails with EBUSY). The
// thread lists show every thread until it leaves the cgroup, which is
// exactly when the kernel stops counting it as populated.
func (t *Tree) QueryPopulated(pool, query string) (bool, error) {
	cg, err := queryPath(pool, query)
	if err != nil {
		return false, err
	}
	f, err := t.fs(t.order[0])
	if err != nil {
		return false, err
	}
	return populated(f, cg, threadList(t.v2))
}

// Thread lists: every live thread of a cgroup, one TID per line.
const (
	fileTasks   = "tasks"          // v1
	fileThreads = "cgroup.threads" // v2
)

// threadList is the thread list's file name on cgroup v2 or v1.
func threadList(v2 bool) string {
	if v2 {
		return fileThreads
	}
	return fileTasks
}

func populated(f FS, cg, threads string) (bool, error) {
	b, err := f.ReadFile(path.Join(cg, threads))
	if err != nil {
		return false, fmt.Errorf("query cgroup %s: %w", cg, err)
	}
	if len(bytes.TrimSpace(b)) > 0 {
		return true, nil
	}
	subs, err := f.ReadDir(cg)
	if err != nil {
		return false, fmt.Errorf("query cgroup %s: %w", cg, err)
	}
	for _, s := range subs {
		if busy, err := populated(f, path.Join(cg, s), threads); busy || err != nil {
			return busy, err
		}
	}
	return false, nil
}

// RemoveQuery removes the query cgroup <pool>/<query>, and any cgroup
// below it, from every hierarchy the tree uses (on v1 the memory, cpuset
// and pids hierarchies only when poolagent's root exists there). The
// cgroups must be empty
// (the kernel refuses to remove a populated one: EBUSY). A hierarchy
// where the query cgroup does not exist is skipped.
func (t *Tree) RemoveQuery(pool, query string) error {
	cg, err := queryPath(pool, query)
	if err != nil {
		return err
	}
	hiers, err := t.hiers(uses{})
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hiers {
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
