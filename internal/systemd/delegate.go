package systemd

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/cgroupfs"
)

// Names of the keeper's leaf and of the pool root inside the pools scope.
const (
	KeepLeaf = "keep"
	PoolsDir = "pools"
)

// Layout is poolagent's cgroup layout on a systemd host. The daemon stays
// in its service's own cgroup, which holds nothing else; the work is in a
// scope beside it, in the same slice, with Delegate=yes:
//
//	<slice>/poolagent.service/            the daemon, alone
//	<slice>/poolagent-pools.scope/        created once, kept alive
//	<slice>/poolagent-pools.scope/keep/   the keeper (sleep infinity): a
//	                                      scope with no process ends
//	<slice>/poolagent-pools.scope/pools/  the pool root: pools/<pool>/<query>
//
// So a restart of the service never touches the cgroup the queries are
// in: systemd before 254 starts a service's main process in the unit's
// own cgroup, which cgroup v2 forbids once controllers are enabled below
// it (status=219/CGROUP), and a scope is never restarted. On cgroup v1 the
// same paths exist in the cpu hierarchy (and cpuacct when mounted apart).
type Layout struct {
	// Scope is the scope's name ("poolagent-pools.scope").
	Scope string
	// Dir is the scope's cgroup directory in the hierarchy carrying cpu.
	Dir string
	// Keeper is the pid of the process that keeps the scope alive.
	Keeper int
	// PoolRoot is Dir/pools, to be given to cgroupfs as the pool root.
	PoolRoot string
	// Created is true when this call created the scope, false when it
	// found it (a restart: the pools and queries below are adopted).
	Created bool
}

// ErrNotDelegated is wrapped when the process is not in a systemd unit's
// cgroup inside a slice, so there is no slice to put the pools scope in.
var ErrNotDelegated = errors.New("not in a systemd unit's cgroup")

// Keepers start the process that keeps the pools scope alive.
type Keepers interface {
	// StartScope starts a keeper in a new scope named name in slice, with
	// Delegate=yes, and returns its pid once the process is in the scope.
	StartScope(name, slice string) (int, error)
	// Start starts a keeper (for a scope that lost its own) and returns its
	// pid; Delegate moves it into the scope.
	Start() (int, error)
}

// ScopeName is the pools scope's name for the daemon's unit:
// "poolagent.service" -> "poolagent-pools.scope".
func ScopeName(unit string) string {
	return strings.TrimSuffix(unit, path.Ext(unit)) + "-pools.scope"
}

// Delegate sets up [Layout] for the daemon pid started by systemd: from
// the unit's cgroup in /proc/PID/cgroup it names the pools scope in the
// same slice, adopts the scope when its cgroup exists (starting a new
// keeper when the old one is gone) or has k start it, moves the keeper
// into keep/ and, on cgroup v2, enables the cpu (and, when delegated,
// memory) controller in the scope's cgroup.subtree_control so the pools
// below get them. root is "/" in production and a fixture tree in tests;
// the writes go through cgroupfs's beneath-root writer opened on the
// scope's cgroup.
func Delegate(m cgroupfs.Mounts, root string, pid int, k Keepers) (Layout, error) {
	cpuDir, v2, err := m.Controller("cpu")
	if err != nil {
		return Layout{}, fmt.Errorf("delegated layout: %w", err)
	}
	procFile := filepath.Join(root, "proc", strconv.Itoa(pid), "cgroup")
	data, err := os.ReadFile(procFile)
	if err != nil {
		return Layout{}, fmt.Errorf("delegated layout: %w", err)
	}
	cg, err := parseProcCgroup(data)
	if err != nil {
		return Layout{}, fmt.Errorf("delegated layout: %s: %w", procFile, err)
	}
	// systemd's own view of the unit: the unified line (on unified and
	// hybrid hosts), else the named systemd hierarchy (legacy hosts).
	unitRel, ok := cg.v2, cg.hasV2
	if !ok {
		unitRel, ok = cg.named["systemd"]
	}
	if !ok {
		return Layout{}, fmt.Errorf("delegated layout: %s names no systemd cgroup (no 0:: or name=systemd line)", procFile)
	}
	slice, unit := path.Base(path.Dir(unitRel)), path.Base(unitRel)
	if unitRel == "/" || !strings.HasSuffix(slice, ".slice") || !strings.HasSuffix(unit, ".service") {
		return Layout{}, fmt.Errorf("%w: process %d is in cgroup %s, not in a service below a slice; run it from its unit (poolagent.service) or give a pool root", ErrNotDelegated, pid, unitRel)
	}
	l := Layout{Scope: ScopeName(unit)}
	scopeRel := path.Join(path.Dir(unitRel), l.Scope)
	// The hierarchies to set up: the one carrying cpu and, on v1, cpuacct
	// when mounted apart (usage is read from there).
	dirs := []string{filepath.Join(cpuDir, filepath.FromSlash(scopeRel))}
	if !v2 {
		if d, ok := m.V1["cpuacct"]; ok && d != cpuDir {
			dirs = append(dirs, filepath.Join(d, filepath.FromSlash(scopeRel)))
		}
	}
	l.Dir, l.PoolRoot = dirs[0], filepath.Join(dirs[0], PoolsDir)
	// A scope found empty may be ending as it is looked at: a second try
	// finds it gone and creates it.
	for try := 0; ; try++ {
		err = l.keep(dirs, slice, v2, k)
		if err == nil || try == 1 || !errors.Is(err, unix.ENOENT) {
			break
		}
	}
	if err != nil {
		return Layout{}, err
	}
	return l, nil
}

// keep finds or creates the scope and puts its keeper into keep/.
func (l *Layout) keep(dirs []string, slice string, v2 bool, k Keepers) error {
	var err error
	l.Keeper, l.Created = 0, false
	if _, serr := os.Stat(dirs[0]); errors.Is(serr, os.ErrNotExist) {
		if l.Keeper, err = k.StartScope(l.Scope, slice); err != nil {
			return fmt.Errorf("delegated layout: start %s in %s: %w", l.Scope, slice, err)
		}
		l.Created = true
	} else if serr != nil {
		return fmt.Errorf("delegated layout: %w", serr)
	}
	for _, dir := range dirs {
		if err := moveToLeaf(dir, l, v2, k); err != nil {
			return err
		}
	}
	return nil
}

// moveToLeaf creates dir/keep, moves the keeper and any process left in
// the scope's own cgroup into it (a keeper that is gone is replaced) and,
// on v2, enables the controllers for the scope's children.
func moveToLeaf(dir string, l *Layout, v2 bool, k Keepers) error {
	d, err := cgroupfs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("delegated layout: %w", err)
	}
	defer d.Close()
	if err := d.Mkdir(KeepLeaf); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("delegated layout: %w", err)
	}
	if l.Keeper == 0 {
		kept, err := d.ReadFile(KeepLeaf + "/cgroup.procs")
		if err != nil {
			return fmt.Errorf("delegated layout: %w", err)
		}
		if f := strings.Fields(string(kept)); len(f) > 0 {
			l.Keeper, _ = strconv.Atoi(f[0])
		} else if l.Keeper, err = k.Start(); err != nil {
			return fmt.Errorf("delegated layout: a new keeper for %s: %w", l.Scope, err)
		}
	}
	procs, err := d.ReadFile("cgroup.procs")
	if err != nil {
		return fmt.Errorf("delegated layout: %w", err)
	}
	for _, p := range append(strings.Fields(string(procs)), strconv.Itoa(l.Keeper)) {
		if err := d.WriteFile(KeepLeaf+"/cgroup.procs", p); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("delegated layout: move the keeper into its leaf: %w", err)
		}
	}
	if !v2 {
		return nil
	}
	avail, err := d.ReadFile("cgroup.controllers")
	if err != nil {
		return fmt.Errorf("delegated layout: %w", err)
	}
	have := strings.Fields(string(avail))
	if !slices.Contains(have, "cpu") {
		return fmt.Errorf("delegated layout: %s/cgroup.controllers is %q: the cpu controller was not delegated to %s (Delegate=yes)",
			dir, strings.TrimSpace(string(avail)), l.Scope)
	}
	for _, c := range []string{"cpu", "memory"} {
		if !slices.Contains(have, c) {
			continue
		}
		if err := d.WriteFile("cgroup.subtree_control", "+"+c); err != nil {
			if errors.Is(err, unix.EBUSY) {
				procs, _ := d.ReadFile("cgroup.procs")
				return fmt.Errorf("delegated layout: %w (processes still in the scope's own cgroup: %s; only its leaves may hold processes)",
					err, strings.Join(strings.Fields(string(procs)), " "))
			}
			return fmt.Errorf("delegated layout: %w", err)
		}
	}
	return nil
}

// procCgroup is the content of /proc/PID/cgroup.
type procCgroup struct {
	v2    string // the cgroup2 path ("0::PATH")
	hasV2 bool
	v1    map[string]string // v1 controller -> path
	named map[string]string // named v1 hierarchy ("systemd") -> path
}

// parseProcCgroup parses /proc/PID/cgroup, one "ID:CONTROLLERS:PATH" line
// per hierarchy:
//
//	12:cpu,cpuacct:/system.slice/poolagent.service
//	1:name=systemd:/system.slice/poolagent.service
//	0::/system.slice/poolagent.service
//
// Paths are absolute within their hierarchy. Named hierarchies
// ("name=systemd") are kept apart from the controllers.
func parseProcCgroup(data []byte) (procCgroup, error) {
	out := procCgroup{v1: map[string]string{}, named: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		id, rest, ok1 := strings.Cut(line, ":")
		ctrls, p, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			return procCgroup{}, fmt.Errorf("line %d %q: want ID:CONTROLLERS:PATH", n, line)
		}
		if _, err := strconv.ParseUint(id, 10, 32); err != nil {
			return procCgroup{}, fmt.Errorf("line %d %q: hierarchy id %q is not a number", n, line, id)
		}
		if !strings.HasPrefix(p, "/") {
			return procCgroup{}, fmt.Errorf("line %d %q: path %q is not absolute", n, line, p)
		}
		p = path.Clean(p)
		if id == "0" && ctrls == "" {
			out.v2, out.hasV2 = p, true
			continue
		}
		for _, c := range strings.Split(ctrls, ",") {
			if name, ok := strings.CutPrefix(c, "name="); ok {
				out.named[name] = p
			} else if c != "" {
				out.v1[c] = p
			}
		}
	}
	if err := sc.Err(); err != nil {
		return procCgroup{}, err
	}
	return out, nil
}
