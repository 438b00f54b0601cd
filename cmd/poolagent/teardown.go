package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/cgroupfs"
)

// teardownCommand is `poolagent teardown`: remove the pool tree that apply
// or the daemon made, as before the first apply.
func teardownCommand() *cli.Command {
	return &cli.Command{
		Name:  "teardown",
		Usage: "remove the pool root and every pool cgroup below it, as before the first apply",
		Description: "Removes every cgroup below the pool root, children first, then the root itself, in every\n" +
			"hierarchy it has (cgroup v1: cpu and its cpuacct twin). It is refused while a daemon\n" +
			"owns the root (stop it first) and stops at a cgroup a process is still in (a running\n" +
			"query: let it end). A root that does not exist is nothing to do. See docs/cgroups.md.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "root", Usage: "pool root `DIR` (default: as poolagent apply: /sys/fs/cgroup/poolagent on cgroup v2, /sys/fs/cgroup/cpu/poolagent on v1)"},
		},
		Action: runTeardown,
	}
}

func runTeardown(c *cli.Context) error {
	mounts, root, err := poolRoot(c)
	if err != nil {
		return err
	}
	if _, err := os.Stat(root); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(c.App.Writer, "no pool root at %s: nothing to remove\n", root)
		return nil
	}
	tree, err := cgroupfs.Open(mounts, root, cgroupfs.Options{})
	if err != nil {
		return rootFlag(c, err)
	}
	defer tree.Close()
	release, err := tree.Own()
	if err != nil {
		return asRoot("teardown", rootFlag(c, fmt.Errorf("%w; nothing removed", err)))
	}
	defer release()
	if err := tree.RemoveAll(); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("%w (a process is still in it: let its query end, or move it out, and run teardown again)", err)
		}
		return asRoot("teardown", err)
	}
	fmt.Fprintf(c.App.Writer, "removed the pool root %s and every cgroup below it\n", root)
	return nil
}
