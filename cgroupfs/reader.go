package cgroupfs

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sync"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/internal/reread"
	"github.com/poolagent/poolagent/observe"
)

// Reader reads the counters and limits of the cgroups at and below one
// directory: a pool root, one pool, or a copy of a tree. It reads only,
// through an [FS] per hierarchy (a [Dir] beneath the directory, like every
// write), and hands the bytes to package observe's parsers. Its methods
// are safe for concurrent use. Groups are slash-separated paths relative
// to the directory, "." for the directory itself.
type Reader struct {
	v2 bool
	// dirs are the directories read, by hierarchy: on v2 the unified
	// one; on v1 the cpu hierarchy's and, where they exist, its twins
	// in cpuacct (usage) and memory.
	dirs map[string]string
	open func(dir string) (FS, error)

	mu  sync.Mutex
	fss map[string]FS // opened, by hierarchy
	// kept reads the files of an opened [Dir] that are read again and
	// again (the counters) without opening them each time, by hierarchy.
	kept map[string]*reread.Files
}

// NewReader returns the reader of dir, a directory of the cgroup v2
// hierarchy (v2) or of v1's cpu hierarchy. On v1, acctDir and memDir are
// dir's twins in the cpuacct and memory hierarchies ("": none; usage, or
// memory, is then unknown). open opens a directory; nil opens a [Dir]
// (any file system: the reader never writes, and so also reads a copy of
// a tree). Nothing is opened before the first read, so the directory may
// be made after the reader.
func NewReader(v2 bool, dir, acctDir, memDir string, open func(dir string) (FS, error)) *Reader {
	if open == nil {
		open = func(dir string) (FS, error) { return OpenDir(dir) }
	}
	r := &Reader{v2: v2, dirs: map[string]string{}, open: open, fss: map[string]FS{}, kept: map[string]*reread.Files{}}
	if v2 {
		r.dirs[HierUnified] = dir
		return r
	}
	r.dirs[HierCPU] = dir
	for h, d := range map[string]string{HierCPUAcct: acctDir, HierMemory: memDir} {
		if d != "" {
			r.dirs[h] = d
		}
	}
	return r
}

// ReaderAt detects which cgroup interface dir speaks from its files
// (cgroup.controllers exists only on v2, cpu.cfs_period_us only in v1's
// cpu hierarchy) and returns its reader (see [NewReader]).
func ReaderAt(dir, acctDir, memDir string) (*Reader, error) {
	d, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	for _, x := range []struct {
		file string
		v2   bool
	}{{fileControllers, true}, {fileCFSPeriod, false}} {
		_, err := d.ReadFile(x.file)
		if err == nil {
			return NewReader(x.v2, dir, acctDir, memDir, nil), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%s is neither a cgroup v2 directory (%s) nor one of v1's cpu hierarchy (%s)", dir, fileControllers, fileCFSPeriod)
}

// V2 reports whether the reader reads cgroup v2.
func (r *Reader) V2() bool { return r.v2 }

// Root is the directory read (v1: in the cpu hierarchy).
func (r *Reader) Root() string { return r.dirs[r.cpuHier()] }

// Dir is the directory read in hierarchy h ("" when none): on v1,
// HierCPUAcct's is where usage is read, HierMemory's where memory is.
func (r *Reader) Dir(h string) string { return r.dirs[h] }

// Version is "v2" or "v1".
func (r *Reader) Version() string {
	if r.v2 {
		return "v2"
	}
	return "v1"
}

func (r *Reader) cpuHier() string {
	if r.v2 {
		return HierUnified
	}
	return HierCPU
}

// memHier is the hierarchy memory is read from; "" on v1 without a
// memory twin.
func (r *Reader) memHier() string {
	if r.v2 {
		return HierUnified
	}
	if r.dirs[HierMemory] == "" {
		return ""
	}
	return HierMemory
}

// fs returns hierarchy h's directory, opened at its first use. A
// directory that is not there (yet) is not remembered, so the next read
// tries again.
func (r *Reader) fs(h string) (FS, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.fss[h]; ok {
		return f, nil
	}
	f, err := r.open(r.dirs[h])
	if err != nil {
		return nil, err
	}
	r.fss[h] = f
	if d, ok := f.(*Dir); ok {
		r.kept[h] = reread.New(d.path, d.open, reread.DefaultMax())
	}
	return f, nil
}

// readFile reads name in hierarchy h: through the kept files where the
// hierarchy is a [Dir], else with the FS's ReadFile.
func (r *Reader) readFile(h, name string) ([]byte, error) {
	f, err := r.fs(h)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	k := r.kept[h]
	r.mu.Unlock()
	if k != nil {
		return k.Read(name)
	}
	return f.ReadFile(name)
}

// Close releases the opened directories.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for h, f := range r.fss {
		if k := r.kept[h]; k != nil {
			errs = append(errs, k.Close())
			delete(r.kept, h)
		}
		if c, ok := f.(interface{ Close() error }); ok {
			errs = append(errs, c.Close())
		}
		delete(r.fss, h)
	}
	return errors.Join(errs...)
}

// read reads group's file in hierarchy h and hands it to parse. A read
// error is the [FS]'s (a *fs.PathError with the full path, wrapping
// fs.ErrNotExist for a missing file or a cgroup removed meanwhile); a
// parse error is prefixed with the file's path.
func read[T any](r *Reader, h, group, file string, parse func([]byte) (T, error)) (T, error) {
	var zero T
	name := path.Join(group, file)
	b, err := r.readFile(h, name)
	if err != nil {
		return zero, err
	}
	v, err := parse(b)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", path.Join(r.dirs[h], name), err)
	}
	return v, nil
}

// Groups returns the cgroups at and below the directory, "." first,
// parents before their children, siblings in lexical order. A cgroup
// removed while the tree is walked (a query that ended) is left out.
func (r *Reader) Groups() ([]string, error) {
	f, err := r.fs(r.cpuHier())
	if err != nil {
		return nil, fmt.Errorf("list cgroups below %s: %w", r.Root(), err)
	}
	groups := []string{}
	var walk func(dir string) error
	walk = func(dir string) error {
		subs, err := f.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) && dir != "." {
			return nil
		}
		if err != nil {
			return err
		}
		groups = append(groups, dir)
		slices.Sort(subs)
		for _, s := range subs {
			if err := walk(path.Join(dir, s)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk("."); err != nil {
		return nil, fmt.Errorf("list cgroups below %s: %w", r.Root(), err)
	}
	return groups, nil
}

// Read reads one group's counters, each controller its own: CPU
// accounting and throttling ([Reader.ReadCPU]), the throttled time of the
// group's own tasks, CPU pressure, memory and tasks where their
// controllers are there ([Reader.Memory], [Reader.Pids]).
func (r *Reader) Read(group string) (observe.Sample, error) {
	s := observe.Sample{Group: group}
	for _, c := range controllers {
		if c.stat == nil {
			continue
		}
		if err := c.stat(r, group, &s); err != nil {
			return observe.Sample{}, err
		}
	}
	return s, nil
}

// ReadCPU reads one group's CPU accounting and throttling alone, the
// sample's CPU and UsageKnown: cpu.stat, and on v1 cpuacct.usage (v1's
// cpu.stat has no usage; its split into user and system time, in
// cpuacct.stat, is not read: UserUsec and SystemUsec stay 0). It is
// [Reader.Read] for a consumer of those counters only, such as the
// history and the throttling prediction, every interval: one file on v2,
// where Read reads eleven with the memory controller there, and two on
// v1. The sample's other fields are left empty.
func (r *Reader) ReadCPU(group string) (observe.Sample, error) {
	s := observe.Sample{Group: group}
	if err := r.readCPU(group, &s, false); err != nil {
		return observe.Sample{}, err
	}
	return s, nil
}

// readCPU reads group's CPU accounting and throttling into s
// ([Reader.ReadCPU]), on v1 with the split into user and system time
// when split is set.
func (r *Reader) readCPU(group string, s *observe.Sample, split bool) error {
	s.UsageKnown = r.v2
	var err error
	if s.CPU, err = r.CPUStat(group); err != nil || r.v2 {
		return err
	}
	return r.usageV1(group, s, split)
}

// ReadAll reads every group of Groups, in that order. A group removed
// between listing and reading (a query that ended) is left out.
func (r *Reader) ReadAll() ([]observe.Sample, error) {
	groups, err := r.Groups()
	if err != nil {
		return nil, err
	}
	samples := make([]observe.Sample, 0, len(groups))
	for _, g := range groups {
		s, err := r.Read(g)
		if errors.Is(err, fs.ErrNotExist) && g != "." {
			continue
		}
		if err != nil {
			return nil, err
		}
		samples = append(samples, s)
	}
	return samples, nil
}

// CPULimit reads group's CPU bandwidth limit ([readCPULimit]).
func (r *Reader) CPULimit(group string) (cpulimit.Limit, error) {
	f, err := r.fs(r.cpuHier())
	if err != nil {
		return cpulimit.Limit{}, err
	}
	return readCPULimit(f, group, r.v2, r.Root())
}

// Threads lists the threads in group and every cgroup below it, at most
// limit of them: v2's cgroup.threads, v1's tasks, one thread ID per line.
// truncated reports that more were there. A cgroup removed while it is
// read (a query that ended) is left out.
func (r *Reader) Threads(group string, limit int) (tids []int, truncated bool, err error) {
	return r.list(group, nil, threadList(r.v2), "threads", limit)
}

// ThreadsExcept is [Reader.Threads] of group less the cgroups directly
// below it that except names (by their base name) and all below those:
// the threads of a pool outside the query cgroups whose threads its
// caller reads on their own, or knows did not run.
func (r *Reader) ThreadsExcept(group string, except map[string]bool, limit int) (tids []int, truncated bool, err error) {
	return r.list(group, except, threadList(r.v2), "threads", limit)
}

// Procs lists the processes in group and every cgroup below it, at most
// limit of them: cgroup.procs, one process ID per line, v1 and v2 alike.
// truncated reports that more were there. A cgroup removed while it is
// read is left out.
func (r *Reader) Procs(group string, limit int) (pids []int, truncated bool, err error) {
	return r.list(group, nil, fileProcs, "processes", limit)
}

// list reads the IDs in file of group and of every cgroup below it but
// those directly below group that except names, at most limit of them,
// in the cpu controller's hierarchy; what names them in its error.
func (r *Reader) list(group string, except map[string]bool, file, what string, limit int) (ids []int, truncated bool, err error) {
	// The lists are opened afresh each time, never kept (reread): cgroup
	// v1 answers a reader of tasks or cgroup.procs from the list it made
	// for that open file, kept for a second after its last read.
	f, err := r.fs(r.cpuHier())
	if err != nil {
		return nil, false, err
	}
	var walk func(dir string) error
	walk = func(dir string) error {
		b, err := f.ReadFile(path.Join(dir, file))
		if errors.Is(err, fs.ErrNotExist) && dir != group {
			return nil
		}
		if err != nil {
			return err
		}
		found, err := parseProcs(b)
		if err != nil {
			return fmt.Errorf("%s: %w", path.Join(r.Root(), dir, file), err)
		}
		for _, id := range found {
			if len(ids) == limit {
				truncated = true
				return nil
			}
			ids = append(ids, id)
		}
		subs, err := f.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) && dir != group {
			return nil
		}
		if err != nil {
			return err
		}
		slices.Sort(subs)
		for _, s := range subs {
			if dir == group && except[s] {
				continue
			}
			if err := walk(path.Join(dir, s)); err != nil || truncated {
				return err
			}
		}
		return nil
	}
	if err := walk(group); err != nil {
		return nil, false, fmt.Errorf("list %s below %s: %w", what, path.Join(r.Root(), group), err)
	}
	return ids, truncated, nil
}
