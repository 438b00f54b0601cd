package advise

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/poolagent/poolagent/internal/cpulimit"
	"github.com/poolagent/poolagent/planner"

	"github.com/poolagent/poolagent/internal/history"
)

// Setting is a pool's CPU limit in the pool file's words:
// TOTAL_CPU_LIMIT_PERCENT_PER_NODE, CPU_BURST_PERCENT and CPU_PERIOD_USEC.
type Setting struct {
	// CapPercent is the pool's average cap, percent of the node's vCPUs.
	CapPercent float64
	// BurstPercent is cpu.max.burst as a percent of the quota, 0..100.
	BurstPercent float64
	// PeriodUsec is the bandwidth period, 1000..1000000.
	PeriodUsec int64
}

// settingOf is the limit the trace recorded, in a pool file's words.
func settingOf(t *history.Trace) Setting {
	s := Setting{CapPercent: 100, PeriodUsec: t.Limit.PeriodUsec}
	if t.Limit.QuotaUsec > 0 {
		s.CapPercent = roundTo(t.Limit.VCPU()/t.NodeCPUs*100, 2)
		s.BurstPercent = roundTo(float64(t.Limit.BurstUsec)/float64(t.Limit.QuotaUsec)*100, 2)
	}
	return s
}

func roundTo(v float64, digits int) float64 {
	f := math.Pow(10, float64(digits))
	return math.Round(v*f) / f
}

// percentText writes a percent the way a pool file does: "40", "12.5".
func percentText(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// Limit is the cgroup limit the planner writes for the setting on a node
// of nodeCPUs vCPUs, for a pool that gets its whole cap (one that the
// max-min division of RESOURCES_WEIGHT holds lower gets less). It runs
// the planner on the setting as DDL, so it is the planner's arithmetic
// and the planner's checks, not a copy of them.
func (s Setting) Limit(nodeCPUs float64) (cpulimit.Limit, error) {
	src := fmt.Sprintf("CREATE RESOURCE POOL p WITH (TOTAL_CPU_LIMIT_PERCENT_PER_NODE = %s, CPU_BURST_PERCENT = %s, CPU_PERIOD_USEC = %d);",
		percentText(s.CapPercent), percentText(s.BurstPercent), s.PeriodUsec)
	m, _, err := planner.Load("advice", []byte(src))
	if err != nil {
		return cpulimit.Limit{}, fmt.Errorf("setting %s: %w", s, err)
	}
	d, err := planner.Plan(m, planner.Node{CPUs: nodeCPUs, MemoryBytes: 1 << 30, PeriodUsec: cpulimit.DefaultPeriodUsec}, planner.Activity{})
	if err != nil {
		return cpulimit.Limit{}, fmt.Errorf("setting %s: %w", s, err)
	}
	p, ok := d.Pool("p")
	if !ok {
		return cpulimit.Limit{}, fmt.Errorf("setting %s: the planner made no pool", s)
	}
	return cpulimit.Limit{QuotaUsec: p.Pool.CPU.QuotaUsec, PeriodUsec: p.Pool.CPU.PeriodUsec, BurstUsec: p.Pool.CPU.BurstUsec}, nil
}

// String is the setting as a pool file's parameters.
func (s Setting) String() string {
	return fmt.Sprintf("TOTAL_CPU_LIMIT_PERCENT_PER_NODE = %s, CPU_BURST_PERCENT = %s, CPU_PERIOD_USEC = %d",
		percentText(s.CapPercent), percentText(s.BurstPercent), s.PeriodUsec)
}

// Alter is the statement that changes pool from the setting was to s,
// naming only the parameters that differ.
func (s Setting) Alter(pool string, was Setting) string {
	var set []string
	if s.CapPercent != was.CapPercent {
		set = append(set, "TOTAL_CPU_LIMIT_PERCENT_PER_NODE = "+percentText(s.CapPercent))
	}
	if s.BurstPercent != was.BurstPercent {
		set = append(set, "CPU_BURST_PERCENT = "+percentText(s.BurstPercent))
	}
	if s.PeriodUsec != was.PeriodUsec {
		set = append(set, fmt.Sprintf("CPU_PERIOD_USEC = %d", s.PeriodUsec))
	}
	if len(set) == 0 {
		return ""
	}
	if strings.Contains(pool, "-") {
		pool = "`" + pool + "`" // a bare name is letters, digits and '_'
	}
	return fmt.Sprintf("ALTER RESOURCE POOL %s SET (%s);", pool, strings.Join(set, ", "))
}
