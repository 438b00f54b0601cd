package main

import (
	"os"
	"strings"
	"testing"
)

// TestAdviseCommand checks that the command prints advise's golden
// output for a trace and budget, and refuses bad flags and traces.
func TestAdviseCommand(t *testing.T) {
	stdout, stderr, err := runApp(t, "advise", "--trace", "../../internal/advise/testdata/traces/chapter-burst.json", "--max-delay", "30ms")
	if err != nil || stderr != "" {
		t.Fatalf("err %v, stderr %q", err, stderr)
	}
	want, err := os.ReadFile("../../internal/advise/testdata/golden/chapter-burst.txt")
	if err != nil {
		t.Fatal(err)
	}
	if stdout != string(want) {
		t.Errorf("got\n%s\nwant\n%s", stdout, want)
	}
	stdout, _, err = runApp(t, "advise", "--trace", "../../internal/advise/testdata/traces/chapter-burst.json")
	if err != nil || !strings.Contains(stdout, "advice for at most 10% of periods throttled") {
		t.Errorf("without a budget flag: err %v, stdout\n%s", err, stdout)
	}

	bad := t.TempDir() + "/cut.json"
	if err := os.WriteFile(bad, []byte(`{"format": "poolagent-trace", "version": 1, "samples": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-throttled-periods", "120%"}, `--max-throttled-periods "120%" is not accepted (accepted: a percent 0..100`},
		{[]string{"--max-delay", "0s"}, "--max-delay 0s is not accepted (accepted: 1ms..1s"},
		{[]string{"--trace", bad}, "cut.json: line 1, column 57: the trace ends early, it was cut off"},
		{[]string{"--pool", "olap"}, "give one of --trace FILE, --pool POOL or --all"},
		{[]string{"--report", "x.html"}, "--report writes the page of --all (accepted: --all --report FILE)"},
	} {
		args := append([]string{"advise", "--trace", "../../internal/advise/testdata/traces/chapter-burst.json"}, c.args...)
		_, _, err := runApp(t, args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"advise"}, "give one of --trace FILE, --pool POOL or --all"},
		{[]string{"advise", "--all", "--format", "xml"}, `--format "xml" is not accepted (accepted: text, json)`},
		{[]string{"advise", "--pool", "olap", "--socket", "/nonexistent/agent.sock"}, "connect to the poolagent daemon at /nonexistent/agent.sock"},
		{[]string{"advise", "--pool", "olap", "--since", "-1m"}, "--since -1m0s is not accepted"},
		{[]string{"record", "--from-daemon", "--pool", "olap", "-o", "x.json", "--for", "1m"}, "--from-daemon writes what the daemon kept: --for and --interval do not apply"},
		{[]string{"record", "--pool", "olap", "-o", "x.json"}, "--for is missing"},
	} {
		_, _, err := runApp(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
}
