package cgroupfs

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strconv"
	"syscall"

	"github.com/poolagent/poolagent/planner"
)

// PlaceQuery creates the query cgroup <pool>/<query> with the pool's query
// template and moves pid into it, in every hierarchy: MakeQuery, then
// MoveToQuery. The pool must exist (apply first); the query cgroup must
// not. If a step fails, the query cgroup is removed again unless the
// process already entered it in some hierarchy; the error says both.
func (t *Tree) PlaceQuery(ps planner.PoolState, query string, pid int) error {
	if err := t.MakeQuery(ps, query); err != nil {
		return err
	}
	if err := t.MoveToQuery(ps, query, pid); err != nil {
		return errors.Join(err, t.rmdirQuery(ps, query))
	}
	return nil
}

// MakeQuery creates the query cgroup <pool>/<query> with the pool's query
// template, in every hierarchy a query of the pool is placed in. The pool
// must exist (apply first); the query cgroup must not. If a step fails,
// the query cgroup is removed again; the error says both.
func (t *Tree) MakeQuery(ps planner.PoolState, query string) error {
	cg, hiers, err := t.queryHiers(ps, query)
	if err != nil {
		return err
	}
	want := fromDesired(ps.Query)
	pool, err := t.readSettings(ps.Name, hiers)
	if err != nil {
		return fmt.Errorf("make query %s: %w", cg, err)
	}
	// The query cgroup is new: the kernel's defaults below the pool as
	// it is.
	b := newBuilder(&current{v2: t.v2, pageSize: t.pageSize, roots: t.roots, hiers: hiers,
		nodes: map[string]*node{}, values: map[string]settings{}})
	b.bw[ps.Name] = pool.cpu
	b.mkdir(cg)
	tg := b.target(cg, b.cur.cpusetWant(want, true, pool))
	b.values(tg)
	b.cpusets([]target{tg})
	if _, err := t.Apply(Changes{Ops: b.ops}); err != nil {
		var ae *ApplyError
		if errors.As(err, &ae) {
			err = ae.Err
		}
		return errors.Join(fmt.Errorf("make query %s: %w", cg, err), t.rmdirQuery(ps, query))
	}
	return nil
}

// MoveToQuery moves pid into the query cgroup <pool>/<query> (made by
// MakeQuery with the same ps), in every hierarchy, by writing its
// cgroup.procs. A failure leaves the cgroup, which the process may have
// entered in some hierarchy: the caller removes it once it is empty.
//
// Where the query is in more than one hierarchy (v1 with cpu, cpuacct and
// cpuset mounted apart), the process keeps running between the writes,
// and a child it forks in between starts in the query cgroup of the
// hierarchies already written and outside it in the others. So the move
// ends by gathering the query ([Tree.gather]): every process in the query
// cgroup of any hierarchy is moved into it in all of them, until a round
// finds none missing. A query is then whole: a process of it is in its
// cgroup in every hierarchy, and its later children are born there.
func (t *Tree) MoveToQuery(ps planner.PoolState, query string, pid int) error {
	cg, hiers, err := t.queryHiers(ps, query)
	if err != nil {
		return err
	}
	var ops []Op
	for _, h := range hiers {
		ops = append(ops, Op{Kind: OpWrite, Hier: h, Dir: t.roots[h], Path: cg, File: fileProcs, Value: strconv.Itoa(pid)})
	}
	if _, err := t.Apply(Changes{Ops: ops}); err != nil {
		var ae *ApplyError
		if errors.As(err, &ae) {
			err = ae.Err
		}
		return fmt.Errorf("place pid %d in query %s: %w", pid, cg, err)
	}
	if len(hiers) > 1 {
		if err := t.gather(cg, hiers); err != nil {
			return fmt.Errorf("place pid %d in query %s: %w", pid, cg, err)
		}
	}
	return nil
}

// maxGatherRounds bounds [Tree.gather]: a round after the first finds a
// straggler only if one was forked during the round before by a process
// being moved, so two rounds suffice unless the processes fork faster
// than the moves; past this many the query is reported split.
const maxGatherRounds = 64

// gather makes query cgroup cg hold the same processes in every hierarchy
// of hiers: a process found in it in one hierarchy and not in another is
// moved there, round after round until a round moves none. A process
// that exits meanwhile is no longer the query's to gather.
func (t *Tree) gather(cg string, hiers []string) error {
	for round := 0; round < maxGatherRounds; round++ {
		in := make(map[string]map[int]bool, len(hiers))
		all := map[int]bool{}
		for _, h := range hiers {
			f, err := t.fs(h)
			if err != nil {
				return err
			}
			pids, err := readProcs(f, cg)
			if err != nil {
				return fmt.Errorf("gather the query's processes: %w", err)
			}
			in[h] = map[int]bool{}
			for _, p := range pids {
				in[h][p], all[p] = true, true
			}
		}
		moved := 0
		for _, h := range hiers {
			f, err := t.fs(h)
			if err != nil {
				return err
			}
			for _, p := range slices.Sorted(maps.Keys(all)) {
				if in[h][p] {
					continue
				}
				err := f.WriteFile(path.Join(cg, fileProcs), strconv.Itoa(p))
				if errors.Is(err, syscall.ESRCH) {
					continue // exited
				}
				if err != nil {
					return fmt.Errorf("gather process %d into the %s hierarchy: %w", p, h, err)
				}
				moved++
			}
		}
		if moved == 0 {
			return nil
		}
	}
	return fmt.Errorf("the query's processes still differ between hierarchies %v after %d rounds of moving them: they fork faster than they can be moved", hiers, maxGatherRounds)
}

// queryHiers checks the names and the query template of ps and returns
// the query cgroup's path below the root and the hierarchies a query of
// the pool is placed in.
func (t *Tree) queryHiers(ps planner.PoolState, query string) (string, []string, error) {
	if err := checkName(ps.Name); err != nil {
		return "", nil, fmt.Errorf("%w: pool: %v", ErrInvalid, err)
	}
	if err := checkName(query); err != nil {
		return "", nil, fmt.Errorf("%w: query: %v", ErrInvalid, err)
	}
	if err := checkCgroup(ps.Query); err != nil {
		return "", nil, fmt.Errorf("%w: pool %q, query template: %v", ErrInvalid, ps.Name, err)
	}
	cg := path.Join(ps.Name, query)
	hiers, err := t.hiers(usesOf(fromDesired(ps.Query)))
	if err != nil {
		return "", nil, fmt.Errorf("query %s: %w", cg, err)
	}
	return cg, hiers, nil
}

// rmdirQuery removes the query cgroup of ps in every hierarchy it may be
// in; one that is gone is not an error, one a process entered is.
func (t *Tree) rmdirQuery(ps planner.PoolState, query string) error {
	cg, hiers, err := t.queryHiers(ps, query)
	if err != nil {
		return err
	}
	var errs []error
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

// QueryPlaces returns, for every hierarchy [Tree.PlaceQuery] would move a
// process in, the hierarchy's mount directory and the query cgroup
// <pool>/<query> as a path below it, slash-separated and starting with
// "/" as /proc/PID/cgroup shows cgroups ("/poolagent/olap/q1"): the
// cgroups a placed process leaves are the ones on its path that are not
// on this one. It writes nothing.
func (t *Tree) QueryPlaces(ps planner.PoolState, query string) (map[string]QueryPlace, error) {
	hiers, err := t.hiers(usesOf(fromDesired(ps.Query)))
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
