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
// without -v (testdata/gotest: a failed test, a failed subtest, a panic
// and a package that does not build), so a failure is not hundreds of
// lines above the end of the run.
func TestTestShFailures(t *testing.T) {
	script, err := os.ReadFile("../../scripts/test.sh")
	if err != nil {
		t.Fatal(err)
	}
	_, fn, ok := strings.Cut(string(script), "\nfailures() {\n")
	fn, _, ok2 := strings.Cut(fn, "\n}\n")
	if !ok || !ok2 {
		t.Fatal("scripts/test.sh has no failures() function")
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
		},
		// With -v a subtest logs before its parent's --- FAIL line: both
		// get its reason.
		"verbose.txt": {
			"  example.com/ft/a TestBad: a_test.go:8: advise --verify: outside the budget of at most 10% of periods throttled",
			"  example.com/ft/a TestSub: a_test.go:11: the VM stayed too busy to judge",
			"  example.com/ft/a TestSub/one: a_test.go:11: the VM stayed too busy to judge",
			"  example.com/ft/b TestB: panic: boom [recovered, repanicked]",
			"  example.com/ft/c: failed without a failed test (build error, panic or timeout; see its output)",
		},
	}
	for name, lines := range want {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(bash, "-c", "failures() {\n"+fn+"\n}\nfailures \"$1\"", "failures", filepath.Join("testdata", "gotest", name))
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
