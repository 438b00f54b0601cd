package metrics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const (
	rulesFile     = "../../monitoring/poolagent.rules.yml"
	rulesTestFile = "../../monitoring/poolagent.rules.test.yml"
	dashboardFile = "../../monitoring/poolagent.dashboard.json"
)

// promtool returns the path of Prometheus' promtool (Debian's prometheus
// package; scripts/test.sh installs it). Under POOLAGENT_REQUIRE_KERNEL=1,
// as in scripts/test.sh and CI, its absence fails the test.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	if os.Getenv("POOLAGENT_REQUIRE_KERNEL") == "1" {
		t.Fatalf("promtool not found (scripts/test.sh installs Debian's prometheus): %v", err)
	}
	t.Skipf("promtool not found: %v", err)
	return ""
}

// TestPromtoolCheckMetrics lints the real exposition, the handler's
// output with the Go and process collectors, with `promtool check metrics`.
func TestPromtoolCheckMetrics(t *testing.T) {
	tool := promtool(t)
	srv := httptest.NewServer(Handler(SourceFunc(func() (Snapshot, error) { return fixture(), nil })))
	defer srv.Close()
	exposition := scrape(t, srv.URL+"/metrics")
	cmd := exec.Command(tool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(exposition)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestPromtoolRules checks the shipped rules with `promtool check rules`
// and runs their unit tests with `promtool test rules`.
func TestPromtoolRules(t *testing.T) {
	tool := promtool(t)
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTestFile}} {
		if out, err := exec.Command(tool, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestDashboardQueries checks the Grafana dashboard's queries: each parses
// as PromQL (promtool check rules on them as recording rules, with
// Grafana's variables filled in) and names only metrics the exposition
// has; so do the rules.
func TestDashboardQueries(t *testing.T) {
	tool := promtool(t)
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	fill := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*", "$pool", ".*")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, p := range d.Panels {
		for _, target := range p.Targets {
			n++
			expr, err := json.Marshal(fill.Replace(target.Expr)) // a JSON string is a YAML string
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&rules, "      - record: dashboard:panel_query_%d\n        expr: %s\n", n, expr)
		}
	}
	if n < 10 {
		t.Fatalf("%s has %d queries; the panels were not read", dashboardFile, n)
	}
	path := filepath.Join(t.TempDir(), "dashboard.rules.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("the dashboard's queries do not parse: %v\n%s", err, out)
	}

	golden, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	rulesText, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	// A metric name; one with a colon is a recording rule's.
	name := regexp.MustCompile(`[a-z_:]*\b(?:poolagent|container)_[a-z_:]+`)
	for file, text := range map[string]string{dashboardFile: string(raw), rulesFile: string(rulesText)} {
		for _, m := range name.FindAllString(text, -1) {
			if strings.Contains(m, ":") {
				continue
			}
			family := strings.TrimSuffix(m, "_bucket")
			if !bytes.Contains(golden, []byte("# TYPE "+family+" ")) {
				t.Errorf("%s uses %s, which the exposition (%s) does not have", file, m, "testdata/metrics/exposition.txt")
			}
		}
	}
}
