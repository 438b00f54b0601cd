package cgroupfs_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/kerneltest"
)

// TestKernelOwnRoot: a pool root owned by one tree (a running daemon) is
// refused to a second (another daemon, or poolagent apply) with the owner
// named, and free again once released.
func TestKernelOwnRoot(t *testing.T) {
	ownNeed := kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1, kerneltest.V2}}
	h := kerneltest.Require(t, ownNeed)
	root := h.NewRoot(t, ownNeed)
	open := func() *cgroupfs.Tree {
		tree, err := cgroupfs.Open(h.Mounts, root.Path, cgroupfs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tree.Close() })
		return tree
	}
	first, second := open(), open()
	release, err := first.Own()
	if err != nil {
		t.Fatal(err)
	}
	_, err = second.Own()
	t.Logf("second owner: %v", err)
	if !errors.Is(err, cgroupfs.ErrOwned) || !strings.Contains(err.Error(), fmt.Sprintf("process %d (", os.Getpid())) ||
		!strings.Contains(err.Error(), "running since") || !strings.Contains(err.Error(), root.Path) {
		t.Fatalf("second Own: %v; want ErrOwned naming process %d, since when, and %s", err, os.Getpid(), root.Path)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	again, err := second.Own()
	if err != nil {
		t.Fatalf("Own after the owner let go: %v", err)
	}
	again()
}
