package pooltree

import (
	"fmt"

	"github.com/poolagent/poolagent/cgroupfs"
)

// ReaderAt is the reader of the cgroup tree at dir, for reading alone:
// dir may be a pool root, one pool or a copy of a tree, and "" is the
// default pool root. Its cgroup version comes from dir's own files; on v1,
// usage comes from cpuacctDir, or when that is "" from dir's twin in the
// cpuacct hierarchy, and memory from memoryDir, or when that is "" from
// dir's twin in the memory hierarchy (none for a copy outside the mounts:
// usage and memory are then unknown). hostRoot is where the host's /proc is found ("/" in
// production; see [cgroupfs.Detect]). The errors name the directory, not
// how the caller was given it (a command adds its flag: [RootFlagError]).
// Close the reader after use.
func ReaderAt(hostRoot, dir, cpuacctDir, memoryDir string) (*cgroupfs.Reader, error) {
	mounts, detectErr := cgroupfs.Detect(hostRoot)
	given := dir != ""
	if !given {
		if detectErr != nil {
			return nil, fmt.Errorf("find the default pool root: %w", detectErr)
		}
		var err error
		if dir, err = Root(mounts, ""); err != nil {
			return nil, err
		}
	}
	if detectErr == nil && cpuacctDir == "" {
		cpuacctDir = mounts.Twin(cgroupfs.HierCPUAcct, dir)
	}
	if detectErr == nil && memoryDir == "" {
		memoryDir = mounts.Twin(cgroupfs.HierMemory, dir)
	}
	r, err := cgroupfs.ReaderAt(dir, cpuacctDir, memoryDir)
	if err != nil && !given {
		return nil, fmt.Errorf("no pool root at the default place (poolagent apply creates it): %w", err)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}
