package pooltree

import (
	"os/exec"
	"sync"
	"testing"
	"time"
)

// TestExitWatcherReusedPID: a PID the cgroup listed, whose pidfd then
// holds a process the cgroup no longer lists first (the one read exited
// and its PID went to another process, elsewhere), is not waited on: the
// watch reads the list again, finds the cgroup empty and says "look",
// where waiting on that pidfd would wait for an unrelated process.
func TestExitWatcherReusedPID(t *testing.T) {
	other := exec.Command("/bin/sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		other.Process.Kill()
		other.Wait()
	})
	var mu sync.Mutex
	reads := 0
	w := &exitWatcher{
		// The first read lists the other process's PID, as if the
		// query's process had it; every later read finds the cgroup
		// empty.
		procs: func(string) ([]int, error) {
			mu.Lock()
			defer mu.Unlock()
			reads++
			if reads == 1 {
				return []int{other.Process.Pid}, nil
			}
			return nil, nil
		},
		populated: func(string, string) (bool, error) { return false, nil },
	}
	wake := make(chan struct{}, 1)
	stop, err := w.watch("olap", "q1", wake)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// The look comes at once with the check, never without it (the
	// other process sleeps for a minute): how long it takes is not judged.
	select {
	case <-wake:
	case <-time.After(50 * time.Second):
		t.Fatal("the watch waits on the pidfd of a process the cgroup no longer lists")
	}
}
