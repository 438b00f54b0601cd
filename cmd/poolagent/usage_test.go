package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// runMain runs the app as main does and returns what main would print:
// stdout, the line on stderr and the exit status.
func runMain(t *testing.T, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	app := newApp()
	app.Version = "VERSION"
	var out, errOut bytes.Buffer
	app.Writer, app.ErrWriter = &out, &errOut
	app.ExitErrHandler = func(*cli.Context, error) {}
	if err := app.Run(append([]string{"poolagent"}, args...)); err != nil {
		errOut.WriteString(errorLine(err) + "\n")
		status = exitCode(err)
	}
	return out.String(), errOut.String(), status
}

// TestUsageErrors holds every kind of mistake in a command line to one
// line on stderr saying what was wrong, what is accepted and the nearest
// name, exit status 2, and no help.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag with a near name", []string{"check", "--pool", "x.sql"},
			"poolagent check: unknown flag --pool; did you mean --pools? (accepted: --pools/-p, --help/-h)"},
		{"unknown flag typed with one dash", []string{"check", "-pool", "x.sql"},
			"poolagent check: unknown flag --pool; did you mean --pools? (accepted: --pools/-p, --help/-h)"},
		{"unknown flag with no near name", []string{"check", "--frobnicate"},
			"poolagent check: unknown flag --frobnicate (accepted: --pools/-p, --help/-h)"},
		{"unknown global flag", []string{"--verison"},
			"poolagent: unknown flag --verison; did you mean --version? (accepted: --help/-h, --version/-v)"},
		{"unknown command with a near name", []string{"simlate"},
			`poolagent: unknown command "simlate"; did you mean simulate? (accepted: simulate, compare, plan, check, apply, teardown, daemon, run, stat, record, advise, sql, fleet, pools, classifiers, queries, completion, man, version, help; poolagent help lists them)`},
		{"unknown command with no near name", []string{"frobnicate"},
			`poolagent: unknown command "frobnicate" (accepted: simulate, compare, plan, check, apply, teardown, daemon, run, stat, record, advise, sql, fleet, pools, classifiers, queries, completion, man, version, help; poolagent help lists them)`},
		{"help for an unknown command", []string{"help", "simlate"},
			`poolagent help: no command "simlate"; did you mean simulate? (accepted: simulate, compare, plan, check, apply, teardown, daemon, run, stat, record, advise, sql, fleet, pools, classifiers, queries, completion, man, version, help)`},
		{"argument to a command that takes none", []string{"check", "x.sql", "--pools", "x.sql"},
			`poolagent check: unexpected argument "x.sql" (accepted: flags only, --pools/-p, --help/-h; a flag after an argument is not read)`},
		{"unknown subcommand", []string{"fleet", "relese-node", "n1"},
			`poolagent fleet: unknown command "relese-node"; did you mean release-node? (accepted: release-node)`},
		{"unknown flag of a subcommand", []string{"fleet", "release-node", "--sockt", "x", "n1"},
			"poolagent fleet release-node: unknown flag --sockt; did you mean --socket? (accepted: --socket, --help/-h)"},
		{"duration without a unit", []string{"advise", "--trace", "x.json", "--max-delay", "30"},
			"poolagent advise: --max-delay 30 has no unit (accepted: a duration with its unit, such as 30ms or 30s; units ns, us, ms, s, m, h)"},
		{"duration that is no duration", []string{"stat", "--watch", "soon"},
			`poolagent stat: --watch "soon" is not accepted (accepted: a duration with its unit (ns, us, ms, s, m, h), such as 20ms or 1.5s)`},
		{"number that is no number", []string{"plan", "--pools", "x.sql", "--cpus", "many"},
			`poolagent plan: --cpus "many" is not accepted (accepted: a number, such as 10 or 1.5)`},
		{"whole number that is no whole number", []string{"compare", "--repeat", "1.5"},
			`poolagent compare: --repeat "1.5" is not accepted (accepted: a whole number, such as 3)`},
		{"flag without its value", []string{"check", "--pools"},
			"poolagent check: --pools needs a value (accepted: pool FILE (YDB DDL))"},
		{"required flag missing", []string{"check"},
			"poolagent check: --pools is required (accepted: pool FILE (YDB DDL))"},
		{"value the command refuses", []string{"compare", "--repeat", "0"},
			"poolagent compare: --repeat 0 is not accepted (accepted: 1 or more)"},
		{"format the command refuses", []string{"simulate", "--format", "xml"},
			`poolagent simulate: --format "xml" is not accepted (accepted: text, json)`},
		{"fleet flag without --etcd", []string{"daemon", "--pools", "x.sql", "--cluster", "analytics"},
			"poolagent daemon: --cluster is a fleet mode flag and needs --etcd (accepted: --etcd ENDPOINTS with it, or no fleet flag)"},
		{"--etcd without an endpoint", []string{"daemon", "--pools", "x.sql", "--etcd", " , "},
			`poolagent daemon: --etcd " , " names no endpoint (accepted: comma-separated URLs, such as https://10.0.0.1:2379,https://10.0.0.2:2379)`},
		{"client certificate without its key", []string{"daemon", "--pools", "x.sql", "--etcd", "https://e:2379", "--etcd-cert", "c.pem"},
			`poolagent daemon: --etcd-cert "c.pem" and --etcd-key "" go together (accepted: both, or neither)`},
		{"lease TTL etcd cannot keep", []string{"daemon", "--pools", "x.sql", "--etcd", "https://e:2379", "--etcd-ttl", "1500ms"},
			"poolagent daemon: --etcd-ttl 1.5s is not accepted (accepted: 2s or more; etcd leases count whole seconds)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, status := runMain(t, tc.args...)
			if status != 2 {
				t.Errorf("exit status %d, want 2", status)
			}
			if got := strings.TrimSuffix(stderr, "\n"); got != tc.want {
				t.Errorf("stderr\n got %q\nwant %q", got, tc.want)
			}
			if stdout != "" {
				t.Errorf("printed on stdout (no help unless asked):\n%s", stdout)
			}
		})
	}
}

// TestVersion checks that `version` and --version print the same line.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-v"}} {
		stdout, stderr, status := runMain(t, args...)
		if stdout != "poolagent version VERSION\n" || stderr != "" || status != 0 {
			t.Errorf("%v: stdout %q, stderr %q, status %d", args, stdout, stderr, status)
		}
	}
}

// TestHelpGolden holds `poolagent --help`, `poolagent help COMMAND` for
// every command and the man page to testdata/help/ (-update rewrites
// them), and checks what they must never show: a default given twice, a
// flag as --flag="", a per-command help subcommand, run's options twice.
func TestHelpGolden(t *testing.T) {
	pages := map[string][]string{"poolagent.txt": {"--help"}, "poolagent.1": {"man"}}
	for _, cmd := range newApp().VisibleCommands() {
		if cmd.Name != "help" {
			pages[cmd.Name+".txt"] = []string{"help", cmd.Name}
		}
	}
	doubled := regexp.MustCompile(`\(default[^)]*\)[^\n]*\(default`)
	for name, args := range pages {
		t.Run(name, func(t *testing.T) {
			stdout, stderr, status := runMain(t, args...)
			if status != 0 || stderr != "" {
				t.Fatalf("poolagent %v: status %d, stderr %q", args, status, stderr)
			}
			checkGoldenFile(t, filepath.Join("testdata", "help", name), stdout)
			if m := doubled.FindString(stdout); m != "" {
				t.Errorf("a default given twice: %q", m)
			}
			if strings.Contains(stdout, `=""`) {
				t.Errorf(`a flag shown as --flag=""`)
			}
			if n := strings.Count(stdout, "help, h"); n > 1 || n == 1 && name != "poolagent.txt" {
				t.Errorf("%q shown %d times", "help, h", n)
			}
			if name == "run.txt" && (strings.Contains(stdout, "\nOPTIONS:") || strings.Count(stdout, "Options:") != 1) {
				t.Errorf("help run lists its options other than once, in its description")
			}
		})
	}
}
