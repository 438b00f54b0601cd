package cgroupfs

import (
	"github.com/poolagent/poolagent/internal/cpulimit"
)

// Interface files of the cgroup core; each controller's files are in its
// own file (cpu.go, memory.go, cpuset.go, pids.go: the table in
// controller.go).
//
//	v2 cgroup.subtree_control "cpu memory"; written as "+cpu"
//	v2 cgroup.controllers     the controllers the cgroup may enable
//	v2, v1 cgroup.procs       one PID per line
const (
	fileSubtreeControl = "cgroup.subtree_control"
	fileControllers    = "cgroup.controllers"
	fileProcs          = "cgroup.procs"
)

// settings is one cgroup's managed values as cgroupfs compares them: the
// CPU limit (Weight 0: cpu.weight is not managed; CPUs: cpuset.cpus),
// cgroup v1's cpu.shares (the weight's v1 form; read back, it does not
// convert to a weight exactly; 0: not managed), the memory limit (-1:
// unlimited), the soft memory limit (0: none), the memory guarantees (v2
// memory.min and memory.low; 0: none, -1: "max"), the task limit (0:
// none) and cgroup v1's cpuset.mems ("": not managed, or none yet). Each
// controller ([controller]) reads and writes its own fields. memUsed is
// not a value but what the cgroup uses, read back for the memory limit
// (0: unknown, as for a new cgroup; never written).
type settings struct {
	cpu      cpulimit.Limit
	shares   int64
	memBytes int64
	memHigh  int64
	memMin   int64
	memLow   int64
	memUsed  int64
	pidsMax  int64
	mems     string
}
