package kerneltest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A timing-judging real-kernel test can fail because the machine did not
// give it the CPU it needed (other work on a busy host, or the host
// taking the CPUs away from a VM), not because the result was wrong. A
// Gauge tells the two apart: while the test runs, a calibration thread
// does a fixed amount of work now and then and times it. On a machine
// that gives the thread a CPU the work takes the same time each round;
// when the machine is starved it takes longer, whatever the guest's own
// CPU accounting says (an emulated VM charges the time the host took
// away to the running thread, so CPU time alone cannot show it).

// Gauge samples the CPU a busy thread gets, from Start to Stop.
type Gauge struct {
	stop chan struct{}
	done sync.WaitGroup
	mu   sync.Mutex
	// rounds are the times of the rounds since Start.
	rounds []time.Duration
}

// gaugeWork is the work of one round, and gaugeEvery how often a round
// runs: about 5 ms of work every 100 ms, so the gauge costs the test
// little.
const (
	gaugeWork  = 2_000_000
	gaugeEvery = 100 * time.Millisecond
)

// bestRound is the fastest gauge round seen in this process: the
// machine's unstarved speed, as far as it is known.
var bestRound struct {
	sync.Mutex
	d time.Duration
}

// StartGauge starts sampling; Stop ends it and says how starved the
// machine was. With tasks, a cgroup v1 tasks file, the sampling thread
// runs in that cgroup: in a test's favoured root it gets the CPU the
// test's own work gets, not what an ordinary thread of the busy host
// would. When the sampling ends the thread goes back to the cgroup it
// came from, and then ends (its goroutine exits locked to it), so it
// leaves the test's cgroup empty by the time Stop returns. An error
// moving it is returned.
func StartGauge(tasks string) (*Gauge, error) {
	g := &Gauge{stop: make(chan struct{})}
	moved := make(chan error, 1)
	g.done.Add(1)
	go g.sample(tasks, moved, make(chan struct{}, 1))
	if err := <-moved; err != nil {
		g.done.Wait()
		return nil, err
	}
	return g, nil
}

// sample is the gauge's goroutine. It says on locked when it holds a
// thread of its own, and on moved whether that thread joined tasks.
func (g *Gauge) sample(tasks string, moved chan<- error, locked chan<- struct{}) {
	defer g.done.Done()
	runtime.LockOSThread() // never unlocked but on the main thread: the thread ends with the goroutine
	if unix.Gettid() == unix.Getpid() {
		// NOTE: the process's main thread outlives a goroutine locked to
		// it, so in a cgroup it would keep the test's cgroup from being
		// removed. Hold it while another goroutine, which cannot be
		// scheduled on it meanwhile, takes a thread of its own.
		child := make(chan struct{}, 1)
		g.done.Add(1)
		go g.sample(tasks, moved, child)
		<-child
		runtime.UnlockOSThread()
		locked <- struct{}{}
		return
	}
	locked <- struct{}{}
	if tasks != "" {
		home, err := joinTasks(tasks)
		if err != nil {
			moved <- err
			return
		}
		// The thread ends with the goroutine, but only after it returns:
		// back home first, so the test's cgroup is empty when Stop
		// returns and the test's cleanup removes it.
		defer home()
	}
	moved <- nil
	round()
	t := time.NewTicker(gaugeEvery)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
			d := round()
			g.mu.Lock()
			g.rounds = append(g.rounds, d)
			g.mu.Unlock()
		}
	}
}

// joinTasks moves the calling thread into the cgroup v1 tasks file given
// and returns what moves it back to the cgroup of the same hierarchy it
// was in. The hierarchy's mount point is the tasks file's directory less
// the thread's cgroup path once moved (/proc/thread-self/cgroup).
func joinTasks(tasks string) (home func(), err error) {
	from, err := threadCPUCgroup()
	if err != nil {
		return nil, err
	}
	tid := []byte(strconv.Itoa(unix.Gettid()))
	if err := os.WriteFile(tasks, tid, 0); err != nil {
		return nil, fmt.Errorf("move the gauge's thread into %s: %w", tasks, err)
	}
	to, err := threadCPUCgroup()
	mount, ok := strings.CutSuffix(filepath.Dir(tasks), to)
	if err != nil || !ok {
		return nil, fmt.Errorf("the gauge's thread moved into %s is in cpu cgroup %q (%v): cannot tell its way back", tasks, to, err)
	}
	back := filepath.Join(mount, from, "tasks")
	return func() { os.WriteFile(back, tid, 0) }, nil
}

// threadCPUCgroup is the calling thread's cgroup in the v1 hierarchy of
// the cpu controller, from /proc/thread-self/cgroup.
func threadCPUCgroup() (string, error) {
	b, err := os.ReadFile("/proc/thread-self/cgroup")
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(b)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "cpu") {
			return f[2], nil
		}
	}
	return "", fmt.Errorf("/proc/thread-self/cgroup names no v1 cpu hierarchy:\n%s", b)
}

// round times one round of work and keeps the fastest.
func round() time.Duration {
	start := time.Now()
	x := uint64(1)
	for i := range gaugeWork {
		x = x*6364136223846793005 + uint64(i)
	}
	sink = x
	d := time.Since(start)
	bestRound.Lock()
	if bestRound.d == 0 || d < bestRound.d {
		bestRound.d = d
	}
	bestRound.Unlock()
	return d
}

// sink keeps the work from being optimised away.
var sink uint64

// Share is the CPU the machine gave the gauge's thread, 0..1: the fastest
// round of the process over the median round since Start. Below
// [StarvedBelow] the machine was too busy for timing to be judged.
type Share float64

// StarvedBelow is the share under which a timing result is not judged:
// the thread got less than 70% of a CPU's speed in half of its rounds.
const StarvedBelow Share = 0.7

// Stop ends the sampling and returns the share of a CPU the thread got.
func (g *Gauge) Stop() Share {
	close(g.stop)
	g.done.Wait()
	g.mu.Lock()
	rounds := append([]time.Duration(nil), g.rounds...)
	g.mu.Unlock()
	if len(rounds) == 0 {
		return 1
	}
	slices.Sort(rounds)
	bestRound.Lock()
	best := bestRound.d
	bestRound.Unlock()
	return Share(float64(best) / float64(rounds[len(rounds)/2]))
}

// String renders the share for a test's log: "62% of a CPU".
func (s Share) String() string { return fmt.Sprintf("%.0f%% of a CPU", float64(s)*100) }

// Retry runs a timing-judging attempt up to attempts times while a Gauge
// measures the machine, its thread in the test's cgroup r on v1 (so it
// gets what the test's favoured work gets) and in the test's own on v2
// (a VM of its own, which only the host can starve). attempt returns "" when the result is right, or
// why it is not. A wrong result while the machine gave the test its CPU
// fails the test at once; one while it was starved is logged and run
// again; when every attempt was starved the test fails saying the
// machine stayed too busy to judge. It never skips.
func (r Root) Retry(t testing.TB, attempts int, attempt func(n int) string) {
	t.Helper()
	tasks := ""
	if r.mode == V1 {
		tasks = filepath.Join(r.Path, "tasks") // v2 moves no single thread outside threaded subtrees
	}
	retry(t, attempts, func() func() Share {
		g, err := StartGauge(tasks)
		if err != nil {
			t.Fatal(err)
		}
		return g.Stop
	}, attempt)
}

// retry is Retry with the gauge given: gauge starts one and returns its
// Stop.
func retry(t TB, attempts int, gauge func() func() Share, attempt func(n int) string) {
	t.Helper()
	for n := 1; n <= attempts; n++ {
		stop := gauge()
		why := attempt(n)
		share := stop()
		switch {
		case why == "" && n > 1:
			t.Logf("attempt %d of %d: right, the machine gave %s (the earlier ones were starved)", n, attempts, share)
			return
		case why == "":
			t.Logf("right at the first attempt; the machine gave %s", share)
			return
		case share >= StarvedBelow:
			t.Errorf("%s (attempt %d of %d, the machine gave %s: a wrong result, not a busy machine)", why, n, attempts, share)
			return
		case n < attempts:
			t.Logf("attempt %d of %d: %s, while the machine gave only %s (below %s): starved, running it again", n, attempts, why, share, StarvedBelow)
		default:
			t.Errorf("%s; every one of %d attempts ran on a machine too busy to judge timing (the last gave %s, below %s): not a verdict on the code, rerun on a quieter machine",
				why, attempts, share, StarvedBelow)
		}
	}
}

// TB is the part of testing.TB Retry uses.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
}
