package compare

import (
	_ "embed"
	"fmt"

	"github.com/poolagent/poolagent/simulate"
)

//go:embed default.scn
var defaultScenario []byte

// DefaultScenarioName names the built-in scenario in reports.
const DefaultScenarioName = "built-in: fixed window in a YDB pool (internal/compare/default.scn)"

// DefaultScenario returns the scenario compare runs without --scenario:
// one pool at 40% of one CPU and two pinned queries each capped at 90% of
// that, which share the pool's quota: the pool throttles at its own level.
func DefaultScenario() *simulate.Scenario {
	sc, err := simulate.ParseScenario(DefaultScenarioName, defaultScenario)
	if err != nil {
		panic(fmt.Sprintf("compare: built-in scenario: %v", err))
	}
	return sc
}
