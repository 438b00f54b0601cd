package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCompareErrors checks that compare refuses bad flags and bad scenario
// files before it creates a cgroup or a report file.
func TestCompareErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.scn")
	if err := os.WriteFile(bad, []byte("cpus 1\ngroup g quota 40\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report.html")
	tests := []struct {
		name   string
		args   []string
		stderr string
		err    string
	}{
		{"bad scenario", []string{"compare", "--report", report, "--scenario", bad},
			bad + `:2: quota "40" has no unit (accepted: 0, or a whole number with us, ms or s: 250us, 40ms, 1s)` + "\n",
			bad + ": 1 error, nothing run"},
		{"missing file", []string{"compare", "-s", bad + ".missing"}, "", "read scenario: open " + bad + ".missing: no such file or directory"},
		{"bad format", []string{"compare", "--format", "html"}, "", `--format "html" is not accepted (accepted: text, json, markdown)`},
		{"bad repeat", []string{"compare", "--repeat", "0"}, "", "--repeat 0 is not accepted (accepted: 1 or more)"},
		{"bad periods", []string{"compare", "--periods", "-1"}, "", "--periods -1 is not accepted (accepted: 0 or more)"},
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
			if _, err := os.Stat(report); !os.IsNotExist(err) {
				t.Errorf("report file written on bad input (stat: %v)", err)
			}
		})
	}
}
