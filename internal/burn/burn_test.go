package burn

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestUntilProcessCPU burns 20 ms of CPU and stops within a chunk of it.
func TestUntilProcessCPU(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	chunk := Chunk(50 * time.Microsecond)
	if chunk < 1000 {
		t.Fatalf("Chunk = %d, want at least 1000", chunk)
	}
	start := ThreadCPU()
	Until(func() bool { return ThreadCPU()-start >= 20*time.Millisecond }, chunk)
	if used := ThreadCPU() - start; used < 20*time.Millisecond {
		t.Errorf("burnt %v of thread CPU, want at least 20ms", used)
	}
}

// TestPin pins this process to the CPU it may run on first and reads the
// mask back.
func TestPin(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	var all []int
	for c := range 1024 {
		if set.IsSet(c) {
			all = append(all, c)
		}
	}
	t.Cleanup(func() {
		if err := Pin(all); err != nil {
			t.Errorf("unpin: %v", err)
		}
	})
	cpu := all[0]
	if err := Pin([]int{cpu}); err != nil {
		t.Fatal(err)
	}
	var got unix.CPUSet
	if err := unix.SchedGetaffinity(0, &got); err != nil {
		t.Fatal(err)
	}
	if got.Count() != 1 || !got.IsSet(cpu) {
		t.Errorf("mask after Pin([%d]) has %d CPUs, cpu %d set: %v", cpu, got.Count(), cpu, got.IsSet(cpu))
	}
}
