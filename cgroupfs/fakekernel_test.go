package cgroupfs

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/cpulimit"
)

// world is an emulated cgroup filesystem for logic tests: plain
// directories under a temporary directory, where a new directory gets the
// kernel's interface files and writes follow the kernel's rules for the
// files poolagent writes (value ranges, burst <= quota, v1's child <=
// parent, v2's no internal processes, process moves).
type world struct {
	t      testing.TB
	v2     bool
	mounts Mounts
}

func newWorld(t testing.TB, v2 bool) *world {
	t.Helper()
	tmp := t.TempDir()
	w := &world{t: t, v2: v2}
	if v2 {
		u := filepath.Join(tmp, "unified")
		w.mounts = Mounts{Mode: Unified, Unified: u, UnifiedControllers: []string{"cpu", "memory"}, V1: map[string]string{}}
		w.must(os.Mkdir(u, 0o755))
		w.mkcg(u)
		w.must(os.WriteFile(filepath.Join(u, fileControllers), []byte("cpu memory\n"), 0o644))
		w.must(os.WriteFile(filepath.Join(u, fileSubtreeControl), []byte("cpu memory\n"), 0o644))
		return w
	}
	w.mounts = Mounts{Mode: Hybrid, V1: map[string]string{}}
	for _, h := range []string{HierCPU, HierCPUAcct, HierMemory} {
		d := filepath.Join(tmp, h)
		w.mounts.V1[h] = d
		w.must(os.Mkdir(d, 0o755))
		w.mkcg(d)
	}
	return w
}

// fakeOnline is the world's online CPUs, which cpuset.cpus must be within.
const fakeOnline = "0-3"

// addCPUSet gives the world the cpuset controller with CPUs 0-3 and memory
// node 0: a v1 cpuset hierarchy, or cpuset in the v2 mount's controllers
// (enabled in its subtree_control, as a host's init does). Call it before
// opening a tree.
func (w *world) addCPUSet() {
	if w.v2 {
		u := w.mounts.Unified
		w.mounts.UnifiedControllers = append(w.mounts.UnifiedControllers, "cpuset")
		for _, f := range []string{fileControllers, fileSubtreeControl} {
			w.must(os.WriteFile(filepath.Join(u, f), []byte("cpu memory cpuset\n"), 0o644))
		}
		w.must(os.WriteFile(filepath.Join(u, fileCPUSetEff), []byte(fakeOnline+"\n"), 0o644))
		return
	}
	d := filepath.Join(filepath.Dir(w.mounts.V1[HierCPU]), HierCPUSet)
	w.mounts.V1[HierCPUSet] = d
	w.must(os.Mkdir(d, 0o755))
	w.mkcg(d)
	w.must(os.WriteFile(filepath.Join(d, fileCPUSetCPUs), []byte(fakeOnline+"\n"), 0o644))
	w.must(os.WriteFile(filepath.Join(d, fileCPUSetMems), []byte("0\n"), 0o644))
}

// addPids gives the world the pids controller: a v1 pids hierarchy, or
// pids in the v2 mount's controllers (enabled in its subtree_control).
// Call it before opening a tree.
func (w *world) addPids() {
	if w.v2 {
		u := w.mounts.Unified
		w.mounts.UnifiedControllers = append(w.mounts.UnifiedControllers, "pids")
		for _, f := range []string{fileControllers, fileSubtreeControl} {
			w.must(os.WriteFile(filepath.Join(u, f), []byte(strings.Join(w.mounts.UnifiedControllers, " ")+"\n"), 0o644))
		}
		return
	}
	d := filepath.Join(filepath.Dir(w.mounts.V1[HierCPU]), HierPids)
	w.mounts.V1[HierPids] = d
	w.must(os.Mkdir(d, 0o755))
	w.mkcg(d)
}

func (w *world) must(err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

// hierOf names the hierarchy dir is in and returns its mount directory.
func (w *world) hierOf(dir string) (string, string) {
	if w.v2 {
		return HierUnified, w.mounts.Unified
	}
	for h, m := range w.mounts.V1 {
		if dir == m || strings.HasPrefix(dir, m+"/") {
			return h, m
		}
	}
	panic("not in a hierarchy: " + dir)
}

// mkcg fills a new cgroup directory with the kernel's files and defaults.
func (w *world) mkcg(dir string) {
	files := map[string]string{fileProcs: ""}
	switch h, mount := w.hierOf(dir); h {
	case HierUnified:
		var ctrls []string
		if dir != mount {
			ctrls = strings.Fields(w.read(filepath.Join(filepath.Dir(dir), fileSubtreeControl)))
		}
		files[fileControllers] = strings.Join(ctrls, " ")
		files[fileSubtreeControl] = ""
		for _, c := range ctrls {
			maps := controllerFiles(c)
			for k, v := range maps {
				files[k] = v
			}
		}
	case HierCPU:
		files[fileCFSQuota], files[fileCFSPeriod], files[fileCFSBurst], files[fileShares] = "-1", "100000", "0", "1024"
	case HierCPUAcct:
		files["cpuacct.usage"] = "0"
	case HierMemory:
		files[fileMemLimit], files[fileMemSoftLimit] = "9223372036854771712", "9223372036854771712"
	case HierCPUSet:
		files[fileCPUSetCPUs], files[fileCPUSetMems] = "", ""
	case HierPids:
		files = pidsFiles(files)
	}
	for k, v := range files {
		w.must(os.WriteFile(filepath.Join(dir, k), []byte(v+"\n"), 0o644))
	}
}

// pidsFiles adds the pids controller's files, as a new cgroup has them,
// to files.
func pidsFiles(files map[string]string) map[string]string {
	files[filePidsMax], files[filePidsCurrent], files[filePidsEvents] = "max", "0", "max 0"
	return files
}

// controllerFiles are the v2 files a controller adds to a cgroup.
func controllerFiles(c string) map[string]string {
	switch c {
	case "cpu":
		return map[string]string{fileCPUMax: "max 100000", fileCPUMaxBurst: "0", fileCPUWeight: "100"}
	case "memory":
		return map[string]string{fileMemoryMax: "max", fileMemoryHigh: "max", fileMemoryMin: "0", fileMemoryLow: "0"}
	case "cpuset":
		return map[string]string{fileCPUSetCPUs: "", fileCPUSetMems: ""}
	case "pids":
		return pidsFiles(map[string]string{})
	}
	return nil
}

func (w *world) read(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		w.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// spawn puts a pretend process pid into cgroup dir.
func (w *world) spawn(dir string, pid int) {
	w.t.Helper()
	p := filepath.Join(dir, fileProcs)
	w.must(os.WriteFile(p, []byte(strings.TrimSpace(w.read(p)+"\n"+strconv.Itoa(pid))+"\n"), 0o644))
}

// open is the Options.OpenFS of the world.
func (w *world) open(dir string) (FS, error) {
	d, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	return &fakeFS{w: w, d: d}, nil
}

// tree opens a pool tree named root in the world's cpu hierarchy.
func (w *world) tree(root string, wrap func(FS) FS) *Tree {
	w.t.Helper()
	dir, _, err := w.mounts.Controller("cpu")
	w.must(err)
	open := w.open
	if wrap != nil {
		open = func(d string) (FS, error) {
			f, err := w.open(d)
			if err != nil {
				return nil, err
			}
			return wrap(f), nil
		}
	}
	t, err := Open(w.mounts, filepath.Join(dir, root), Options{OpenFS: open})
	w.must(err)
	w.t.Cleanup(func() { t.Close() })
	return t
}

// fakeFS wraps a real Dir (so names still resolve beneath the root) and
// applies the kernel's rules on top.
type fakeFS struct {
	w *world
	d *Dir
}

func (f *fakeFS) Close() error                          { return f.d.Close() }
func (f *fakeFS) ReadFile(name string) ([]byte, error)  { return f.d.ReadFile(name) }
func (f *fakeFS) ReadDir(name string) ([]string, error) { return f.d.ReadDir(name) }

func (f *fakeFS) Mkdir(name string) error {
	if err := f.d.Mkdir(name); err != nil {
		return err
	}
	f.w.mkcg(f.d.full(name))
	return nil
}

func (f *fakeFS) Marked(name string) (bool, error) { return f.d.Marked(name) }

func (f *fakeFS) Rmdir(name string) error {
	abs := f.d.full(name)
	ents, err := os.ReadDir(abs)
	if err != nil {
		return &os.PathError{Op: "rmdir", Path: abs, Err: unix.ENOENT}
	}
	for _, e := range ents {
		if e.IsDir() {
			return &os.PathError{Op: "rmdir", Path: abs, Err: unix.EBUSY}
		}
	}
	if procs := strings.Fields(f.w.read(filepath.Join(abs, fileProcs))); len(procs) > 0 {
		return &os.PathError{Op: "rmdir", Path: abs, Err: unix.EBUSY}
	}
	for _, e := range ents {
		os.Remove(filepath.Join(abs, e.Name()))
	}
	return f.d.Rmdir(name)
}

func (f *fakeFS) WriteFile(name, value string) error {
	// Resolve beneath the root first, exactly as the real write would.
	if _, err := f.d.ReadFile(name); err != nil {
		return fmt.Errorf("write %q to %s: %w", value, f.d.full(name), errors.Unwrap(err))
	}
	abs := f.d.full(name)
	stored, err := f.w.kernelWrite(filepath.Dir(abs), filepath.Base(abs), strings.TrimSpace(value))
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", value, abs, err)
	}
	if stored == nil {
		return nil
	}
	return f.d.WriteFile(name, *stored+"\n")
}

// kernelWrite applies the kernel's rule for one write and returns what the
// file then reads (nil when the write updated other files itself).
func (w *world) kernelWrite(cg, file, v string) (*string, error) {
	cur := func(f string) string { return w.read(filepath.Join(cg, f)) }
	switch file {
	case fileProcs:
		return nil, w.move(cg, v)
	case fileSubtreeControl:
		return nil, w.subtree(cg, v)
	case fileCPUMax:
		// A write without a period keeps the current one.
		if f := strings.Fields(v); len(f) == 1 {
			v = f[0] + " " + strings.Fields(cur(fileCPUMax))[1]
		}
		m, err := cpulimit.ParseCPUMax(v)
		q, p := m.QuotaUsec, m.PeriodUsec
		if err != nil || (q >= 0 && q < cpulimit.MinQuotaUsec) || p < cpulimit.MinPeriodUsec || p > cpulimit.MaxPeriodUsec {
			return nil, unix.EINVAL
		}
		burst, _ := strconv.ParseInt(cur(fileCPUMaxBurst), 10, 64)
		if q >= 0 && burst > q {
			return nil, unix.EINVAL
		}
		s := m.CPUMax()
		return &s, nil
	case fileCPUMaxBurst, fileCFSBurst:
		b, err := strconv.ParseInt(v, 10, 64)
		if err != nil || b < 0 {
			return nil, unix.EINVAL
		}
		q := w.quota(cg)
		if q >= 0 && b > q {
			return nil, unix.EINVAL
		}
		return &v, nil
	case fileCFSQuota, fileCFSPeriod:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, unix.EINVAL
		}
		q, _ := strconv.ParseInt(cur(fileCFSQuota), 10, 64)
		p, _ := strconv.ParseInt(cur(fileCFSPeriod), 10, 64)
		if file == fileCFSQuota {
			if n < 0 {
				n = -1
			}
			if n >= 0 && n < cpulimit.MinQuotaUsec {
				return nil, unix.EINVAL
			}
			q = n
		} else {
			if n < cpulimit.MinPeriodUsec || n > cpulimit.MaxPeriodUsec {
				return nil, unix.EINVAL
			}
			p = n
		}
		burst, _ := strconv.ParseInt(cur(fileCFSBurst), 10, 64)
		if q >= 0 && burst > q {
			return nil, unix.EINVAL
		}
		if err := w.v1Schedulable(cg, q, p); err != nil {
			return nil, err
		}
		s := strconv.FormatInt(n, 10)
		return &s, nil
	case fileCPUWeight:
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n < cpulimit.MinWeight || n > cpulimit.MaxWeight {
			return nil, unix.ERANGE
		}
		return &v, nil
	case fileShares:
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, unix.EINVAL
		}
		s := strconv.FormatUint(min(max(n, cpulimit.MinShares), cpulimit.MaxShares), 10)
		return &s, nil
	case fileCPUSetCPUs, fileCPUSetMems:
		return w.cpusetWrite(cg, file, v)
	case filePidsMax:
		n, err := strconv.ParseInt(v, 10, 64)
		if v != "max" && (err != nil || n < 0 || n > 4<<20) {
			return nil, unix.EINVAL
		}
		return &v, nil
	case fileMemoryMax, fileMemLimit, fileMemoryHigh, fileMemSoftLimit, fileMemoryMin, fileMemoryLow:
		if v == "max" || v == "-1" {
			s := "max"
			if file == fileMemLimit || file == fileMemSoftLimit {
				s = "9223372036854771712"
			}
			return &s, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, unix.EINVAL
		}
		s := strconv.FormatInt(pageDown(n, int64(os.Getpagesize())), 10)
		return &s, nil
	}
	return nil, unix.EACCES
}

func (w *world) quota(cg string) int64 {
	if w.v2 {
		m, _ := cpulimit.ParseCPUMax(w.read(filepath.Join(cg, fileCPUMax)))
		return m.QuotaUsec
	}
	q, _ := strconv.ParseInt(w.read(filepath.Join(cg, fileCFSQuota)), 10, 64)
	return q
}

// v1Schedulable is tg_cfs_schedulable_down for cgroup v1: walking from the
// mount root, a limited cgroup's ratio may not exceed its nearest limited
// ancestor's. cg is checked with quota q and period p.
func (w *world) v1Schedulable(cg string, q, p int64) error {
	_, mount := w.hierOf(cg)
	var walk func(dir string, parent uint64) error
	walk = func(dir string, parent uint64) error {
		dq, dp := q, p
		if dir != cg {
			dq, _ = strconv.ParseInt(w.read(filepath.Join(dir, fileCFSQuota)), 10, 64)
			dp, _ = strconv.ParseInt(w.read(filepath.Join(dir, fileCFSPeriod)), 10, 64)
		}
		r := cpulimit.Limit{QuotaUsec: dq, PeriodUsec: dp}.Ratio()
		switch {
		case dir == mount || r == math.MaxUint64:
			r = parent
		case parent != math.MaxUint64 && r > parent:
			return unix.EINVAL
		}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if e.IsDir() {
				if err := walk(filepath.Join(dir, e.Name()), r); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(mount, math.MaxUint64)
}

// cpusetWrite is update_cpumask / update_nodemask: a list within the
// online CPUs (memory node 0), never empty while the cgroup or one below
// it has processes (validate_change, v1 and v2 alike in Linux 6.1); on v1
// (validate_change_legacy) also within the parent's and holding every
// child's.
func (w *world) cpusetWrite(cg, file, v string) (*string, error) {
	set, err := cpulimit.ParseCPUSet(v)
	online := fakeOnline
	if file == fileCPUSetMems {
		online = "0"
	}
	all, _ := cpulimit.ParseCPUSet(online)
	if err != nil || !set.SubsetOf(all) {
		return nil, unix.EINVAL
	}
	if set.IsEmpty() && w.populated(cg) {
		return nil, unix.ENOSPC
	}
	if h, mount := w.hierOf(cg); h == HierCPUSet && cg != mount {
		of := func(dir string) cpulimit.CPUSet {
			s, _ := cpulimit.ParseCPUSet(w.read(filepath.Join(dir, file)))
			return s
		}
		if !set.SubsetOf(of(filepath.Dir(cg))) {
			return nil, unix.EACCES
		}
		ents, _ := os.ReadDir(cg)
		for _, e := range ents {
			if e.IsDir() && !of(filepath.Join(cg, e.Name())).SubsetOf(set) {
				return nil, unix.EBUSY
			}
		}
	}
	s := set.String()
	return &s, nil
}

// populated reports whether cg or a cgroup below it holds a process.
func (w *world) populated(cg string) bool {
	busy := false
	filepath.WalkDir(cg, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == fileProcs && w.read(p) != "" {
			busy = true
		}
		return nil
	})
	return busy
}

// move moves process pid (as text) into cg from wherever it is in cg's
// hierarchy.
func (w *world) move(cg, v string) error {
	pid, err := strconv.Atoi(v)
	if err != nil {
		return unix.EINVAL
	}
	h, mount := w.hierOf(cg)
	if h == HierUnified && cg != mount && w.read(filepath.Join(cg, fileSubtreeControl)) != "" {
		return unix.EBUSY // no internal processes
	}
	// cpuset_can_attach: v1 takes no process into a cpuset without CPUs
	// or memory nodes.
	if h == HierCPUSet && (w.read(filepath.Join(cg, fileCPUSetCPUs)) == "" || w.read(filepath.Join(cg, fileCPUSetMems)) == "") {
		return unix.ENOSPC
	}
	var from string
	filepath.WalkDir(mount, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == fileProcs && slices.Contains(strings.Fields(w.read(p)), v) {
			from = p
		}
		return nil
	})
	if from == "" {
		return unix.ESRCH
	}
	rest := slices.DeleteFunc(strings.Fields(w.read(from)), func(s string) bool { return s == v })
	w.must(os.WriteFile(from, []byte(strings.Join(rest, "\n")+"\n"), 0o644))
	w.spawn(cg, pid)
	return nil
}

// subtree applies "+ctrl -ctrl" to cg's cgroup.subtree_control and gives
// the children the files of the newly enabled controllers.
func (w *world) subtree(cg, v string) error {
	_, mount := w.hierOf(cg)
	have := strings.Fields(w.read(filepath.Join(cg, fileSubtreeControl)))
	avail := strings.Fields(w.read(filepath.Join(cg, fileControllers)))
	if cg == mount {
		avail = w.mounts.UnifiedControllers
	}
	if cg != mount && w.read(filepath.Join(cg, fileProcs)) != "" {
		return unix.EBUSY
	}
	for _, op := range strings.Fields(v) {
		c := op[1:]
		if !slices.Contains(avail, c) {
			return unix.ENOENT
		}
		switch op[0] {
		case '+':
			if !slices.Contains(have, c) {
				have = append(have, c)
			}
		case '-':
			have = slices.DeleteFunc(have, func(s string) bool { return s == c })
		default:
			return unix.EINVAL
		}
	}
	w.must(os.WriteFile(filepath.Join(cg, fileSubtreeControl), []byte(strings.Join(have, " ")+"\n"), 0o644))
	ents, _ := os.ReadDir(cg)
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		child := filepath.Join(cg, e.Name())
		w.must(os.WriteFile(filepath.Join(child, fileControllers), []byte(strings.Join(have, " ")+"\n"), 0o644))
		for _, c := range have {
			for k, v := range controllerFiles(c) {
				if _, err := os.Stat(filepath.Join(child, k)); err != nil {
					w.must(os.WriteFile(filepath.Join(child, k), []byte(v+"\n"), 0o644))
				}
			}
		}
	}
	return nil
}

// snapshot is every cgroup below the world's hierarchies' pool roots with
// its files, for comparing two trees.
func (w *world) snapshot(root string) string {
	var b strings.Builder
	mounts := []string{w.mounts.Unified}
	if !w.v2 {
		mounts = []string{w.mounts.V1[HierCPU], w.mounts.V1[HierCPUAcct], w.mounts.V1[HierMemory]}
		if d, ok := w.mounts.V1[HierCPUSet]; ok {
			mounts = append(mounts, d)
		}
	}
	for _, m := range mounts {
		filepath.WalkDir(filepath.Join(m, root), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			rel, _ := filepath.Rel(filepath.Dir(m), p)
			fmt.Fprintf(&b, "%s = %q\n", rel, w.read(p))
			return nil
		})
	}
	return b.String()
}

// faultFS fails the Nth write (mkdir, rmdir or file write) counted across
// every FS sharing the counter.
type faultFS struct {
	FS
	c *faultCounter
}

type faultCounter struct{ n, failAt int }

func (c *faultCounter) hit(what string) error {
	c.n++
	if c.n == c.failAt {
		return fmt.Errorf("injected fault at write %d (%s): %w", c.n, what, unix.EIO)
	}
	return nil
}

func (f faultFS) WriteFile(name, value string) error {
	if err := f.c.hit(name); err != nil {
		return err
	}
	return f.FS.WriteFile(name, value)
}

func (f faultFS) Mkdir(name string) error {
	if err := f.c.hit("mkdir " + name); err != nil {
		return err
	}
	return f.FS.Mkdir(name)
}

func (f faultFS) Rmdir(name string) error {
	if err := f.c.hit("rmdir " + name); err != nil {
		return err
	}
	return f.FS.Rmdir(name)
}

func (f faultFS) Close() error {
	if c, ok := f.FS.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
