package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/internal/kerneltest"
	"github.com/poolagent/poolagent/observe"
)

// statFixtures are cgroup trees shaped like the kernel's (see
// observe/tree_test.go); statGolden holds the expected outputs.
const (
	statFixtures = "../../testdata/observe/"
	statGolden   = "../../testdata/observe/golden/"
)

// checkStatGolden compares got with statGolden/name, or rewrites it with
// -update.
func checkStatGolden(t *testing.T, name, got string) {
	t.Helper()
	checkGoldenFile(t, statGolden+name, got)
}

func TestStatGolden(t *testing.T) {
	v1 := []string{"stat", "--root", statFixtures + "v1/cpu/poolagent", "--cpuacct-root", statFixtures + "v1/cpuacct/poolagent",
		"--memory-root", statFixtures + "v1/memory/poolagent"}
	tests := []struct {
		golden string
		args   []string
	}{
		{"stat-v2.txt", []string{"stat", "--root", statFixtures + "v2/poolagent"}},
		{"stat-v2-wide.txt", []string{"stat", "--root", statFixtures + "v2/poolagent", "--wide"}},
		{"stat-v2.json", []string{"stat", "--root", statFixtures + "v2/poolagent", "--format", "json"}},
		{"stat-v1.txt", v1},
		{"stat-v1.json", append(v1, "--format", "json")},
		// outside the cgroup mounts and without --cpuacct-root: usage unknown
		{"stat-v1-no-cpuacct.txt", []string{"stat", "--root", statFixtures + "v1/cpu/poolagent"}},
		{"stat-v2-pool.txt", []string{"stat", "--root", statFixtures + "v2/poolagent/olap"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			out, stderr, err := runApp(t, tt.args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			checkStatGolden(t, tt.golden, out)
			// Without --wide the table fits a terminal of 120 columns.
			for _, line := range strings.Split(out, "\n") {
				if !slices.Contains(tt.args, "--wide") && len(line) > 120 {
					t.Errorf("a line of %d columns, more than 120: %q", len(line), line)
				}
			}
		})
	}
}

func TestStatErrors(t *testing.T) {
	root := statFixtures + "v2/poolagent"
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown format", []string{"stat", "--root", root, "--format", "yaml"}, `--format "yaml" is not accepted (accepted: text, json)`},
		{"interval too short", []string{"stat", "--root", root, "--watch", "1ms"}, "--watch 1ms is not accepted (accepted: an interval of 10ms or more"},
		{"negative interval", []string{"stat", "--root", root, "--watch", "-1s"}, "--watch -1s is not accepted"},
		{"count without watch", []string{"stat", "--root", root, "--count", "3"}, "--count 3 is not accepted (accepted: N >= 0 together with --watch)"},
		{"negative count", []string{"stat", "--root", root, "--watch", "1s", "--count", "-1"}, "--count -1 is not accepted"},
		{"missing root", []string{"stat", "--root", statFixtures + "nonexistent"}, "--root: open pool root ../../testdata/observe/nonexistent: no such file or directory"},
		{"not a cgroup", []string{"stat", "--root", statFixtures + "v1/cpuacct/poolagent"}, "is neither a cgroup v2 directory (cgroup.controllers) nor one of v1's cpu hierarchy (cpu.cfs_period_us)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runApp(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestStatWatch feeds watchStat a tree whose counters change between
// intervals as the kernel's would: olap is throttled in the first
// interval, a query appears in the second, and a pool is recreated
// (counters restart) in the third.
func TestStatWatch(t *testing.T) {
	for format, golden := range map[string]string{"text": "stat-watch-v2.txt", "json": "stat-watch-v2.json"} {
		t.Run(format, func(t *testing.T) {
			root := copyTree(t, statFixtures+"v2/poolagent")
			tree := cgroupfs.NewReader(true, root, "", "", nil)
			defer tree.Close()
			start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			steps := []func(){
				func() {
					writeFixture(t, root, "olap/cpu.stat", "usage_usec 620059\nuser_usec 610290\nsystem_usec 9769\nnr_periods 31\nnr_throttled 30\nthrottled_usec 2403874\nnr_bursts 1\nburst_usec 20000\n")
					writeFixture(t, root, "olap/cpu.stat.local", "throttled_usec 2403874\n")
					// Throttled for 0.8 s of the 1 s: pressure grows by as much.
					writeFixture(t, root, "olap/cpu.pressure", "some avg10=9.10 avg60=2.02 avg300=0.45 total=895210\nfull avg10=9.05 avg60=2.00 avg300=0.44 total=894100\n")
				},
				func() {
					if err := os.Mkdir(filepath.Join(root, "olap", "q-2"), 0o755); err != nil {
						t.Fatal(err)
					}
					writeFixture(t, root, "olap/q-2/cpu.stat", "usage_usec 50000\nuser_usec 40000\nsystem_usec 10000\nnr_periods 5\nnr_throttled 0\nthrottled_usec 0\nnr_bursts 0\nburst_usec 0\n")
				},
				func() {
					writeFixture(t, root, "default/cpu.stat", "usage_usec 9000\nuser_usec 6000\nsystem_usec 3000\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\nnr_bursts 0\nburst_usec 0\n")
				},
			}
			n := 0
			next := func() (time.Time, bool) {
				if n == len(steps) {
					t.Fatal("watchStat asked for more intervals than --count")
				}
				steps[n]()
				n++
				// intervals of 1 s, 2 s, 1 s
				return start.Add(time.Duration(n+n/2) * time.Second), true
			}
			var out bytes.Buffer
			if err := watchStat(&out, tree, format, true, len(steps), start, next); err != nil {
				t.Fatal(err)
			}
			checkStatGolden(t, golden, strings.ReplaceAll(out.String(), root, "ROOT"))
		})
	}
}

// TestStatWatchStops checks that watch mode ends when it is interrupted
// (next returns false) and prints nothing after that.
func TestStatWatchStops(t *testing.T) {
	tree := cgroupfs.NewReader(true, statFixtures+"v2/poolagent", "", "", nil)
	defer tree.Close()
	calls := 0
	next := func() (time.Time, bool) { calls++; return time.Time{}, false }
	var out bytes.Buffer
	if err := watchStat(&out, tree, "json", true, 0, time.Now(), next); err != nil {
		t.Fatal(err)
	}
	if calls != 1 || out.Len() != 0 {
		t.Errorf("after interrupt: %d calls, output %q", calls, out.String())
	}
}

// TestKernelStatCommand runs `poolagent stat` on a tree `poolagent apply`
// made on the real kernel: every pool is listed and, on v1, usage is found
// in the cpuacct hierarchy from the mounts alone.
func TestKernelStatCommand(t *testing.T) {
	need := kerneltest.Need{Modes: []kerneltest.Mode{kerneltest.V1, kerneltest.V2}, Controllers: []string{"cpuacct"}}
	h := kerneltest.Require(t, need)
	root := h.NewRoot(t, need)
	if _, stderr, err := runApp(t, "apply", "--pools", "../../testdata/pools/seed.sql", "--root", root.Path, "--cpus", "10", "--memory", "17179869184"); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	out, stderr, err := runApp(t, "stat", "--root", root.Path, "--format", "json")
	if err != nil {
		t.Fatalf("stat: %v\n%s", err, stderr)
	}
	var got statJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got.Version != string(h.Mode) || got.Root != root.Path {
		t.Errorf("version %q root %q, want %q %q", got.Version, got.Root, h.Mode, root.Path)
	}
	groups := map[string]observe.Sample{}
	for _, s := range got.Groups {
		groups[s.Group] = s
		if !s.UsageKnown {
			t.Errorf("%s: usage unknown", s.Group)
		}
		if h.Mode == kerneltest.V2 && s.Pressure == nil {
			t.Errorf("%s: no cpu.pressure on v2", s.Group)
		}
	}
	for _, pool := range []string{".", "default", "olap"} {
		if _, ok := groups[pool]; !ok {
			t.Errorf("pool %q missing from %s", pool, out)
		}
	}
	text, _, err := runApp(t, "stat", "--root", root.Path)
	if err != nil || !strings.Contains(text, "olap") {
		t.Errorf("text: %v\n%s", err, text)
	}
	t.Logf("%s", text)
}

// copyTree copies a fixture tree into a temporary directory.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func writeFixture(t *testing.T, root, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestStatDocsExcerpt keeps docs/commands.md's example output true.
func TestStatDocsExcerpt(t *testing.T) {
	doc, err := os.ReadFile("../../docs/commands.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(statGolden + "stat-v2.txt")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```\n"+string(want)+"```\n") {
		t.Errorf("docs/commands.md's poolagent stat example is not %sstat-v2.txt:\n%s", statGolden, want)
	}
}
