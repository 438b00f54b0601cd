// Package systemd fits the daemon into a systemd service: the notify
// protocol (READY=1 once the first apply succeeded, STATUS= lines,
// RELOADING=1 and STOPPING=1, WATCHDOG=1 pings while the daemon is healthy)
// through github.com/coreos/go-systemd, and the cgroup layout on a systemd
// host: the daemon alone in its unit's cgroup, the pools in a scope beside
// it with Delegate=yes (poolagent-pools.scope), created once with
// systemd-run and adopted on every start. Outside systemd (no
// NOTIFY_SOCKET) every notification is a no-op.
package systemd

import (
	"context"
	"fmt"
	"strings"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
)

// Notifier sends state changes to the service manager over $NOTIFY_SOCKET.
type Notifier struct{}

// notify sends state; without $NOTIFY_SOCKET it does nothing.
func notify(state string) error {
	if _, err := sd.SdNotify(false, state); err != nil {
		return fmt.Errorf("notify service manager %q: %w", state, err)
	}
	return nil
}

// statusLine keeps a STATUS= value on one line, as the protocol requires.
func statusLine(status string) string {
	return "STATUS=" + strings.Join(strings.Fields(status), " ")
}

// Ready says start-up (or a reload) is complete, with a status line.
func (Notifier) Ready(status string) error {
	return notify(sd.SdNotifyReady + "\n" + statusLine(status))
}

// Status replaces the status line `systemctl status` shows.
func (Notifier) Status(status string) error {
	return notify(statusLine(status))
}

// Reloading says a reload began; [Notifier.Ready] ends it.
func (Notifier) Reloading() error {
	return notify(sd.SdNotifyReloading)
}

// Stopping says the daemon is shutting down, with a status line.
func (Notifier) Stopping(status string) error {
	return notify(sd.SdNotifyStopping + "\n" + statusLine(status))
}

// Watchdog pings the service manager with WATCHDOG=1 at half the unit's
// WatchdogSec= while healthy returns nil, until ctx ends. When healthy
// fails the ping is withheld, so systemd's watchdog restarts a daemon that
// is stuck; the failure is given to report (which may log it). Without a
// watchdog for this process (no $WATCHDOG_USEC, or $WATCHDOG_PID names
// another process) it returns at once.
func Watchdog(ctx context.Context, healthy func() error, report func(error)) error {
	interval, err := sd.SdWatchdogEnabled(false)
	if err != nil {
		return fmt.Errorf("watchdog settings: %w", err)
	}
	if interval <= 0 {
		return nil
	}
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		if err := healthy(); err != nil {
			report(err)
		} else if err := notify(sd.SdNotifyWatchdog); err != nil {
			report(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
