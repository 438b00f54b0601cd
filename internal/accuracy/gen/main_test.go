package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/accuracy"
	"github.com/poolagent/poolagent/internal/compare"
	"github.com/poolagent/poolagent/observe"
)

// group is one row: its class, and its measured and predicted throttled
// time (µs) per run.
type group struct {
	class           accuracy.Class
	measured, model []uint64
}

// report is a measured report of one scenario with one group per class
// given.
func report(scenario string, pinned bool, groups ...group) *compare.Report {
	r := &compare.Report{Scenario: "testdata/scenarios/" + scenario, Env: compare.Env{Measured: true, Kernel: "6.18", Cgroup: "v1", Runs: 2},
		Target: compare.TargetFor(pinned, false, 4000)}
	for i, g := range groups {
		gr := compare.GroupResult{Name: string(rune('a' + i)), Path: string(rune('a' + i)), QuotaUsec: 40000, Class: g.class}
		for j := range g.measured {
			gr.Runs = append(gr.Runs, compare.GroupRun{Measured: observe.CPUStat{ThrottledUsec: g.measured[j]}, Kernel: observe.CPUStat{ThrottledUsec: g.model[j]}})
		}
		r.Groups = append(r.Groups, gr)
	}
	r.Finish()
	return r
}

func TestClassErrors(t *testing.T) {
	reports := []*compare.Report{
		// One CPU: 100 ms measured, 102 ms predicted: within a tick, so
		// the class gets its target, 5%.
		report("one.scn", true, group{accuracy.OneCPU, []uint64{90000, 110000}, []uint64{102000, 102000}}),
		// Placed: 100 ms measured, 134 ms predicted: 30 ms beyond the
		// tick, 30%; and a row of 50 ms measured, 60 predicted: 12%.
		report("placed.scn", false, group{accuracy.PlacedBelowCPU, []uint64{100000, 100000}, []uint64{134000, 134000}},
			group{accuracy.PlacedBelowCPU, []uint64{50000, 50000}, []uint64{60000, 60000}}),
	}
	// A report from an emulated CPU is in the table, not in the error.
	vm := report("one.scn", true, group{accuracy.OneCPU, []uint64{10000, 10000}, []uint64{100000, 100000}})
	vm.Env.Emulated, vm.Env.Cgroup = true, "v2"
	reports = append(reports, vm)
	got := classErrors(reports)
	want := []accuracy.Error{
		{Class: accuracy.OneCPU, Percent: 5, Rows: 1, Worst: "one.scn v1 a: +2.0%"},
		{Class: accuracy.PlacedBelowCPU, Percent: 30, Rows: 2, Worst: "placed.scn v1 a: +34.0%"},
	}
	if len(got) != len(want) {
		t.Fatalf("classErrors = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("class %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	src, err := generate(reports)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{`{Class: OneCPU, Percent: 5.0, Rows: 1, Worst: "one.scn v1 a: +2.0%"},`, "// Linux 6.18 cgroup v1, 2 runs per scenario."} {
		if !strings.Contains(string(src), line) {
			t.Errorf("generated source lacks %q:\n%s", line, src)
		}
	}
	var md bytes.Buffer
	if err := writeMarkdown(&md, reports); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "4 rows: 1 meet the target, 0 more are within the measured runs' range, 3 miss both; 0 rows hold usage only") {
		t.Errorf("summary missing:\n%s", md.String())
	}
	if _, err := generate([]*compare.Report{vm}); err == nil {
		t.Error("generate of VM reports alone: no error")
	}
}
