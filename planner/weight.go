package planner

import "github.com/poolagent/poolagent/internal/cpulimit"

// CPUWeight maps a RESOURCES_WEIGHT to cgroup v2 cpu.weight (1..10000):
// -1 (the pool takes no part in the division) becomes the kernel's
// default 100; 0 becomes 1, the smallest weight; 1..10000 are written as
// they are, so the ratio between pools is exact; anything larger is
// capped at 10000 (Apply warns about it).
func CPUWeight(resourcesWeight int64) int64 {
	switch {
	case resourcesWeight < 0:
		return cpulimit.DefaultWeight
	case resourcesWeight == 0:
		return cpulimit.MinWeight
	case resourcesWeight > cpulimit.MaxWeight:
		return cpulimit.MaxWeight
	}
	return resourcesWeight
}
