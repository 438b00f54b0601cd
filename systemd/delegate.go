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

// Names of the daemon's leaf and of the pool root inside the unit's cgroup.
const (
	AgentLeaf = "agent"
	PoolsDir  = "pools"
)

// Layout is poolagent's cgroup layout inside its unit's delegated cgroup:
//
//	<unit>/agent/   the daemon itself (a leaf: cgroup v2 allows processes
//	                only in leaves once controllers are enabled below)
//	<unit>/pools/   the pool root: <unit>/pools/<pool>/<query>
//	<unit>/.control systemd's own helpers (ExecReload=), left alone
//
// On cgroup v1 the same paths exist in the cpu hierarchy (and cpuacct when
// mounted apart).
type Layout struct {
	// Unit is the unit's cgroup directory in the hierarchy carrying cpu.
	Unit string
	// Agent is Unit/agent.
	Agent string
	// PoolRoot is Unit/pools, to be given to cgroupfs as the pool root.
	PoolRoot string
}

// ErrNotDelegated is wrapped when the process is in the root cgroup, so no
// unit cgroup was delegated to it.
var ErrNotDelegated = errors.New("not in a delegated cgroup")

// Delegate sets up [Layout] for process pid (the daemon itself, normally)
// in the cgroup systemd started it in: it creates agent/, moves pid there,
// and on cgroup v2 enables the cpu (and, when available, memory) controller
// in the unit's cgroup.subtree_control so the pools below get them. The
// unit's cgroup is the one pid is in (or the parent of agent/ when pid is
// already in it, so Delegate is idempotent). root is "/" in production and
// a fixture tree in tests; the writes go through cgroupfs's beneath-root
// writer opened on the unit's cgroup.
func Delegate(m cgroupfs.Mounts, root string, pid int) (Layout, error) {
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
	// The hierarchies to set up: the one carrying cpu and, on v1, cpuacct
	// when mounted apart (usage is read from there).
	type hier struct{ name, mount string }
	hiers := []hier{{"cpu", cpuDir}}
	if !v2 {
		if d, ok := m.V1["cpuacct"]; ok && d != cpuDir {
			hiers = append(hiers, hier{"cpuacct", d})
		}
	}
	var l Layout
	for i, h := range hiers {
		rel, ok := cg.v1[h.name]
		if v2 {
			rel, ok = cg.v2, cg.hasV2
		}
		if !ok {
			return Layout{}, fmt.Errorf("delegated layout: %s names no cgroup for %s", procFile, h.name)
		}
		unitRel := rel
		if path.Base(rel) == AgentLeaf {
			unitRel = path.Dir(rel)
		}
		if unitRel == "/" {
			return Layout{}, fmt.Errorf("%w: process %d is in the root %s cgroup; run it in a unit with Delegate=yes or give a pool root", ErrNotDelegated, pid, h.name)
		}
		unit := filepath.Join(h.mount, filepath.FromSlash(unitRel))
		if err := moveToLeaf(unit, pid, v2); err != nil {
			return Layout{}, err
		}
		if i == 0 {
			l = Layout{Unit: unit, Agent: filepath.Join(unit, AgentLeaf), PoolRoot: filepath.Join(unit, PoolsDir)}
		}
	}
	return l, nil
}

// moveToLeaf creates unit/agent, moves pid into it and, on v2, enables the
// controllers for the unit's children.
func moveToLeaf(unit string, pid int, v2 bool) error {
	d, err := cgroupfs.OpenDir(unit)
	if err != nil {
		return fmt.Errorf("delegated layout: %w", err)
	}
	defer d.Close()
	if err := d.Mkdir(AgentLeaf); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("delegated layout: %w", err)
	}
	if err := d.WriteFile(AgentLeaf+"/cgroup.procs", strconv.Itoa(pid)); err != nil {
		return fmt.Errorf("delegated layout: move the daemon into its leaf: %w", err)
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
		return fmt.Errorf("delegated layout: %s/cgroup.controllers is %q: the cpu controller was not delegated (Delegate=yes, or Delegate=cpu memory)",
			unit, strings.TrimSpace(string(avail)))
	}
	for _, c := range []string{"cpu", "memory"} {
		if !slices.Contains(have, c) {
			continue
		}
		if err := d.WriteFile("cgroup.subtree_control", "+"+c); err != nil {
			if errors.Is(err, unix.EBUSY) {
				procs, _ := d.ReadFile("cgroup.procs")
				return fmt.Errorf("delegated layout: %w (processes still in the unit's own cgroup: %s; only its leaves may hold processes)",
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
}

// parseProcCgroup parses /proc/PID/cgroup, one "ID:CONTROLLERS:PATH" line
// per hierarchy:
//
//	12:cpu,cpuacct:/system.slice/poolagent.service
//	1:name=systemd:/system.slice/poolagent.service
//	0::/system.slice/poolagent.service
//
// Paths are absolute within their hierarchy. Named hierarchies
// ("name=systemd") are skipped.
func parseProcCgroup(data []byte) (procCgroup, error) {
	out := procCgroup{v1: map[string]string{}}
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
			if c != "" && !strings.HasPrefix(c, "name=") {
				out.v1[c] = p
			}
		}
	}
	if err := sc.Err(); err != nil {
		return procCgroup{}, err
	}
	return out, nil
}
