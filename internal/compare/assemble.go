package compare

import (
	"fmt"
	"maps"

	"github.com/poolagent/poolagent/observe"
	"github.com/poolagent/poolagent/simulate"
)

// assemble predicts every run with both models and builds the report.
// Each run's kernel prediction uses that run's measured period phases,
// tick phase and actual arrival times; the simple model needs none of
// them and runs once.
func assemble(name string, l *Layout, opt Options, env Env, runs []runResult) (*Report, error) {
	window := windowUsec(l)
	simple, err := simulate.RunHost(l.Simple, simulate.HostOptions{})
	if err != nil {
		return nil, fmt.Errorf("compare: simple model: %w", err)
	}
	r := &Report{Scenario: name, Env: env, Target: TargetFor(l.Pinned(), env.Emulated, env.TickUsec), WindowUsec: window}
	for i, g := range l.Kernel.Groups {
		r.Groups = append(r.Groups, GroupResult{Name: g.Name, Path: l.Paths[g.Name], Limit: LimitText(g), QuotaUsec: g.QuotaUsec, Simple: simple.Groups[i].Stat})
	}
	for i, t := range l.Kernel.Tasks {
		r.Tasks = append(r.Tasks, TaskResult{Name: t.Name, Group: l.PoolOf[t.Name], ArriveUsec: t.ArriveUsec, NeedUsec: t.NeedUsec,
			Threads: max(t.Threads, 1), CPUs: l.TaskCPUs[t.Name], SimpleDoneUsec: int64(simple.Tasks[i].Done) * l.Simple.TickUsec})
	}
	for _, run := range runs {
		r.Runs = append(r.Runs, RunInfo{TickPhaseUsec: run.tickPhase})
		host := l.Kernel
		host.Tasks = append([]simulate.HostTask(nil), l.Kernel.Tasks...)
		for i, t := range host.Tasks {
			if at, ok := run.arrivals[t.Name]; ok {
				host.Tasks[i].ArriveUsec = max(at, 0)
			}
		}
		p := kernelParams(opt.Kernel)
		p.TickPhaseUsec = run.tickPhase
		p.PeriodPhaseUsec = maps.Clone(run.phases)
		p.WindowUsec = window
		p.TaskCPUs = l.TaskCPUs
		kr, err := simulate.RunKernel(host, p)
		if err != nil {
			return nil, fmt.Errorf("compare: kernel model: %w", err)
		}
		for i := range r.Groups {
			g := &r.Groups[i]
			if g.Class == "" { // by the first run's prediction
				g.Class = l.Class(g.Name, kr, p.TickUsec)
			}
			gr := GroupRun{Kernel: kr.Groups[i].Stat, PhaseUsec: run.phases[g.Name], Measured: run.measured[g.Name]}
			for _, w := range kr.Groups[i].Windows {
				gr.KernelWindows = append(gr.KernelWindows, Window{RanUsec: w.RanUsec, ThrottledUsec: w.ThrottledUsec})
			}
			gr.MeasuredWindows = run.windows[g.Name]
			g.Runs = append(g.Runs, gr)
		}
		for i := range r.Tasks {
			t := &r.Tasks[i]
			tr := TaskRun{MeasuredDoneUsec: -1, KernelDoneUsec: kr.Tasks[i].DoneUsec}
			if d, ok := run.done[t.Name]; ok {
				tr.MeasuredDoneUsec, tr.BurntUsec = d, run.burnt[t.Name]
			}
			t.Runs = append(t.Runs, tr)
		}
	}
	r.Finish()
	return r, nil
}

// kernelParams are the kernel model's parameters for the host's settings.
func kernelParams(k observe.KernelSettings) simulate.KernelParams {
	return simulate.KernelParams{SliceUsec: k.SliceUsec, TickUsec: k.TickUsec(), WakeCreditUsec: k.WakeCreditUsec}
}
