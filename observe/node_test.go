package observe

import (
	"strings"
	"testing"

	"github.com/poolagent/poolagent/internal/cpulimit"
)

func TestNodeParsers(t *testing.T) {
	cpuList := []struct {
		in   string
		want int
		err  string
	}{
		{"0\n", 1, ""},
		{"0-3", 4, ""},
		{"0,2-3,8-11\n", 7, ""},
		{"", 0, "empty CPU list"},
		{"3-1", 0, `range "3-1" runs backwards`},
		{"0-", 0, `"" is not a CPU number`},
		{"a", 0, `"a" is not a CPU number`},
	}
	for _, tc := range cpuList {
		got, err := parseOnline(tc.in)
		if got.Count() != tc.want || !strings.Contains(errString(err), tc.err) || (tc.err == "") != (err == nil) {
			t.Errorf("parseOnline(%q) = %d, %v; want %d, %q", tc.in, got.Count(), err, tc.want, tc.err)
		}
	}
	mem := []struct {
		in   string
		want int64
		err  string
	}{
		{"max\n", -1, ""},
		{"1073741824\n", 1 << 30, ""},
		{"9223372036854771712\n", -1, ""}, // v1 unlimited
		{"0", 0, ""},
		{"1G", 0, `memory limit "1G": want "max" or bytes`},
		{"-1", 0, `memory limit "-1": want "max" or bytes`},
	}
	for _, tc := range mem {
		got, err := ParseMemoryLimit(tc.in)
		if got != tc.want || errString(err) != tc.err {
			t.Errorf("ParseMemoryLimit(%q) = %v, %v; want %v, %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// cpus is the CPU list s, which must parse.
func cpus(s string) cpulimit.CPUSet {
	c, err := cpulimit.ParseCPUSet(s)
	if err != nil {
		panic(err)
	}
	return c
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzNodeLimits feeds arbitrary file contents to the node parsers: no
// panics, and accepted values are in range.
func FuzzNodeLimits(f *testing.F) {
	f.Add("0-3,8")
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := parseOnline(s); err == nil && n.Count() < 1 {
			t.Fatalf("parseOnline(%q) = %d CPUs", s, n.Count())
		}
		if m, err := ParseMemoryLimit(s); err == nil && m < -1 {
			t.Fatalf("ParseMemoryLimit(%q) = %v", s, m)
		}
	})
}
