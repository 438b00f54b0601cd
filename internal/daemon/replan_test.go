package daemon

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/poolagent/poolagent/planner"
)

// repairsCgroups is plannedOnly that records the queries argument of each
// Repair, and ends the loop after the last one wanted.
type repairsCgroups struct {
	plannedOnly
	mu      sync.Mutex
	queries []bool
	want    int
	done    context.CancelFunc
}

func (c *repairsCgroups) Repair(_ planner.Desired, queries bool) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queries = append(c.queries, queries)
	if len(c.queries) == c.want {
		c.done()
	}
	return 0, nil
}

// TestReconcileLoopQueries: the periodic comparison reads the query
// cgroups' values one time in QueryRepairEvery, and a reload every time.
func TestReconcileLoopQueries(t *testing.T) {
	m, _, err := planner.Load("pools.sql", []byte("CREATE RESOURCE POOL olap WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE=50);"))
	if err != nil {
		t.Fatal(err)
	}
	policy := Policy{Model: m, Node: planner.Node{CPUs: 2, MemoryBytes: 1 << 30, PeriodUsec: 100000}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cg := &repairsCgroups{want: 2*QueryRepairEvery + 1, done: cancel}
	rp := newReplanner(cg, slog.New(slog.NewTextHandler(io.Discard, nil)), newRegistry(&activeBackend{}, policy))
	rp.setPolicy(policy)
	if err := rp.plan(); err != nil {
		t.Fatal(err)
	}
	rp.reconcileLoop(ctx, time.Millisecond)
	if err := rp.reconcile(true); err != nil {
		t.Fatal(err)
	}
	cg.mu.Lock()
	defer cg.mu.Unlock()
	if len(cg.queries) != cg.want+1 {
		t.Fatalf("%d comparisons, want %d (the loop's and a reload's)", len(cg.queries), cg.want+1)
	}
	for i, q := range cg.queries[:cg.want] {
		if want := (i+1)%QueryRepairEvery == 0; q != want {
			t.Errorf("periodic comparison %d read the queries' values: %v, want %v", i+1, q, want)
		}
	}
	if !cg.queries[cg.want] {
		t.Errorf("a reload's comparison left out the queries' values")
	}
}
