package compare

import (
	"bufio"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/poolagent/poolagent/internal/burn"
	"github.com/poolagent/poolagent/simulate"
)

// WorkerSpec is one CPU-burning worker: Threads threads that together burn
// NeedUsec of CPU time, measured by the process's own CPU clock
// (CLOCK_PROCESS_CPUTIME_ID) from the moment it is ready, then stop.
type WorkerSpec struct {
	// NeedUsec is the CPU time to burn, in microseconds; >= 0.
	NeedUsec int64
	// Threads is the number of burning threads; >= 1.
	Threads int
	// CPUs, when not empty, restricts every thread of the worker to these
	// CPUs (sched_setaffinity), before it signals ready.
	CPUs []int
}

// Args renders the spec as the worker subcommand's arguments, the inverse
// of [ParseWorkerArgs]: "NEED_USEC THREADS [CPU,CPU...]".
func (s WorkerSpec) Args() []string {
	args := []string{strconv.FormatInt(s.NeedUsec, 10), strconv.Itoa(s.Threads)}
	if len(s.CPUs) > 0 {
		args = append(args, formatCPUs(s.CPUs))
	}
	return args
}

// ParseWorkerArgs parses the worker subcommand's arguments:
// "NEED_USEC THREADS [CPU,CPU...]".
func ParseWorkerArgs(args []string) (WorkerSpec, error) {
	if len(args) < 2 || len(args) > 3 {
		return WorkerSpec{}, fmt.Errorf("worker arguments %q: want NEED_USEC THREADS [CPU,CPU...]", args)
	}
	need, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || need < 0 {
		return WorkerSpec{}, fmt.Errorf("worker need %q: want microseconds, 0 or more", args[0])
	}
	threads, err := strconv.Atoi(args[1])
	if err != nil || threads < 1 {
		return WorkerSpec{}, fmt.Errorf("worker threads %q: want 1 or more", args[1])
	}
	s := WorkerSpec{NeedUsec: need, Threads: threads}
	if len(args) == 3 {
		s.CPUs, err = simulate.ParseCPUList(args[2])
		if err == nil && slices.Max(s.CPUs) >= cpuSetSize {
			err = fmt.Errorf("has CPU %d", slices.Max(s.CPUs))
		}
		if err != nil {
			return WorkerSpec{}, fmt.Errorf("worker cpus %q %w (want CPU numbers 0..%d as a list like 0,1 or 0-3)", args[2], err, cpuSetSize-1)
		}
	}
	return s, nil
}

// cpuSetSize is how many CPUs unix.CPUSet holds.
const cpuSetSize = 1024

func formatCPUs(cpus []int) string {
	parts := make([]string, len(cpus))
	for i, c := range cpus {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ",")
}

// Worker protocol on the worker's stdin and stdout:
//
//	worker → runner  "ready\n"               pinned, calibrated, threads parked
//	runner → worker  one byte                 go (EOF instead: exit without burning)
//	worker → runner  "done MONO_NS CPU_NS\n"  need burnt at CLOCK_MONOTONIC
//	                                          MONO_NS, CPU_NS burnt since ready
//	runner → worker  EOF                      exit
//
// Between done and EOF the worker sleeps, so its exit (a few ms of CPU for
// a Go process) happens after the runner's last read of cpu.stat.
const (
	readyLine  = "ready"
	doneFormat = "done %d %d\n"
)

// RunWorker is the body of the worker subcommand: pin the process, park
// spec.Threads burner threads, get ready, wait for the go byte on in,
// burn spec.NeedUsec of CPU, report on out, then sleep until in is closed.
func RunWorker(spec WorkerSpec, in io.Reader, out io.Writer) error {
	if len(spec.CPUs) > 0 {
		if err := burn.Pin(spec.CPUs); err != nil {
			return fmt.Errorf("worker: %w", err)
		}
	}
	runtime.GOMAXPROCS(spec.Threads)
	chunk := burn.Chunk(50 * time.Microsecond)
	// No garbage collection or heap scavenging once ready: the worker
	// allocates almost nothing from here on, and background GC work would
	// run in the query cgroup before the task's arrival.
	debug.SetGCPercent(-1)
	runtime.GC()
	debug.FreeOSMemory()
	var (
		parked sync.WaitGroup
		start  = make(chan struct{})
		end    time.Duration // set before start is closed
		done   = make(chan time.Duration, spec.Threads)
	)
	for range spec.Threads {
		parked.Add(1)
		go func() {
			runtime.LockOSThread()
			parked.Done()
			<-start
			burnUntil(end, chunk, done)
		}()
	}
	parked.Wait()
	// The need is counted from here, so what the process does between
	// ready and burning (sleeping in its cgroup, waking at go) is part of
	// it, as the cgroup counts it.
	begin := burn.ProcessCPU()
	if _, err := fmt.Fprintln(out, readyLine); err != nil {
		return fmt.Errorf("worker: signal ready: %w", err)
	}
	var b [1]byte
	if n, _ := in.Read(b[:]); n == 0 {
		return nil
	}
	// NOTE: the move into the query cgroup, between ready and go, resets
	// the affinity to the cgroup's CPUs where the cpuset controller is
	// on (cpuset_attach; Linux 6.2 and later keep the mask a process
	// asked for), so the pin is made again.
	if len(spec.CPUs) > 0 {
		if err := burn.Pin(spec.CPUs); err != nil {
			return fmt.Errorf("worker: %w", err)
		}
	}
	end = begin + time.Duration(spec.NeedUsec)*time.Microsecond
	close(start)
	at := <-done
	burnt := burn.ProcessCPU() - begin
	if _, err := fmt.Fprintf(out, doneFormat, int64(at), int64(burnt)); err != nil {
		return fmt.Errorf("worker: report done: %w", err)
	}
	io.Copy(io.Discard, in)
	return nil
}

// burnUntil spins on its locked OS thread until the process's CPU clock
// reaches end, checking it every chunk (about 50 µs), sends the monotonic
// time it saw, and parks the thread for good: ending a locked goroutine
// would make the runtime exit its thread, CPU the measurement would count.
func burnUntil(end time.Duration, chunk int, done chan<- time.Duration) {
	burn.Until(func() bool { return burn.ProcessCPU() >= end }, chunk)
	done <- burn.Monotonic()
	select {}
}

// workerReport is what a worker said when it finished.
type workerReport struct {
	doneMono time.Duration // CLOCK_MONOTONIC when the need was burnt
	burnt    time.Duration // process CPU time from just before ready until done
}

// readReady waits for the worker's ready line.
func readReady(r *bufio.Reader) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("worker did not signal ready: %w", err)
	}
	if strings.TrimSpace(line) != readyLine {
		return fmt.Errorf("worker said %q, want %q", strings.TrimSpace(line), readyLine)
	}
	return nil
}

// readDone parses the worker's done line.
func readDone(r *bufio.Reader) (workerReport, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return workerReport{}, fmt.Errorf("worker ended without reporting done: %w", err)
	}
	var mono, burnt int64
	if _, err := fmt.Sscanf(line, doneFormat, &mono, &burnt); err != nil {
		return workerReport{}, fmt.Errorf("worker done line %q: %w", strings.TrimSpace(line), err)
	}
	return workerReport{doneMono: time.Duration(mono), burnt: time.Duration(burnt)}, nil
}
