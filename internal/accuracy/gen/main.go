// Command gen turns the JSON reports of an accuracy run
// (scripts/accuracy.sh) into the accuracy table of docs/accuracy.md (-md)
// and into internal/accuracy/measured.go, the model's measured error per workload
// class (-o); -doc writes the table, with the run's date (-date) and
// machines, between the accuracy run's markers of docs/accuracy.md; -line
// prints one line per report, its scenario and compare's verdict:
//
//	go run ./internal/accuracy/gen [-md] [-o internal/accuracy/measured.go] [-doc docs/accuracy.md -date 2026-12-05] [-line] REPORT.json...
//
// Every group with a quota in a measured report is one row; a class's
// error is the largest of its rows' (compare.GroupResult.ThrottledErrorPercent),
// and at least the target its rows are held to (5% pinned, 10% unpinned):
// a class that met its target in one run is not promised better. Rows
// measured on an emulated CPU are in the table but not in the error.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/format"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/poolagent/poolagent/internal/accuracy"
	"github.com/poolagent/poolagent/internal/compare"
	"github.com/poolagent/poolagent/internal/cpulimit"
)

func main() {
	out := flag.String("o", "", "write the measured error per class to this Go file")
	md := flag.Bool("md", false, "print the accuracy table's rows, its summary and the error per class")
	doc := flag.String("doc", "", "write the run's date and machines, the table, its summary and the error per class between the accuracy run's markers of this markdown file")
	date := flag.String("date", "", "the run's date, for -doc")
	line := flag.Bool("line", false, "print one line per report: its scenario, cgroup and verdict")
	flag.Parse()
	if (*out == "" && !*md && *doc == "" && !*line) || flag.NArg() == 0 || (*doc == "") != (*date == "") {
		fmt.Fprintln(os.Stderr, "usage: go run ./internal/accuracy/gen [-md] [-o internal/accuracy/measured.go] [-doc docs/accuracy.md -date YYYY-MM-DD] [-line] REPORT.json...")
		os.Exit(2)
	}
	if err := run(flag.Args(), outputs{md: *md, out: *out, doc: *doc, date: *date, line: *line}); err != nil {
		fmt.Fprintln(os.Stderr, "internal/accuracy/gen:", err)
		os.Exit(1)
	}
}

// outputs are what gen writes, from its flags.
type outputs struct {
	md, line       bool
	out, doc, date string
}

func run(files []string, o outputs) error {
	reports, err := read(files)
	if err != nil {
		return err
	}
	if o.line {
		for _, r := range reports {
			fmt.Println(verdictLine(r))
		}
	}
	if o.md {
		if err := writeMarkdown(os.Stdout, reports); err != nil {
			return err
		}
	}
	// Both files are made before either is written: nothing is written
	// when one cannot be.
	writes := map[string][]byte{}
	if o.out != "" {
		if writes[o.out], err = generate(reports); err != nil {
			return err
		}
	}
	if o.doc != "" {
		if writes[o.doc], err = docWithRun(o.doc, o.date, reports); err != nil {
			return err
		}
	}
	for path, b := range writes {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// read reads measured compare reports.
func read(files []string) ([]*compare.Report, error) {
	var reports []*compare.Report
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		r := new(compare.Report)
		if err := json.Unmarshal(data, r); err != nil {
			return nil, fmt.Errorf("%s: not a compare JSON report: %w", f, err)
		}
		if !r.Env.Measured {
			return nil, fmt.Errorf("%s: nothing measured (%s): only measured reports have accuracy rows", f, r.Env.Why)
		}
		for _, g := range r.Groups {
			if g.QuotaUsec != cpulimit.Max && g.Class == "" {
				return nil, fmt.Errorf("%s: group %s has no workload class: the report predates the classes, measure again", f, g.Path)
			}
		}
		reports = append(reports, r)
	}
	return reports, nil
}

// writeMarkdown prints the rows of every report under one header, a
// summary of the verdicts and the error per class.
func writeMarkdown(w io.Writer, reports []*compare.Report) error {
	var b strings.Builder
	b.WriteString(compare.MarkdownHeader)
	verdicts, ties := map[string]int{}, 0
	for _, r := range reports {
		if err := compare.WriteMarkdownRows(&b, r, filepath.Base(r.Scenario)); err != nil {
			return err
		}
		for _, g := range r.Groups {
			if g.QuotaUsec != cpulimit.Max {
				verdicts[g.Verdict(true)]++
			}
			if g.QuotaUsec != cpulimit.Max && g.Tie != "" {
				ties++
			}
		}
	}
	rows := verdicts["target"] + verdicts["spread"] + verdicts["missed"]
	fmt.Fprintf(&b, "\n%d rows: %d meet the target, %d more are within the measured runs' range, %d miss both; %d rows hold usage only (a query with its pool's cpu.max: the kernel throttles either).\n\n",
		rows, verdicts["target"], verdicts["spread"], verdicts["missed"], ties)
	b.WriteString("| workload class | rows on a native CPU | advise margin: largest throttled_usec error beyond one tick, at least the target | worst row |\n| --- | --- | --- | --- |\n")
	for _, e := range classErrors(reports) {
		fmt.Fprintf(&b, "| %s | %d | %.1f%% | %s |\n", e.Class, e.Rows, e.Percent, e.Worst)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// generate renders the error per class as Go source; an accuracy run
// without rows on a native CPU has nothing to write.
func generate(reports []*compare.Report) ([]byte, error) {
	if len(classErrors(reports)) == 0 {
		return nil, fmt.Errorf("no held rows measured on a native CPU (VM reports alone do not make the table): run scripts/accuracy.sh host first")
	}
	sources := map[string]bool{}
	for _, r := range reports {
		if r.Env.Emulated {
			continue
		}
		sources[fmt.Sprintf("Linux %s cgroup %s, %d runs per scenario", r.Env.Kernel, r.Env.Cgroup, r.Env.Runs)] = true
	}
	var b bytes.Buffer
	b.WriteString("// Code generated by go run ./internal/accuracy/gen; DO NOT EDIT.\n\n")
	b.WriteString("package accuracy\n\n")
	b.WriteString("// measured is the model's error per class, from the accuracy run on\n")
	fmt.Fprintf(&b, "// %s.\n", strings.Join(slices.Sorted(maps.Keys(sources)), "; "))
	b.WriteString("var measured = []Error{\n")
	for _, e := range classErrors(reports) {
		fmt.Fprintf(&b, "\t{Class: %s, Percent: %.1f, Rows: %d, Worst: %q},\n", constName(e.Class), e.Percent, e.Rows, e.Worst)
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}

// classErrors is the largest error among every class's rows, in the
// order of accuracy.Classes; classes without rows are left out, and so
// are rows whose throttling is not held (compare.GroupResult.Tie: a query
// with its pool's cpu.max, where the kernel throttles either). Reports
// from an emulated CPU (the qemu TCG VM) are left out too: there the guest
// charges translation and the time the host took from the vCPU to the
// running task, so its scatter is the emulator's, while advice is for
// pools on real CPUs.
func classErrors(reports []*compare.Report) []accuracy.Error {
	errs := map[accuracy.Class]*accuracy.Error{}
	worst, worstDiff := map[accuracy.Class]float64{}, map[accuracy.Class]float64{}
	for _, r := range reports {
		if r.Env.Emulated {
			continue
		}
		for _, g := range r.Groups {
			if g.QuotaUsec == cpulimit.Max || g.Tie != "" {
				continue
			}
			e := errs[g.Class]
			if e == nil {
				e = &accuracy.Error{Class: g.Class}
				errs[g.Class] = e
				worst[g.Class] = -1
			}
			e.Rows++
			e.Percent = max(e.Percent, r.Target.Pct) // never below the accuracy the target holds the class to
			// The worst row: the largest error beyond the tick, then the
			// largest difference in µs.
			pct, diff := g.ThrottledErrorPercent(r.Target), math.Abs(throttledDiffUsec(g))
			if pct > worst[g.Class] || pct == worst[g.Class] && diff > worstDiff[g.Class] {
				worst[g.Class], worstDiff[g.Class] = pct, diff
				e.Worst = fmt.Sprintf("%s %s %s: %s", filepath.Base(r.Scenario), r.Env.Cgroup, g.Path, throttledDiff(g))
			}
		}
	}
	var out []accuracy.Error
	for _, c := range accuracy.Classes {
		if e, ok := errs[c]; ok {
			e.Percent = math.Round(10*max(e.Percent, worst[c])) / 10
			out = append(out, *e)
		}
	}
	return out
}

// constName is the Go name of a class constant.
func constName(c accuracy.Class) string {
	switch c {
	case accuracy.OneCPU:
		return "OneCPU"
	case accuracy.PinnedSpread:
		return "PinnedSpread"
	case accuracy.PlacedBelowCPU:
		return "PlacedBelowCPU"
	case accuracy.PlacedCPUOrMore:
		return "PlacedCPUOrMore"
	case accuracy.QuotaEdge:
		return "QuotaEdge"
	case accuracy.SharedCPU:
		return "SharedCPU"
	}
	panic(fmt.Sprintf("internal/accuracy/gen: class %q has no constant", c))
}

// throttledDiffUsec is the kernel model's mean throttled_usec minus the
// measured mean.
func throttledDiffUsec(g compare.GroupResult) float64 {
	for _, f := range g.Fields {
		if f.Field == "throttled_usec" {
			return f.Diff
		}
	}
	return 0
}

// throttledDiff is the group's throttled_usec error as the accuracy
// table shows it: "+33.8%", or "+0.8ms" when nothing was measured.
func throttledDiff(g compare.GroupResult) string {
	for _, f := range g.Fields {
		if f.Field != "throttled_usec" {
			continue
		}
		if f.DiffPct == nil {
			return fmt.Sprintf("%+.1fms", f.Diff/1000)
		}
		return fmt.Sprintf("%+.1f%%", *f.DiffPct)
	}
	return "no throttled_usec"
}

// verdictLine is the progress line of one report (-line): its scenario,
// cgroup version and compare's verdict over its groups.
func verdictLine(r *compare.Report) string {
	return fmt.Sprintf("%s %s: %s", filepath.Base(r.Scenario), r.Env.Cgroup, r.Verdict.Line)
}
