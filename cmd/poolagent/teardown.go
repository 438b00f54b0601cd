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
		Usage: "remove the pool root and the pool cgroups poolagent made below it, as before the first apply",
		Description: "Removes the cgroups poolagent made (apply and the daemon mark each one they make) below the\n" +
			"pool root, children first, then the root itself if poolagent made it, in every hierarchy it\n" +
			"has (cgroup v1: cpu and its cpuacct and cpuset twins). A cgroup poolagent did not make (by\n" +
			"hand, another program's, or one made before poolagent marked its cgroups) is left with what\n" +
			"is below it, and listed; --unmarked removes those too. It is refused while a daemon owns\n" +
			"the root (stop it first) and stops at a cgroup a process is still in (a running query: let\n" +
			"it end). A root that does not exist is nothing to do. See docs/cgroups.md.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "root", Usage: "pool root `DIR` (default: as poolagent apply: /sys/fs/cgroup/poolagent on cgroup v2, /sys/fs/cgroup/cpu/poolagent on v1)"},
			&cli.BoolFlag{Name: "unmarked", Usage: "also remove the cgroups below the root that poolagent did not make (and the root itself)"},
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
	var left cgroupfs.Leftovers
	if c.Bool("unmarked") {
		err = tree.RemoveAll()
	} else {
		left, err = tree.RemoveMade()
	}
	if err != nil {
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("%w (a process is still in it: let its query end, or move it out, and run teardown again)", err)
		}
		return asRoot("teardown", err)
	}
	if len(left.Foreign) == 0 && len(left.Kept) == 0 {
		fmt.Fprintf(c.App.Writer, "removed the pool root %s and every cgroup below it\n", root)
		return nil
	}
	w := c.App.Writer
	fmt.Fprintf(w, "removed the cgroups poolagent made below the pool root %s; left %d it did not make:\n", root, len(left.Foreign))
	for _, cg := range left.Foreign {
		fmt.Fprintf(w, "  %s\n", cg)
	}
	if len(left.Kept) > 0 {
		fmt.Fprintf(w, "and kept %d of poolagent's that hold them:\n", len(left.Kept))
		for _, cg := range left.Kept {
			fmt.Fprintf(w, "  %s\n", cg)
		}
	}
	fmt.Fprintf(w, "remove those yourself, or run poolagent teardown --unmarked to remove every cgroup below the root\n")
	return nil
}
