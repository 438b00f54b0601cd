// Package burn is the CPU burning that compare's workers and the
// real-kernel tests' burners share: a busy loop that looks at a clock
// between chunks of work, the clocks it looks at, and pinning a process's
// threads to CPUs.
package burn

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// sink keeps the busy loop's result alive so the compiler keeps the loop.
var sink atomic.Uint64

// spin runs n iterations of the busy loop.
func spin(n int) {
	x := uint64(1)
	for range n {
		x = x*6364136223846793005 + 1442695040888963407
	}
	sink.Add(x)
}

// Until spins on the calling thread, chunk iterations of the busy loop
// between looks, until done reports true.
func Until(done func() bool, chunk int) {
	for !done() {
		spin(chunk)
	}
}

// Chunk is how many iterations of the busy loop take about d of CPU on
// this thread (at least 1000), so that a look at a clock every chunk stops
// within about d of a limit without spending much on clock reads.
func Chunk(d time.Duration) int {
	const probe = 1 << 16
	t0 := ThreadCPU()
	spin(probe)
	per := ThreadCPU() - t0
	if per <= 0 {
		return probe
	}
	return max(1000, int(int64(probe)*int64(d)/int64(per)))
}

// Clock reads clock id (unix.CLOCK_MONOTONIC, ...) as a duration.
func Clock(id int32) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(id, &ts); err != nil {
		panic(fmt.Sprintf("clock_gettime(%d): %v", id, err))
	}
	return time.Duration(ts.Nano())
}

// ProcessCPU is the CPU time of this process (CLOCK_PROCESS_CPUTIME_ID).
func ProcessCPU() time.Duration { return Clock(unix.CLOCK_PROCESS_CPUTIME_ID) }

// ThreadCPU is the CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID).
func ThreadCPU() time.Duration { return Clock(unix.CLOCK_THREAD_CPUTIME_ID) }

// Monotonic is CLOCK_MONOTONIC.
func Monotonic() time.Duration { return Clock(unix.CLOCK_MONOTONIC) }

// Pin restricts every thread of this process to cpus; threads started
// later inherit the mask from the thread that starts them, and a thread
// that exits meanwhile is skipped.
func Pin(cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("list threads: %w", err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("pin thread %d to cpus %s: %w", tid, cpuList(cpus), err)
		}
	}
	return nil
}

func cpuList(cpus []int) string {
	parts := make([]string, len(cpus))
	for i, c := range cpus {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ",")
}
