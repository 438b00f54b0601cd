package simulate

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchWorkloads are the sizes the event engine is measured at against the
// per-tick reference (scripts/bench-simulate.sh prints their ratios).
func benchWorkloads() []runInput {
	// 8 tasks under 40/100 on 2 CPUs, arriving mid-period, with 40,000
	// CPU-ticks of work between them: 10^3 periods, 10^5 ticks.
	var eight []Task
	for i := range 8 {
		eight = append(eight, Task{Name: fmt.Sprint(i), Arrive: 37 * i, Need: 5000})
	}
	// 1,000 tasks arriving at random over 9*10^5 ticks, 2,000 CPU-ticks
	// each on average, under 2 CPUs' worth of quota per 1,000-tick period
	// with burst, on 8 CPUs: about 10^6 ticks, 10^3 periods.
	r := rand.New(rand.NewPCG(1, 2))
	var thousand []Task
	for i := range 1000 {
		thousand = append(thousand, Task{Name: fmt.Sprint(i), Arrive: r.IntN(900_000), Need: 1 + r.IntN(4000)})
	}
	return []runInput{
		{TickLimit{Quota: 40, Period: 100}, 2, eight},
		{TickLimit{Quota: 2000, Period: 1000, Burst: 1000}, 8, thousand},
		// One task at half a CPU with the kernel's default period:
		// 10^4 periods, 10^9 ticks.
		{TickLimit{Quota: 50_000, Period: 100_000}, 1, []Task{{Name: "long", Need: 500_000_000}}},
	}
}

// BenchmarkRun measures Run (the event engine, input checks included)
// against the per-tick reference on benchWorkloads. Each reports the ticks
// and periods it simulates.
func BenchmarkRun(b *testing.B) {
	names := []string{"8tasks_1e3periods", "1000tasks_1e6ticks", "1task_1e9ticks"}
	chapterEngines := []struct {
		name string
		run  func(TickLimit, int, []Task) ([]Result, []Period)
	}{
		{"event", Run},
		{"tick", runTicks},
	}
	for i, w := range benchWorkloads() {
		for _, e := range chapterEngines {
			b.Run(names[i]+"/"+e.name, func(b *testing.B) {
				var periods []Period
				for b.Loop() {
					_, periods = e.run(w.limit, w.ncpu, w.tasks)
				}
				b.ReportMetric(float64(len(periods)), "periods")
				b.ReportMetric(float64(len(periods)*w.limit.Period), "ticks")
			})
		}
	}
}
