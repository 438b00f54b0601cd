package systemd

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SystemdRun is the production [Keepers]: `systemd-run --scope` asks
// systemd (its private socket, as root) to create the scope with
// Delegate=yes and then execs `sleep infinity` in it. The keeper is the
// daemon's child until the daemon exits; it starts a session of its own
// and inherits no descriptor and no environment, so it holds nothing of
// the daemon's.
type SystemdRun struct {
	// Description is the scope's Description=.
	Description string
}

// scopeWait bounds how long systemd may take to create the scope.
const scopeWait = 30 * time.Second

// StartScope implements [Keepers].
func (s SystemdRun) StartScope(name, slice string) (int, error) {
	run, err := exec.LookPath("systemd-run")
	if err != nil {
		return 0, fmt.Errorf("%w (systemd-run comes with systemd)", err)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		return 0, err
	}
	var stderr bytes.Buffer
	cmd := exec.Command(run, "--scope", "--quiet", "--collect", "--unit="+name, "--slice="+slice,
		"--description="+s.Description, "--property=Delegate=yes", "--", sleep, "infinity")
	cmd.Stderr = &stderr
	exited, err := start(cmd)
	if err != nil {
		return 0, err
	}
	// systemd-run execs the keeper once systemd has moved it into the
	// scope: wait for /proc/PID/cgroup to name the scope.
	pid := cmd.Process.Pid
	deadline := time.Now().Add(scopeWait)
	for {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
		if err == nil && bytes.Contains(data, []byte("/"+name+"\n")) {
			return pid, nil
		}
		select {
		case err := <-exited:
			return 0, fmt.Errorf("%s: %v: %s", run, err, strings.TrimSpace(stderr.String()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s: no scope %s after %s", run, name, scopeWait)
		}
	}
}

// Start implements [Keepers].
func (SystemdRun) Start() (int, error) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(sleep, "infinity")
	if _, err := start(cmd); err != nil {
		return 0, err
	}
	return cmd.Process.Pid, nil
}

// start starts cmd as a keeper and reaps it in the background; the
// channel gets its exit.
func start(cmd *exec.Cmd) (<-chan error, error) {
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// Descriptors systemd passed (the listening socket) are not
	// close-on-exec until the daemon takes them; the keeper gets none.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil && !errors.Is(err, unix.ENOSYS) {
		return nil, fmt.Errorf("close_range: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		if err == nil {
			err = errors.New("exited")
		}
		exited <- err
	}()
	return exited, nil
}
