package simulate

import (
	"errors"
	"testing"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/observe"
)

func TestRunKernelHost(t *testing.T) {
	app := Group{Name: "app", Limit: cpulimit.Limit{QuotaUsec: 20_000, PeriodUsec: 100_000}}
	tests := []struct {
		name string
		host Host
		p    KernelParams
		stat observe.CPUStat
		done int64
	}{
		{
			// The chapter's first experiment on the kernel: 40 ms of quota
			// runs out at tick 40 (five draws: 5, 8, 8, 8, then the last 3
			// leave the silo at 0), throttled 40→100; the last 20 ms run
			// 100→120 on a fresh silo; the timer then counts 200 (idle)
			// and 300 (stop). Same 120 ms and 60 ms throttled as the chapter.
			name: "chapter fixed window",
			host: Host{CPUs: 1, TickUsec: 1000,
				Groups: []Group{{Name: "app", Limit: cpulimit.Limit{QuotaUsec: 40_000, PeriodUsec: 100_000}}},
				Tasks:  []HostTask{{Name: "job", Group: "app", NeedUsec: 60_000}}},
			p:    DefaultKernelParams(),
			stat: observe.CPUStat{UsageUsec: 60_000, NrPeriods: 3, NrThrottled: 1, ThrottledUsec: 60_000},
			done: 120_000,
		},
		{
			// Two threads pinned to one CPU share one runqueue: the same
			// counters as one thread (see TestBandwidthMechanisms), including
			// the throttle 120→200 as the task ends in debt.
			name: "two threads pinned to cpu 0",
			host: Host{CPUs: 2, TickUsec: 1000, Groups: []Group{app},
				Tasks: []HostTask{{Name: "a", Group: "app", NeedUsec: 40_000, Threads: 2}}},
			p:    KernelParams{SliceUsec: 5000, TickUsec: 4000, TaskCPUs: map[string][]int{"a": {0}}},
			stat: observe.CPUStat{UsageUsec: 40_000, NrPeriods: 4, NrThrottled: 2, ThrottledUsec: 160_000},
			done: 120_000,
		},
		{
			// The same two threads free to use both CPUs: throttled time
			// is summed over two runqueues; the task ends with quota left
			// on CPU 0, where its last work runs.
			name: "two threads on two cpus",
			host: Host{CPUs: 2, TickUsec: 1000, Groups: []Group{app},
				Tasks: []HostTask{{Name: "a", Group: "app", NeedUsec: 40_000, Threads: 2}}},
			p:    DefaultKernelParams(),
			stat: observe.CPUStat{UsageUsec: 40_000, NrPeriods: 4, NrThrottled: 2, ThrottledUsec: 176_000},
			done: 108_000,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, err := RunKernel(tt.host, tt.p)
			if err != nil {
				t.Fatal(err)
			}
			if got := run.Groups[0].Stat; got != tt.stat {
				t.Errorf("stat = %+v\nwant   %+v", got, tt.stat)
			}
			if got := run.Tasks[0].DoneUsec; got != tt.done {
				t.Errorf("done at %d µs, want %d", got, tt.done)
			}
		})
	}
}

func TestRunKernelWindows(t *testing.T) {
	host := Host{CPUs: 1, TickUsec: 1000,
		Groups: []Group{{Name: "app", Limit: cpulimit.Limit{QuotaUsec: 40_000, PeriodUsec: 100_000}}},
		Tasks:  []HostTask{{Name: "job", Group: "app", NeedUsec: 60_000}}}
	p := DefaultKernelParams()
	p.WindowUsec = 100_000
	run, err := RunKernel(host, p)
	if err != nil {
		t.Fatal(err)
	}
	// Ran 40 then 20; the 60 ms throttled 40→100 are added when the
	// runqueue is unthrottled at 100, so they land in the second window.
	want := []KernelWindow{{RanUsec: 40_000, ThrottledCPUs: 1}, {RanUsec: 20_000, ThrottledUsec: 60_000}, {}}
	got := run.Groups[0].Windows
	if len(got) != len(want) {
		t.Fatalf("windows = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("window %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestRunKernelErrors(t *testing.T) {
	host := Host{CPUs: 2, TickUsec: 1000,
		Groups: []Group{{Name: "app", Limit: cpulimit.Limit{QuotaUsec: 40_000, PeriodUsec: 100_000}}},
		Tasks:  []HostTask{{Name: "job", Group: "app", NeedUsec: 60_000}}}
	tests := []struct {
		name string
		host Host
		p    KernelParams
	}{
		{"pinned outside the host", host, KernelParams{SliceUsec: 5000, TickUsec: 4000, TaskCPUs: map[string][]int{"job": {2}}}},
		{"slice 0", host, KernelParams{TickUsec: 4000}},
		{"tick phase past the tick", host, KernelParams{SliceUsec: 5000, TickUsec: 4000, TickPhaseUsec: 4000}},
		{"negative period phase", host, KernelParams{SliceUsec: 5000, TickUsec: 4000, PeriodPhaseUsec: map[string]int64{"app": -1}}},
		{"invalid host", Host{CPUs: 0, TickUsec: 1000}, DefaultKernelParams()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := RunKernel(tt.host, tt.p); !errors.Is(err, ErrInvalidInput) {
				t.Errorf("err = %v, want one wrapping ErrInvalidInput", err)
			}
		})
	}
}

// TestRunKernelLongRun replays 40 minutes of the scaling benchmark's query
// stream. Past 2^31 µs a float64 clock moves in steps of 4.8e-7 µs, and a
// task whose last need is less than its threads run in one step could not
// reach its completion: the next event stayed at the same instant for
// ever. Every task must end after its arrival, and the pool must have used
// exactly what the tasks needed.
func TestRunKernelLongRun(t *testing.T) {
	h := queryStream(2400)
	run, err := RunKernel(h, DefaultKernelParams())
	if err != nil {
		t.Fatal(err)
	}
	var need int64
	for i, task := range h.Tasks {
		need += task.NeedUsec
		if done := run.Tasks[i].DoneUsec; done <= task.ArriveUsec || done > run.EndUsec {
			t.Errorf("task %s arrived at %d µs, done at %d µs, run ended at %d µs", task.Name, task.ArriveUsec, done, run.EndUsec)
		}
	}
	if got := run.Groups[0].Stat.UsageUsec; got != uint64(need) {
		t.Errorf("pool used %d µs, the tasks needed %d µs", got, need)
	}
}
