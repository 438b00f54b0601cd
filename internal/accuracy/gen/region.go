package main

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/poolagent/poolagent/internal/compare"
)

// The markers around the part of docs/accuracy.md that an accuracy run
// writes (-doc): everything between them is replaced, nothing outside.
const (
	regionStart = "<!-- accuracy run: start -->\n"
	regionEnd   = "<!-- accuracy run: end -->\n"
)

// docWithRun returns the markdown file at path with its accuracy run's
// part replaced by the run's header (runHeader), table, summary and error
// per class; an error for a file without both markers, in that order.
func docWithRun(path, date string, reports []*compare.Report) ([]byte, error) {
	doc, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var table bytes.Buffer
	if err := writeMarkdown(&table, reports); err != nil {
		return nil, err
	}
	out, err := replaceRegion(doc, runHeader(date, reports)+"\n"+table.String())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// replaceRegion returns doc with the text between its markers replaced by
// region.
func replaceRegion(doc []byte, region string) ([]byte, error) {
	start := bytes.Index(doc, []byte(regionStart))
	end := bytes.Index(doc, []byte(regionEnd))
	if start < 0 || end < start {
		return nil, fmt.Errorf("no lines %q and %q, in that order, to write the accuracy run between",
			strings.TrimSpace(regionStart), strings.TrimSpace(regionEnd))
	}
	var b bytes.Buffer
	b.Write(doc[:start+len(regionStart)])
	b.WriteString(region)
	if !strings.HasSuffix(region, "\n") {
		b.WriteString("\n")
	}
	b.Write(doc[end:])
	return b.Bytes(), nil
}

// pass is the reports of one machine of an accuracy run: one kernel and
// cgroup version.
type pass struct {
	kernel, cgroup  string
	emulated        bool
	tickUsec, slice int64
	runs            map[int]bool
	loadLo, loadHi  float64
	scenarios       int
	caveats         map[string]bool
}

// runHeader says when and where the reports were measured: the date, and
// per kernel and cgroup version the tick, the slice, the runs per
// scenario, the range of the 1-minute load average seen before and after
// the scenarios, and any note that the models do not cover that host.
func runHeader(date string, reports []*compare.Report) string {
	passes := map[string]*pass{}
	for _, r := range reports {
		e := r.Env
		key := e.Kernel + " " + e.Cgroup
		p := passes[key]
		if p == nil {
			p = &pass{kernel: e.Kernel, cgroup: e.Cgroup, emulated: e.Emulated, tickUsec: e.TickUsec, slice: e.SliceUsec,
				runs: map[int]bool{}, loadLo: math.Inf(1), loadHi: math.Inf(-1), caveats: map[string]bool{}}
			passes[key] = p
		}
		p.scenarios++
		p.runs[e.Runs] = true
		for _, l := range []float64{e.Load1Start, e.Load1End} {
			if l >= 0 {
				p.loadLo, p.loadHi = min(p.loadLo, l), max(p.loadHi, l)
			}
		}
		if e.ModelCaveat != "" {
			p.caveats[e.ModelCaveat] = true
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Written by `scripts/accuracy.sh -w` on %s from %d reports:\n", date, len(reports))
	for _, key := range slices.Sorted(maps.Keys(passes)) {
		p := passes[key]
		cpu, where := "native CPUs", ""
		if p.emulated {
			cpu, where = "emulated CPUs", " in the guest"
		}
		load := "unknown"
		if !math.IsInf(p.loadLo, 0) {
			load = fmt.Sprintf("%.2f..%.2f", p.loadLo, p.loadHi)
		}
		fmt.Fprintf(&b, "- Linux %s, cgroup %s, %s, HZ=%d, slice %d µs: scenarios %d, runs %s each, 1-minute load average%s %s.",
			p.kernel, p.cgroup, cpu, 1_000_000/max(p.tickUsec, 1), p.slice, p.scenarios, joinInts(slices.Sorted(maps.Keys(p.runs))), where, load)
		for _, c := range slices.Sorted(maps.Keys(p.caveats)) {
			fmt.Fprintf(&b, " Note: %s.", c)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// joinInts prints 5, or 3/5 when the reports differ.
func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, "/")
}
