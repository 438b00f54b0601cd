package main

import (
	"fmt"
	"math"
	"math/big"
	"strings"
)

// byteUnits are the suffixes parseBytes accepts, matched without regard to
// case: IEC (powers of 1024, "Gi" as Kubernetes writes it, "GiB" as the
// IEC does) and SI (powers of 1000). A bare K, M, G, T or P is refused:
// systemd reads it as 1024-based and Kubernetes as 1000-based, and a limit
// off by 7% is worse than an error.
var byteUnits = map[string]int64{
	"": 1, "b": 1,
	"ki": 1 << 10, "kib": 1 << 10, "mi": 1 << 20, "mib": 1 << 20, "gi": 1 << 30, "gib": 1 << 30,
	"ti": 1 << 40, "tib": 1 << 40, "pi": 1 << 50, "pib": 1 << 50,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "pb": 1e15,
}

// bytesAccepted says what parseBytes accepts, for error messages.
const bytesAccepted = "bytes > 0, plain (17179869184) or with an IEC suffix for powers of 1024 " +
	"(KiB, MiB, GiB, TiB, PiB or Ki, Mi, Gi, Ti, Pi: 16GiB, 1.5Gi) or an SI suffix for powers of 1000 (kB, MB, GB, TB, PB: 512MB)"

// parseBytes reads a memory size given on the command line: "17179869184",
// "16GiB", "16Gi", "1.5GiB", "512MB", "16 GiB". The result is a whole
// number of bytes greater than zero that fits in an int64; a fraction
// that does not come to whole bytes (0.1KiB) is refused.
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	// big.Rat reads only plain decimals here: num holds digits and dots.
	r, ok := new(big.Rat).SetString(num)
	if num == "" || strings.Count(num, ".") > 1 || strings.HasSuffix(num, ".") || !ok {
		return 0, fmt.Errorf("%q is not a size (accepted: %s)", s, bytesAccepted)
	}
	mult, ok := byteUnits[unit]
	switch {
	case !ok && len(unit) == 1 && strings.Contains("kmgtp", unit):
		u := strings.ToUpper(unit)
		return 0, fmt.Errorf("%q: suffix %q is ambiguous (write %s%siB for powers of 1024 or %s%sB for powers of 1000)", s, t[i:], num, u, num, u)
	case !ok:
		return 0, fmt.Errorf("%q: unknown suffix %q (accepted: %s)", s, t[i:], bytesAccepted)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, fmt.Errorf("%q is not a whole number of bytes (%s bytes; accepted: %s)", s, r.FloatString(3), bytesAccepted)
	}
	switch n := r.Num(); {
	case n.Sign() == 0:
		return 0, fmt.Errorf("%q is zero (accepted: %s)", s, bytesAccepted)
	case !n.IsInt64():
		return 0, fmt.Errorf("%q is out of range (accepted: %s, at most %d bytes)", s, bytesAccepted, int64(math.MaxInt64))
	default:
		return n.Int64(), nil
	}
}
