package pooltree

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/planner"
)

// startModel is ten pools whose caps overlap on two CPUs.
func startModel(t *testing.T) *planner.Model {
	t.Helper()
	var ddl strings.Builder
	for i := range 10 {
		fmt.Fprintf(&ddl, "CREATE RESOURCE POOL p%d WITH (RESOURCES_WEIGHT=%d, TOTAL_CPU_LIMIT_PERCENT_PER_NODE=%d);\n", i, 10+i*10, 10+i*10)
	}
	m, _, err := planner.Load("start.sql", []byte(ddl.String()))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var twoCPUs = planner.Node{CPUs: 2, MemoryBytes: 1 << 30, PeriodUsec: 100000}

// TestToApply: a query start whose plan changes one pool's cgroups (p3
// held to the demand it had while idle) applies that pool alone, and one
// that changes none applies none; a pool with a memory limit held back
// is applied again; a first plan, a plan of other pools and one for
// another node reconcile the whole tree.
func TestToApply(t *testing.T) {
	m := startModel(t)
	plan := func(node planner.Node, active ...string) planner.Desired {
		d, err := planner.Plan(m, node, planner.Activity{Active: append([]string{}, active...), DemandCPUs: map[string]float64{"p3": 0.01}})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	idle := plan(twoCPUs)
	for name, tc := range map[string]struct {
		applied *planner.Desired
		d       planner.Desired
		pending []cgroupfs.Pending
		want    []string
		whole   bool
	}{
		"start changing one pool": {applied: &idle, d: plan(twoCPUs, "p3"), want: []string{"p3"}},
		"start changing none":     {applied: &idle, d: plan(twoCPUs, "p1")},
		"memory held back":        {applied: &idle, d: plan(twoCPUs, "p3"), pending: []cgroupfs.Pending{{Path: "p7/q-1"}}, want: []string{"p3", "p7"}},
		"first plan":              {d: idle, whole: true},
		"other node":              {applied: &idle, d: plan(planner.Node{CPUs: 4, MemoryBytes: 1 << 30, PeriodUsec: 100000}), whole: true},
		"other pools":             {applied: &planner.Desired{Node: twoCPUs, Pools: idle.Pools[1:]}, d: idle, whole: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, whole := toApply(tc.applied, tc.d, tc.pending)
			if whole != tc.whole || !slices.Equal(got, tc.want) {
				t.Errorf("toApply: %v, whole %v; want %v, whole %v", got, whole, tc.want, tc.whole)
			}
		})
	}
}
