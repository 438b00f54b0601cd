package planner

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// replanModel is n pools whose caps overlap on two CPUs (so two active
// pools often share by weight), one kept out of the division and one
// without a CPU limit.
func replanModel(t testing.TB, n int) *Model {
	t.Helper()
	var ddl strings.Builder
	for i := range n {
		fmt.Fprintf(&ddl, "CREATE RESOURCE POOL p%02d WITH (RESOURCES_WEIGHT=%d, TOTAL_CPU_LIMIT_PERCENT_PER_NODE=%d, QUERY_CPU_LIMIT_PERCENT_PER_NODE=50);\n",
			i, 10+i*7%90, 10+i*13%90)
	}
	ddl.WriteString("CREATE RESOURCE POOL out WITH (RESOURCES_WEIGHT=-1, TOTAL_CPU_LIMIT_PERCENT_PER_NODE=30);\n")
	ddl.WriteString("CREATE RESOURCE POOL whole WITH (RESOURCES_WEIGHT=5);\n")
	m, _, err := Load("replan.sql", []byte(ddl.String()))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestReplanIsPlan: a chain of re-plans over random changes of the
// active set and the demand gives, at every step, what a whole plan of
// the same activity gives.
func TestReplanIsPlan(t *testing.T) {
	m := replanModel(t, 12)
	node := Node{CPUs: 2, MemoryBytes: 1 << 30, PeriodUsec: 100000}
	names := []string{DefaultPool, "out", "whole"}
	for i := range 12 {
		names = append(names, fmt.Sprintf("p%02d", i))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	prev, err := Plan(m, node, Activity{Active: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	for step := range 500 {
		act := Activity{Active: []string{}, DemandCPUs: map[string]float64{}}
		for _, n := range names {
			if rng.IntN(4) == 0 {
				act.Active = append(act.Active, n)
			}
			if rng.IntN(2) == 0 {
				act.DemandCPUs[n] = rng.Float64() * 2
			}
		}
		want, err := Plan(m, node, act)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Replan(prev, m, node, act)
		if err != nil {
			t.Fatal(err)
		}
		// A plan that does not say which of its pools are active (one not
		// made by Plan or Replan) is re-planned the same, each pool looked at.
		unsaid := prev
		unsaid.activeAt = nil
		if again, err := Replan(unsaid, m, node, act); err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("step %d: re-plan of a plan without its active pools differs: %+v, %v", step, again, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d, active %v: re-plan differs from plan:\n got %+v\nwant %+v", step, act.Active, got, want)
		}
		// A pool active in neither plan is not planned again: its state
		// is prev's, shared, not a copy.
		for i, ps := range got.Pools {
			if !ps.Active && !prev.Pools[i].Active && ps != prev.Pools[i] {
				t.Fatalf("step %d: pool %s, inactive before and now, has a new state", step, ps.Name)
			}
		}
		prev = got
	}
}

// TestReplanRefuses: a plan for another node, an active pool the model
// lacks and an invalid demand of an active pool are refused.
func TestReplanRefuses(t *testing.T) {
	m := replanModel(t, 3)
	node := Node{CPUs: 2, MemoryBytes: 1 << 30, PeriodUsec: 100000}
	prev, err := Plan(m, node, Activity{Active: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	other := node
	other.CPUs = 4
	for name, tc := range map[string]struct {
		node Node
		act  Activity
		want string
	}{
		"other node":     {other, Activity{Active: []string{}}, "same node"},
		"unknown pool":   {node, Activity{Active: []string{"nope"}}, "nope"},
		"invalid demand": {node, Activity{Active: []string{"p01"}, DemandCPUs: map[string]float64{"p01": -1}}, "p01"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Replan(prev, m, tc.node, tc.act)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Replan: %v, want an error naming %q", err, tc.want)
			}
		})
	}
}
