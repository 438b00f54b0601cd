package observe

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode"
)

// ParseCPUStatV2 parses a cgroup v2 cpu.stat file. It holds one "key
// value" pair per line, times in microseconds:
//
//	usage_usec 12345
//	user_usec 10000
//	system_usec 2345
//	nr_periods 100
//	nr_throttled 20
//	throttled_usec 160000
//	nr_bursts 1
//	burst_usec 20000
//
// The bandwidth keys (nr_periods … burst_usec) appear only while the cpu
// controller is enabled for the group; absent keys read as zero. Keys this
// package does not know (nice_usec, core_sched.force_idle_usec, …) are skipped.
func ParseCPUStatV2(b []byte) (CPUStat, error) {
	var st CPUStat
	fields := map[string]*uint64{
		"usage_usec":     &st.UsageUsec,
		"user_usec":      &st.UserUsec,
		"system_usec":    &st.SystemUsec,
		"nr_periods":     &st.NrPeriods,
		"nr_throttled":   &st.NrThrottled,
		"throttled_usec": &st.ThrottledUsec,
		"nr_bursts":      &st.NrBursts,
		"burst_usec":     &st.BurstUsec,
	}
	if _, err := parseKeyValues(b, fields); err != nil {
		return CPUStat{}, err
	}
	return st, nil
}

// ParseLocalStat returns the value of key in a cpu.stat.local file, whose
// throttled time (v2 "throttled_usec 160000", µs; v1 "throttled_time
// 1600000000", ns) is how long the group's own runnable tasks were held
// off the CPU by its limit or an ancestor's, summed per CPU (cpu.stat's
// counts only the group's own limit; the file exists since Linux 6.6).
// ok is false when the key is absent (the root cgroup's file is empty).
func ParseLocalStat(b []byte, key string) (v uint64, ok bool, err error) {
	seen, err := parseKeyValues(b, map[string]*uint64{key: &v})
	if err != nil {
		return 0, false, err
	}
	return v, seen[key], nil
}

// parseKeyValues walks "key value" lines and stores the value of each key
// found in fields, returning which keys it saw. Lines of known keys must
// hold exactly one unsigned decimal value; other lines are skipped whatever
// they hold, so newer kernels that add keys keep parsing. Fields are split
// as strings.Fields splits them, and a line's "\r" before its "\n" is
// dropped. It allocates only for the keys it saw: the daemon parses a
// cpu.stat for every running query of a busy pool each period.
func parseKeyValues(b []byte, fields map[string]*uint64) (seen map[string]bool, err error) {
	seen = make(map[string]bool, len(fields))
	for n := 1; len(b) > 0; n++ {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		line = bytes.TrimSuffix(line, []byte{'\r'})
		key, rest := nextField(line)
		if key == nil {
			continue
		}
		p, ok := fields[string(key)]
		if !ok {
			continue
		}
		value, rest := nextField(rest)
		if more, _ := nextField(rest); value == nil || more != nil {
			return nil, fmt.Errorf("line %d: %q: want \"%s <unsigned integer>\"", n, line, key)
		}
		v, err := strconv.ParseUint(string(value), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: %s value %q: %w", n, key, value, err)
		}
		*p = v
		seen[string(key)] = true
	}
	return seen, nil
}

// nextField is b's first field as strings.Fields splits (Unicode white
// space between), and what follows it; nil when b holds none.
func nextField(b []byte) (field, rest []byte) {
	start := bytes.IndexFunc(b, func(r rune) bool { return !unicode.IsSpace(r) })
	if start < 0 {
		return nil, nil
	}
	b = b[start:]
	end := bytes.IndexFunc(b, unicode.IsSpace)
	if end < 0 {
		return b, nil
	}
	return b[:end], b[end:]
}
