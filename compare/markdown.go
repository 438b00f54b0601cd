package compare

import (
	"fmt"
	"io"
	"strings"

	"github.com/poolagent/poolagent/cpulimit"
)

// MarkdownHeader is the header of the accuracy table WriteMarkdownRows
// fills: one row per group with a quota, per scenario and cgroup version.
const MarkdownHeader = `| scenario | cgroup | group | class | nr_throttled measured [min..max] | kernel | Δ | throttled_usec measured mean [min..max] | kernel Δ | simple Δ | usage_usec measured mean | kernel Δ | target |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
`

// WriteMarkdownRows writes one accuracy-table row for every group of r
// that has a quota: the measured spread of nr_throttled and
// throttled_usec, the kernel model's error against the measured mean (the
// simple model's too for throttled_usec), and whether the target was met.
// scenario is the name shown in the first column. A report of the
// simulation alone has no rows: it is an error.
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
		verdict := "met"
		if len(g.Misses) > 0 {
			verdict = "missed: " + strings.Join(g.Misses, "; ")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s [%d..%d] | %s | %+.1f | %s [%s..%s] | %s | %s | %s | %s | %s |\n",
			scenario, r.Env.Cgroup, g.Path, r.Target.Class,
			meanText(nt.Measured), nt.Measured.Min, nt.Measured.Max, meanText(nt.Kernel), nt.Diff,
			msText(tu.Measured.Mean), msText(float64(tu.Measured.Min)), msText(float64(tu.Measured.Max)), relText(tu.Diff, tu.Measured.Mean),
			relText(float64(tu.Simple)-tu.Measured.Mean, tu.Measured.Mean),
			msText(us.Measured.Mean), relText(us.Diff, us.Measured.Mean), verdict)
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
