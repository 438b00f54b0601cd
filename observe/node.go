package observe

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/prometheus/procfs"

	"github.com/poolagent/poolagent/internal/cpulimit"
)

// NodeCapacity is the CPU and memory this process may use on its host:
// the node a plan is made for when the operator gives no figures.
type NodeCapacity struct {
	// CPUs is OnlineCPUs lowered to CgroupCPUs when that is smaller,
	// vCPU; fractional when a quota caps this process's cgroup.
	CPUs float64
	// Online is /sys/devices/system/cpu/online, the CPUs a pool's CPUS
	// may name; OnlineCPUs counts them.
	Online     cpulimit.CPUSet
	OnlineCPUs int
	// CgroupCPUs is the tightest CPU bandwidth limit (quota / period) on
	// this process's cgroup or any ancestor, vCPU; 0 when there is none.
	CgroupCPUs float64
	// MemoryBytes is MemTotalBytes lowered to CgroupMemoryBytes when that
	// is smaller.
	MemoryBytes int64
	// MemTotalBytes is /proc/meminfo MemTotal, bytes.
	MemTotalBytes int64
	// CgroupMemoryBytes is the tightest memory limit on this process's
	// cgroup or any ancestor, bytes; 0 when there is none.
	CgroupMemoryBytes int64
}

// ReadHostCapacity reads the host's own figures below root ("/" on a
// live host, a fixture tree in tests):
//
//	sys/devices/system/cpu/online   CPU list, "0-3,8"
//	proc/meminfo                    MemTotal
//
// CPUs and MemoryBytes are then the whole host's; [NodeCapacity.Within]
// lowers them to the limits of this process's cgroups, which package
// cgroupfs reads (cgroupfs.ReadNodeCapacity does both).
func ReadHostCapacity(root string) (NodeCapacity, error) {
	var n NodeCapacity
	onlinePath := filepath.Join(root, "sys/devices/system/cpu/online")
	b, err := os.ReadFile(onlinePath)
	if err != nil {
		return n, fmt.Errorf("read online CPUs: %w", err)
	}
	if n.Online, err = parseOnline(string(b)); err != nil {
		return n, fmt.Errorf("%s: %w", onlinePath, err)
	}
	n.OnlineCPUs = n.Online.Count()

	pfs, err := procfs.NewFS(filepath.Join(root, "proc"))
	if err != nil {
		return n, fmt.Errorf("open proc: %w", err)
	}
	mi, err := pfs.Meminfo()
	if err != nil {
		return n, fmt.Errorf("read meminfo: %w", err)
	}
	if mi.MemTotalBytes == nil || *mi.MemTotalBytes == 0 || *mi.MemTotalBytes > math.MaxInt64 {
		return n, errors.New("read meminfo: no MemTotal")
	}
	n.MemTotalBytes = int64(*mi.MemTotalBytes)
	n.CPUs, n.MemoryBytes = float64(n.OnlineCPUs), n.MemTotalBytes
	return n, nil
}

// Within keeps a CPU limit (vCPU, 0: none) and a memory limit (bytes, 0:
// none) of a cgroup of this process's as CgroupCPUs and CgroupMemoryBytes
// when they are the tightest yet, and lowers CPUs and MemoryBytes to them.
func (n *NodeCapacity) Within(cpus float64, memBytes int64) {
	if cpus > 0 && (n.CgroupCPUs == 0 || cpus < n.CgroupCPUs) {
		n.CgroupCPUs = cpus
	}
	if memBytes > 0 && (n.CgroupMemoryBytes == 0 || memBytes < n.CgroupMemoryBytes) {
		n.CgroupMemoryBytes = memBytes
	}
	n.CPUs = float64(n.OnlineCPUs)
	if n.CgroupCPUs > 0 && n.CgroupCPUs < n.CPUs {
		n.CPUs = n.CgroupCPUs
	}
	n.MemoryBytes = n.MemTotalBytes
	if n.CgroupMemoryBytes > 0 && n.CgroupMemoryBytes < n.MemoryBytes {
		n.MemoryBytes = n.CgroupMemoryBytes
	}
}

// parseOnline reads /sys/devices/system/cpu/online, a CPU list
// (cpulimit.ParseCPUSet) that names at least the CPU reading it.
func parseOnline(s string) (cpulimit.CPUSet, error) {
	set, err := cpulimit.ParseCPUSet(s)
	if err == nil && set.IsEmpty() {
		err = errors.New("empty CPU list; want the online CPUs, such as \"0-3\"")
	}
	return set, err
}

// CgroupLimit is a CPU or memory limit, or a CPU demotion, set on one
// cgroup.
type CgroupLimit struct {
	// Cgroup is the cgroup, "/"-rooted below its hierarchy's mount as
	// /proc/PID/cgroup names it ("/user.slice/user-1000.slice").
	Cgroup string
	// File is the limit's file: cpu.max or memory.max (v2),
	// cpu.cfs_quota_us or memory.limit_in_bytes (v1).
	File string
	// Value is the file's content, trimmed: "10000 100000", "536870912".
	Value string
	// CPUs is a CPU limit in vCPU (quota / period); 0 for a memory limit.
	CPUs float64
	// MemoryBytes is a memory limit in bytes; 0 for a CPU limit.
	MemoryBytes int64
	// CPUSet is, for a cpuset.cpus limit, its CPUs (CPUs is then their
	// count); empty otherwise.
	CPUSet cpulimit.CPUSet
	// Weight is, for a CPU demotion (cpu.idle 1, or a cpu.weight or v1
	// cpu.shares below the default), the weight the scheduler gives the
	// cgroup in cpu.weight's units: cpulimit.IdleWeight when idle,
	// shares × 100 / 1024 for cpu.shares; 0 otherwise.
	Weight float64
}
