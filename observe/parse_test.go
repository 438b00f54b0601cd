package observe

import (
	"strings"
	"testing"
)

func TestParseCPUStatV2(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    CPUStat
		wantErr string
	}{
		{
			name: "linux 6.1 with bandwidth",
			in:   "usage_usec 2400345\nuser_usec 2390765\nsystem_usec 9580\nnr_periods 40\nnr_throttled 21\nthrottled_usec 1633210\nnr_bursts 1\nburst_usec 20000\n",
			want: CPUStat{UsageUsec: 2400345, UserUsec: 2390765, SystemUsec: 9580, NrPeriods: 40, NrThrottled: 21, ThrottledUsec: 1633210, NrBursts: 1, BurstUsec: 20000},
		},
		{
			name: "unknown keys of newer kernels skipped",
			in:   "usage_usec 5\nnice_usec 7\ncore_sched.force_idle_usec 9\nnr_periods 3\nsome_future_key not-a-number at all\n",
			want: CPUStat{UsageUsec: 5, NrPeriods: 3},
		},
		{
			name: "cpu controller not enabled: usage only",
			in:   "usage_usec 90416000\nuser_usec 48688000\nsystem_usec 41728000\n",
			want: CPUStat{UsageUsec: 90416000, UserUsec: 48688000, SystemUsec: 41728000},
		},
		{name: "empty", in: "", want: CPUStat{}},
		{name: "blank lines and no final newline", in: "\n\nnr_throttled 4", want: CPUStat{NrThrottled: 4}},
		{name: "largest value", in: "usage_usec 18446744073709551615\n", want: CPUStat{UsageUsec: 18446744073709551615}},
		{name: "negative value", in: "nr_periods -1\n", wantErr: `line 1: nr_periods value "-1"`},
		{name: "overflow", in: "usage_usec 18446744073709551616\n", wantErr: "value out of range"},
		{name: "missing value", in: "usage_usec 1\nthrottled_usec\n", wantErr: `line 2: "throttled_usec": want "throttled_usec <unsigned integer>"`},
		{name: "extra field", in: "burst_usec 1 2\n", wantErr: "line 1"},
		{name: "float", in: "usage_usec 1.5\n", wantErr: `usage_usec value "1.5"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCPUStatV2([]byte(tt.in))
			checkErr(t, err, tt.wantErr)
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseCPUStatV1(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    CPUStat
		wantErr string
	}{
		{
			name: "linux 6.18 hybrid host",
			in:   "nr_periods 21\nnr_throttled 20\nthrottled_time 1603874211\nnr_bursts 1\nburst_time 20000000\n",
			want: CPUStat{NrPeriods: 21, NrThrottled: 20, ThrottledUsec: 1603874, NrBursts: 1, BurstUsec: 20000},
		},
		{
			name: "before burst existed (linux < 5.14), schedstats on",
			in:   "nr_periods 3\nnr_throttled 1\nthrottled_time 999\nwait_sum 12345\n",
			want: CPUStat{NrPeriods: 3, NrThrottled: 1, ThrottledUsec: 0},
		},
		{
			name: "v2 keys are not v1 keys",
			in:   "throttled_usec 5\nusage_usec 7\n",
			want: CPUStat{},
		},
		{name: "bad throttled_time", in: "throttled_time 1e9\n", wantErr: `throttled_time value "1e9"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCPUStatV1([]byte(tt.in))
			checkErr(t, err, tt.wantErr)
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseCPUAcct(t *testing.T) {
	usage := []struct {
		name    string
		in      string
		want    uint64
		wantErr string
	}{
		{name: "kernel format", in: "90653512357\n", want: 90653512357},
		{name: "no newline", in: "0", want: 0},
		{name: "empty", in: "", wantErr: `usage "": want one unsigned integer`},
		{name: "two numbers", in: "1 2\n", wantErr: `usage "1 2"`},
	}
	for _, tt := range usage {
		t.Run("usage/"+tt.name, func(t *testing.T) {
			got, err := ParseCPUAcctUsage([]byte(tt.in))
			checkErr(t, err, tt.wantErr)
			if got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
	stat := []struct {
		name    string
		in      string
		want    CPUStat
		wantErr string
	}{
		{name: "kernel format", in: "user 4886\nsystem 4178\n", want: CPUStat{UserUsec: 48860000, SystemUsec: 41780000}},
		{name: "unknown line skipped", in: "user 1\nguest 9\nsystem 2\n", want: CPUStat{UserUsec: 10000, SystemUsec: 20000}},
		{name: "ticks overflow microseconds", in: "user 18446744073709551615\n", wantErr: "user: 18446744073709551615 ticks overflow"},
		{name: "bad value", in: "system x\n", wantErr: `system value "x"`},
	}
	for _, tt := range stat {
		t.Run("stat/"+tt.name, func(t *testing.T) {
			got, err := ParseCPUAcctStat([]byte(tt.in))
			checkErr(t, err, tt.wantErr)
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseLocalStat(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		key     string
		want    uint64
		wantOK  bool
		wantErr string
	}{
		{name: "v2", in: "throttled_usec 1603874\n", key: "throttled_usec", want: 1603874, wantOK: true},
		{name: "v1", in: "throttled_time 1603874211\n", key: "throttled_time", want: 1603874211, wantOK: true},
		{name: "root cgroup: empty", in: "", key: "throttled_usec"},
		{name: "other key only", in: "throttled_time 5\n", key: "throttled_usec"},
		{name: "bad value", in: "throttled_usec -5\n", key: "throttled_usec", wantErr: `throttled_usec value "-5"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := ParseLocalStat([]byte(tt.in), tt.key)
			checkErr(t, err, tt.wantErr)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("got %d, %v, want %d, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestParsePressure(t *testing.T) {
	full := PressureLine{Avg10Percent: 0.5, Avg60Percent: 0.25, Avg300Percent: 0.125, TotalUsec: 42}
	tests := []struct {
		name    string
		in      string
		want    Pressure
		wantErr string
	}{
		{
			name: "some and full",
			in:   "some avg10=40.77 avg60=16.84 avg300=5.70 total=21913855\nfull avg10=0.50 avg60=0.25 avg300=0.125 total=42\n",
			want: Pressure{Some: PressureLine{Avg10Percent: 40.77, Avg60Percent: 16.84, Avg300Percent: 5.70, TotalUsec: 21913855}, Full: &full},
		},
		{
			name: "cpu before linux 5.13: some only",
			in:   "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
			want: Pressure{},
		},
		{
			name: "unknown fields and lines skipped",
			in:   "some avg10=1.00 avg600=9 avg60=2.00 avg300=3.00 total=4\nmost avg10=x\n",
			want: Pressure{Some: PressureLine{Avg10Percent: 1, Avg60Percent: 2, Avg300Percent: 3, TotalUsec: 4}},
		},
		{name: "empty", in: "", wantErr: `no "some" line`},
		{name: "full only", in: "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", wantErr: `no "some" line`},
		{name: "missing total", in: "some avg10=0.00 avg60=0.00 avg300=0.00\n", wantErr: "line 1: some: \"avg10=0.00 avg60=0.00 avg300=0.00\": want avg10=P avg60=P avg300=P total=USEC"},
		{name: "repeated field does not stand in for a missing one", in: "some avg10=1 avg10=1 avg10=1 total=1\n", wantErr: "want avg10=P"},
		{name: "not key=value", in: "some avg10\n", wantErr: `field "avg10": want key=value`},
		{name: "NaN", in: "some avg10=NaN avg60=0 avg300=0 total=0\n", wantErr: `avg10="NaN": want a percentage 0..100`},
		{name: "above 100", in: "some avg10=100.01 avg60=0 avg300=0 total=0\n", wantErr: "want a percentage"},
		{name: "negative total", in: "some avg10=0 avg60=0 avg300=0 total=-1\n", wantErr: `total="-1"`},
		{name: "bad full line", in: "some avg10=0 avg60=0 avg300=0 total=0\nfull avg10=0\n", wantErr: "line 2: full:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePressure([]byte(tt.in))
			checkErr(t, err, tt.wantErr)
			if got.Some != tt.want.Some || (got.Full == nil) != (tt.want.Full == nil) || (got.Full != nil && *got.Full != *tt.want.Full) {
				t.Errorf("got %+v (full %+v), want %+v (full %+v)", got, got.Full, tt.want, tt.want.Full)
			}
		})
	}
}

// checkErr fails t unless err contains want, or err is nil when want is "".
func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("no error, want one containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q does not contain %q", err, want)
	}
}

// BenchmarkParseCPUStatV2 parses a v2 cpu.stat as the daemon's history
// does for every running query of a busy pool each period; its allocations
// are what the collector has to follow.
func BenchmarkParseCPUStatV2(b *testing.B) {
	file := []byte("usage_usec 90653512\nuser_usec 80000000\nsystem_usec 10653512\ncore_sched.force_idle_usec 0\n" +
		"nr_periods 100\nnr_throttled 20\nthrottled_usec 160000\nnr_bursts 1\nburst_usec 5000\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseCPUStatV2(file); err != nil {
			b.Fatal(err)
		}
	}
}
