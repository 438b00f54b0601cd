package cgroupfs

import (
	"errors"
	"fmt"
	"strings"

	"github.com/poolagent/poolagent/planner"
)

// DefaultPool is the pool that always exists; a dropped pool's processes
// move into it.
const DefaultPool = "default"

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
		pool, query := fromDesired(p.Pool, v2), fromDesired(p.Query, v2)
		if err := checkSettings(pool); err != nil {
			return fmt.Errorf("%w: pool %q: %v", ErrInvalid, p.Name, err)
		}
		if err := checkSettings(query); err != nil {
			return fmt.Errorf("%w: pool %q, query template: %v", ErrInvalid, p.Name, err)
		}
		// v1 refuses a limited child above its limited parent; an
		// unlimited child (-1) inherits the parent's limit.
		if !v2 && pool.QuotaUsec != nil && query.QuotaUsec != nil && pool.PeriodUsec != nil && query.PeriodUsec != nil &&
			*query.QuotaUsec >= 0 && ratio(*query.QuotaUsec, *query.PeriodUsec) > ratio(*pool.QuotaUsec, *pool.PeriodUsec) {
			return fmt.Errorf("%w: pool %q: query limit %d/%d µs is above the pool's %d/%d µs; cgroup v1 refuses a child above its parent",
				ErrInvalid, p.Name, *query.QuotaUsec, *query.PeriodUsec, *pool.QuotaUsec, *pool.PeriodUsec)
		}
	}
	if !seen[DefaultPool] {
		return fmt.Errorf("%w: no %q pool; it always exists and receives a dropped pool's processes", ErrInvalid, DefaultPool)
	}
	return nil
}

// checkSettings applies the kernel's rules for one cgroup's values.
func checkSettings(s settings) error {
	if q := s.QuotaUsec; q != nil && *q != -1 && *q < minQuotaUsec {
		return fmt.Errorf("quota %d µs: want -1 (unlimited) or at least %d µs", *q, minQuotaUsec)
	}
	if p := s.PeriodUsec; p != nil && (*p < minPeriodUsec || *p > maxPeriodUsec) {
		return fmt.Errorf("period %d µs: want %d..%d µs", *p, minPeriodUsec, maxPeriodUsec)
	}
	if b := s.BurstUsec; b != nil && *b > 0 {
		if s.QuotaUsec != nil && *s.QuotaUsec >= 0 && int64(*b) > *s.QuotaUsec {
			return fmt.Errorf("burst %d µs is above the quota %d µs; the kernel wants burst <= quota", *b, *s.QuotaUsec)
		}
	}
	if w := s.Weight; w != nil && (*w < 1 || *w > maxWeight) {
		return fmt.Errorf("cpu.weight %d: want 1..%d", *w, maxWeight)
	}
	if sh := s.Shares; sh != nil && (*sh < minShares || *sh > maxShares) {
		return fmt.Errorf("cpu.shares %d: want %d..%d", *sh, minShares, maxShares)
	}
	if m := s.MemBytes; m != nil && *m < -1 {
		return fmt.Errorf("memory limit %d bytes: want -1 (unlimited) or bytes", *m)
	}
	return nil
}
