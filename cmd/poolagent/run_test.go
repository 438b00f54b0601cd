package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/poolagent/poolagent/daemon"
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

func TestRunRefusesBeforeAsking(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		status int
		msg    string
	}{
		{name: "bad stats format", args: []string{"run", "--stats", "xml", "--", "true"}, status: 125,
			msg: `poolagent: --stats "xml" is not accepted (accepted: text, json)`},
		{name: "no command", args: []string{"run"}, status: 125,
			msg: "poolagent: run: no command given (usage: poolagent run [--pool P] -- CMD [ARGS...])"},
		{name: "command not found", args: []string{"run", "--", "no-such-command-poolagent"}, status: 127,
			msg: `poolagent: exec: "no-such-command-poolagent": executable file not found in $PATH`},
		{name: "no daemon", args: []string{"run", "--socket", "/nonexistent/agent.sock", "--", "true"}, status: 125,
			msg: "poolagent: connect to the poolagent daemon at /nonexistent/agent.sock (is `poolagent daemon` running?)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, status, err := runAppStatus(t, tt.args...)
			if status != tt.status || err == nil || !strings.HasPrefix(err.Error(), tt.msg) {
				t.Fatalf("status %d, error %v; want %d, %q", status, err, tt.status, tt.msg)
			}
		})
	}
}

func TestDaemonFlags(t *testing.T) {
	_, _, err := runAppStatus(t, "daemon", "--pools", "../../testdata/admission/pools.sql", "--load-sample", "1ms")
	want := "--load-sample 1ms is not accepted (accepted: 10ms or more, such as 1s)"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

func TestWriteRunStats(t *testing.T) {
	s := daemon.Stats{ResourcePoolID: "olap", QueuedTimeUs: 1200, TotalDurationUs: 53000,
		UsageUsec: 99314, NrPeriods: 9, NrThrottled: 9, ThrottledUsec: 945083}
	tests := []struct {
		format string
		want   string
	}{
		{format: "text", want: "ResourcePoolId   olap\nQueuedTimeUs     1200\nTotalDurationUs  53000\n" +
			"usage_usec       99314\nnr_periods       9\nnr_throttled     9\nthrottled_usec   945083\n"},
		{format: "json", want: `{"ResourcePoolId":"olap","QueuedTimeUs":1200,"TotalDurationUs":53000,` +
			`"usage_usec":99314,"nr_periods":9,"nr_throttled":9,"throttled_usec":945083}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeRunStats(&b, s, tt.format); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}
