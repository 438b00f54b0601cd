package suggest

import "testing"

func TestNearest(t *testing.T) {
	flags := []string{"pools", "p", "root", "dry-run", "n", "cpus", "memory", "period", "help", "h"}
	commands := []string{"simulate", "compare", "plan", "check", "apply", "teardown", "daemon", "run", "stat", "record", "advise", "sql", "pools"}
	tests := []struct {
		name, word string
		names      []string
		want       string
	}{
		{"a letter missing", "pool", flags, "pools"},
		{"a letter too many", "poolss", flags, "pools"},
		{"two letters swapped", "simlate", commands, "simulate"},
		{"a prefix", "dry", flags, "dry-run"},
		{"a letter wrong", "cpys", flags, "cpus"},
		{"nothing near", "frobnicate", commands, ""},
		{"too far for a short word", "xyz", flags, ""},
		{"no guess at one letter", "q", flags, ""},
		{"exact", "root", flags, "root"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Nearest(tc.word, tc.names); got != tc.want {
				t.Errorf("Nearest(%q) = %q, want %q", tc.word, got, tc.want)
			}
		})
	}
}
