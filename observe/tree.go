package observe

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Version is the cgroup interface a hierarchy speaks.
type Version int

const (
	// V1 is a legacy hierarchy with the cpu controller (cpu.cfs_quota_us,
	// cpu.stat with throttled_time), usage read from cpuacct.
	V1 Version = 1
	// V2 is the unified hierarchy (cpu.max, cpu.stat with usage_usec).
	V2 Version = 2
)

// String returns "v1" or "v2".
func (v Version) String() string { return fmt.Sprintf("v%d", int(v)) }

// DetectVersion tells from the files in dir which cgroup interface it
// speaks: cgroup.controllers exists only in v2, cpu.cfs_period_us only in
// v1's cpu hierarchy.
func DetectVersion(dir string) (Version, error) {
	if _, err := os.Stat(filepath.Join(dir, "cgroup.controllers")); err == nil {
		return V2, nil
	}
	if _, err := os.Stat(filepath.Join(dir, "cpu.cfs_period_us")); err == nil {
		return V1, nil
	}
	if _, err := os.Stat(dir); err != nil {
		return 0, fmt.Errorf("cgroup root: %w", err)
	}
	return 0, fmt.Errorf("%s is neither a cgroup v2 directory (cgroup.controllers) nor one of v1's cpu hierarchy (cpu.cfs_period_us)", dir)
}

// Sample is one cgroup's counters at one moment.
type Sample struct {
	// Group is the cgroup's path relative to the tree's root, "." for the
	// root itself.
	Group string  `json:"group"`
	CPU   CPUStat `json:"cpu"`
	// UsageKnown is false on v1 when the group has no counterpart in the
	// cpuacct hierarchy; the usage fields of CPU are then zero.
	UsageKnown bool `json:"usage_known"`
	// LocalThrottledUsec is cpu.stat.local's throttled time: how long the
	// group's own tasks were held off the CPU by its limit or an
	// ancestor's. Nil before Linux 6.6.
	LocalThrottledUsec *uint64 `json:"local_throttled_usec,omitempty"`
	// Pressure is cpu.pressure; nil on v1 and where PSI is off.
	Pressure *Pressure `json:"pressure,omitempty"`
}

// Tree reads the counters of every cgroup below a root, for example
// poolagent's pool root.
type Tree struct {
	Version Version
	// Root is the root's directory: on v2 in the unified hierarchy, on v1
	// in the cpu controller's hierarchy.
	Root string
	// CPUAcctRoot is, on v1, the same cgroup in the cpuacct hierarchy
	// (equal to Root where cpu and cpuacct are mounted together); empty
	// when there is none, and usage is then unknown.
	CPUAcctRoot string
}

// Groups returns the cgroups at and below the root as paths relative to
// it, "." first, parents before their children, siblings in lexical order.
// A cgroup removed while the tree is walked (a query that ended) is left
// out.
func (t Tree) Groups() ([]string, error) {
	var groups []string
	err := filepath.WalkDir(t.Root, func(path string, d fs.DirEntry, err error) error {
		if err != nil && path != t.Root && errors.Is(err, fs.ErrNotExist) {
			return fs.SkipDir
		}
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(t.Root, path)
		if err != nil {
			return err
		}
		groups = append(groups, rel)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list cgroups below %s: %w", t.Root, err)
	}
	return groups, nil
}

// Read reads one group's counters; group is relative to the root.
func (t Tree) Read(group string) (Sample, error) {
	dir := filepath.Join(t.Root, group)
	s := Sample{Group: group}
	var local uint64
	var haveLocal bool
	var err error
	switch t.Version {
	case V2:
		if s.CPU, err = ReadCPUStatV2(dir); err != nil {
			return Sample{}, err
		}
		s.UsageKnown = true
		if local, haveLocal, err = ReadLocalThrottledUsecV2(dir); err != nil {
			return Sample{}, err
		}
		p, ok, err := ReadPressure(dir)
		if err != nil {
			return Sample{}, err
		}
		if ok {
			s.Pressure = &p
		}
	case V1:
		if s.CPU, err = ReadCPUStatV1(dir); err != nil {
			return Sample{}, err
		}
		if local, haveLocal, err = ReadLocalThrottledUsecV1(dir); err != nil {
			return Sample{}, err
		}
		if err := t.readUsageV1(group, &s); err != nil {
			return Sample{}, err
		}
	default:
		return Sample{}, fmt.Errorf("cgroup version %d: want 1 or 2", int(t.Version))
	}
	if haveLocal {
		s.LocalThrottledUsec = &local
	}
	return s, nil
}

// readUsageV1 fills s's usage from the group's cpuacct counterpart, if any.
func (t Tree) readUsageV1(group string, s *Sample) error {
	if t.CPUAcctRoot == "" {
		return nil
	}
	u, err := ReadUsageV1(filepath.Join(t.CPUAcctRoot, group))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	s.CPU.UsageUsec, s.CPU.UserUsec, s.CPU.SystemUsec = u.UsageUsec, u.UserUsec, u.SystemUsec
	s.UsageKnown = true
	return nil
}

// ReadAll reads every group of Groups, in that order. A group removed
// between listing and reading (a query that ended) is left out.
func (t Tree) ReadAll() ([]Sample, error) {
	groups, err := t.Groups()
	if err != nil {
		return nil, err
	}
	samples := make([]Sample, 0, len(groups))
	for _, g := range groups {
		s, err := t.Read(g)
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
