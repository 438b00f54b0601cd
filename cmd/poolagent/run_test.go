package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/internal/client"
)

// runAppStatus runs poolagent with args like runApp, but keeps an exit
// status error from ending the test process, and returns that status.
func runAppStatus(t *testing.T, args ...string) (stderr string, status int, err error) {
	t.Helper()
	app := newApp()
	var out, errOut bytes.Buffer
	app.Writer, app.ErrWriter = &out, &errOut
	app.ExitErrHandler = func(*cli.Context, error) {}
	err = app.Run(append([]string{"poolagent"}, args...))
	if err != nil {
		status = exitCode(err)
	}
	return errOut.String(), status, err
}

// TestRunCommandWiring checks that `poolagent run` hands its arguments to
// client.RunCommand as typed and exits with its status; client's tests
// check the messages.
func TestRunCommandWiring(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		status int
	}{
		{name: "bad stats format", args: []string{"run", "--stats", "xml", "--", "true"}, status: 125},
		{name: "no command", args: []string{"run", "-p", "olap"}, status: 125},
		{name: "command not found", args: []string{"run", "--", "no-such-command-poolagent"}, status: 127},
		{name: "no daemon", args: []string{"run", "--socket", "/nonexistent/agent.sock", "--", "true"}, status: 125},
		{name: "help", args: []string{"run", "--help"}, status: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, status, err := runAppStatus(t, tt.args...)
			if status != tt.status || (tt.status == 0) != (err == nil) {
				t.Fatalf("status %d, error %v; want %d", status, err, tt.status)
			}
		})
	}
}

func TestRunHelp(t *testing.T) {
	app := newApp()
	var out bytes.Buffer
	app.Writer = &out
	if err := app.Run([]string{"poolagent", "help", "run"}); err != nil {
		t.Fatal(err)
	}
	// urfave indents the description: compare it line by line.
	for _, want := range append([]string{client.RunSummary, client.RunArgsUsage}, strings.Split(client.RunHelp, "\n")...) {
		if !strings.Contains(out.String(), want) {
			t.Errorf("`poolagent help run` lacks %q:\n%s", want, out.String())
		}
	}
}

func TestDaemonFlags(t *testing.T) {
	_, _, err := runAppStatus(t, "daemon", "--pools", "../../testdata/admission/pools.sql", "--load-sample", "1ms")
	want := "--load-sample 1ms is not accepted (accepted: 10ms or more, such as 1s)"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

// TestRunHandsOver: installed with poolagent-run beside it, poolagent
// runs `poolagent run` as poolagent-run (package handover), which
// initialises none of poolagent's heavy packages and speaks as `poolagent
// run`; without poolagent-run beside it, poolagent runs the command itself,
// alike but after its whole start.
func TestRunHandsOver(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"poolagent", "poolagent-run"} {
		build := exec.Command("go", "build", "-o", filepath.Join(dir, name), "../"+name)
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", name, err, out)
		}
	}
	socket := filepath.Join(dir, "absent.sock")
	want := "poolagent: connect to the poolagent daemon at " + socket + " (is `poolagent daemon` running?): connect: no such file or directory\n"
	// heavy is a package only the full binary initialises.
	const heavy = "init github.com/prometheus/client_golang/prometheus @"
	run := func() (status int, message, inits string) {
		cmd := exec.Command(filepath.Join(dir, "poolagent"), "run", "--socket", socket, "--", "true")
		cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("poolagent run: %v, want an exit status", err)
		}
		for line := range strings.Lines(stderr.String()) {
			if strings.HasPrefix(line, "init ") {
				inits += line
			} else {
				message += line
			}
		}
		return ee.ExitCode(), message, inits
	}
	status, message, inits := run()
	if status != client.ExitRefused || message != want || strings.Contains(inits, heavy) || !strings.Contains(inits, "init os @") {
		t.Fatalf("handed over: status %d, message %q; want %d, %q, and no %q among its inits:\n%s", status, message, client.ExitRefused, want, heavy, inits)
	}
	if err := os.Remove(filepath.Join(dir, "poolagent-run")); err != nil {
		t.Fatal(err)
	}
	status, message, inits = run()
	if status != client.ExitRefused || message != want || !strings.Contains(inits, heavy) {
		t.Fatalf("alone: status %d, message %q; want %d, %q, after %q", status, message, client.ExitRefused, want, heavy)
	}
}
