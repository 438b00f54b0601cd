package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/client"
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
