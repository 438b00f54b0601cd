package observe

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The fuzz targets replay their corpus in testdata/fuzz/ on every go test;
// run one longer with e.g. go test ./observe -fuzz FuzzParseCPUStatV2.

func FuzzParseCPUStatV2(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ParseCPUStatV2(b)
		if err != nil {
			return
		}
		text := fmt.Sprintf("usage_usec %d\nuser_usec %d\nsystem_usec %d\nnr_periods %d\nnr_throttled %d\nthrottled_usec %d\nnr_bursts %d\nburst_usec %d\n",
			st.UsageUsec, st.UserUsec, st.SystemUsec, st.NrPeriods, st.NrThrottled, st.ThrottledUsec, st.NrBursts, st.BurstUsec)
		again, err := ParseCPUStatV2([]byte(text))
		if err != nil || again != st {
			t.Fatalf("%+v printed as\n%s\nparsed back as %+v, %v", st, text, again, err)
		}
	})
}

func FuzzParseCPUStatV1(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ParseCPUStatV1(b)
		if err != nil {
			return
		}
		if st.UsageUsec != 0 || st.UserUsec != 0 || st.SystemUsec != 0 {
			t.Fatalf("v1 cpu.stat has no usage, got %+v", st)
		}
		text := fmt.Sprintf("nr_periods %d\nnr_throttled %d\nthrottled_time %d\nnr_bursts %d\nburst_time %d\n",
			st.NrPeriods, st.NrThrottled, st.ThrottledUsec*1000, st.NrBursts, st.BurstUsec*1000)
		again, err := ParseCPUStatV1([]byte(text))
		if err != nil || again != st {
			t.Fatalf("%+v printed as\n%s\nparsed back as %+v, %v", st, text, again, err)
		}
	})
}

func FuzzParseCPUAcctUsage(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseCPUAcctUsage(b)
		if err != nil {
			return
		}
		again, err := ParseCPUAcctUsage([]byte(strconv.FormatUint(v, 10) + "\n"))
		if err != nil || again != v {
			t.Fatalf("%d parsed back as %d, %v", v, again, err)
		}
	})
}

func FuzzParseCPUAcctStat(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ParseCPUAcctStat(b)
		if err != nil {
			return
		}
		const usecPerTick = 1_000_000 / userHZ
		if st.UserUsec%usecPerTick != 0 || st.SystemUsec%usecPerTick != 0 {
			t.Fatalf("%+v is not whole USER_HZ ticks", st)
		}
		text := fmt.Sprintf("user %d\nsystem %d\n", st.UserUsec/usecPerTick, st.SystemUsec/usecPerTick)
		again, err := ParseCPUAcctStat([]byte(text))
		if err != nil || again != st {
			t.Fatalf("%+v printed as\n%s\nparsed back as %+v, %v", st, text, again, err)
		}
	})
}

func FuzzParseLocalStat(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, key := range []string{"throttled_usec", "throttled_time"} {
			v, ok, err := ParseLocalStat(b, key)
			if err != nil {
				continue
			}
			if !ok && v != 0 {
				t.Fatalf("%s absent but value %d", key, v)
			}
		}
	})
}

func FuzzParsePressure(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePressure(b)
		if err != nil {
			return
		}
		text := "some " + formatPressureLine(t, p.Some) + "\n"
		if p.Full != nil {
			text += "full " + formatPressureLine(t, *p.Full) + "\n"
		}
		again, err := ParsePressure([]byte(text))
		if err != nil || again.Some != p.Some || (again.Full == nil) != (p.Full == nil) || (p.Full != nil && *again.Full != *p.Full) {
			t.Fatalf("%+v printed as\n%s\nparsed back as %+v, %v", p, text, again, err)
		}
	})
}

// formatPressureLine prints l in the kernel's PSI format with exact
// floats, failing t on values the kernel cannot report.
func formatPressureLine(t *testing.T, l PressureLine) string {
	for _, x := range []float64{l.Avg10Percent, l.Avg60Percent, l.Avg300Percent} {
		if math.IsNaN(x) || x < 0 || x > 100 {
			t.Fatalf("parsed an impossible percentage %v", x)
		}
	}
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	return fmt.Sprintf("avg10=%s avg60=%s avg300=%s total=%d", g(l.Avg10Percent), g(l.Avg60Percent), g(l.Avg300Percent), l.TotalUsec)
}

func FuzzParseSchedstat(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		run, err := parseSchedstat(b)
		if err != nil {
			return
		}
		again, err := parseSchedstat([]byte(fmt.Sprintf("%d 0 0\n", run)))
		if err != nil || again != run {
			t.Fatalf("%d parsed back as %d, %v", run, again, err)
		}
	})
}

func FuzzParseStatState(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		state, err := parseStatState(b)
		if err != nil {
			return
		}
		again, err := parseStatState(append(append([]byte("1 (x) "), state), " 0"...))
		if err != nil || again != state {
			t.Fatalf("state %q parsed back as %q, %v", state, again, err)
		}
	})
}

// scanKeyValues is parseKeyValues as a line scanner and strings.Fields
// wrote it, which the allocation-free walk must agree with.
func scanKeyValues(b []byte, fields map[string]*uint64) (map[string]bool, error) {
	seen := make(map[string]bool, len(fields))
	s := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; s.Scan(); n++ {
		f := strings.Fields(s.Text())
		if len(f) == 0 {
			continue
		}
		p, ok := fields[f[0]]
		if !ok {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("line %d: %q: want \"%s <unsigned integer>\"", n, s.Text(), f[0])
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: %s value %q: %w", n, f[0], f[1], err)
		}
		*p = v
		seen[f[0]] = true
	}
	return seen, s.Err()
}

func FuzzParseKeyValues(f *testing.F) {
	f.Add([]byte("usage_usec 12\nuser_usec 3\r\nnr_periods\t4 \n\nnew_key a b c\n"))
	f.Add([]byte("usage_usec 1 2\n"))
	f.Add([]byte("usage_usec\u00a07\u2003\n nr_periods -1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if slices.ContainsFunc(bytes.Split(b, []byte{'\n'}), func(l []byte) bool { return len(l) >= bufio.MaxScanTokenSize }) {
			return // a line the scanner refused as too long
		}
		fields := func() (map[string]*uint64, *[3]uint64) {
			var v [3]uint64
			return map[string]*uint64{"usage_usec": &v[0], "nr_periods": &v[1], "max": &v[2]}, &v
		}
		gotFields, got := fields()
		wantFields, want := fields()
		gotSeen, gotErr := parseKeyValues(b, gotFields)
		wantSeen, wantErr := scanKeyValues(b, wantFields)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !maps.Equal(gotSeen, wantSeen) || (gotErr == nil && *got != *want) {
			t.Fatalf("%q: got %v %v %v, want %v %v %v", b, *got, gotSeen, gotErr, *want, wantSeen, wantErr)
		}
	})
}
