package cgroupfs

import (
	"errors"
	"fmt"
	"strings"

	"github.com/poolagent/poolagent/planner"
)

// ErrInvalid is wrapped by every error about a desired state cgroupfs
// refuses before writing anything.
var ErrInvalid = errors.New("invalid desired state")

// reservedPrefixes are the interface-file prefixes a pool name may not
// start with: such a directory would collide with a controller's files.
var reservedPrefixes = []string{
	"cgroup.", "cpu.", "cpuacct.", "cpuset.", "memory.", "io.", "pids.", "rdma.",
	"hugetlb.", "misc.", "blkio.", "devices.", "freezer.", "net_cls.", "net_prio.", "perf_event.",
}

// checkName refuses a cgroup name that is not a single, ordinary path
// component below the pool root.
func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty name")
	case name == "." || name == "..":
		return fmt.Errorf("name %q is a relative directory", name)
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("name %q contains '/' or NUL; a name is one path component", name)
	case strings.HasPrefix(name, "."):
		return fmt.Errorf("name %q starts with '.'", name)
	case len(name) > 200:
		return fmt.Errorf("name %.20q... is %d bytes; at most 200 are accepted", name, len(name))
	case name == "tasks" || name == "notify_on_release" || name == "release_agent":
		return fmt.Errorf("name %q is a cgroup v1 interface file", name)
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(name, p) {
			return fmt.Errorf("name %q starts with %q, the prefix of cgroup interface files", name, p)
		}
	}
	return nil
}

// validate refuses a desired state the kernel would refuse, or that could
// address a path outside the pool root, before anything is written. v2
// says which backend will write it.
func validate(d planner.Desired, v2 bool) error {
	seen := map[string]bool{}
	for i, p := range d.Pools {
		if err := checkName(p.Name); err != nil {
			return fmt.Errorf("%w: pool %d: %v", ErrInvalid, i, err)
		}
		if seen[p.Name] {
			return fmt.Errorf("%w: pool %q appears twice", ErrInvalid, p.Name)
		}
		seen[p.Name] = true
		// Query cgroups inherit (v2) or copy (v1) their pool's CPUs.
		if p.Query.CPU.CPUs != p.Pool.CPU.CPUs {
			return fmt.Errorf("%w: pool %q: query CPUs %q differ from the pool's %q; a query runs on its pool's CPUs",
				ErrInvalid, p.Name, p.Query.CPU.CPUs, p.Pool.CPU.CPUs)
		}
		if err := checkCgroup(p.Pool); err != nil {
			return fmt.Errorf("%w: pool %q: %v", ErrInvalid, p.Name, err)
		}
		if err := checkCgroup(p.Query); err != nil {
			return fmt.Errorf("%w: pool %q, query template: %v", ErrInvalid, p.Name, err)
		}
		// v1 refuses a limited child above its limited parent; an
		// unlimited child (-1) inherits the parent's limit.
		pool, query := p.Pool.CPU, p.Query.CPU
		if !v2 && query.Limited() && query.Ratio() > pool.Ratio() {
			return fmt.Errorf("%w: pool %q: query limit %d/%d µs is above the pool's %d/%d µs; cgroup v1 refuses a child above its parent",
				ErrInvalid, p.Name, query.QuotaUsec, query.PeriodUsec, pool.QuotaUsec, pool.PeriodUsec)
		}
	}
	if !seen[planner.DefaultPool] {
		return fmt.Errorf("%w: no %q pool; it always exists and receives a dropped pool's processes", ErrInvalid, planner.DefaultPool)
	}
	return nil
}
