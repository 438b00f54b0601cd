package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/planner"
)

// applyCommand is `poolagent apply`: make the cgroup tree match a pool
// file, writing only what differs.
func applyCommand() *cli.Command {
	return &cli.Command{
		Name:  "apply",
		Usage: "create and update the pools' cgroups from a pool file, writing only what differs",
		Description: "Plans the pool file for this node (as `poolagent plan` shows, every pool with\n" +
			"RESOURCES_WEIGHT >= 0 counted as active), reads the cgroup tree below the pool root and\n" +
			"writes only what differs: new pools are created, changed ones updated, and a pool that\n" +
			"is no longer in the file has its processes moved into default before its cgroup is\n" +
			"removed. Empty query cgroups are removed. A second apply of the same file writes\n" +
			"nothing. The pool root belongs to poolagent: every cgroup directly below it that is not\n" +
			"a pool in the file is treated as a dropped pool. A memory limit lowered below what its\n" +
			"cgroup uses is not written: it is shown as \"pending: usage X above new limit Y\" and\n" +
			"the old limit is kept (the kernel would OOM-kill at once), until an apply finds usage\n" +
			"below it, or --force writes it anyway. See docs/cgroups.md.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "pools", Aliases: []string{"p"}, Usage: "pool `FILE` (YDB DDL)", Required: true},
			&cli.StringFlag{Name: "root", Usage: "pool root `DIR` (default: poolagent below the cpu controller's mount: /sys/fs/cgroup/poolagent on cgroup v2, /sys/fs/cgroup/cpu/poolagent on v1)"},
			&cli.BoolFlag{Name: "dry-run", Aliases: []string{"n"}, Usage: "print the writes in the order they would be made, and make none"},
			&cli.BoolFlag{Name: "force", Usage: "write a lowered memory limit even below what its cgroup uses (the kernel reclaims at once and OOM-kills what it cannot)"},
			&cli.Float64Flag{Name: "cpus", Usage: "node vCPUs, fractional allowed; a pool's CPUS may then name CPUs 0..N-1, N rounded up (default: read from the host, with its online CPUs)"},
			memoryFlag(),
			&cli.DurationFlag{Name: "period", Value: cpulimit.DefaultPeriodUsec * time.Microsecond, Usage: "CPU bandwidth period for pools without CPU_PERIOD_USEC, 1ms..1s"},
		},
		Action: runApply,
	}
}

func runApply(c *cli.Context) error {
	node, err := applyNode(c)
	if err != nil {
		return err
	}
	m, err := loadPools(c, c.String("pools"), "nothing applied")
	if err != nil {
		return err
	}
	d, err := planner.Plan(m, node, planner.Activity{})
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	mounts, root, err := poolRoot(c)
	if err != nil {
		return err
	}
	tree, err := cgroupfs.Open(mounts, root, cgroupfs.Options{})
	if err != nil {
		return rootFlag(c, err)
	}
	defer tree.Close()
	if !c.Bool("dry-run") {
		// A running daemon owns its root: apply writes no tree it keeps.
		release, err := tree.Own()
		if err != nil {
			return asRoot("apply", rootFlag(c, fmt.Errorf("%w; nothing written", err)))
		}
		defer release()
	}
	tree.Force(c.Bool("force"))
	changes, err := tree.Changes(d)
	if errors.Is(err, cgroupfs.ErrInvalid) {
		return fmt.Errorf("%s: %w; nothing written", c.String("pools"), err)
	}
	if err != nil {
		return fmt.Errorf("%s: %w; nothing written", root, err)
	}
	w := c.App.Writer
	if c.Bool("dry-run") {
		fmt.Fprint(w, changes)
		fmt.Fprintf(w, "dry run: %d %s planned under %s, none made\n", changes.Writes(), plural(changes.Writes(), "write", "writes"), root)
		return nil
	}
	res, err := tree.Apply(changes)
	if err != nil {
		return asRoot("apply", err)
	}
	for _, op := range res.Done {
		fmt.Fprintln(w, op)
	}
	for _, p := range changes.Pending {
		fmt.Fprintln(w, p)
	}
	fmt.Fprintf(w, "applied %s under %s: %d %s\n", c.String("pools"), root, res.Writes, plural(res.Writes, "write", "writes"))
	return nil
}

// applyNode builds the node from --cpus, --memory and --period, reading
// this host for what they leave out.
func applyNode(c *cli.Context) (planner.Node, error) {
	node, _, err := planNode(c, "/")
	return node, err
}
