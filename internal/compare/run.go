package compare

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/burn"
	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/internal/pooltree"
	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/planner"
	"github.com/poolagent/poolagent/simulate"
)

// Options steer a compare run.
type Options struct {
	// Root is the pool root to create for the run, e.g.
	// /sys/fs/cgroup/cpu/poolagent-compare; it must not exist. Empty: a
	// unique directory below the cpu controller's mount. Each repetition
	// creates it afresh and removes it at the end.
	Root string
	// Repeat is how many times the scenario runs; at least 1.
	Repeat int
	// Timeline samples every group's cpu.stat once per window for the
	// measured timeline.
	Timeline bool
	// Kernel are the host's settings for the kernel model.
	Kernel observe.KernelSettings
	// WorkerCommand starts a worker: the worker's arguments
	// (WorkerSpec.Args) are appended. The CLI passes its own binary and
	// its hidden worker subcommand.
	WorkerCommand []string
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// HostRoot is the directory the host's /proc and /sys are found in:
	// the cgroup mounts (cgroupfs.Detect), the load average and the CPU
	// model. "" is "/"; tests pass a fixture tree.
	HostRoot string
}

// Measure runs l for real opt.Repeat times and returns the report with
// both models' predictions for every run. It cleans up every cgroup and
// worker it made, also when ctx is cancelled or a step fails.
func Measure(ctx context.Context, name string, l *Layout, opt Options) (*Report, error) {
	if len(opt.WorkerCommand) == 0 {
		return nil, errors.New("compare: no worker command")
	}
	host := cmp.Or(opt.HostRoot, "/")
	proc := filepath.Join(host, "proc")
	mounts, err := cgroupfs.Detect(host)
	if err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	cpuDir, v2, err := mounts.Controller("cpu")
	if err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	if n := numCPU(); l.Kernel.CPUs > n {
		return nil, fmt.Errorf("compare: %s needs %d CPUs, this host has %d", name, l.Kernel.CPUs, n)
	}
	env := Env{Measured: true, Kernel: observe.KernelRelease(), Cgroup: "v1", CPUs: l.Kernel.CPUs, SliceUsec: opt.Kernel.SliceUsec,
		TickUsec: opt.Kernel.TickUsec(), TickSource: opt.Kernel.Source, Runs: max(opt.Repeat, 1), Load1Start: observe.Load1(proc), Emulated: observe.Emulated(proc),
		ModelCaveat: observe.ReadModelHost(host).Caveats().String()}
	if v2 {
		env.Cgroup = "v2"
	}
	var runs []runResult
	for i := range env.Runs {
		root := opt.Root
		if root == "" {
			root = filepath.Join(cpuDir, fmt.Sprintf("poolagent-compare-%d-%d", os.Getpid(), i+1))
		}
		progress(opt, "run %d of %d in %s", i+1, env.Runs, root)
		r, err := runOnce(ctx, mounts, root, l, opt)
		if _, statErr := os.Stat(root); errors.Is(err, context.Canceled) && os.IsNotExist(statErr) {
			return nil, fmt.Errorf("compare: run %d interrupted; its workers were ended and %s removed: %w", i+1, root, err)
		}
		if err != nil {
			return nil, fmt.Errorf("compare: run %d: %w", i+1, err)
		}
		runs = append(runs, r)
	}
	env.Load1End = observe.Load1(proc)
	return assemble(name, l, opt, env, runs)
}

// Predict returns the report of the simulation alone, for when nothing
// can be measured; why says so in the report.
func Predict(name string, l *Layout, opt Options, why string) (*Report, error) {
	env := Env{Why: why, CPUs: l.Kernel.CPUs, SliceUsec: opt.Kernel.SliceUsec, TickUsec: opt.Kernel.TickUsec(),
		TickSource: opt.Kernel.Source, Runs: 1, ModelCaveat: observe.ReadModelHost(cmp.Or(opt.HostRoot, "/")).Caveats().String()}
	run := runResult{phases: map[string]int64{}, arrivals: map[string]int64{}}
	return assemble(name, l, opt, env, []runResult{run})
}

func progress(opt Options, format string, args ...any) {
	if opt.Progress != nil {
		fmt.Fprintf(opt.Progress, "compare: "+format+"\n", args...)
	}
}

// runResult is what one real run measured.
type runResult struct {
	phases    map[string]int64 // group → first period expiry after t0, µs
	tickPhase int64
	arrivals  map[string]int64 // task → when it was told to go, µs after t0
	measured  map[string]observe.CPUStat
	windows   map[string][]Window
	done      map[string]int64 // task → need burnt, µs after t0
	burnt     map[string]int64
}

// worker is one started worker process.
type worker struct {
	task   string
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *bytes.Buffer
	report workerReport
	err    error
	// reported is closed when the worker said done (or failed to).
	reported chan struct{}
}

// runOnce makes the cgroups, starts the workers, measures and removes
// everything again.
func runOnce(ctx context.Context, mounts cgroupfs.Mounts, root string, l *Layout, opt Options) (res runResult, err error) {
	if _, err := os.Stat(root); err == nil {
		return res, fmt.Errorf("pool root %s exists; compare creates its own root and removes it afterwards: give a path that does not exist", root)
	}
	h, err := pooltree.Open(mounts, root, cgroupfs.Options{})
	if err != nil {
		return res, err
	}
	defer h.Close()

	var workers []*worker
	created := false
	defer func() {
		killAll(workers)
		if created {
			if rerr := h.Writer().RemoveAll(); rerr != nil {
				err = errors.Join(err, fmt.Errorf("remove compare cgroups: %w", rerr))
			}
		}
	}()
	for _, t := range l.Kernel.Tasks {
		w, err := startWorker(opt, l, t)
		if err != nil {
			return res, err
		}
		workers = append(workers, w)
	}
	for _, w := range workers {
		if err := waitReady(ctx, w); err != nil {
			return res, err
		}
	}
	created = true
	if err := placeWorkers(h, l, workers); err != nil {
		return res, err
	}
	return measure(ctx, h.Reader(), l, opt, workers, burn.Monotonic())
}

// placeWorkers applies the pools, favours their root and moves each ready
// worker into its query cgroup.
func placeWorkers(h *pooltree.Handle, l *Layout, workers []*worker) error {
	if err := h.Apply(l.Desired); err != nil {
		return fmt.Errorf("apply pools: %w", err)
	}
	if err := h.Writer().FavourRoot(); err != nil {
		return err
	}
	for _, w := range workers {
		ps, _ := l.Desired.Pool(l.PoolOf[w.task])
		if err := h.PlaceQuery(ps, w.task, w.cmd.Process.Pid); err != nil {
			return fmt.Errorf("place worker of %s: %w", w.task, err)
		}
	}
	return nil
}

// measure finds the period timers' phases, releases the placed workers at
// their arrivals, waits for them and for the counters to settle, and
// returns what the cgroups counted. lastWrite is when the last cgroup
// file was written.
func measure(ctx context.Context, ot *cgroupfs.Reader, l *Layout, opt Options, workers []*worker, lastWrite time.Duration) (res runResult, err error) {
	boundaries, err := watchBoundaries(ctx, ot, l, lastWrite)
	if err != nil {
		return res, err
	}
	tickAt := tickBoundary()
	base, err := readGroups(ot, l)
	if err != nil {
		return res, err
	}

	t0 := burn.Monotonic() + 5*time.Millisecond
	res = runResult{phases: map[string]int64{}, arrivals: map[string]int64{}, done: map[string]int64{}, burnt: map[string]int64{}}
	tick := time.Duration(opt.Kernel.TickUsec()) * time.Microsecond
	res.tickPhase = int64(posMod(tickAt-t0, tick) / time.Microsecond)
	for g, at := range boundaries {
		period := time.Duration(groupByName(l.Kernel, g).PeriodUsec) * time.Microsecond
		res.phases[g] = int64(posMod(at-t0, period) / time.Microsecond)
	}

	window := windowUsec(l)
	sampler := startSampler(ot, l, opt.Timeline, t0, time.Duration(window)*time.Microsecond, base)
	var releaseErr error
	onRealtimeThread(func() { releaseErr = release(ctx, workers, l, t0, &res) })
	if releaseErr != nil {
		sampler.stop()
		return res, releaseErr
	}
	for _, w := range workers {
		select {
		case <-w.reported:
		case <-ctx.Done():
			sampler.stop()
			return res, ctx.Err()
		}
		if w.err != nil {
			sampler.stop()
			return res, w.err
		}
		res.done[w.task] = int64((w.report.doneMono - t0) / time.Microsecond)
		res.burnt[w.task] = int64(w.report.burnt / time.Microsecond)
	}
	// Let every period timer see its last period and stop (two expiries
	// after the last demand), so the counters are final.
	if err := sleepCtx(ctx, 2*maxPeriod(l)+30*time.Millisecond); err != nil {
		sampler.stop()
		return res, err
	}
	if res.windows, err = sampler.stop(); err != nil {
		return res, err
	}
	final, err := readGroups(ot, l)
	if err != nil {
		return res, err
	}
	if err := endWorkers(workers); err != nil {
		return res, err
	}
	res.measured = map[string]observe.CPUStat{}
	for g, st := range final {
		res.measured[g] = st.Sub(base[g])
	}
	progress(opt, "measured %d groups; each group's period timer (which refills its quota) first expired at %s, the scheduler tick first came at %dµs, both from the run's start; the kernel model starts from these phases",
		len(final), phasesText(res.phases), res.tickPhase)
	return res, nil
}

// startWorker starts the worker of task t, restricted to its pinned CPUs
// or else to the scenario's CPUs.
func startWorker(opt Options, l *Layout, t simulate.HostTask) (*worker, error) {
	cpus := l.TaskCPUs[t.Name]
	if len(cpus) == 0 && l.Kernel.CPUs < numCPU() {
		for c := range l.Kernel.CPUs {
			cpus = append(cpus, c)
		}
	}
	spec := WorkerSpec{NeedUsec: t.NeedUsec, Threads: max(t.Threads, 1), CPUs: cpus}
	args := append(slices.Clone(opt.WorkerCommand[1:]), spec.Args()...)
	cmd := exec.Command(opt.WorkerCommand[0], args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	w := &worker{task: t.Name, cmd: cmd, in: in, out: bufio.NewReader(out), stderr: new(bytes.Buffer), reported: make(chan struct{})}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker of %s: %w", t.Name, err)
	}
	return w, nil
}

// waitReady waits up to 30 s for a worker's ready line.
func waitReady(ctx context.Context, w *worker) error {
	got := make(chan error, 1)
	go func() { got <- readReady(w.out) }()
	select {
	case err := <-got:
		if err != nil {
			return fmt.Errorf("worker of %s (pid %d): %w; stderr: %s", w.task, w.cmd.Process.Pid, err, strings.TrimSpace(w.stderr.String()))
		}
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("worker of %s (pid %d) not ready after 30s", w.task, w.cmd.Process.Pid)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release tells each worker to go at t0 + its arrival and starts
// collecting its report.
func release(ctx context.Context, workers []*worker, l *Layout, t0 time.Duration, res *runResult) error {
	order := slices.Clone(workers)
	arrive := map[string]int64{}
	for _, t := range l.Kernel.Tasks {
		arrive[t.Name] = t.ArriveUsec
	}
	sort.SliceStable(order, func(i, j int) bool { return arrive[order[i].task] < arrive[order[j].task] })
	for _, w := range order {
		if err := sleepUntil(ctx, t0+time.Duration(arrive[w.task])*time.Microsecond, nil); err != nil {
			return err
		}
		at := burn.Monotonic()
		if _, err := w.in.Write([]byte{1}); err != nil {
			return fmt.Errorf("start worker of %s: %w", w.task, err)
		}
		res.arrivals[w.task] = int64((at - t0) / time.Microsecond)
		go func() {
			w.report, w.err = readDone(w.out)
			if w.err != nil {
				w.err = fmt.Errorf("worker of %s: %w; stderr: %s", w.task, w.err, strings.TrimSpace(w.stderr.String()))
			}
			close(w.reported)
		}()
	}
	return nil
}

// endWorkers lets every worker exit (EOF on its stdin) and reaps it.
func endWorkers(workers []*worker) error {
	var errs []error
	for _, w := range workers {
		w.in.Close()
		if err := w.cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("worker of %s: %w; stderr: %s", w.task, err, strings.TrimSpace(w.stderr.String())))
		}
	}
	return errors.Join(errs...)
}

// killAll ends every worker not yet reaped, by its PID, and reaps it.
func killAll(workers []*worker) {
	for _, w := range workers {
		if w.cmd.ProcessState != nil {
			continue
		}
		w.cmd.Process.Kill()
		w.in.Close()
		w.cmd.Wait()
	}
}

func groupByName(h simulate.Host, name string) simulate.Group {
	for _, g := range h.Groups {
		if g.Name == name {
			return g
		}
	}
	return simulate.Group{}
}

// limited lists the groups with a quota: the ones with a period timer.
func limited(h simulate.Host) []string {
	var out []string
	for _, g := range h.Groups {
		if g.QuotaUsec != cpulimit.Max {
			out = append(out, g.Name)
		}
	}
	return out
}

func maxPeriod(l *Layout) time.Duration {
	p := int64(0)
	for _, g := range l.Kernel.Groups {
		p = max(p, g.PeriodUsec)
	}
	return time.Duration(p) * time.Microsecond
}

// windowUsec is the timeline's window: the first pool's period.
func windowUsec(l *Layout) int64 {
	for _, g := range l.Kernel.Groups {
		if g.Parent == "" && g.Name != planner.DefaultPool {
			return g.PeriodUsec
		}
	}
	return cpulimit.DefaultPeriodUsec
}

// watchBoundaries polls nr_periods of every group with a quota every
// 200 µs while its period timer makes the two expiries that follow the
// write of its limit (then it stops: the group is idle), and returns, per
// group, a moment on CLOCK_MONOTONIC when its timer expired.
func watchBoundaries(ctx context.Context, ot *cgroupfs.Reader, l *Layout, lastWrite time.Duration) (map[string]time.Duration, error) {
	groups := limited(l.Kernel)
	seen := map[string]uint64{}
	at := map[string]time.Duration{}
	deadline := lastWrite + 2*maxPeriod(l) + 50*time.Millisecond
	prev := burn.Monotonic()
	for {
		now := burn.Monotonic()
		finished := true
		for _, g := range groups {
			st, err := ot.CPUStat(l.Paths[g])
			if err != nil {
				return nil, err
			}
			if n, ok := seen[g]; ok && st.NrPeriods != n {
				at[g] = prev + (now-prev)/2
			}
			seen[g] = st.NrPeriods
			if st.NrPeriods < 2 {
				finished = false
			}
		}
		prev = now
		if finished || now > deadline {
			break
		}
		if err := sleepCtx(ctx, 200*time.Microsecond); err != nil {
			return nil, err
		}
	}
	return at, nil
}

// tickBoundary returns a moment when the scheduler tick fired: jiffies,
// and so CLOCK_MONOTONIC_COARSE, advance at ticks.
func tickBoundary() time.Duration {
	start := burn.Clock(unix.CLOCK_MONOTONIC_COARSE)
	for {
		now := burn.Monotonic()
		if burn.Clock(unix.CLOCK_MONOTONIC_COARSE) != start {
			return now
		}
	}
}

// readGroups reads every group's counters.
func readGroups(ot *cgroupfs.Reader, l *Layout) (map[string]observe.CPUStat, error) {
	out := map[string]observe.CPUStat{}
	for _, g := range l.Kernel.Groups {
		s, err := ot.Read(l.Paths[g.Name])
		if err != nil {
			return nil, err
		}
		out[g.Name] = s.CPU
	}
	return out, nil
}

// sampler reads every group once per window for the measured timeline.
type sampler struct {
	stopped atomic.Bool
	done    chan map[string][]Window
	err     error // the read that ended sampling early; set before done
	enabled bool
}

func startSampler(ot *cgroupfs.Reader, l *Layout, enabled bool, t0, window time.Duration, base map[string]observe.CPUStat) *sampler {
	s := &sampler{done: make(chan map[string][]Window, 1), enabled: enabled}
	if !enabled {
		s.done <- nil
		return s
	}
	go onRealtimeThread(func() {
		out := map[string][]Window{}
		defer func() { s.done <- out }()
		prev := base
		for k := 1; ; k++ {
			if sleepUntil(context.Background(), t0+time.Duration(k)*window, &s.stopped) != nil {
				return
			}
			cur, err := readGroups(ot, l)
			if err != nil {
				s.err = fmt.Errorf("sample window %d: %w", k, err)
				return
			}
			for g, st := range cur {
				d := st.Sub(prev[g])
				out[g] = append(out[g], Window{RanUsec: d.UsageUsec, ThrottledUsec: d.ThrottledUsec})
			}
			prev = cur
		}
	})
	return s
}

// stop ends sampling and returns the windows, or the error of a read
// that ended it early.
func (s *sampler) stop() (map[string][]Window, error) {
	if s.enabled {
		s.stopped.Store(true)
		s.enabled = false
	}
	return <-s.done, s.err
}

// errStopped ends a sleepUntil whose stop flag was raised.
var errStopped = errors.New("stopped")

// sleepUntil sleeps on this OS thread until CLOCK_MONOTONIC reaches
// deadline (clock_nanosleep, so a real-time thread wakes on time however
// busy the Go runtime's other threads are), waking every 20 ms to check
// ctx and stop.
func sleepUntil(ctx context.Context, deadline time.Duration, stop *atomic.Bool) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if stop != nil && stop.Load() {
			return errStopped
		}
		now := burn.Monotonic()
		if now >= deadline {
			return nil
		}
		ts := unix.NsecToTimespec(int64(min(deadline, now+20*time.Millisecond)))
		if err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil); err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("clock_nanosleep: %w", err)
		}
	}
}

// onRealtimeThread runs fn on an OS thread of its own with the real-time
// policy SCHED_FIFO, and waits for it. The workers run with the top CPU
// weight (favour) and may keep every CPU busy; releasing them on time and
// sampling cpu.stat on the period grid must not wait behind them. When the
// policy cannot be set, fn runs at normal priority. The thread ends with
// fn, so its policy never leaks to other goroutines.
func onRealtimeThread(fn func()) {
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		defer close(done)
		unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: 1}, 0)
		fn()
	}()
	<-done
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func posMod(d, m time.Duration) time.Duration {
	r := d % m
	if r < 0 {
		r += m
	}
	return r
}

func numCPU() int { return runtime.NumCPU() }

// phasesText renders group → phase (µs) as "olap 93091µs, q1 12000µs",
// groups in name order.
func phasesText(phases map[string]int64) string {
	var parts []string
	for _, g := range slices.Sorted(maps.Keys(phases)) {
		parts = append(parts, fmt.Sprintf("%s %dµs", g, phases[g]))
	}
	return strings.Join(parts, ", ")
}
