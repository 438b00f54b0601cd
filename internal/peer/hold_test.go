package peer

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHoldTracedProcess: a process another tracer holds (a debugger,
// strace -f) cannot be held while it is moved, so it is not moved, and
// the refusal names the tracer, read from the process's status.
func TestHoldTracedProcess(t *testing.T) {
	c, err := NewChecker("/proc")
	if err != nil {
		t.Fatal(err)
	}
	// A grandchild: the daemon holds every process but its own children.
	sh := exec.Command("/bin/sh", "-c", "sleep 30 & echo $!; wait")
	out, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Fscan(out, &pid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGKILL)
		sh.Wait()
	})
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	traced, stop, detached := make(chan int), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(detached)
		runtime.LockOSThread() // the tracer is this thread
		defer runtime.UnlockOSThread()
		if err := unix.PtraceSeize(pid); err != nil {
			t.Error(err)
			close(traced)
			return
		}
		traced <- unix.Gettid()
		<-stop
		// Let go before the test ends: a tracee killed while traced
		// would stay a zombie no one waits for, and its shell's wait
		// with it.
		if err := release(pid); err != nil {
			t.Errorf("let go of process %d: %v", pid, err)
		}
	}()
	tracer := <-traced
	defer func() {
		close(stop)
		<-detached
	}()
	p := Process{FD: fd, PID: pid}
	moved := false
	err = c.Hold(Placement{Peer: p, UID: uint32(os.Getuid()), Target: p, Rel: PeerItself}, func(int) error {
		moved = true
		return nil
	})
	want := fmt.Sprintf("it is traced by process %d", tracer)
	if !errors.Is(err, ErrCannotHold) || !strings.Contains(err.Error(), want) {
		t.Fatalf("hold of a traced process: %v; want ErrCannotHold and %q", err, want)
	}
	if moved {
		t.Error("a process that could not be held was moved")
	}
}
