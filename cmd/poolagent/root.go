package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/pooltree"
)

// rootFlag adds to an error about the pool root the flag that names it:
// "--root: …" when --root was given, "… (or give --root)" when the
// default root was looked for. The libraries' errors name directories,
// never flags.
func rootFlag(c *cli.Context, err error) error {
	if err == nil {
		return nil
	}
	if c.String("root") != "" {
		return fmt.Errorf("--root: %w", err)
	}
	return fmt.Errorf("%w (or give --root)", err)
}

// poolRoot finds this host's cgroup mounts and the pool root: --root, or
// the default of its cgroup mode.
func poolRoot(c *cli.Context) (cgroupfs.Mounts, string, error) {
	mounts, err := cgroupfs.Detect("/")
	if err != nil {
		return cgroupfs.Mounts{}, "", err
	}
	root, err := pooltree.Root(mounts, c.String("root"))
	if err != nil {
		return cgroupfs.Mounts{}, "", rootFlag(c, err)
	}
	return mounts, root, nil
}

// asRoot says, of a permission error met by a command run by a user other
// than root, that the command writes cgroups root owns: "apply needs root:
// run it as root, or with sudo (as uid 1000: mkdir …: permission
// denied)". Any other error is returned as it is.
func asRoot(cmd string, err error) error {
	uid := os.Geteuid()
	if err == nil || uid == 0 || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	return fmt.Errorf("%s needs root: run it as root, or with sudo (as uid %d: %w)", cmd, uid, err)
}

// needRoot refuses to start a command that only root can run, before it
// does anything: the daemon moves other users' processes into cgroups.
func needRoot(cmd, why string) error {
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Errorf("%s needs root: %s; run it as root, or with sudo (running as uid %d)", cmd, why, uid)
	}
	return nil
}
