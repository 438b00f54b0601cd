package cgroupfs

import (
	"strconv"
	"testing"
)

func TestParseCPUMax(t *testing.T) {
	tests := []struct {
		in      string
		quota   int64
		period  uint64
		wantErr bool
	}{
		{"max 100000\n", -1, 100000, false},
		{"700000 100000", 700000, 100000, false},
		{"max", -1, 100000, false},
		{"20000", 20000, 100000, false},
		{"", 0, 0, true},
		{"1 2 3", 0, 0, true},
		{"-5 100000", 0, 0, true},
		{"max x", 0, 0, true},
		{"MAX 100000", 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.in), func(t *testing.T) {
			q, p, err := parseCPUMax(tt.in)
			if (err != nil) != tt.wantErr || q != tt.quota || p != tt.period {
				t.Fatalf("got %d %d %v, want %d %d err=%v", q, p, err, tt.quota, tt.period, tt.wantErr)
			}
		})
	}
}

func TestParseMemory(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"max\n", -1, false},
		{"1073741824\n", 1 << 30, false},
		{"9223372036854771712", -1, false}, // v1 unlimited
		{"0", 0, false},
		{"lots", 0, true},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.in), func(t *testing.T) {
			got, err := parseMemory(fileMemoryMax, tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("got %d %v, want %d err=%v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParseProcs(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"", 0, false},
		{"1\n22\n333\n", 3, false},
		{"1\nx\n", 0, true},
		{"0\n", 0, true},
		{"-3\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.in), func(t *testing.T) {
			got, err := parseProcs([]byte(tt.in))
			if (err != nil) != tt.wantErr || len(got) != tt.want {
				t.Fatalf("got %v %v, want %d pids err=%v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// FuzzParseCPUMax: whatever parses renders back (via containerd's
// cgroup2.NewCPUMax) to a line that parses to the same values.
func FuzzParseCPUMax(f *testing.F) {
	for _, s := range []string{"max 100000", "700000 100000", "max", "20000", "1 2 3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		q, p, err := parseCPUMax(in)
		if err != nil {
			return
		}
		q2, p2, err := parseCPUMax(formatCPUMax(q, p))
		if err != nil || q2 != q || p2 != p {
			t.Fatalf("%q -> %d %d -> %q -> %d %d %v", in, q, p, formatCPUMax(q, p), q2, p2, err)
		}
	})
}

// FuzzParseMemory: a parsed limit is -1 or a byte count.
func FuzzParseMemory(f *testing.F) {
	for _, s := range []string{"max", "1073741824", "9223372036854771712", "-1", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		v, err := parseMemory(fileMemLimit, in)
		if err == nil && v < -1 {
			t.Fatalf("%q parsed to %d", in, v)
		}
	})
}

// FuzzParseProcs: every PID parsed is positive.
func FuzzParseProcs(f *testing.F) {
	for _, s := range []string{"", "1\n22\n", "x", "0"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		pids, err := parseProcs(in)
		for _, p := range pids {
			if err == nil && p <= 0 {
				t.Fatalf("%q parsed to pid %d", in, p)
			}
		}
	})
}
