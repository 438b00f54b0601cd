package peer

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSignal: a client's signal reaches a process of its own uid, a
// process that has gone is not an error, and a process of another uid
// than a non-root client's is refused and left alone.
func TestSignal(t *testing.T) {
	c, err := NewChecker("/proc")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	own := uint32(os.Getuid())
	if err := c.Signal(pid, own+1, unix.SIGTERM); !errors.Is(err, ErrMayNotSignal) {
		t.Fatalf("another uid's client: %v, want ErrMayNotSignal", err)
	}
	if err := unix.Kill(pid, 0); err != nil {
		t.Fatalf("the refused signal was sent after all: %v", err)
	}
	if err := c.Signal(pid, own, unix.SIGTERM); err != nil {
		t.Fatalf("the process's own uid: %v", err)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("the process ended with %v, want SIGTERM", err)
	}
	if err := c.Signal(pid, own, unix.SIGTERM); err != nil {
		t.Fatalf("a process that has gone: %v, want no error", err)
	}
}
