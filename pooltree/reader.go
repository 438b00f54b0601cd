package pooltree

import (
	"fmt"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/observe"
)

// ReaderAt is the reader of the cgroup tree at dir, for reading alone:
// dir may be a pool root, one pool or a copy of a tree, and "" is the
// default pool root. Its cgroup version comes from dir's own files; on v1,
// usage comes from cpuacctDir, or when that is "" from dir's twin in the
// cpuacct hierarchy (none for a copy outside the mounts: usage is then
// unknown). hostRoot is where the host's /proc is found ("/" in
// production; see [cgroupfs.Detect]). The errors name the --root flag.
func ReaderAt(hostRoot, dir, cpuacctDir string) (observe.Tree, error) {
	mounts, detectErr := cgroupfs.Detect(hostRoot)
	given := dir != ""
	if !given {
		if detectErr != nil {
			return observe.Tree{}, fmt.Errorf("find the pool root (give --root): %w", detectErr)
		}
		var err error
		if dir, err = Root(mounts, ""); err != nil {
			return observe.Tree{}, err
		}
	}
	v, err := observe.DetectVersion(dir)
	if err != nil && !given {
		return observe.Tree{}, fmt.Errorf("no pool root at the default place (poolagent apply creates it; or give --root): %w", err)
	}
	if err != nil {
		return observe.Tree{}, fmt.Errorf("--root: %w", err)
	}
	tree := observe.Tree{Version: v, Root: dir, CPUAcctRoot: cpuacctDir}
	if v == observe.V1 && cpuacctDir == "" && detectErr == nil {
		tree.CPUAcctRoot = mounts.Twin(cgroupfs.HierCPUAcct, dir)
	}
	return tree, nil
}
