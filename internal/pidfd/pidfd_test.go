package pidfd

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAwait: Await returns once the process has exited, and with an error
// when its context ends first; Open of a process that is gone says so.
func TestAwait(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "read x")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f, err := Open(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := Await(ctx, f); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Await of a running process: %v, want the context's deadline", err)
	}
	w, err := Watch(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	done := make(chan error, 1)
	go func() { done <- Await(context.Background(), w) }()
	stdin.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Await after the exit: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Await did not return within a minute of the process's exit")
	}
	cmd.Wait()
	if _, err := Open(cmd.Process.Pid); !errors.Is(err, unix.ESRCH) {
		t.Errorf("Open of a reaped process: %v, want ESRCH", err)
	}
}
