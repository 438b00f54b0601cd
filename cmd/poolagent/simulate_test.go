package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runApp runs poolagent with args and returns stdout, stderr and the error.
func runApp(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	app := newApp()
	var stdout, stderr bytes.Buffer
	app.Writer, app.ErrWriter = &stdout, &stderr
	err := app.Run(append([]string{"poolagent"}, args...))
	return stdout.String(), stderr.String(), err
}

// TestSimulateDefault checks that the command without flags prints the
// built-in scenario exactly as the simulator's golden files have it.
func TestSimulateDefault(t *testing.T) {
	for _, tt := range []struct {
		name   string
		args   []string
		golden string
	}{
		{"text", []string{"simulate"}, "builtin.txt"},
		{"json", []string{"simulate", "--format", "json"}, "builtin.json"},
		{"scenario file", []string{"simulate", "--scenario", "../../testdata/scenarios/chapter-burst.scn"}, "chapter-burst.txt"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, err := runApp(t, tt.args...)
			if err != nil || stderr != "" {
				t.Fatalf("err %v, stderr %q", err, stderr)
			}
			want, err := os.ReadFile(filepath.Join("../../simulate/testdata/golden", tt.golden))
			if err != nil {
				t.Fatal(err)
			}
			// The golden files name shipped scenarios by their path
			// from the repository root.
			got := strings.ReplaceAll(stdout, "../../testdata/", "testdata/")
			if got != string(want) {
				t.Errorf("output differs from %s:\n%s", tt.golden, stdout)
			}
		})
	}
}

// TestSimulateErrors checks that bad input fails with a message saying
// where and what, and that nothing is simulated.
func TestSimulateErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.scn")
	if err := os.WriteFile(bad, []byte("cpus 1\ngroup g quota 40\ntask t group g need 1ms threads 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		stderr string
		err    string
	}{
		{"bad scenario", []string{"simulate", "--scenario", bad},
			bad + `:2: quota "40" has no unit (accepted: 0, or a whole number with us, ms or s: 250us, 40ms, 1s)` + "\n" +
				bad + `:3: threads "0" is not accepted (accepted: a whole number, 1 or more)` + "\n",
			bad + ": 2 errors, nothing simulated"},
		{"missing file", []string{"simulate", "-s", bad + ".missing"}, "", "read scenario: open " + bad + ".missing: no such file or directory"},
		{"bad format", []string{"simulate", "--format", "yaml"}, "", `--format "yaml" is not accepted (accepted: text, json)`},
		{"bad periods", []string{"simulate", "--periods", "0"}, "", "--periods 0 is not accepted (accepted: 1 or more)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, err := runApp(t, tt.args...)
			if err == nil || err.Error() != tt.err {
				t.Errorf("error %v, want %q", err, tt.err)
			}
			if stderr != tt.stderr || stdout != "" {
				t.Errorf("stdout %q stderr %q, want no output and stderr %q", stdout, stderr, tt.stderr)
			}
			if code := exitCode(err); code == 0 {
				t.Errorf("exit code 0")
			}
		})
	}
}

// TestModelNote is the message test of the note simulate and advise print
// on a host whose kernel the models do not cover (the literal host trees
// of observe/testdata/host), and of their silence where it is covered.
func TestModelNote(t *testing.T) {
	for tree, want := range map[string]string{
		"fair": "",
		"scx-rusty": `poolagent simulate: note: the throttling prediction may not match this host: sched_ext is enabled: the BPF scheduler "rusty" schedules every task ` +
			"and enforces cpu.max its own way, where the models assume the kernel's fair class (CFS/EEVDF)\n",
		// A trace or a scenario carries its tick: an unknown CONFIG_HZ is not said.
		"garbage": `poolagent simulate: note: the throttling prediction may not match this host: kernel release "banana" not understood ` +
			"(accepted: MAJOR.MINOR, then anything, as uname -r prints it), where the models follow the CFS bandwidth code of Linux 5.4 and later; " +
			"the nohz_full CPUs cannot be read (ROOT/sys/devices/system/cpu/nohz_full: CPU list \"cpu one\" not understood (accepted: a list such as 1-3,5, or (null))), " +
			"where the models check every busy CPU's quota at each tick\n",
	} {
		root := filepath.Join("../../observe/testdata/host", tree)
		var b bytes.Buffer
		modelNote(&b, "simulate", root)
		if got := strings.ReplaceAll(b.String(), root, "ROOT"); got != want {
			t.Errorf("%s:\n got %q\nwant %q", tree, got, want)
		}
	}
}
