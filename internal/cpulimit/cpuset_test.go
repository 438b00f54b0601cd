package cpulimit

import (
	"slices"
	"strings"
	"testing"
)

// TestParseCPUSet: the kernel's CPU lists read into canonical form.
func TestParseCPUSet(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		count          int
	}{
		{"one", "0", "0", 1},
		{"range", "0-3", "0-3", 4},
		{"list", "0,2-3", "0,2-3", 3},
		{"kernel newline", "0-1\n", "0-1", 2},
		{"empty file", "\n", "", 0},
		{"unsorted", "8,0-3", "0-3,8", 5},
		{"adjacent merged", "0,1,2,4-5,6", "0-2,4-6", 6},
		{"overlapping", "0-5,3-7", "0-7", 8},
		{"one-CPU range", "3-3", "3", 1},
		{"leading zero", "007", "7", 1},
		{"highest CPU", "8191", "8191", 1},
		{"every CPU", "0-8191", "0-8191", 8192},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseCPUSet(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if s.String() != tc.want || s.Count() != tc.count {
				t.Errorf("ParseCPUSet(%q) = %q (%d CPUs), want %q (%d)", tc.in, s, s.Count(), tc.want, tc.count)
			}
		})
	}
}

// TestParseCPUSetErrors: every refused list says what is wrong, where in
// the list, and what a list may hold.
func TestParseCPUSetErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"reversed range", "0,3-1", `CPU list "0,3-1", byte 2: range "3-1" runs backwards`},
		{"above the highest CPU", "0-8192", `CPU list "0-8192", byte 0: CPU 8192 is above 8191`},
		{"huge number", "99999999999999999999999", `CPU 99999999999999999999999 is above 8191`},
		{"negative", "-1", `byte 0: "" is not a CPU number`},
		{"empty item", "0,,2", `byte 2: "" is not a CPU number`},
		{"trailing comma", "0,", `byte 2: "" is not a CPU number`},
		{"word", "all", `"all" is not a CPU number`},
		{"plus sign", "+1", `"+1" is not a CPU number`},
		{"inner space", "0, 1", `" 1" is not a CPU number`},
		{"stride", "0-7:2/4", `"7:2/4" is not a CPU number`},
		{"double dash", "1-2-3", `"2-3" is not a CPU number`},
		{"too long", strings.Repeat("0,", MaxCPUListBytes), "longer than 32768"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCPUSet(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "accepted: comma-separated CPU numbers 0..8191") {
				t.Errorf("ParseCPUSet(%.40q) = %v; want an error with %q and what is accepted", tc.in, err, tc.want)
			}
		})
	}
}

// TestCPUSetOps: the set operations cgroupfs and the planner use.
func TestCPUSetOps(t *testing.T) {
	mustSet := func(s string) CPUSet {
		t.Helper()
		c, err := ParseCPUSet(s)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	a, b := mustSet("0-3"), mustSet("2-5,9")
	if got := a.Union(b).String(); got != "0-5,9" {
		t.Errorf("union = %q", got)
	}
	if got := a.Intersect(b).String(); got != "2-3" {
		t.Errorf("intersect = %q", got)
	}
	if got := b.Minus(a).String(); got != "4-5,9" {
		t.Errorf("minus = %q", got)
	}
	if !mustSet("1-2").SubsetOf(a) || b.SubsetOf(a) || !(CPUSet{}).SubsetOf(a) {
		t.Error("SubsetOf wrong")
	}
	if !b.Contains(9) || b.Contains(8) || b.Contains(-1) || b.Contains(MaxCPU+1) {
		t.Error("Contains wrong")
	}
	if got := b.CPUs(); !slices.Equal(got, []int{2, 3, 4, 5, 9}) {
		t.Errorf("CPUs = %v", got)
	}
	if FirstCPUs(4) != a || !FirstCPUs(0).IsEmpty() || FirstCPUs(1<<20).Count() != MaxCPU+1 {
		t.Errorf("FirstCPUs(4) = %q", FirstCPUs(4))
	}
}

// TestCPUSetOpsEmpty: an empty operand gives what the bitmaps would.
func TestCPUSetOpsEmpty(t *testing.T) {
	var none CPUSet
	for _, list := range []string{"", "0", "0-63", "2-5,9", "8191"} {
		s, err := ParseCPUSet(list)
		if err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			op        string
			got, want CPUSet
		}{
			{"s ∪ ∅", s.Union(none), s},
			{"∅ ∪ s", none.Union(s), s},
			{"s ∩ ∅", s.Intersect(none), none},
			{"∅ ∩ s", none.Intersect(s), none},
			{"s − ∅", s.Minus(none), s},
			{"∅ − s", none.Minus(s), none},
			{"s − s", s.Minus(s), none},
			{"s ∩ s", s.Intersect(s), s},
		}
		for _, tc := range tests {
			if tc.got != tc.want {
				t.Errorf("s = %q: %s = %q, want %q", list, tc.op, tc.got, tc.want)
			}
		}
		if !none.SubsetOf(s) || s.SubsetOf(none) != s.IsEmpty() {
			t.Errorf("s = %q: SubsetOf with the empty set wrong", list)
		}
	}
}

// FuzzParseCPUSet: a list that parses renders to a canonical list that
// parses to the same set, with as many CPUs as the list names.
func FuzzParseCPUSet(f *testing.F) {
	for _, s := range []string{"0", "0-3", "0,2-3", "8,0-3\n", "", "3-1", "0-8191", "1-2-3", "0-7:2/4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseCPUSet(in)
		if err != nil {
			return
		}
		back, err := ParseCPUSet(s.String())
		if err != nil || back != s {
			t.Fatalf("%q -> %q -> %q, %v", in, s, back, err)
		}
		if len(s.CPUs()) != s.Count() || s.Count() > MaxCPU+1 {
			t.Fatalf("%q: %d CPUs listed, count %d", in, len(s.CPUs()), s.Count())
		}
	})
}

// BenchmarkUnion: a set operation on what a host has, none (no pool has
// CPUS: every placement computes one) and the CPUs of a 64-CPU node.
func BenchmarkUnion(b *testing.B) {
	for _, tt := range []struct{ name, list string }{{"empty", ""}, {"0-63", "0-63"}} {
		s, err := ParseCPUSet(tt.list)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tt.name, func(b *testing.B) {
			for range b.N {
				s.Union(s)
			}
		})
	}
}
