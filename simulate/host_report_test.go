package simulate

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden/")

// golden compares got with testdata/golden/name, or rewrites it with
// -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (rerun with -update and review the diff):\n%s", path, got)
	}
}

// TestReportGolden renders the built-in scenario and every shipped one as
// text and JSON and compares them with their golden files.
func TestReportGolden(t *testing.T) {
	scenarios := map[string]*Scenario{"builtin": BuiltinScenario()}
	shipped, err := filepath.Glob(filepath.Join(scenarioDir, "*.scn"))
	if err != nil || len(shipped) == 0 {
		t.Fatalf("no shipped scenarios in %s: %v", scenarioDir, err)
	}
	for _, path := range shipped {
		s := readScenario(t, filepath.Base(path))
		s.Name = filepath.ToSlash(filepath.Join("testdata/scenarios", filepath.Base(path)))
		scenarios[strings.TrimSuffix(filepath.Base(path), ".scn")] = s
	}
	const periods = 3
	for name, s := range scenarios {
		t.Run(name, func(t *testing.T) {
			run, err := RunHost(s.Host, HostOptions{TraceTicks: TimelineTicks(s.Host, periods)})
			if err != nil {
				t.Fatal(err)
			}
			var text, js bytes.Buffer
			if err := WriteText(&text, s, run, periods); err != nil {
				t.Fatal(err)
			}
			if err := WriteJSON(&js, s, run); err != nil {
				t.Fatal(err)
			}
			golden(t, name+".txt", text.Bytes())
			golden(t, name+".json", js.Bytes())
		})
	}
}

// TestDocsExcerpt keeps the output excerpt in docs/commands.md's
// "poolagent simulate" section true: its lines must appear, in order, in
// the built-in scenario's golden text.
func TestDocsExcerpt(t *testing.T) {
	doc, err := os.ReadFile("../docs/commands.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## poolagent simulate\n")
	if !ok {
		t.Fatal(`docs/commands.md has no "## poolagent simulate" section`)
	}
	blocks := strings.Split(section, "```")
	if len(blocks) < 4 {
		t.Fatal("the section has no second code block, the output excerpt")
	}
	want, err := os.ReadFile(filepath.Join("testdata", "golden", "builtin.txt"))
	if err != nil {
		t.Fatal(err)
	}
	rest := string(want)
	for _, line := range strings.Split(strings.Trim(blocks[3], "\n"), "\n") {
		i := strings.Index(rest, line+"\n")
		if i < 0 {
			t.Fatalf("docs/commands.md excerpt line %q is not in builtin.txt (in order)", line)
		}
		rest = rest[i+len(line)+1:]
	}
}
