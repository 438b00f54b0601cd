package cgroupfs

import (
	"strconv"
	"strings"
	"testing"
)

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

// FuzzParseCount: whatever a count file parses to is the file's number,
// non-negative.
func FuzzParseCount(f *testing.F) {
	for _, s := range []string{"0", "1024\n", "18446744073709551615", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		v, err := parseCount(in)
		if err != nil {
			return
		}
		u, uerr := strconv.ParseUint(strings.TrimSpace(in), 10, 64)
		if v < 0 || uerr != nil || u != uint64(v) {
			t.Fatalf("parseCount(%q) = %d; the number is %d, %v", in, v, u, uerr)
		}
	})
}
