package cgroupfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"

	"github.com/poolagent/poolagent/planner"
)

// PlaceQuery creates the query cgroup <pool>/<query> with the pool's query
// template and moves pid into it, in every hierarchy. The pool must exist
// (apply first); the query cgroup must not. If a step fails, the query
// cgroup is removed again unless the process already entered it in some
// hierarchy; the error says both.
func (t *Tree) PlaceQuery(ps planner.PoolState, query string, pid int) error {
	if err := checkName(ps.Name); err != nil {
		return fmt.Errorf("%w: pool: %v", ErrInvalid, err)
	}
	if err := checkName(query); err != nil {
		return fmt.Errorf("%w: query: %v", ErrInvalid, err)
	}
	want := fromDesired(ps.Query)
	if err := checkCgroup(ps.Query); err != nil {
		return fmt.Errorf("%w: pool %q, query template: %v", ErrInvalid, ps.Name, err)
	}
	hiers, err := t.hiers(want.memBytes >= 0, !want.cpu.CPUs.IsEmpty())
	if err != nil {
		return fmt.Errorf("place query %s/%s: %w", ps.Name, query, err)
	}
	pool, err := t.readSettings(ps.Name, hiers)
	if err != nil {
		return fmt.Errorf("place query %s/%s: %w", ps.Name, query, err)
	}
	// The query cgroup is new: the kernel's defaults below the pool as
	// it is.
	cg := path.Join(ps.Name, query)
	b := newBuilder(&current{v2: t.v2, pageSize: t.pageSize, roots: t.roots, hiers: hiers,
		nodes: map[string]*node{}, values: map[string]settings{}})
	b.bw[ps.Name] = pool.cpu
	b.mkdir(cg)
	tg := b.target(cg, b.cur.cpusetWant(want, true, pool))
	b.values(tg)
	b.cpusets([]target{tg})
	for _, h := range hiers {
		b.add(h, cg, OpWrite, fileProcs, strconv.Itoa(pid))
	}
	if _, err := t.Apply(Changes{Ops: b.ops}); err != nil {
		var ae *ApplyError
		if errors.As(err, &ae) {
			err = ae.Err
		}
		errs := []error{fmt.Errorf("place pid %d in query %s: %w", pid, cg, err)}
		for _, h := range hiers {
			f, ferr := t.fs(h)
			if ferr == nil {
				ferr = f.Rmdir(cg)
			}
			if ferr != nil && !errors.Is(ferr, fs.ErrNotExist) {
				errs = append(errs, ferr)
			}
		}
		return errors.Join(errs...)
	}
	return nil
}

// QueryPlaces returns, for every hierarchy [Tree.PlaceQuery] would move a
// process in, the hierarchy's mount directory and the query cgroup
// <pool>/<query> as a path below it, slash-separated and starting with
// "/" as /proc/PID/cgroup shows cgroups ("/poolagent/olap/q1"): the
// cgroups a placed process leaves are the ones on its path that are not
// on this one. It writes nothing.
func (t *Tree) QueryPlaces(ps planner.PoolState, query string) (map[string]QueryPlace, error) {
	hiers, err := t.hiers(fromDesired(ps.Query).memBytes >= 0, !ps.Query.CPU.CPUs.IsEmpty())
	if err != nil {
		return nil, err
	}
	out := map[string]QueryPlace{}
	for _, h := range hiers {
		rel := t.inMount(h, t.roots[h])
		out[h] = QueryPlace{Mount: t.mounts[h], Path: path.Join("/", rel, ps.Name, query)}
	}
	return out, nil
}

// QueryPlace is where a query cgroup is in one hierarchy.
type QueryPlace struct {
	// Mount is the hierarchy's mount directory.
	Mount string
	// Path is the query cgroup below it, "/"-rooted.
	Path string
}
