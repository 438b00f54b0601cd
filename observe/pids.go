package observe

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Pids is one cgroup's tasks as the pids controller reports them, the
// same on cgroup v2 and v1 (package cgroupfs reads the files):
//
//	CurrentTasks  pids.current: tasks (processes and threads) in the cgroup and below it
//	PeakTasks     pids.peak (Linux >= 6.2 on v2); nil where the kernel keeps none
//	Limit         pids.max; -1 = none ("max")
//	Events        pids.events: "max N", forks refused
type Pids struct {
	CurrentTasks uint64     `json:"current_tasks"`
	PeakTasks    *uint64    `json:"peak_tasks,omitempty"`
	Limit        int64      `json:"limit"`
	Events       PidsEvents `json:"events"`
	// Hierarchical says the kernel counts Events.Max where the limit was
	// reached and in every cgroup above it (cgroup v2 on kernels that
	// have pids.events.local); older v2 kernels, and v1, count each
	// refused fork in the cgroup of the task that forked, whichever
	// limit refused it.
	Hierarchical bool `json:"hierarchical,omitempty"`
}

// PidsEvents are the counts of pids.events:
//
//	max 3
//
// Max counts forks (and thread creations) refused because a pids.max
// was reached: see [Pids.Hierarchical] for which cgroup counts them.
type PidsEvents struct {
	Max uint64 `json:"max"`
}

// ParsePidsEvents parses pids.events (v2 and v1). Unknown keys are
// skipped, for a kernel that adds some.
func ParsePidsEvents(b []byte) (PidsEvents, error) {
	var e PidsEvents
	if _, err := parseKeyValues(b, map[string]*uint64{"max": &e.Max}); err != nil {
		return PidsEvents{}, err
	}
	return e, nil
}

// ParsePidsMax parses pids.max: "max" (none, -1) or a count of tasks.
func ParsePidsMax(b []byte) (int64, error) {
	t := strings.TrimSpace(string(b))
	if t == "max" {
		return -1, nil
	}
	v, err := strconv.ParseUint(t, 10, 64)
	if err != nil || v > math.MaxInt64 {
		return 0, fmt.Errorf("pids.max %q: want \"max\" or a count of tasks", t)
	}
	return int64(v), nil
}

// ForkLimit says which limit refused forks in a query's cgroup: "query"
// (its own pids.max), "pool" (its pool's), "query or pool" when the
// kernel's counts cannot tell, or "" when no fork was refused. q is the
// query's reading when it ended, poolBefore and poolAfter its pool's
// when it started and ended (nil: not read). queryLimited and
// poolLimited say which of the two has a limit.
//
// Where the kernel counts a refused fork in the forking task's cgroup
// (v1, v2 without pids.events.local), q counts every refusal of the query's
// tasks, at either limit: it is the one limited scope, or both. Where it
// counts at the limit reached and above (Pids.Hierarchical), q counts
// the query's own limit, and growth of the pool's count while the query
// ran is the pool's limit, reached by this query's tasks or another's.
func ForkLimit(q, poolBefore, poolAfter *Pids, queryLimited, poolLimited bool) string {
	if q == nil {
		return ""
	}
	if q.Hierarchical {
		switch {
		case q.Events.Max > 0 && queryLimited:
			return "query"
		case poolBefore != nil && poolAfter != nil && poolAfter.Events.Max > poolBefore.Events.Max && poolLimited:
			return "pool"
		}
		return ""
	}
	switch {
	case q.Events.Max == 0:
		return ""
	case queryLimited && poolLimited:
		return "query or pool"
	case queryLimited:
		return "query"
	case poolLimited:
		return "pool"
	}
	return ""
}
