package client

import (
	"bytes"
	"github.com/poolagent/poolagent/internal/protocol"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCommand runs RunCommand with files for its output and returns the
// status, stdout and stderr.
func runCommand(t *testing.T, name string, args ...string) (status int, stdout, stderr string) {
	t.Helper()
	dir := t.TempDir()
	open := func(name string) *os.File {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	in, out, errOut := open("stdin"), open("stdout"), open("stderr")
	status = RunCommand(name, args, in, out, errOut)
	read := func(f *os.File) string {
		b, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return status, read(out), read(errOut)
}

func TestRunCommandRefusesBeforeAsking(t *testing.T) {
	tests := []struct {
		name   string
		prog   string
		args   []string
		status int
		msg    string
	}{
		{name: "bad stats format", prog: "poolagent run", args: []string{"--stats", "xml", "--", "true"}, status: 125,
			msg: `poolagent: --stats "xml" is not accepted (accepted: text, json)`},
		{name: "no command", prog: "poolagent run", status: 125,
			msg: "poolagent: run: no command given (usage: poolagent run [--pool P] -- CMD [ARGS...])"},
		{name: "no command after flags", prog: "poolagent-run", args: []string{"-p", "olap", "--"}, status: 125,
			msg: "poolagent-run: no command given (usage: poolagent-run [--pool P] -- CMD [ARGS...])"},
		{name: "unknown flag", prog: "poolagent-run", args: []string{"--pol", "olap", "--", "true"}, status: 125,
			msg: "poolagent-run: unknown flag --pol; did you mean --pool? (accepted: --pool/-p, --stats, --socket, --version, --help/-h) (usage: poolagent-run [--pool P] -- CMD [ARGS...])"},
		{name: "flag without value", prog: "poolagent-run", args: []string{"--pool"}, status: 125,
			msg: "poolagent-run: --pool needs a value (accepted: --pool/-p, --stats, --socket, --version, --help/-h) (usage: poolagent-run [--pool P] -- CMD [ARGS...])"},
		{name: "command not found", prog: "poolagent run", args: []string{"--", "no-such-command-poolagent"}, status: 127,
			msg: `poolagent: exec: "no-such-command-poolagent": executable file not found in $PATH`},
		{name: "command not executable", prog: "poolagent-run", args: []string{"--", "/dev/null"}, status: 126,
			msg: `poolagent-run: exec: "/dev/null": permission denied`},
		{name: "no daemon", prog: "poolagent run", args: []string{"--socket", "/nonexistent/agent.sock", "--", "true"}, status: 125,
			msg: "poolagent: connect to the poolagent daemon at /nonexistent/agent.sock (is `poolagent daemon` running?)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, stdout, stderr := runCommand(t, tt.prog, tt.args...)
			if status != tt.status || !strings.HasPrefix(stderr, tt.msg) || stdout != "" {
				t.Fatalf("status %d, stderr %q, stdout %q; want %d, %q", status, stderr, stdout, tt.status, tt.msg)
			}
		})
	}
}

func TestRunCommandHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		t.Run(arg, func(t *testing.T) {
			status, stdout, stderr := runCommand(t, "poolagent-run", arg)
			want := "Usage: poolagent-run " + RunArgsUsage + "\n\n" + RunSummary + ".\n\n" + RunHelp + "\n"
			if status != 0 || stdout != want || stderr != "" {
				t.Fatalf("status %d, stdout\n%s\nstderr %q; want 0 and\n%s", status, stdout, stderr, want)
			}
		})
	}
}

func TestWriteStats(t *testing.T) {
	s := protocol.Stats{ResourcePoolID: "olap", QueuedTimeUs: 1200, TotalDurationUs: 53000,
		UsageUsec: 99314, NrPeriods: 9, NrThrottled: 9, ThrottledUsec: 945083,
		PeakMemoryBytes: 536866816, MemoryMaxEvents: 41, OOMKills: 1,
		OOM:          &protocol.OOMKill{Limit: "query", LimitBytes: 536870912, Parameter: "QUERY_MEMORY_LIMIT_PERCENT_PER_NODE", Percent: 5, NodeBytes: 10 << 30},
		ForksRefused: 3, Fork: &protocol.ForkRefused{Limit: "query or pool", Refused: 3, QueryLimit: 64, PoolLimit: 200}}
	tests := []struct {
		format string
		want   string
	}{
		{format: "text", want: "ResourcePoolId      olap\nQueuedTimeUs        1200\nTotalDurationUs     53000\n" +
			"usage_usec          99314\nnr_periods          9\nnr_throttled        9\nthrottled_usec      945083\n" +
			"peak_memory_bytes   536866816\nmemory_high_events  0\nmemory_max_events   41\noom_kills           1\n" +
			"oom_limit           query 536870912 bytes (QUERY_MEMORY_LIMIT_PERCENT_PER_NODE=5)\n" +
			"forks_refused       3\nfork_limit          query or pool (QUERY_PIDS_LIMIT=64, TOTAL_PIDS_LIMIT=200; 0: none)\n"},
		{format: "json", want: `{"ResourcePoolId":"olap","QueuedTimeUs":1200,"TotalDurationUs":53000,` +
			`"usage_usec":99314,"nr_periods":9,"nr_throttled":9,"throttled_usec":945083,` +
			`"peak_memory_bytes":536866816,"memory_high_events":0,"memory_max_events":41,"oom_kills":1,` +
			`"oom":{"limit":"query","limit_bytes":536870912,"parameter":"QUERY_MEMORY_LIMIT_PERCENT_PER_NODE","percent":5,"node_bytes":10737418240},` +
			`"forks_refused":3,"fork":{"limit":"query or pool","refused":3,"query_limit":64,"pool_limit":200}}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteStats(&b, s, tt.format); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}

// TestDescribeConfined: a refusal as confined is printed with the daemon
// option that would allow the move; other errors as they are.
func TestDescribeConfined(t *testing.T) {
	confined := &RefusedError{Code: protocol.CodeConfined, Message: "held by a limit the query would leave: process 7 is in cgroup /u, so it stays where it is"}
	if got := describe(confined); got != confined.Message+"; an administrator may let queries leave that cgroup's limits: poolagent daemon --may-leave CGROUP" {
		t.Errorf("confined: %q", got)
	}
	full := &RefusedError{Code: protocol.CodeQueueFull, Message: "queue full"}
	if got := describe(full); got != "queue full" {
		t.Errorf("queue full: %q", got)
	}
}
