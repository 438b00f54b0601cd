package simulate

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/cpulimit"
)

// kernelCase is one input of the kernel model's golden test.
type kernelCase struct {
	name string
	host Host
	p    KernelParams
}

// randomKernelHost is a random node for the kernel model: up to 3 pools,
// each empty of queries or holding up to 3, a query holding up to 2
// subgroups; limits, bursts and weights at random, some groups unlimited;
// up to 12 tasks of 1-8 threads, some pinned to a few CPUs, with random
// tick, slice, tick phase, period phases and timeline.
func randomKernelHost(r *rand.Rand) (Host, KernelParams) {
	const ms = 1000
	h := Host{CPUs: 1 + r.IntN(8), TickUsec: ms}
	p := KernelParams{
		SliceUsec: []int64{5000, 1000, 3000, 10000}[r.IntN(4)],
		TickUsec:  []int64{4000, 1000, 10000}[r.IntN(3)],
		TaskCPUs:  map[string][]int{},
	}
	p.TickPhaseUsec = r.Int64N(p.TickUsec)
	if r.IntN(2) == 0 {
		p.WindowUsec = int64(20+r.IntN(200)) * ms
	}
	p.PeriodPhaseUsec = map[string]int64{}
	var leaves []string
	group := func(name, parent string) {
		g := Group{Name: name, Parent: parent, Limit: cpulimit.Limit{QuotaUsec: cpulimit.Max, PeriodUsec: int64(10+r.IntN(200)) * ms}}
		if r.IntN(3) > 0 {
			g.Weight = int64(1 + r.IntN(400))
		}
		if r.IntN(5) > 0 {
			g.QuotaUsec = int64(1+r.IntN(int(g.PeriodUsec/ms)*h.CPUs)) * ms
			if r.IntN(3) == 0 {
				g.BurstUsec = int64(r.IntN(int(g.QuotaUsec/ms)+1)) * ms
			}
		}
		if r.IntN(2) == 0 {
			p.PeriodPhaseUsec[name] = r.Int64N(g.PeriodUsec)
		}
		h.Groups = append(h.Groups, g)
	}
	for pi := range 1 + r.IntN(3) {
		pool := fmt.Sprintf("p%d", pi)
		group(pool, "")
		queries := r.IntN(4)
		if queries == 0 {
			leaves = append(leaves, pool)
		}
		for q := range queries {
			query := fmt.Sprintf("%s-q%d", pool, q)
			group(query, pool)
			subs := max(r.IntN(5)-2, 0)
			if subs == 0 {
				leaves = append(leaves, query)
			}
			for s := range subs {
				sub := fmt.Sprintf("%s-s%d", query, s)
				group(sub, query)
				leaves = append(leaves, sub)
			}
		}
	}
	for i := range r.IntN(13) {
		t := HostTask{Name: fmt.Sprintf("t%d", i), Group: leaves[r.IntN(len(leaves))],
			ArriveUsec: int64(r.IntN(3)*r.IntN(300)) * ms, NeedUsec: int64(r.IntN(250)) * ms, Threads: 1 + r.IntN(8)}
		if r.IntN(3) == 0 {
			cpus := r.Perm(h.CPUs)[:1+r.IntN(min(h.CPUs, 3))]
			slices.Sort(cpus)
			p.TaskCPUs[t.Name] = cpus
		}
		h.Tasks = append(h.Tasks, t)
	}
	return h, p
}

// kernelCases are the golden test's inputs: every shipped scenario with
// the default parameters, with measured-looking phases and a timeline,
// and with those and CFS's wake-up credit, random nodes (some with the
// credit), and the scaling benchmark's query stream.
func kernelCases(t *testing.T) []kernelCase {
	var cases []kernelCase
	shipped, err := filepath.Glob(filepath.Join(scenarioDir, "*.scn"))
	if err != nil || len(shipped) == 0 {
		t.Fatalf("no shipped scenarios in %s: %v", scenarioDir, err)
	}
	// The shipped scenarios' phases come from a stream of their own, so
	// that a new scenario leaves the random nodes as they are.
	r, phases := rand.New(rand.NewPCG(14, 6)), rand.New(rand.NewPCG(14, 7))
	for _, path := range shipped {
		s := readScenario(t, filepath.Base(path))
		name := strings.TrimSuffix(filepath.Base(path), ".scn")
		p := DefaultKernelParams()
		p.TaskCPUs = s.TaskCPUs
		cases = append(cases, kernelCase{name, s.Host, p})
		p.TickPhaseUsec = phases.Int64N(p.TickUsec)
		p.WindowUsec = 50_000
		p.PeriodPhaseUsec = map[string]int64{}
		for _, g := range s.Host.Groups {
			p.PeriodPhaseUsec[g.Name] = phases.Int64N(g.PeriodUsec)
		}
		cases = append(cases, kernelCase{name + "/phases", s.Host, p})
		p.WakeCreditUsec = 6000
		cases = append(cases, kernelCase{name + "/cfs", s.Host, p})
	}
	for i := range 400 {
		h, p := randomKernelHost(r)
		cases = append(cases, kernelCase{fmt.Sprintf("random%d", i), h, p})
	}
	// CFS's wake-up credit on random nodes of a stream of their own.
	cfs := rand.New(rand.NewPCG(14, 8))
	for i := range 100 {
		h, p := randomKernelHost(cfs)
		p.WakeCreditUsec = []int64{6000, 3000, 12000}[cfs.IntN(3)]
		cases = append(cases, kernelCase{fmt.Sprintf("cfs%d", i), h, p})
	}
	p := DefaultKernelParams()
	cases = append(cases, kernelCase{"stream60", queryStream(60), p})
	p.WindowUsec = 1_000_000
	p.TickPhaseUsec = 1500
	cases = append(cases, kernelCase{"stream60/windows", queryStream(60), p})
	return cases
}

// writeKernelRun prints every counter of a run: per group its cpu.stat
// and timeline windows (ran/throttled/throttled CPUs), per task its
// completion.
func writeKernelRun(w *bytes.Buffer, name string, run KernelRun) {
	fmt.Fprintf(w, "case %s end %d\n", name, run.EndUsec)
	for _, g := range run.Groups {
		st := g.Stat
		fmt.Fprintf(w, "group %s usage %d periods %d throttled %d throttled_usec %d bursts %d burst_usec %d\n",
			g.Name, st.UsageUsec, st.NrPeriods, st.NrThrottled, st.ThrottledUsec, st.NrBursts, st.BurstUsec)
		if len(g.Windows) == 0 {
			continue
		}
		fmt.Fprintf(w, "windows %s", g.Name)
		for _, win := range g.Windows {
			fmt.Fprintf(w, " %d/%d/%d", win.RanUsec, win.ThrottledUsec, win.ThrottledCPUs)
		}
		fmt.Fprintln(w)
	}
	for _, tk := range run.Tasks {
		fmt.Fprintf(w, "task %s done %d\n", tk.Name, tk.DoneUsec)
	}
}

// TestRunKernelGolden holds RunKernel to the counters it predicted when
// testdata/golden/kernel-model.txt was written, on every shipped
// scenario, 400 random nodes (trees up to three levels deep, bursts,
// per-query caps under pool caps, unlimited groups, weights, pinned
// tasks, 1-8 CPUs, random slice, tick and phases) and a minute of the
// scaling benchmark's query stream. A change to the engine that is meant
// to be exact (a faster data structure) must leave the file as it is; a
// change to the model rewrites it with -update, and the diff shows every
// counter that moved.
func TestRunKernelGolden(t *testing.T) {
	var got bytes.Buffer
	for _, c := range kernelCases(t) {
		run, err := RunKernel(c.host, c.p)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		writeKernelRun(&got, c.name, run)
	}
	path := filepath.Join("testdata", "golden", "kernel-model.txt")
	if *update {
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	gotLines, wantLines := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
	diffs, kase := 0, ""
	for i := range max(len(gotLines), len(wantLines)) {
		g, w := line(gotLines, i), line(wantLines, i)
		if strings.HasPrefix(w, "case ") {
			kase = w
		}
		if g == w {
			continue
		}
		if diffs++; diffs <= 10 {
			t.Errorf("%s:%d (in %s)\n got %s\nwant %s", path, i+1, kase, g, w)
		}
	}
	if diffs > 10 {
		t.Errorf("%d more lines differ (rerun with -update and review the diff)", diffs-10)
	}
}

// line is lines[i], or "" past the end.
func line(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return ""
}
