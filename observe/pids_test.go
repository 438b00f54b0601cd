package observe

import (
	"fmt"
	"testing"
)

// TestParsePids: pids.events' max count (unknown keys skipped) and
// pids.max, "max" being none.
func TestParsePids(t *testing.T) {
	e, err := ParsePidsEvents([]byte("max 7\nnew_key 3\n"))
	if err != nil || e.Max != 7 {
		t.Errorf("events %+v, %v", e, err)
	}
	if _, err := ParsePidsEvents([]byte("max seven\n")); err == nil {
		t.Error("a count that is not a number parsed")
	}
	for in, want := range map[string]int64{"max\n": -1, "64\n": 64, "0": 0} {
		if got, err := ParsePidsMax([]byte(in)); err != nil || got != want {
			t.Errorf("pids.max %q: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "lots", "18446744073709551615"} {
		if _, err := ParsePidsMax([]byte(in)); err == nil {
			t.Errorf("pids.max %q parsed", in)
		}
	}
}

// TestForkLimit: which limit refused a query's forks, with the kernel's
// two ways of counting.
func TestForkLimit(t *testing.T) {
	refused := &Pids{Events: PidsEvents{Max: 2}}
	none := &Pids{}
	hier := func(n uint64) *Pids { return &Pids{Hierarchical: true, Events: PidsEvents{Max: n}} }
	for _, tt := range []struct {
		name              string
		q, before, after  *Pids
		queryLim, poolLim bool
		want              string
	}{
		{"not read", nil, nil, nil, true, true, ""},
		{"nothing refused", none, none, none, true, true, ""},
		{"forking cgroup counts, query limited", refused, nil, nil, true, false, "query"},
		{"forking cgroup counts, pool limited", refused, nil, nil, false, true, "pool"},
		{"forking cgroup counts, both limited", refused, nil, nil, true, true, "query or pool"},
		{"forking cgroup counts, no limit of ours", refused, nil, nil, false, false, ""},
		{"hierarchical, query's limit", hier(1), hier(0), hier(1), true, true, "query"},
		{"hierarchical, pool's limit", hier(0), hier(4), hier(6), true, true, "pool"},
		{"hierarchical, pool's count unchanged", hier(0), hier(4), hier(4), true, true, ""},
		{"hierarchical, pool not read", hier(0), nil, hier(4), false, true, ""},
	} {
		if got := ForkLimit(tt.q, tt.before, tt.after, tt.queryLim, tt.poolLim); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func FuzzParsePidsEvents(f *testing.F) {
	f.Add([]byte("max 0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParsePidsEvents(b)
		if err != nil {
			return
		}
		again, err := ParsePidsEvents([]byte(fmt.Sprintf("max %d\n", e.Max)))
		if err != nil || again != e {
			t.Fatalf("%+v parsed back as %+v, %v", e, again, err)
		}
	})
}

func FuzzParsePidsMax(f *testing.F) {
	f.Add([]byte("max\n"))
	f.Add([]byte("4194304\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParsePidsMax(b)
		if err != nil {
			return
		}
		text := "max"
		if v >= 0 {
			text = fmt.Sprint(v)
		} else if v != -1 {
			t.Fatalf("%q parsed as %d", b, v)
		}
		again, err := ParsePidsMax([]byte(text))
		if err != nil || again != v {
			t.Fatalf("%d parsed back as %d, %v", v, again, err)
		}
	})
}
