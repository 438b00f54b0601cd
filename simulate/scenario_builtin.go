package simulate

import (
	"fmt"

	"github.com/poolagent/poolagent/internal/cpulimit"
)

// BuiltinScenario is the chapter's parallelism experiment, what
// `poolagent simulate` runs without a scenario file: 8 tasks of 10 ms,
// all arriving at 0, under cpu.max = 40 ms / 100 ms on 8 CPUs, with 1 tick
// = 1 ms. It is testdata/scenarios/chapter-parallelism.scn built in code, so
// the binary needs no file; a test keeps the two equal.
func BuiltinScenario() *Scenario {
	h := Host{
		CPUs:     8,
		TickUsec: 1000,
		Groups:   []Group{{Name: "app", Limit: cpulimit.Limit{QuotaUsec: 40_000, PeriodUsec: 100_000, Weight: cpulimit.DefaultWeight}}},
	}
	for i := range 8 {
		h.Tasks = append(h.Tasks, HostTask{Name: fmt.Sprintf("t%d", i+1), Group: "app", NeedUsec: 10_000, Threads: 1})
	}
	return &Scenario{Name: "built-in: the chapter's parallelism experiment (testdata/scenarios/chapter-parallelism.scn)", Host: h}
}
