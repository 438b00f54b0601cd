package observe

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
	// Memory is the memory controller's view of the group; nil where it
	// is not enabled (v2: not in the parent's cgroup.subtree_control;
	// v1: no memory twin of the tree).
	Memory *Memory `json:"memory,omitempty"`
	// Pids is the pids controller's view of the group; nil where it is
	// not enabled, as for Memory.
	Pids *Pids `json:"pids,omitempty"`
}
