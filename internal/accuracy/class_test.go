package accuracy

import (
	"slices"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		w    Work
		want Class
	}{
		{"one thread, no quota", Work{Threads: 1, QuotaCPUs: -1}, OneCPU},
		{"one thread under 40%", Work{Threads: 1, QuotaCPUs: 0.4}, OneCPU},
		{"eight tasks pinned to one CPU", Work{Threads: 8, PinnedCPUs: 1, QuotaCPUs: 0.4}, OneCPU},
		{"pinned to one CPU another pool runs on", Work{Threads: 1, PinnedCPUs: 1, QuotaCPUs: 0.6, SharesCPU: true}, SharedCPU},
		{"pinned to two CPUs", Work{Threads: 2, PinnedCPUs: 2, QuotaCPUs: 1.5}, PinnedSpread},
		{"8 threads placed, quota 40%", Work{Threads: 8, QuotaCPUs: 0.4}, PlacedBelowCPU},
		{"4 threads placed, quota of one CPU", Work{Threads: 4, QuotaCPUs: 1}, PlacedCPUOrMore},
		{"2 threads placed, no quota", Work{Threads: 2, QuotaCPUs: -1}, PlacedCPUOrMore},
		{"8 tasks on one CPU needing two quotas", Work{Threads: 8, PinnedCPUs: 1, QuotaCPUs: 0.4, WholeQuotas: true}, QuotaEdge},
		{"8 threads placed needing two quotas", Work{Threads: 8, QuotaCPUs: 0.4, WholeQuotas: true}, QuotaEdge},
		{"a shared CPU before whole quotas", Work{Threads: 1, PinnedCPUs: 1, QuotaCPUs: 0.5, SharesCPU: true, WholeQuotas: true}, SharedCPU},
	}
	for _, tt := range tests {
		if got := Classify(tt.w); got != tt.want {
			t.Errorf("%s: Classify(%+v) = %q, want %q", tt.name, tt.w, got, tt.want)
		}
	}
}

// TestMeasured checks the generated table: known classes in order, each
// once, with rows and a worst row, and that ErrorOf finds each.
func TestMeasured(t *testing.T) {
	m := Measured()
	if len(m) == 0 {
		t.Fatal("no measured errors: run scripts/accuracy.sh -w")
	}
	last := -1
	for _, e := range m {
		i := slices.Index(Classes, e.Class)
		if i <= last {
			t.Errorf("class %q unknown, repeated or out of order", e.Class)
		}
		last = i
		if e.Rows < 1 || e.Percent < 0 || e.Worst == "" {
			t.Errorf("class %q: %+v", e.Class, e)
		}
		if got, err := ErrorOf(e.Class); err != nil || got != e {
			t.Errorf("ErrorOf(%q) = %+v, %v; want %+v", e.Class, got, err, e)
		}
	}
	if _, err := ErrorOf("no such class"); err == nil {
		t.Error("ErrorOf of an unknown class: no error")
	}
}
