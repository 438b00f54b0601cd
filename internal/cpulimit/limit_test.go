package cpulimit

import (
	"math"
	"testing"
)

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestParseCPUMax(t *testing.T) {
	tests := []struct {
		in   string
		want Limit
		vcpu float64
		err  string
	}{
		{"max 100000\n", Limit{QuotaUsec: Max, PeriodUsec: 100000}, 0, ""},
		{"150000 100000\n", Limit{QuotaUsec: 150000, PeriodUsec: 100000}, 1.5, ""},
		{"1000 1000", Limit{QuotaUsec: 1000, PeriodUsec: 1000}, 1, ""},
		{"max", Limit{}, 0, `cpu.max "max": want "max PERIOD" or "QUOTA PERIOD"`},
		{"1 2 3", Limit{}, 0, `cpu.max "1 2 3": want "max PERIOD" or "QUOTA PERIOD"`},
		{"max 0", Limit{}, 0, `cpu.max "max 0": period "0" is not a positive number of µs`},
		{"max -1", Limit{}, 0, `cpu.max "max -1": period "-1" is not a positive number of µs`},
		{"MAX 100000", Limit{}, 0, `cpu.max "MAX 100000": quota "MAX" is neither "max" nor a positive number of µs`},
		{"-5 100000", Limit{}, 0, `cpu.max "-5 100000": quota "-5" is neither "max" nor a positive number of µs`},
		{"0 100000", Limit{}, 0, `cpu.max "0 100000": quota "0" is neither "max" nor a positive number of µs`},
	}
	for _, tc := range tests {
		got, err := ParseCPUMax(tc.in)
		if got != tc.want || got.VCPU() != tc.vcpu || errString(err) != tc.err {
			t.Errorf("ParseCPUMax(%q) = %+v (%v vCPU), %v; want %+v (%v), %q", tc.in, got, got.VCPU(), err, tc.want, tc.vcpu, tc.err)
		}
	}
}

func TestEncodings(t *testing.T) {
	tests := []struct {
		name     string
		l        Limit
		cpuMax   string
		cfsQuota string
		ratio    uint64
		shares   int64
	}{
		{"unlimited", Unlimited(DefaultPeriodUsec), "max 100000", "-1", math.MaxUint64, 1024},
		{"seed olap pool", Limit{QuotaUsec: 700000, PeriodUsec: 100000, Weight: 100}, "700000 100000", "700000", 7 << 20, 1024},
		{"half a CPU, weight 300", Limit{QuotaUsec: 25000, PeriodUsec: 50000, Weight: 300}, "25000 50000", "25000", 1 << 19, 3072},
		{"weight unset", Limit{QuotaUsec: 1000, PeriodUsec: 1000}, "1000 1000", "1000", 1 << 20, 1024},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.l.CPUMax(); got != tc.cpuMax {
				t.Errorf("CPUMax() = %q, want %q", got, tc.cpuMax)
			}
			if got := tc.l.CFSQuota(); got != tc.cfsQuota {
				t.Errorf("CFSQuota() = %q, want %q", got, tc.cfsQuota)
			}
			if got := tc.l.Ratio(); got != tc.ratio {
				t.Errorf("Ratio() = %d, want %d", got, tc.ratio)
			}
			if got := tc.l.Shares(); got != tc.shares {
				t.Errorf("Shares() = %d, want %d", got, tc.shares)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		l    Limit
		err  string
	}{
		{"unlimited", Unlimited(DefaultPeriodUsec), ""},
		{"smallest", Limit{QuotaUsec: MinQuotaUsec, PeriodUsec: MinPeriodUsec, BurstUsec: MinQuotaUsec, Weight: MinWeight}, ""},
		{"largest", Limit{QuotaUsec: math.MaxInt64, PeriodUsec: MaxPeriodUsec, Weight: MaxWeight}, ""},
		{"quota too small", Limit{QuotaUsec: 999, PeriodUsec: 100000}, "quota 999 µs: want -1 (unlimited) or at least 1000 µs"},
		{"quota -2", Limit{QuotaUsec: -2, PeriodUsec: 100000}, "quota -2 µs: want -1 (unlimited) or at least 1000 µs"},
		{"period 0", Limit{QuotaUsec: Max}, "period 0 µs: want 1000..1000000 µs"},
		{"period too long", Limit{QuotaUsec: Max, PeriodUsec: 1000001}, "period 1000001 µs: want 1000..1000000 µs"},
		{"negative burst", Limit{QuotaUsec: 2000, PeriodUsec: 100000, BurstUsec: -1}, "burst -1 µs: want 0 or more"},
		{"burst above quota", Limit{QuotaUsec: 2000, PeriodUsec: 100000, BurstUsec: 2001}, "burst 2001 µs is above the quota 2000 µs; the kernel wants burst <= quota"},
		{"weight too large", Limit{QuotaUsec: Max, PeriodUsec: 100000, Weight: 10001}, "cpu.weight 10001: want 1..10000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := errString(tc.l.Check()); got != tc.err {
				t.Errorf("Check() = %q, want %q", got, tc.err)
			}
		})
	}
}

// FuzzParseCPUMax: whatever cpu.max parses is in the kernel's ranges as
// far as the file's format goes, and CPUMax renders it back to a line that
// parses to the same values.
func FuzzParseCPUMax(f *testing.F) {
	for _, s := range []string{"max 100000", "700000 100000", "max", "20000", "1 2 3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		m, err := ParseCPUMax(in)
		if err != nil {
			return
		}
		if m.QuotaUsec < Max || m.QuotaUsec == 0 || m.PeriodUsec <= 0 || m.VCPU() < 0 || math.IsInf(m.VCPU(), 0) || math.IsNaN(m.VCPU()) {
			t.Fatalf("ParseCPUMax(%q) = %+v (%v vCPU)", in, m, m.VCPU())
		}
		line := m.CPUMax()
		if m2, err := ParseCPUMax(line); err != nil || m2 != m {
			t.Fatalf("%q -> %+v -> %q -> %+v %v", in, m, line, m2, err)
		}
	})
}

// TestCPUIdle: cpu.idle reads back what it renders, refuses anything but
// 0 and 1, and an idle limit with a weight fails Check.
func TestCPUIdle(t *testing.T) {
	for _, tc := range []struct {
		in   string
		idle bool
		ok   bool
	}{{"0\n", false, true}, {"1\n", true, true}, {" 1 ", true, true}, {"2", false, false}, {"", false, false}, {"-1", false, false}, {"yes", false, false}} {
		idle, err := ParseCPUIdle(tc.in)
		if (err == nil) != tc.ok || idle != tc.idle {
			t.Errorf("ParseCPUIdle(%q) = %v, %v; want %v, ok %v", tc.in, idle, err, tc.idle, tc.ok)
		}
	}
	if got := (Limit{Idle: true}).CPUIdle(); got != "1" {
		t.Errorf("idle renders %q, want 1", got)
	}
	l := Unlimited(DefaultPeriodUsec)
	l.Idle = true
	if err := l.Check(); err == nil {
		t.Errorf("idle with weight %d passed Check", l.Weight)
	}
	l.Weight = 0
	if err := l.Check(); err != nil {
		t.Errorf("idle without a weight: %v", err)
	}
}

// FuzzParseCPUIdle: whatever cpu.idle parses renders back to the value
// read.
func FuzzParseCPUIdle(f *testing.F) {
	for _, s := range []string{"0\n", "1\n", "2", "", " 1 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		idle, err := ParseCPUIdle(in)
		if err != nil {
			return
		}
		if back, err := ParseCPUIdle(Limit{Idle: idle}.CPUIdle()); err != nil || back != idle {
			t.Fatalf("%q -> %v -> %v %v", in, idle, back, err)
		}
	})
}

// TestParseCFS: v1 quota and period as the kernel writes them, and what
// they refuse.
func TestParseCFS(t *testing.T) {
	for _, tc := range []struct {
		in    string
		quota int64
		qok   bool
		pok   bool
	}{{"-1\n", Max, true, false}, {"50000\n", 50000, true, true}, {"0", 0, false, false}, {"-2", 0, false, false}, {"x", 0, false, false}, {"", 0, false, false}} {
		q, err := ParseCFSQuota(tc.in)
		if (err == nil) != tc.qok || q != tc.quota {
			t.Errorf("ParseCFSQuota(%q) = %d, %v; want %d, ok %v", tc.in, q, err, tc.quota, tc.qok)
		}
		if _, err := ParseCFSPeriod(tc.in); (err == nil) != tc.pok {
			t.Errorf("ParseCFSPeriod(%q): %v, want ok %v", tc.in, err, tc.pok)
		}
	}
	if _, err := ParseCFSQuota("0"); err == nil || err.Error() != `cpu.cfs_quota_us "0": want -1 or a positive number of µs` {
		t.Errorf("error %v", err)
	}
}

// FuzzParseCFS: whatever v1 quota and period parse renders back to the
// value read.
func FuzzParseCFS(f *testing.F) {
	for _, s := range []string{"-1\n", "100000\n", "0", "-2", " 5 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if q, err := ParseCFSQuota(in); err == nil {
			if back, err := ParseCFSQuota(Limit{QuotaUsec: q}.CFSQuota()); err != nil || back != q {
				t.Fatalf("quota %q -> %d -> %d %v", in, q, back, err)
			}
		}
		if p, err := ParseCFSPeriod(in); err == nil && p <= 0 {
			t.Fatalf("period %q -> %d", in, p)
		}
	})
}
