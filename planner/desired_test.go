package planner

import (
	"slices"
	"testing"
)

// TestChanged: the pools whose cgroup values differ, not those whose
// activity alone did; plans of different pools or nodes are not compared
// pool by pool.
func TestChanged(t *testing.T) {
	m := replanModel(t, 3)
	node := Node{CPUs: 2, MemoryBytes: 1 << 30, PeriodUsec: 100000}
	plan := func(node Node, active ...string) Desired {
		d, err := Plan(m, node, Activity{Active: append([]string{}, active...), DemandCPUs: map[string]float64{"p01": 0.1}})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	idle := plan(node)
	changed, same := Changed(idle, plan(node, "p00", "p01"))
	if !same || !slices.Equal(changed, []string{"p01"}) {
		t.Errorf("Changed: %v, %v; want [p01] (held to its demand; p00 active at its cap changes nothing), true", changed, same)
	}
	if changed, same := Changed(idle, idle); !same || changed != nil {
		t.Errorf("Changed of a plan with itself: %v, %v; want none, true", changed, same)
	}
	other := node
	other.MemoryBytes *= 2
	if _, same := Changed(idle, plan(other)); same {
		t.Error("Changed compared plans for two nodes pool by pool")
	}
	fewer := idle
	fewer.Pools = idle.Pools[1:]
	if _, same := Changed(idle, fewer); same {
		t.Error("Changed compared plans of different pools pool by pool")
	}
}
