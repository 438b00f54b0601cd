// Package cgroupfs is the only code in poolagent that opens the cgroup
// filesystem's files, to write or to read. It finds where the cpu,
// cpuacct, memory, cpuset and pids controllers are mounted, reads the pool tree
// below a pool root, and reconciles it with the planner's desired state
// through one door that opens every file beneath the pool root (openat2
// RESOLVE_BENEATH), so no pool name can address a path outside it. Its
// [Reader] reads counters and limits through the same door and hands the
// bytes to package observe's parsers. One file per controller (cpu.go,
// memory.go, cpuset.go, pids.go) holds the whole of that controller: its
// files, how its values are read back, the ops that change them and its
// counters, as one entry of the table in controller.go, which reading
// (current.go), deciding (diff.go) and sampling (reader.go) iterate. A
// new controller is one new file and its entry there.
package cgroupfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Mode is the host's cgroup layout.
type Mode int

const (
	// Unavailable: no cgroup filesystem is mounted.
	Unavailable Mode = iota
	// Legacy: only cgroup v1 hierarchies are mounted.
	Legacy
	// Hybrid: v1 hierarchies carry the controllers, and a cgroup2 mount
	// (usually /sys/fs/cgroup/unified) exists beside them.
	Hybrid
	// Unified: only cgroup v2 is mounted (usually at /sys/fs/cgroup).
	Unified
)

// String returns "unavailable", "legacy", "hybrid" or "unified".
func (m Mode) String() string {
	switch m {
	case Legacy:
		return "legacy"
	case Hybrid:
		return "hybrid"
	case Unified:
		return "unified"
	default:
		return "unavailable"
	}
}

// ErrNoController is returned when a controller poolagent needs is neither
// mounted as a v1 hierarchy nor available in the cgroup2 mount.
var ErrNoController = errors.New("controller not available")

// Mounts says where the cgroup controllers are. Paths are joined to the root
// given to [Detect], so with root "/" they are the host's own paths.
type Mounts struct {
	Mode Mode
	// Unified is the cgroup2 mount point; "" when none is mounted.
	Unified string
	// UnifiedControllers lists the controllers in the cgroup2 mount's
	// cgroup.controllers ("cpu io memory pids"), in file order.
	UnifiedControllers []string
	// V1 maps each v1 controller ("cpu", "cpuacct", "memory", ...) to the
	// mount point of the hierarchy it is attached to. Co-mounted
	// controllers ("cpu,cpuacct") map to the same directory.
	V1 map[string]string
}

// Controller reports where controller name is: the directory of its
// hierarchy's root and whether that hierarchy is cgroup v2. A v1 hierarchy
// wins over the unified one, because on a hybrid host a controller bound to
// v1 is absent from v2. It wraps ErrNoController when name is in neither.
func (m Mounts) Controller(name string) (dir string, v2 bool, err error) {
	if d, ok := m.V1[name]; ok {
		return d, false, nil
	}
	if m.Unified != "" && slices.Contains(m.UnifiedControllers, name) {
		return m.Unified, true, nil
	}
	return "", false, fmt.Errorf("%s (mode %s): %w", name, m.Mode, ErrNoController)
}

// Twin returns dir's counterpart in the hierarchy carrying controller
// name: the path that has the same place below that hierarchy's mount as
// dir has below the cpu controller's (for example, on cgroup v1,
// /sys/fs/cgroup/cpuacct/poolagent for /sys/fs/cgroup/cpu/poolagent). It
// is dir itself when name shares cpu's hierarchy (cgroup v2, or v1
// "cpu,cpuacct" mounted together), and "" when name is not mounted in the
// same cgroup version as cpu (on a hybrid host a v2 controller has no v1
// twin) or dir is not below the cpu controller's mount (a copy of a tree,
// a fixture).
func (m Mounts) Twin(name, dir string) string {
	cpuDir, cpuV2, err := m.Controller("cpu")
	if err != nil {
		return ""
	}
	d, v2, err := m.Controller(name)
	if err != nil || v2 != cpuV2 {
		return ""
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	rel, err := filepath.Rel(cpuDir, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return ""
	}
	return filepath.Join(d, rel)
}

// DefaultRootName is the pool root's directory name below the cpu
// controller's hierarchy when none is given.
const DefaultRootName = "poolagent"

// DefaultRoot is the pool root poolagent uses when none is given:
// DefaultRootName below the cpu controller's hierarchy
// (/sys/fs/cgroup/poolagent on cgroup v2, /sys/fs/cgroup/cpu/poolagent on
// v1). It wraps ErrNoController when no hierarchy carries cpu.
func (m Mounts) DefaultRoot() (string, error) {
	dir, _, err := m.Controller("cpu")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, DefaultRootName), nil
}

// Detect reads root/proc/self/mountinfo and the cgroup2 mount's
// cgroup.controllers and reports the host's cgroup layout. Tests pass a
// fixture tree as root; production passes "/".
func Detect(root string) (Mounts, error) {
	p := filepath.Join(root, "proc/self/mountinfo")
	b, err := os.ReadFile(p)
	if err != nil {
		return Mounts{}, fmt.Errorf("detect cgroup mounts: %w", err)
	}
	ms, err := parseMountinfo(bytes.NewReader(b))
	if err != nil {
		return Mounts{}, fmt.Errorf("detect cgroup mounts: %s: %w", p, err)
	}
	out := Mounts{V1: map[string]string{}}
	for _, m := range ms {
		switch m.fsType {
		case "cgroup2":
			if out.Unified == "" {
				out.Unified = filepath.Join(root, m.mountPoint)
			}
		case "cgroup":
			for _, o := range strings.Split(m.superOptions, ",") {
				if isV1Controller(o) {
					if _, seen := out.V1[o]; !seen {
						out.V1[o] = filepath.Join(root, m.mountPoint)
					}
				}
			}
		}
	}
	if out.Unified != "" {
		c := filepath.Join(out.Unified, "cgroup.controllers")
		b, err := os.ReadFile(c)
		if err != nil {
			return Mounts{}, fmt.Errorf("detect cgroup mounts: %w", err)
		}
		out.UnifiedControllers = strings.Fields(string(b))
	}
	switch {
	case out.Unified != "" && len(out.V1) == 0:
		out.Mode = Unified
	case out.Unified != "":
		out.Mode = Hybrid
	case len(out.V1) > 0:
		out.Mode = Legacy
	}
	return out, nil
}

// isV1Controller tells a v1 controller name apart from the other super
// options of a cgroup mount ("rw", "name=systemd", "nsdelegate",
// "clone_children", "noprefix", "release_agent=...", "xattr").
func isV1Controller(opt string) bool {
	switch opt {
	case "", "rw", "ro", "noprefix", "clone_children", "xattr", "nsdelegate",
		"cpuset_v2_mode", "favordynmods", "none", "all":
		return false
	}
	return !strings.ContainsRune(opt, '=')
}

// mountinfoLine is one line of /proc/<pid>/mountinfo, of which cgroupfs
// needs the mount point, the filesystem type and the super options.
type mountinfoLine struct {
	mountPoint   string
	fsType       string
	superOptions string
}

// parseMountinfo parses the proc(5) mountinfo format:
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//	(1)(2)(3)   (4)   (5)      (6)      (7)   (8) (9)    (10)         (11)
//
// Field 7 is zero or more optional fields ended by the "-" separator. Paths
// escape space, tab, newline and backslash as octal (\040).
func parseMountinfo(r io.Reader) ([]mountinfoLine, error) {
	var out []mountinfoLine
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if sep < 6 || len(f) < sep+3 {
			return nil, fmt.Errorf("line %d: %q: want \"ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS\"", n, line)
		}
		mp, err := unescapeOctal(f[4])
		if err != nil {
			return nil, fmt.Errorf("line %d: mount point %q: %w", n, f[4], err)
		}
		m := mountinfoLine{mountPoint: mp, fsType: f[sep+1]}
		if len(f) > sep+3 {
			m.superOptions = f[sep+3]
		}
		out = append(out, m)
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// unescapeOctal undoes the kernel's \NNN escaping of mountinfo paths.
func unescapeOctal(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", fmt.Errorf("truncated escape at byte %d, want \\NNN", i)
		}
		v := 0
		for _, c := range s[i+1 : i+4] {
			if c < '0' || c > '7' {
				return "", fmt.Errorf("bad escape %q at byte %d, want \\NNN octal", s[i:i+4], i)
			}
			v = v*8 + int(c-'0')
		}
		if v > 0xff {
			return "", fmt.Errorf("escape %q at byte %d is above \\377", s[i:i+4], i)
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}
