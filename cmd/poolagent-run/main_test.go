package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/version"
)

// envAsMain makes the test binary run main instead of the tests, so that
// the binary's own behaviour is tested without building it again.
const envAsMain = "POOLAGENT_RUN_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envAsMain) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// TestSlimDependencies keeps the binary slim: everything it links must be
// the standard library, golang.org/x/sys, package client, package protocol
// or the internal packages version and suggest, and not package net, whose
// initialisation alone would add much of a start's cost
// (docs/performance.md "Admission").
func TestSlimDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if or (not .Standard) (eq .ImportPath \"net\")}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list -deps: %v", err)
	}
	var offenders []string
	for _, pkg := range strings.Fields(string(out)) {
		switch {
		case pkg == "github.com/poolagent/poolagent/cmd/poolagent-run",
			pkg == "github.com/poolagent/poolagent/internal/client",
			pkg == "github.com/poolagent/poolagent/internal/protocol",
			pkg == "github.com/poolagent/poolagent/internal/version",
			pkg == "github.com/poolagent/poolagent/internal/suggest",
			pkg == "golang.org/x/sys" || strings.HasPrefix(pkg, "golang.org/x/sys/"):
		default:
			offenders = append(offenders, pkg)
		}
	}
	if len(offenders) > 0 {
		t.Fatalf("poolagent-run links %s; only the standard library, golang.org/x/sys (but not its package net) and github.com/poolagent/poolagent/{client,protocol,internal/version,internal/suggest} may be linked", strings.Join(offenders, ", "))
	}
}

func TestWithoutDaemon(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		status int
		stderr string
	}{
		{name: "no command", status: 125,
			stderr: "poolagent-run: no command given (usage: poolagent-run [--pool P] -- CMD [ARGS...])\n"},
		{name: "unknown flag", args: []string{"--verbose", "--", "true"}, status: 125,
			stderr: "poolagent-run: unknown flag --verbose (accepted: --pool/-p, --stats, --socket, --version, --help/-h) (usage: poolagent-run [--pool P] -- CMD [ARGS...])\n"},
		{name: "bad stats format", args: []string{"--stats", "xml", "--", "true"}, status: 125,
			stderr: "poolagent-run: --stats \"xml\" is not accepted (accepted: text, json)\n"},
		{name: "command not found", args: []string{"-p", "olap", "--", "no-such-command-poolagent"}, status: 127,
			stderr: "poolagent-run: exec: \"no-such-command-poolagent\": executable file not found in $PATH\n"},
		{name: "no daemon", args: []string{"--socket", "/nonexistent/agent.sock", "--", "true"}, status: 125,
			stderr: "poolagent-run: connect to the poolagent daemon at /nonexistent/agent.sock (is `poolagent daemon` running?): " +
				"connect: no such file or directory\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], tt.args...)
			cmd.Env = append(os.Environ(), envAsMain+"=1")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			status := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				status = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if status != tt.status || stderr.String() != tt.stderr || stdout.Len() != 0 {
				t.Fatalf("status %d, stderr %q, stdout %q; want %d, %q", status, stderr.String(), stdout.String(), tt.status, tt.stderr)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	cmd := exec.Command(os.Args[0], "--version")
	cmd.Env = append(os.Environ(), envAsMain+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("poolagent-run --version: %v", err)
	}
	if want := "poolagent-run version " + version.Current().String() + "\n"; string(out) != want {
		t.Errorf("poolagent-run --version printed %q, want %q", out, want)
	}
}
