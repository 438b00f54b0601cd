package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/planner"
)

// BenchmarkReplan is the replanner's share of a query's start and end with
// n pools: the active set gains a pool, and loses it again, and each
// change is planned (planner.Plan) and compared with the plan before it
// (sameCgroups), as a start and an end do. Cgroup writes are left out
// (they are the kernel's cost, not the plan's): one op is one plan.
func BenchmarkReplan(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("pools=%d", n), func(b *testing.B) {
			var ddl strings.Builder
			for i := range n {
				fmt.Fprintf(&ddl, "CREATE RESOURCE POOL p%04d WITH (CONCURRENT_QUERY_LIMIT=4, RESOURCES_WEIGHT=%d, TOTAL_CPU_LIMIT_PERCENT_PER_NODE=%d);\n",
					i, 10+i%90, 10+i%90)
			}
			m, _, err := planner.Load("bench.sql", []byte(ddl.String()))
			if err != nil {
				b.Fatal(err)
			}
			policy := Policy{Model: m, Node: planner.Node{CPUs: 64, MemoryBytes: 1 << 36, PeriodUsec: 100000}}
			backend := &activeBackend{}
			rp := newReplanner(plannedOnly{}, slog.New(slog.NewTextHandler(io.Discard, nil)), newRegistry(backend, policy))
			rp.setPolicy(policy)
			if err := rp.plan(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				backend.active = nil
				if i%2 == 0 {
					backend.active = []string{fmt.Sprintf("p%04d", i/2%n)}
				}
				if err := rp.plan(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// activeBackend is an admission backend whose active pools are set by
// hand; the replanner asks it nothing else.
type activeBackend struct {
	admission.Backend
	active []string
}

func (a *activeBackend) Active() []string { return a.active }

// plannedOnly is Cgroups that takes every plan and writes nothing, so
// holds nothing back; the replanner calls nothing else.
type plannedOnly struct{ Cgroups }

func (plannedOnly) Apply(planner.Desired) error { return nil }

func (plannedOnly) Pending() []cgroupfs.Pending { return nil }
