package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/accuracy"
	"github.com/poolagent/poolagent/internal/compare"
)

// TestWriteDoc: the run's part of the page is replaced between its
// markers, with the date and each machine of the run, and nothing else of
// the page changes; a page without the markers is refused, and then
// neither it nor measured.go is written.
func TestWriteDoc(t *testing.T) {
	host := report("one.scn", true, group{accuracy.OneCPU, []uint64{90000, 110000}, []uint64{102000, 102000}})
	host.Env.Kernel, host.Env.TickUsec, host.Env.SliceUsec, host.Env.Load1Start, host.Env.Load1End = "6.18.44", 4000, 5000, 1.09, 1.15
	vm := report("one.scn", true, group{accuracy.OneCPU, []uint64{10000, 10000}, []uint64{100000, 100000}})
	vm.Env.Kernel, vm.Env.Cgroup, vm.Env.Emulated, vm.Env.TickUsec, vm.Env.SliceUsec, vm.Env.Load1Start, vm.Env.Load1End = "6.1.0-57-cloud-amd64", "v2", true, 4000, 5000, 2.39, 2.26
	vm.Env.ModelCaveat = "the throttling prediction may not match this host: CONFIG_HZ is not known"
	path := filepath.Join(t.TempDir(), "accuracy.md")
	page := "# Accuracy\n\nbefore\n" + regionStart + "the last run\n" + regionEnd + "after\n"
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeReports(t, outputs{doc: path, date: "2026-12-05"}, host, vm); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	want := regionStart + "Written by `scripts/accuracy.sh -w` on 2026-12-05 from 2 reports:\n" +
		"- Linux 6.1.0-57-cloud-amd64, cgroup v2, emulated CPUs, HZ=250, slice 5000 µs: scenarios 1, runs 2 each, 1-minute load average in the guest 2.26..2.39." +
		" Note: the throttling prediction may not match this host: CONFIG_HZ is not known.\n" +
		"- Linux 6.18.44, cgroup v1, native CPUs, HZ=250, slice 5000 µs: scenarios 1, runs 2 each, 1-minute load average 1.09..1.15.\n\n" +
		compare.MarkdownHeader
	if !strings.HasPrefix(got, "# Accuracy\n\nbefore\n"+want) || !strings.HasSuffix(got, "\n"+regionEnd+"after\n") || strings.Contains(got, "the last run") {
		t.Errorf("page written:\n%s", got)
	}
	if !strings.Contains(got, "| one CPU | 1 | 5.0% | one.scn v1 a: +2.0% |\n") {
		t.Errorf("no error per class in:\n%s", got)
	}

	if err := os.WriteFile(path, []byte("no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	measured := filepath.Join(filepath.Dir(path), "measured.go")
	err = writeReports(t, outputs{doc: path, date: "2026-12-05", out: measured}, host)
	if err == nil || !strings.Contains(err.Error(), `no lines "<!-- accuracy run: start -->" and "<!-- accuracy run: end -->", in that order`) {
		t.Errorf("page without markers: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "no markers\n" {
		t.Errorf("page without markers changed: %q", b)
	}
	if _, err := os.Stat(measured); !os.IsNotExist(err) {
		t.Errorf("measured.go written beside a page that could not be: %v", err)
	}
	if got, want := verdictLine(host), "one.scn v1: "+host.Verdict.Line; got != want || !strings.HasPrefix(host.Verdict.Line, "verdict: ") {
		t.Errorf("verdict line %q, want %q", got, want)
	}
}

// writeReports runs gen on the reports, saved as JSON files.
func writeReports(t *testing.T, o outputs, reports ...*compare.Report) error {
	t.Helper()
	var files []string
	for i, r := range reports {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.Join(t.TempDir(), fmt.Sprintf("%d.json", i)))
		if err := os.WriteFile(files[i], b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return run(files, o)
}
