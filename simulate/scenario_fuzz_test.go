package simulate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/cpulimit"
)

// formatScenario writes h in the scenario format, every setting explicit.
func formatScenario(h Host) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cpus %d\ntick %s\n", h.CPUs, FormatUsec(h.TickUsec))
	for _, g := range h.Groups {
		quota := "max"
		if g.QuotaUsec != cpulimit.Max {
			quota = FormatUsec(g.QuotaUsec)
		}
		fmt.Fprintf(&b, "group %s quota %s period %s burst %s weight %d", g.Name, quota, FormatUsec(g.PeriodUsec), FormatUsec(g.BurstUsec), g.Weight)
		if g.Parent != "" {
			fmt.Fprintf(&b, " parent %s", g.Parent)
		}
		b.WriteByte('\n')
	}
	for _, t := range h.Tasks {
		fmt.Fprintf(&b, "task %s group %s arrive %s need %s threads %d\n", t.Name, t.Group, FormatUsec(t.ArriveUsec), FormatUsec(t.NeedUsec), t.Threads)
	}
	return b.String()
}

// FuzzParseScenario checks that any input either parses into a Host that
// validates and survives a round trip through the format, or is refused
// with line-numbered errors only.
func FuzzParseScenario(f *testing.F) {
	shipped, err := filepath.Glob(filepath.Join(scenarioDir, "*.scn"))
	if err != nil || len(shipped) == 0 {
		f.Fatalf("no shipped scenarios in %s: %v", scenarioDir, err)
	}
	for _, path := range shipped {
		src, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		s, err := ParseScenario("f.scn", src)
		if err != nil {
			if s != nil {
				t.Fatal("a scenario came back with an error")
			}
			lines := strings.Count(string(src), "\n") + 1
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var se *ScenarioError
				if !errors.As(e, &se) || se.Line < 0 || se.Line > lines || se.File != "f.scn" {
					t.Fatalf("error %v is not a ScenarioError within the file's %d lines", e, lines)
				}
			}
			return
		}
		if err := s.Host.Validate(); err != nil {
			t.Fatalf("parsed host does not validate: %v", err)
		}
		lines := strings.Count(string(src), "\n") + 1
		if len(s.GroupLines) != len(s.Host.Groups) || len(s.TaskLines) != len(s.Host.Tasks) {
			t.Fatalf("%d group lines for %d groups, %d task lines for %d tasks", len(s.GroupLines), len(s.Host.Groups), len(s.TaskLines), len(s.Host.Tasks))
		}
		for _, l := range append(slices.Clone(s.GroupLines), s.TaskLines...) {
			if l < 1 || l > lines {
				t.Fatalf("declaration line %d outside the file's %d lines", l, lines)
			}
		}
		again, err := ParseScenario("f.scn", []byte(formatScenario(s.Host)))
		if err != nil {
			t.Fatalf("formatted scenario does not parse: %v\n%s", err, formatScenario(s.Host))
		}
		if !reflect.DeepEqual(again.Host, s.Host) {
			t.Fatalf("round trip changed the host\n got %+v\nwant %+v", again.Host, s.Host)
		}
	})
}
