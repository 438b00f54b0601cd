package fleet

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/state"
)

func TestDecodeNodeRecord(t *testing.T) {
	for _, tt := range []struct {
		name, key, value, err string
	}{
		{"ok", "n1", `{"node":"n1","vcpus":4,"load_percent":12.5,"version":"v1","updated":1700000000}`, ""},
		{"load out of range", "n1", `{"node":"n1","vcpus":4,"load_percent":1e300}`, "load_percent 1e+300, want 0 to 100"},
		{"negative load", "n1", `{"node":"n1","vcpus":4,"load_percent":-1}`, "want 0 to 100"},
		{"name from the key", "n1", `{"node":"n2","vcpus":4}`, `names node "n2": want the name in its key`},
		{"bad key name", "n/1", `{"node":"n/1","vcpus":4}`, "not allowed"},
		{"negative vcpus", "n1", `{"node":"n1","vcpus":-2}`, "vcpus -2, want 0 (unknown) to 65536"},
		{"version with a newline", "n1", `{"node":"n1","vcpus":1,"version":"a\nb"}`, "printable"},
		{"not json", "n1", `{`, "node record of n1"},
		{"too large", "n1", `{"node":"n1","vcpus":1,"version":"` + strings.Repeat("x", 2000) + `"}`, "want at most 1024"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeNodeRecord(tt.key, []byte(tt.value))
			if (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("got %v, want %q", err, tt.err)
			}
		})
	}
}

func TestDecodeEntry(t *testing.T) {
	for _, tt := range []struct {
		name, dir, key, value, err string
	}{
		{"queued", queueDir, "n1.1a.7", `{"node":"n1","token":"n1.1a.7","arrived":1700000000000}`, ""},
		{"slot", slotDir, "s3", `{"node":"n1","token":"n1.1a.7","arrived":1}`, ""},
		{"token not the key's", queueDir, "n1.1a.8", `{"node":"n1","token":"n1.1a.7"}`, "want the key's"},
		{"node not the token's", extraDir, "n1.1a.7", `{"node":"n2","token":"n1.1a.7"}`, "want the token's node"},
		{"bad slot", slotDir, "x3", `{"node":"n1","token":"n1.1a.7"}`, `slot "x3"`},
		{"bad token", queueDir, "n1", `{"node":"n1","token":"n1"}`, "want NODE.LEASE.N"},
		{"bad lease", queueDir, "n1.zz.1", `{"node":"n1","token":"n1.zz.1"}`, "want hexadecimal"},
		{"arrived out of range", queueDir, "n1.1.1", `{"node":"n1","token":"n1.1.1","arrived":-5}`, "arrived -5"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeEntry(tt.dir, tt.key, []byte(tt.value))
			if (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("got %v, want %q", err, tt.err)
			}
		})
	}
}

func defsValue(t testing.TB, pools string, changes ...state.Change) []byte {
	v, err := json.Marshal(Definitions{Format: DefinitionsFormat, Seed: "n1:/etc/poolagent/pools.sql", PoolFile: pools, Changes: changes})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestDecodeDefinitions(t *testing.T) {
	good := "CREATE RESOURCE POOL olap WITH (CONCURRENT_QUERY_LIMIT = 2);\n"
	for _, tt := range []struct {
		name  string
		value []byte
		err   string
	}{
		{"ok", defsValue(t, good), ""},
		{"pool file errors as for a file", defsValue(t, "CREATE RESOURCE POOL olap WITH (CONCURRENT_QUERY_LIMIT = -7);\n"), "n1:/etc/poolagent/pools.sql:1:"},
		{"change that does not apply", defsValue(t, good, state.Change{Seq: 1, DDL: "DROP RESOURCE POOL nosuch;"}), "do not load"},
		{"changes out of order", defsValue(t, good, state.Change{Seq: 2, DDL: "DROP RESOURCE POOL olap;"}), "numbered 2, want 1"},
		{"format", []byte(`{"format":"x"}`), `format "x"`},
		{"too large", []byte(`{"format":"` + strings.Repeat("x", maxDefsValue) + `"}`), "want at most"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeDefinitions(tt.value, 1)
			if (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("got %v, want %q", err, tt.err)
			}
		})
	}
}

// FuzzDecodeNodeRecord: a record accepted is within its ranges and names
// the node of its key.
func FuzzDecodeNodeRecord(f *testing.F) {
	f.Add("n1", []byte(`{"node":"n1","vcpus":4,"load_percent":12.5}`))
	f.Add("n1", []byte(`{"node":"n1","vcpus":4,"load_percent":1e300}`))
	f.Fuzz(func(t *testing.T, name string, value []byte) {
		r, err := decodeNodeRecord(name, value)
		if err != nil {
			return
		}
		if r.Node != name || r.VCPUs < 0 || r.VCPUs > maxVCPUs || math.IsNaN(r.LoadPercent) || r.LoadPercent < 0 || r.LoadPercent > 100 {
			t.Fatalf("accepted %+v from %q", r, value)
		}
	})
}

// FuzzDecodeEntry: an entry accepted names the node of its token.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(queueDir, "n1.1a.7", []byte(`{"node":"n1","token":"n1.1a.7","arrived":1}`))
	f.Add(slotDir, "s0", []byte(`{"node":"n1","token":"n1.1a.7","arrived":1}`))
	f.Fuzz(func(t *testing.T, dir, name string, value []byte) {
		e, err := decodeEntry(dir, name, value)
		if err != nil {
			return
		}
		if node, _, err := parseToken(e.Token); err != nil || node != e.Node || e.ArrivedUnixMilli < 0 || len(e.User) > maxUser || !printable(e.User) {
			t.Fatalf("accepted %+v from %q", e, value)
		}
	})
}

// FuzzDecodeUsage: a usage accepted is a finite, non-negative number of
// seconds at a time since 1970.
func FuzzDecodeUsage(f *testing.F) {
	f.Add([]byte(`{"seconds":12.5,"at":1767225600000}`))
	f.Add([]byte(`{"seconds":-1,"at":1}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		u, err := decodeUsage(value)
		if err != nil {
			return
		}
		if math.IsNaN(u.Seconds) || math.IsInf(u.Seconds, 0) || u.Seconds < 0 || u.At.UnixMilli() < 0 {
			t.Fatalf("accepted %+v from %q", u, value)
		}
	})
}

// FuzzDecodeDefinitions: definitions accepted make a model.
func FuzzDecodeDefinitions(f *testing.F) {
	f.Add(defsValue(f, "CREATE RESOURCE POOL olap WITH (CONCURRENT_QUERY_LIMIT = 2);\n"))
	f.Add([]byte(`{"format":"poolagent-cluster-defs/1","pool_file":"x"}`))
	f.Fuzz(func(t *testing.T, value []byte) {
		d, err := decodeDefinitions(value, 1)
		if err != nil {
			return
		}
		if _, _, err := d.Model(); err != nil {
			t.Fatalf("accepted definitions that do not load: %v", err)
		}
	})
}
