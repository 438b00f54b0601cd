package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// update rewrites the golden files of the cmd/poolagent tests.
var update = flag.Bool("update", false, "rewrite the golden files of the cmd/poolagent tests")

// poolsDir holds the pool files and, in golden/, the expected outputs.
const poolsDir = "../../testdata/pools/"

// checkGolden compares got with testdata/pools/golden/name, or rewrites
// it with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	checkGoldenFile(t, filepath.Join(poolsDir, "golden", name), got)
}

// checkGoldenFile compares got with the file at path, or rewrites it with
// -update. Paths in got are shown from the repository root, as an operator
// running poolagent there sees them.
func checkGoldenFile(t *testing.T, path, got string) {
	t.Helper()
	got = replaceTestdata(got)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s:\n%s", path, got)
	}
}

// replaceTestdata shows paths from the repository root.
func replaceTestdata(s string) string {
	return strings.ReplaceAll(s, "../../testdata/", "testdata/")
}

// seedNode is the seed's 10-vCPU node with 64 GiB.
var seedNode = []string{"--cpus", "10", "--memory", "68719476736"}

func TestPlanGolden(t *testing.T) {
	tests := []struct {
		golden string
		args   []string
	}{
		{"seed.txt", append([]string{"plan", "--pools", poolsDir + "seed.sql"}, seedNode...)},
		{"seed.json", append([]string{"plan", "--pools", poolsDir + "seed.sql", "--format", "json"}, seedNode...)},
		{"seed_weights.txt", append([]string{"plan", "--pools", poolsDir + "seed_weights.sql"}, seedNode...)},
		{"seed_weights_200.txt", append([]string{"plan", "--pools", poolsDir + "seed_weights_200.sql"}, seedNode...)},
		{"seed_weights_200.json", append([]string{"plan", "--pools", poolsDir + "seed_weights_200.sql", "--format", "json"}, seedNode...)},
		{"seed_ceo.txt", append([]string{"plan", "--pools", poolsDir + "seed_ceo.sql"}, seedNode...)},
		{"seed_ceo.json", append([]string{"plan", "--pools", poolsDir + "seed_ceo.sql", "--format", "json"}, seedNode...)},
		{"host.txt", []string{"plan", "--pools", poolsDir + "host.sql", "--cpus", "8", "--memory", "34359738368"}},
		{"host.json", []string{"plan", "--pools", poolsDir + "host.sql", "--cpus", "8", "--memory", "32GiB", "--format", "json"}},
		{"demand.txt", append([]string{"plan", "--pools", poolsDir + "seed_weights.sql", "--active", "pool1, pool2,pool3",
			"--demand", "pool1=0.5", "--period", "50ms"}, seedNode...)},
		{"host_unified.txt", []string{"plan", "--pools", poolsDir + "seed_weights.sql", "--host-root", "../../testdata/node/unified"}},
		{"cpus.txt", []string{"plan", "--pools", poolsDir + "cpus.sql", "--cpus", "8", "--memory", "32GiB", "--active", "web,etl"}},
		{"cpus.json", []string{"plan", "--pools", poolsDir + "cpus.sql", "--cpus", "8", "--memory", "32GiB", "--active", "web,etl", "--format", "json"}},
		{"pids.txt", []string{"plan", "--pools", poolsDir + "pids.sql", "--cpus", "8", "--memory", "32GiB"}},
		{"pids.json", []string{"plan", "--pools", poolsDir + "pids.sql", "--cpus", "8", "--memory", "32GiB", "--format", "json"}},
		{"guarantees.txt", []string{"plan", "--pools", poolsDir + "guarantees.sql", "--cpus", "8", "--memory", "32GiB"}},
		{"guarantees.json", []string{"plan", "--pools", poolsDir + "guarantees.sql", "--cpus", "8", "--memory", "32GiB", "--format", "json"}},
		{"host_cpus_given.txt", []string{"plan", "--pools", poolsDir + "seed_ceo.sql", "--cpus", "3", "--host-root", "../../testdata/node/hybrid"}},
	}
	for _, tc := range tests {
		t.Run(tc.golden, func(t *testing.T) {
			stdout, stderr, err := runApp(t, tc.args...)
			if err != nil || stderr != "" {
				t.Fatalf("err %v, stderr %q", err, stderr)
			}
			checkGolden(t, tc.golden, stdout)
		})
	}
}

// TestPlanSeedNumbers reads the seed's numbers out of the JSON contract.
func TestPlanSeedNumbers(t *testing.T) {
	stdout, _, err := runApp(t, append([]string{"plan", "--pools", poolsDir + "seed.sql", "--format", "json"}, seedNode...)...)
	if err != nil {
		t.Fatal(err)
	}
	var plan struct {
		Node struct {
			CPUs        float64 `json:"cpus"`
			MemoryBytes int64   `json:"memory_bytes"`
			PeriodUsec  uint64  `json:"period_usec"`
		} `json:"node"`
		Pools []map[string]any `json:"pools"`
	}
	if err := json.Unmarshal([]byte(stdout), &plan); err != nil {
		t.Fatal(err)
	}
	if plan.Node.CPUs != 10 || plan.Node.PeriodUsec != 100000 {
		t.Errorf("node %+v", plan.Node)
	}
	for _, p := range plan.Pools {
		if p["name"] != "olap" {
			continue
		}
		if p["cpu_max"] != "700000 100000" || p["query_cpu_max"] != "350000 100000" || p["alloc_cpus"] != 7.0 {
			t.Errorf("olap %v, want 7 vCPU: cpu.max 700000 100000, per query 350000 100000", p)
		}
		return
	}
	t.Error("no olap pool in the plan")
}

// TestPlanErrors checks that bad flags and files fail with a precise
// message on stderr and nothing on stdout.
func TestPlanErrors(t *testing.T) {
	seed := poolsDir + "seed.sql"
	tests := []struct {
		name       string
		args       []string
		err        string
		stderrHead string
	}{
		{"format", []string{"plan", "--pools", seed, "--format", "yaml", "--cpus", "1", "--memory", "1"},
			`--format "yaml" is not accepted (accepted: text, json)`, ""},
		{"cpus", []string{"plan", "--pools", seed, "--cpus", "0", "--memory", "1"},
			"--cpus 0 is not accepted (accepted: vCPUs > 0, such as 10 or 1.5)", ""},
		{"memory", []string{"plan", "--pools", seed, "--cpus", "1", "--memory", "-1"},
			`--memory "-1" is not a size (accepted: bytes > 0, plain (17179869184) or with an IEC suffix for powers of 1024 (KiB, MiB, GiB, TiB, PiB or Ki, Mi, Gi, Ti, Pi: 16GiB, 1.5Gi) or an SI suffix for powers of 1000 (kB, MB, GB, TB, PB: 512MB))`, ""},
		{"memory ambiguous suffix", []string{"plan", "--pools", seed, "--cpus", "1", "--memory", "16G"},
			`--memory "16G": suffix "G" is ambiguous (write 16GiB for powers of 1024 or 16GB for powers of 1000)`, ""},
		{"period", []string{"plan", "--pools", seed, "--cpus", "1", "--memory", "1", "--period", "500us"},
			"--period 500µs is not accepted (accepted: 1ms..1s in whole µs)", ""},
		{"demand syntax", []string{"plan", "--pools", seed, "--cpus", "1", "--memory", "1", "--demand", "olap:2"},
			`--demand "olap:2" is not accepted (accepted: POOL=VCPU with VCPU >= 0, comma-separated)`, ""},
		{"demand pool", []string{"plan", "--pools", seed, "--cpus", "1", "--memory", "1", "--demand", "olpa=2"},
			`plan: demand: pool "olpa" does not exist; did you mean "olap"?`, ""},
		{"active pool", []string{"plan", "--pools", seed, "--cpus", "1", "--memory", "1", "--active", "olap,etl"},
			`plan: active pool: pool "etl" does not exist`, ""},
		{"missing file", []string{"plan", "--pools", poolsDir + "nope.sql", "--cpus", "1", "--memory", "1"},
			"read pool file: open ../../testdata/pools/nope.sql: no such file or directory", ""},
		{"unreadable host", []string{"plan", "--pools", seed, "--host-root", "/nonexistent"},
			"read the host (give --cpus and --memory instead): read online CPUs: open /nonexistent/sys/devices/system/cpu/online: no such file or directory", ""},
		{"cpus not online", []string{"plan", "--pools", poolsDir + "cpus.sql", "--host-root", "../../testdata/node/unified"},
			"plan: ../../testdata/pools/cpus.sql:15:12: pool \"batch\": CPUS='4-7': CPUs 4-7 are not online on this node (online: 0-3); accepted: CPUs within 0-3, or CPUS=-1", ""},
		{"refused file", []string{"plan", "--pools", poolsDir + "bad.sql", "--cpus", "1", "--memory", "1"},
			"../../testdata/pools/bad.sql: 8 errors, nothing planned",
			"../../testdata/pools/bad.sql:5:28: CONCURRENT_QUERY_LIMIT=2000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, err := runApp(t, tc.args...)
			if err == nil || err.Error() != tc.err {
				t.Errorf("err %v\nwant %s", err, tc.err)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if !strings.HasPrefix(stderr, tc.stderrHead) || (tc.stderrHead == "" && stderr != "") {
				t.Errorf("stderr %q, want it to start with %q", stderr, tc.stderrHead)
			}
		})
	}
}
