package compare

import (
	"fmt"
	"io"
	"strings"

	"github.com/poolagent/poolagent/internal/cpulimit"
)

// MarkdownHeader is the header of the accuracy table WriteMarkdownRows
// fills: one row per group with a quota, per scenario and cgroup version.
const MarkdownHeader = `| scenario | cgroup | group | target class | workload class | nr_throttled predicted | measured mean [min..max] | throttled_usec predicted | measured mean | spread [min..max] | error | simple model error | usage_usec measured mean | error | target | meets |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
`

// WriteMarkdownRows writes one accuracy-table row for every group of r
// that has a quota: the kernel model's mean prediction of nr_throttled
// and throttled_usec beside the measured mean and the runs' range, the
// error of both models, usage, the target and whether the prediction met
// it ("target"), met it only within the runs' range ("spread: " and the
// misses), or neither ("no: " and the misses). scenario is the name shown
// in the first column. A report of the simulation alone has no rows: it
// is an error.
func WriteMarkdownRows(w io.Writer, r *Report, scenario string) error {
	if !r.Env.Measured {
		return fmt.Errorf("compare: %s: nothing measured (%s), no accuracy rows", scenario, r.Env.Why)
	}
	var b strings.Builder
	for _, g := range r.Groups {
		if g.QuotaUsec == cpulimit.Max {
			continue
		}
		f := map[string]FieldCompare{}
		for _, fc := range g.Fields {
			f[fc.Field] = fc
		}
		nt, tu, us := f["nr_throttled"], f["throttled_usec"], f["usage_usec"]
		meets := "target"
		switch g.Verdict(true) {
		case "spread":
			meets = "spread: " + strings.Join(g.Misses, "; ")
		case "missed":
			meets = "no: " + strings.Join(g.OutsideSpread, "; ")
		}
		if g.Tie != "" {
			meets += " (" + g.Tie + ")"
		}
		target := fmt.Sprintf("±%g, ±%g%% or %s", r.Target.NrThrottled, r.Target.Pct, msText(r.Target.FloorUsec))
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s [%d..%d] | %s | %s | %s..%s | %s | %s | %s | %s | %s | %s |\n",
			scenario, r.Env.Cgroup, g.Path, r.Target.Class, g.Class,
			meanText(nt.Kernel), meanText(nt.Measured), nt.Measured.Min, nt.Measured.Max,
			msText(tu.Kernel.Mean), msText(tu.Measured.Mean), msText(float64(tu.Measured.Min)), msText(float64(tu.Measured.Max)),
			relText(tu.Diff, tu.Measured.Mean), relText(float64(tu.Simple)-tu.Measured.Mean, tu.Measured.Mean),
			msText(us.Measured.Mean), relText(us.Diff, us.Measured.Mean), target, meets)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// relText renders a difference in percent of base, or in ms when base is 0.
func relText(diff, base float64) string {
	if base == 0 {
		return signedMs(diff)
	}
	return fmt.Sprintf("%+.1f%%", 100*diff/base)
}
