package simulate

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/cpulimit"
)

// modelHost is a node with a pool of two query groups (one on CPUs 2-3),
// a second pool with its own period, a group without tasks, and tasks
// spread over time, one of them pinned.
func modelHost(t *testing.T) (Host, KernelParams) {
	cpus, err := cpulimit.ParseCPUSet("2-3")
	if err != nil {
		t.Fatal(err)
	}
	lim := func(quota, period, burst int64) cpulimit.Limit {
		return cpulimit.Limit{QuotaUsec: quota, PeriodUsec: period, BurstUsec: burst}
	}
	q2 := Group{Name: "q2", Parent: "olap", Limit: lim(60_000, 100_000, 0)}
	q2.CPUs = cpus
	h := Host{CPUs: 4, TickUsec: 1000,
		Groups: []Group{
			{Name: "olap", Limit: lim(200_000, 100_000, 100_000)},
			{Name: "q1", Parent: "olap", Limit: lim(100_000, 100_000, 0)},
			q2,
			{Name: "spare", Limit: lim(10_000, 100_000, 0)},
			{Name: "web", Limit: lim(20_000, 40_000, 0)},
		},
		Tasks: []HostTask{
			{Name: "a", Group: "q1", ArriveUsec: 0, NeedUsec: 80_000, Threads: 2},
			{Name: "b", Group: "q2", ArriveUsec: 200_000, NeedUsec: 150_000, Threads: 3},
			{Name: "c", Group: "web", ArriveUsec: 200_000, NeedUsec: 40_000, Threads: 1},
			{Name: "d", Group: "q1", ArriveUsec: 600_000, NeedUsec: 120_000, Threads: 4},
			{Name: "e", Group: "web", ArriveUsec: 700_000, NeedUsec: 30_000, Threads: 2},
		}}
	p := KernelParams{SliceUsec: 5000, TickUsec: 4000, TickPhaseUsec: 1000, WindowUsec: 100_000,
		PeriodPhaseUsec: map[string]int64{"olap": 30_000, "q1": 7000, "web": 10_000},
		TaskCPUs:        map[string][]int{"c": {1}}}
	return h, p
}

// cutHost is h cut down to its tasks from..to-1, each arriving shiftUsec
// earlier, and the groups on their paths, in h's order.
func cutHost(h Host, from, to int, shiftUsec int64) Host {
	parent := map[string]string{}
	for _, g := range h.Groups {
		parent[g.Name] = g.Parent
	}
	keep := map[string]bool{}
	cut := Host{CPUs: h.CPUs, TickUsec: h.TickUsec}
	for _, task := range h.Tasks[from:to] {
		for g := task.Group; g != ""; g = parent[g] {
			keep[g] = true
		}
		task.ArriveUsec -= shiftUsec
		cut.Tasks = append(cut.Tasks, task)
	}
	for _, g := range h.Groups {
		if keep[g.Name] {
			cut.Groups = append(cut.Groups, g)
		}
	}
	return cut
}

// TestKernelModelRunTasks holds RunTasks to its definition: RunKernel of
// the host cut down to the tasks and their groups, arrivals moved by the
// shift, with the same parameters.
func TestKernelModelRunTasks(t *testing.T) {
	h, p := modelHost(t)
	m, err := NewKernelModel(h, p)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := m.Run()
	if err != nil {
		t.Fatal(err)
	}
	if want, err := RunKernel(h, p); err != nil || !reflect.DeepEqual(whole, want) {
		t.Fatalf("Run = %+v, %v\nwant %+v", whole, err, want)
	}
	tests := []struct {
		name      string
		from, to  int
		shiftUsec int64
		groups    []string
	}{
		{"all", 0, 5, 0, []string{"olap", "q1", "q2", "web"}},
		{"a query on cpus 2-3 and a pinned task, moved", 1, 3, 200_000, []string{"olap", "q2", "web"}},
		{"two pools, moved", 3, 5, 600_000, []string{"olap", "q1", "web"}},
		{"a task of its own pool", 2, 3, 200_000, []string{"web"}},
		{"no task", 2, 2, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := m.RunTasks(tt.from, tt.to, tt.shiftUsec)
			if err != nil {
				t.Fatal(err)
			}
			want, err := RunKernel(cutHost(h, tt.from, tt.to, tt.shiftUsec), p)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("RunTasks = %+v\nwant %+v", got, want)
			}
			var names []string
			for _, g := range got.Groups {
				names = append(names, g.Name)
			}
			if !slices.Equal(names, tt.groups) {
				t.Errorf("groups %v, want %v", names, tt.groups)
			}
			if len(got.Groups) > 0 && got.Groups[0].Stat.UsageUsec == 0 {
				t.Errorf("the part ran nothing: %+v", got)
			}
		})
	}
}

func TestKernelModelRunTasksErrors(t *testing.T) {
	h, p := modelHost(t)
	m, err := NewKernelModel(h, p)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		from, to  int
		shiftUsec int64
		field     string
		want      string
	}{
		{"to past the tasks", 0, 6, 0, "RunTasks to", "in [0, 5]"},
		{"from after to", 3, 2, 0, "RunTasks from", "in [0, 2]"},
		{"from negative", -1, 2, 0, "RunTasks from", "in [0, 2]"},
		{"shift past the earliest arrival", 1, 3, 300_000, "RunTasks shiftUsec", "in [0, 200000]"},
		{"shift negative", 1, 3, -100_000, "RunTasks shiftUsec", "in [0, 200000]"},
		{"shift off the tick", 1, 3, 2000, "RunTasks shiftUsec", "KernelParams.TickUsec, 4000 µs"},
		{"shift off the window", 1, 3, 40_000, "RunTasks shiftUsec", "KernelParams.WindowUsec, 100000 µs"},
		{"shift off web's period", 4, 5, 500_000, "RunTasks shiftUsec", `group "web", 40000 µs`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := m.RunTasks(tt.from, tt.to, tt.shiftUsec)
			var ie *InputError
			if !errors.As(err, &ie) || ie.Field != tt.field || !strings.Contains(ie.Want, tt.want) || !errors.Is(err, ErrInvalidInput) {
				t.Errorf("err = %v, want an *InputError on %s wanting %s", err, tt.field, tt.want)
			}
		})
	}
	if _, err := NewKernelModel(Host{CPUs: 0, TickUsec: 1000}, p); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("NewKernelModel of a host without CPUs: err = %v, want one wrapping ErrInvalidInput", err)
	}
}

// TestOnGridIsTheRemainder holds onGrid's integer arithmetic to the
// floating-point remainder it replaces, at and around grid points (within
// the 1e-6 tolerance, on its edge, one ulp either side of it), between
// them, before the grid's first point and at hours into a run.
func TestOnGridIsTheRemainder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	offsets := []float64{0, 1e-6, -1e-6, 5e-7, -5e-7, 1e-9, -1e-9, 0.5, -0.5, 1, -1, 0.999999, -0.999999, 1e-3}
	var n, on int
	for _, step := range []int64{1, 2, 3, 1000, 3333, 4000, 10_000} {
		for _, phase := range []int64{0, 1, step / 2, step - 1} {
			for _, k := range []int64{-2, -1, 0, 1, 2, 7, 1000, 900_000, 1_000_000_000, 1 << 40} {
				at := float64(phase + k*step)
				for _, d := range offsets {
					for _, x := range []float64{at + d, math.Nextafter(at+d, math.Inf(1)), math.Nextafter(at+d, math.Inf(-1))} {
						got, want := onGrid(x, phase, step), onGridMod(x, float64(phase), float64(step))
						if got != want {
							t.Errorf("onGrid(%v, %d, %d) = %v, the remainder says %v", x, phase, step, got, want)
						}
						n++
						if want {
							on++
						}
					}
				}
				for range 20 {
					x := at + (rng.Float64()-0.5)*2*float64(step)
					if got, want := onGrid(x, phase, step), onGridMod(x, float64(phase), float64(step)); got != want {
						t.Errorf("onGrid(%v, %d, %d) = %v, the remainder says %v", x, phase, step, got, want)
					}
				}
			}
		}
	}
	if on == 0 || on == n {
		t.Fatalf("%d of %d points on the grid: the cases do not test both answers", on, n)
	}
}

// TestKernelWakeCredit holds CFS's wake-up credit (kernels before 6.6):
// pools a (30ms) and b (40ms per 100ms) share one CPU with the same
// period phase. Every period a is throttled first, and while it waits b
// runs alone for about 10ms, so at the refill a comes back 6ms of
// vruntime behind b and runs alone for 6ms before they share: a spends
// its quota about 6ms sooner and is throttled that much longer in every
// period after the first. b spends its quota when the CPU has run 70ms
// of the two pools' work either way, so its throttled time stays.
func TestKernelWakeCredit(t *testing.T) {
	lim := func(quota int64) cpulimit.Limit {
		return cpulimit.Limit{QuotaUsec: quota, PeriodUsec: 100_000}
	}
	h := Host{CPUs: 1, TickUsec: 1000,
		Groups: []Group{{Name: "a", Limit: lim(30_000)}, {Name: "b", Limit: lim(40_000)}},
		Tasks: []HostTask{
			{Name: "qa", Group: "a", NeedUsec: 130_000, Threads: 1},
			{Name: "qb", Group: "b", NeedUsec: 170_000, Threads: 1},
		}}
	p := KernelParams{SliceUsec: 5000, TickUsec: 1000}
	eevdf, err := RunKernel(h, p)
	if err != nil {
		t.Fatal(err)
	}
	p.WakeCreditUsec = 6000
	cfs, err := RunKernel(h, p)
	if err != nil {
		t.Fatal(err)
	}
	a0, a1 := eevdf.Groups[0].Stat, cfs.Groups[0].Stat
	if a0.NrThrottled != a1.NrThrottled || a1.NrThrottled < 3 {
		t.Fatalf("a throttled in %d periods without the credit, %d with it; want the same, 3 or more", a0.NrThrottled, a1.NrThrottled)
	}
	// The first period has no credit; each later one gains 6ms, within a tick.
	gain := float64(a1.ThrottledUsec-a0.ThrottledUsec) / float64(a1.NrThrottled-1)
	if math.Abs(gain-6000) > 1000 {
		t.Errorf("a's throttled time grew by %.0fµs per period with the credit (%d → %dµs), want 6000±1000", gain, a0.ThrottledUsec, a1.ThrottledUsec)
	}
	b0, b1 := eevdf.Groups[1].Stat, cfs.Groups[1].Stat
	if d := float64(b1.ThrottledUsec) - float64(b0.ThrottledUsec); math.Abs(d) > 1000 || b0.NrThrottled != b1.NrThrottled {
		t.Errorf("b without the credit %d periods %dµs, with it %d periods %dµs; want the same within a tick", b0.NrThrottled, b0.ThrottledUsec, b1.NrThrottled, b1.ThrottledUsec)
	}
	if u0, u1 := a0.UsageUsec+eevdf.Groups[1].Stat.UsageUsec, a1.UsageUsec+b1.UsageUsec; u0 != u1 {
		t.Errorf("usage %dµs without the credit, %dµs with it: the credit moves CPU time, it adds none", u0, u1)
	}
	if err := (KernelParams{SliceUsec: 5000, TickUsec: 1000, WakeCreditUsec: -1}).Validate(); err == nil || !strings.Contains(err.Error(), "WakeCreditUsec") {
		t.Errorf("a negative credit validated: %v", err)
	}
}
