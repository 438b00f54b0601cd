package main

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestParseBytes(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
	}{
		{"plain bytes", "17179869184", 16 << 30},
		{"one byte", "1", 1},
		{"B suffix", "512B", 512},
		{"GiB", "16GiB", 16 << 30},
		{"Gi as Kubernetes writes it", "16Gi", 16 << 30},
		{"lower case", "16gib", 16 << 30},
		{"space before suffix", " 16 GiB ", 16 << 30},
		{"fraction of GiB", "1.5GiB", 3 << 29},
		{"leading dot", ".5KiB", 512},
		{"KiB", "4KiB", 4096},
		{"MiB", "512MiB", 512 << 20},
		{"TiB", "2TiB", 2 << 40},
		{"PiB", "1PiB", 1 << 50},
		{"kB", "3kB", 3000},
		{"KB", "3KB", 3000},
		{"MB", "512MB", 512e6},
		{"GB", "16GB", 16e9},
		{"TB", "1TB", 1e12},
		{"PB", "2PB", 2e15},
		{"largest", strconv.FormatInt(math.MaxInt64, 10), math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseBytes(tt.in)
			if err != nil || got != tt.want {
				t.Fatalf("parseBytes(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseBytesErrors(t *testing.T) {
	tests := []struct {
		name, in, err string
	}{
		{"empty", "", `"" is not a size (accepted: bytes > 0`},
		{"negative", "-1", `"-1" is not a size (accepted: bytes > 0`},
		{"words", "lots", `"lots" is not a size`},
		{"two dots", "1.2.3GiB", `"1.2.3GiB" is not a size`},
		{"trailing dot", "1.GiB", `"1.GiB" is not a size`},
		{"suffix only", "GiB", `"GiB" is not a size`},
		{"zero", "0", `"0" is zero (accepted: bytes > 0`},
		{"zero with suffix", "0GiB", `"0GiB" is zero`},
		{"bare G", "16G", `"16G": suffix "G" is ambiguous (write 16GiB for powers of 1024 or 16GB for powers of 1000)`},
		{"bare k", "4k", `"4k": suffix "k" is ambiguous (write 4KiB for powers of 1024 or 4KB for powers of 1000)`},
		{"unknown suffix", "16XB", `"16XB": unknown suffix "XB" (accepted: bytes > 0`},
		{"bits", "16Gbit", `"16Gbit": unknown suffix "Gbit"`},
		{"exponent", "1e9", `"1e9": unknown suffix "e9"`},
		{"part of a byte", "0.1KiB", `"0.1KiB" is not a whole number of bytes (102.400 bytes; accepted: bytes > 0`},
		{"half a byte", "0.5", `"0.5" is not a whole number of bytes`},
		{"above int64", "9223372036854775808", `"9223372036854775808" is out of range (accepted: bytes > 0`},
		{"above int64 with suffix", "8193PiB", `"8193PiB" is out of range`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseBytes(tt.in)
			if err == nil {
				t.Fatalf("parseBytes(%q) = %d, want an error", tt.in, got)
			}
			if !strings.HasPrefix(err.Error(), tt.err) {
				t.Errorf("parseBytes(%q) error\n got %s\nwant %s…", tt.in, err, tt.err)
			}
		})
	}
}

// FuzzParseBytes checks that parseBytes never panics, accepts only sizes
// above zero, and reads back every plain count it is given. Its corpus is
// testdata/fuzz/FuzzParseBytes.
func FuzzParseBytes(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseBytes(s)
		if err != nil {
			return
		}
		if n <= 0 {
			t.Fatalf("parseBytes(%q) = %d, want > 0", s, n)
		}
		if plain, perr := strconv.ParseInt(strings.TrimSpace(s), 10, 64); perr == nil && plain != n {
			t.Fatalf("parseBytes(%q) = %d, want the plain count %d", s, n, plain)
		}
	})
}
