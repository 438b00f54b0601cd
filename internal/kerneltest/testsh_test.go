package kerneltest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTestShFailures: the last lines of scripts/test.sh name every failed
// test with the line it failed on, read from go test's output with and
// without -v (testdata/gotest: a failed test, a failed subtest, a panic,
// a package that does not build, one whose test skips, and one whose
// failed test then prints a log of its daemon), so a failure
// is not hundreds of lines above the end of the run; a skipped test is
// named with its reason.
func TestTestShFailures(t *testing.T) {
	script, err := os.ReadFile("../../scripts/test.sh")
	if err != nil {
		t.Fatal(err)
	}
	_, fn, ok := strings.Cut(string(script), "\nreasons() {\n")
	fn, _, ok2 := strings.Cut(fn, "\n}\n")
	if !ok || !ok2 {
		t.Fatal("scripts/test.sh has no reasons() function")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"plain.txt": {
			"  example.com/ft/a TestBad: a_test.go:8: advise --verify: outside the budget of at most 10% of periods throttled",
			"  example.com/ft/a TestSub: (a subtest failed, or see its output)",
			"  example.com/ft/a TestSub/one: a_test.go:11: the VM stayed too busy to judge",
			"  example.com/ft/b TestB: panic: boom [recovered, repanicked]",
			"  example.com/ft/c: failed without a failed test (build error, panic or timeout; see its output)",
			"  example.com/ft/e TestDump: e_test.go:12: the history shows no throttling of the query cgroups",
		},
		// With -v a subtest logs before its parent's --- FAIL line: both
		// get its reason.
		"verbose.txt": {
			"  example.com/ft/a TestBad: a_test.go:8: advise --verify: outside the budget of at most 10% of periods throttled",
			"  example.com/ft/a TestSub: a_test.go:11: the VM stayed too busy to judge",
			"  example.com/ft/a TestSub/one: a_test.go:11: the VM stayed too busy to judge",
			"  example.com/ft/b TestB: panic: boom [recovered, repanicked]",
			"  example.com/ft/c: failed without a failed test (build error, panic or timeout; see its output)",
			"  example.com/ft/e TestDump: e_test.go:12: the history shows no throttling of the query cgroups",
		},
		"skips in verbose.txt": {
			"  example.com/ft/d TestSkip: d_test.go:4: the host's other work kept its CPUs busy",
		},
	}
	for name, lines := range want {
		t.Run(name, func(t *testing.T) {
			outcome, file := "FAIL", name
			if skips, ok := strings.CutPrefix(name, "skips in "); ok {
				outcome, file = "SKIP", skips
			}
			cmd := exec.Command(bash, "-c", "reasons() {\n"+fn+"\n}\nreasons \"$@\"", "reasons", outcome, filepath.Join("testdata", "gotest", file))
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("failures: %v", err)
			}
			if got := strings.Split(strings.TrimRight(string(out), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(lines, "\n") {
				t.Errorf("failures of %s:\n%s\nwant:\n%s", name, out, strings.Join(lines, "\n"))
			}
		})
	}
}
