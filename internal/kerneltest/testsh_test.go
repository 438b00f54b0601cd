package kerneltest

import (
	"fmt"
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

// shellFuncs returns the definitions of the named functions of
// scripts/test.sh, each one line ("name() { ...; }") or a block ending in
// a line "}".
func shellFuncs(t *testing.T, names ...string) string {
	t.Helper()
	script, err := os.ReadFile("../../scripts/test.sh")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, name := range names {
		_, rest, ok := strings.Cut(string(script), "\n"+name+"() {")
		if !ok {
			t.Fatalf("scripts/test.sh has no %s() function", name)
		}
		body, _, _ := strings.Cut(rest, "\n")
		if !strings.HasSuffix(body, "}") {
			body, _, ok = strings.Cut(rest, "\n}\n")
			if !ok {
				t.Fatalf("scripts/test.sh: %s() has no end", name)
			}
			body += "\n}"
		}
		out.WriteString(name + "() {" + body + "\n")
	}
	return out.String()
}

// bashRun runs script under bash with args and returns its output.
func bashRun(t *testing.T, script string, args ...string) string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bash, append([]string{"-c", "set -euo pipefail\n" + script, "test.sh"}, args...)...).Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return string(out)
}

// TestTestShKernelStalls: scripts/test.sh runs again the packages that
// failed on the host when the host's kernel said it stalled while they
// ran. stalls picks the kernel's lockup and stall lines (and not the
// boot's words for its watchdogs); failedpkgs names each package that
// failed once; without drops those packages' lines from the output and
// keeps the rest whole, so the run's coverage and failures are read from
// the first run's other packages and the second run's.
func TestTestShKernelStalls(t *testing.T) {
	funcs := shellFuncs(t, "reasons", "failures", "stalls", "failedpkgs", "without")
	got := bashRun(t, funcs+`stalls <"$1"`, filepath.Join("testdata", "kernellog", "stalled.txt"))
	want := []string{
		"[52751.509023] BUG: workqueue lockup - pool cpus=0 node=0 flags=0x0 nice=0 stuck for 39s!",
		"[52770.000001] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:",
		"[52790.000003] rcu: INFO: rcu_sched self-detected stall on CPU",
		"[52800.000004] watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [fleet.test:10180]",
		"[52810.000005] NMI watchdog: Watchdog detected hard LOCKUP on cpu 1",
		"[52820.000006] INFO: task kworker/0:1:41 blocked for more than 122 seconds.",
	}
	if strings.TrimRight(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stalls:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if got := bashRun(t, funcs+`stalls </dev/null`); got != "" {
		t.Errorf("stalls of a quiet log: %q, want nothing", got)
	}

	verbose := filepath.Join("testdata", "gotest", "verbose.txt")
	got = bashRun(t, funcs+`failedpkgs "$1"`, verbose)
	if want := "example.com/ft/a\nexample.com/ft/b\nexample.com/ft/c\nexample.com/ft/e\n"; got != want {
		t.Errorf("failedpkgs:\n%s\nwant:\n%s", got, want)
	}

	log, err := os.ReadFile(verbose)
	if err != nil {
		t.Fatal(err)
	}
	kept := bashRun(t, funcs+`without "example.com/ft/a example.com/ft/c example.com/ft/e" "$1"`, verbose)
	// What is left is the lines of b and d as they were, and the run's
	// last line.
	for _, pkg := range []string{"example.com/ft/b", "example.com/ft/d"} {
		section := sectionOf(t, string(log), pkg)
		if !strings.Contains(kept, section) {
			t.Errorf("without: the lines of %s are not kept whole:\n%s", pkg, kept)
		}
	}
	for _, gone := range []string{"TestBad", "TestSub", "[build failed]", "TestDump", "daemon log:"} {
		if strings.Contains(kept, gone) {
			t.Errorf("without: %q of a dropped package is left:\n%s", gone, kept)
		}
	}
	if !strings.HasSuffix(kept, "\nFAIL\n") {
		t.Errorf("without: the run's last line is lost:\n%s", kept)
	}
	if got := bashRun(t, funcs+`without "" "$1"`, verbose); got != string(log) {
		t.Errorf("without nothing to drop changed the output:\n%s", got)
	}
}

// TestTestShStalledAgain: stalledAgain runs the failed packages once
// more when the kernel's log has a stall since the step began, and only
// then; their second run's lines take the place of the first's in the
// step's log, each counts as a rerun, and the step's status is the
// second run's.
func TestTestShStalledAgain(t *testing.T) {
	funcs := shellFuncs(t, "reasons", "failures", "stalls", "kernelstalls", "failedpkgs", "without", "terse", "stalledAgain")
	verbose, err := filepath.Abs(filepath.Join("testdata", "gotest", "verbose.txt"))
	if err != nil {
		t.Fatal(err)
	}
	stalled, err := filepath.Abs(filepath.Join("testdata", "kernellog", "stalled.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// rerun stands for go test: it passes a and fails b of the packages
	// it is given, and notes what it was asked to run.
	const rerun = `rerun() {
	echo "$*" >"$logs/asked"
	printf -- '--- PASS: TestBad (0.00s)\nok  \texample.com/ft/a\t0.1s\n'
	printf -- '--- FAIL: TestB (0.00s)\nFAIL\texample.com/ft/b\t0.1s\n'
	[ "$2" = pass ]
}
`
	for _, c := range []struct {
		name, kernelLog, second string
		status                  int
		asked                   string
	}{
		{"stalled, passes again", stalled, "pass", 0, "-v pass example.com/ft/a example.com/ft/b example.com/ft/c example.com/ft/e"},
		{"stalled, fails again", stalled, "fail", 1, "-v fail example.com/ft/a example.com/ft/b example.com/ft/c example.com/ft/e"},
		{"no stall", "/dev/null", "pass", 1, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			logs := t.TempDir()
			script := funcs + rerun + `dmesg() { [ "$1 $2" = "--since 2026-12-06 10:20:00" ] && cat "$KERNEL_LOG"; }
cp "$1" "$logs/host"; : >"$logs/stalled"
status=0
stalledAgain "$logs/host" "2026-12-06 10:20:00" "real-kernel tests" rerun -v "$2" >"$logs/out" || status=$?
echo "$status"`
			cmd := exec.Command("bash", "-c", "set -euo pipefail\nlogs="+logs+"\n"+script, "test.sh", verbose, c.second)
			cmd.Env = append(os.Environ(), "KERNEL_LOG="+c.kernelLog)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if got := strings.TrimSpace(string(out)); got != fmt.Sprint(c.status) {
				t.Errorf("status %s, want %d", got, c.status)
			}
			asked, _ := os.ReadFile(filepath.Join(logs, "asked"))
			if got := strings.TrimSpace(string(asked)); got != c.asked {
				t.Errorf("ran again: %q, want %q", got, c.asked)
			}
			host, err := os.ReadFile(filepath.Join(logs, "host"))
			if err != nil {
				t.Fatal(err)
			}
			counted, err := os.ReadFile(filepath.Join(logs, "stalled"))
			if err != nil {
				t.Fatal(err)
			}
			first, err := os.ReadFile(verbose)
			if err != nil {
				t.Fatal(err)
			}
			if c.asked == "" {
				if string(host) != string(first) || len(counted) != 0 {
					t.Errorf("no stall, but the log or the reruns changed:\n%s\n%s", host, counted)
				}
				return
			}
			said, _ := os.ReadFile(filepath.Join(logs, "out"))
			for _, want := range []string{
				"== the host's kernel stalled while the real-kernel tests ran; its log says (6 lines, the first of each kind):",
				"  BUG: workqueue lockup - pool cpus=0 node=0 flags=0x0 nice=0 stuck for 39s!",
				"  INFO: task kworker/0:1:41 blocked for more than 122 seconds.",
				"== so the packages that failed run once more: example.com/ft/a example.com/ft/b example.com/ft/c example.com/ft/e",
			} {
				if !strings.Contains(string(said), want+"\n") {
					t.Errorf("it said:\n%s\nwant a line %q", said, want)
				}
			}
			wantHost := sectionOf(t, string(first), "example.com/ft/d") + "FAIL\n" +
				"--- PASS: TestBad (0.00s)\nok  \texample.com/ft/a\t0.1s\n--- FAIL: TestB (0.00s)\nFAIL\texample.com/ft/b\t0.1s\n"
			if !strings.HasSuffix(string(host), wantHost) || strings.Contains(string(host), "TestDump") {
				t.Errorf("the step's log after the rerun:\n%s\nwant it to end:\n%s", host, wantHost)
			}
			wantCounted := ""
			for _, p := range strings.Fields(c.asked)[2:] {
				wantCounted += "  " + p + " (real-kernel tests, the kernel stalled): 1\n"
			}
			if string(counted) != wantCounted {
				t.Errorf("reruns counted:\n%s\nwant:\n%s", counted, wantCounted)
			}
		})
	}
}

// sectionOf returns the lines go test printed for pkg: those after the
// line that ended the package before it, through its own "ok" or "FAIL"
// line.
func sectionOf(t *testing.T, log, pkg string) string {
	t.Helper()
	at, from := 0, 0
	for line := range strings.Lines(log) {
		at += len(line)
		if f := strings.Fields(line); len(f) >= 2 && (f[0] == "ok" || f[0] == "FAIL") {
			if f[1] == pkg {
				return log[from:at]
			}
			from = at
		}
	}
	t.Fatalf("no lines of %s in the log", pkg)
	return ""
}
