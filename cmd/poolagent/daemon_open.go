package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/daemon"
	"github.com/poolagent/poolagent/internal/pooltree"
	"github.com/poolagent/poolagent/internal/state"
	"github.com/poolagent/poolagent/internal/systemd"
	"github.com/poolagent/poolagent/planner"
)

// openStateDir opens the --state-dir journal of run-time changes,
// making the directory only when create (--create-state-dir) is set.
func openStateDir(dir string, create bool) (*state.Store, error) {
	store, err := state.Open(dir, state.Options{Create: create})
	if errors.Is(err, state.ErrNoDir) {
		return nil, fmt.Errorf("--state-dir: %w (create it, mode 0700, or add --create-state-dir)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("--state-dir: %w", err)
	}
	return store, nil
}

// loadSources reads the pool model from src, logging the pool file's
// warnings.
func loadSources(src daemon.Sources, log *slog.Logger) (*planner.Model, error) {
	model, warnings, err := src.Load()
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		log.Warn("pool file", "warning", w.String())
	}
	return model, nil
}

// warnAdminGroup logs when the --admin-group is not (yet) in the user
// database. Not refused: a directory group may be unreachable for a moment.
func warnAdminGroup(group string, log *slog.Logger) {
	if group == "" {
		return
	}
	if _, err := user.LookupGroup(group); err != nil {
		log.Warn("--admin-group: no such group in the user database yet; its members administer pools once it exists", "group", group, "err", err)
	}
}

// openPoolRoot opens the pool tree the daemon manages: --root (or the
// default), or with --delegated the scope systemd delegates beside the
// daemon's unit, created on the first start and adopted after. It
// returns the handle and the root's path.
func openPoolRoot(c *cli.Context, log *slog.Logger) (*pooltree.Handle, string, error) {
	mounts, err := cgroupfs.Detect("/")
	if err != nil {
		return nil, "", err
	}
	root := c.String("root")
	if c.Bool("delegated") {
		if root != "" {
			return nil, "", fmt.Errorf("--delegated and --root %s: give one (--delegated keeps the pools in the unit's cgroup)", root)
		}
		keepers := systemd.SystemdRun{Description: "poolagent pools: the queries, kept across restarts of the daemon"}
		layout, err := systemd.Delegate(mounts, "/", os.Getpid(), keepers)
		if err != nil {
			return nil, "", fmt.Errorf("--delegated: %w", err)
		}
		log.Info("delegated scope", "scope", layout.Scope, "cgroup", layout.Dir, "keeper", layout.Keeper, "created", layout.Created)
		root = layout.PoolRoot
	}
	if root, err = pooltree.Root(mounts, root); err != nil {
		return nil, "", rootFlag(c, err)
	}
	cg, err := pooltree.Open(mounts, root, cgroupfs.Options{})
	if err != nil {
		return nil, "", rootFlag(c, err)
	}
	return cg, root, nil
}

// activatedSocket returns the socket systemd passed the daemon by socket
// activation (LISTEN_FDS, poolagent.socket), or nil when it passed none.
// It must be one Unix stream socket listening on path: a unit whose
// ListenStream= and --socket differ would serve where no client looks.
func activatedSocket(path string) (*net.UnixListener, error) {
	lns, err := activation.Listeners()
	if err != nil {
		return nil, fmt.Errorf("socket activation: %w", err)
	}
	switch {
	case len(lns) == 0:
		return nil, nil
	case len(lns) > 1:
		return nil, fmt.Errorf("socket activation: systemd passed %d sockets (accepted: one, ListenStream=%s)", len(lns), path)
	}
	ln, ok := lns[0].(*net.UnixListener)
	if !ok || lns[0].Addr().String() != path {
		lns[0].Close()
		return nil, fmt.Errorf("socket activation: systemd passed %s %s, but --socket is %s (ListenStream= and --socket must name the same path)",
			lns[0].Addr().Network(), lns[0].Addr(), path)
	}
	return ln, nil
}
