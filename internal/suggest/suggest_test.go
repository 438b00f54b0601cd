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

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"kitten", "sitting", 3},
		{"RESOURCES_WEIGHT", "RESOURCE_WEIGHT", 1},
		{"flaw", "lawn", 2},
		{"µs", "us", 1}, // runes, not bytes: µ is two bytes
		{"über", "uber", 1},
	}
	for _, tc := range tests {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (it is symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
}
