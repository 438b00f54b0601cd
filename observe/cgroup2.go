package observe

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ReadCPUStatV2 reads the cpu.stat file of the cgroup v2 directory dir, for
// example /sys/fs/cgroup/poolagent/olap. The file holds one "key value" pair
// per line, times in microseconds:
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
func ReadCPUStatV2(dir string) (CPUStat, error) {
	return readFile(dir, "cpu.stat", parseCPUStatV2)
}

// readFile reads dir/name and hands its bytes to parse. A read error keeps
// the file's name and wraps the os error (fs.ErrNotExist for a missing
// file or a cgroup removed meanwhile); a parse error is prefixed with the
// file's path.
func readFile[T any](dir, name string, parse func([]byte) (T, error)) (T, error) {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("read %s: %w", name, err)
	}
	v, err := parse(b)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// parseCPUStatV2 parses the text of a cgroup v2 cpu.stat file.
func parseCPUStatV2(b []byte) (CPUStat, error) {
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

// ReadLocalThrottledUsecV2 reads throttled_usec from the cpu.stat.local file
// of the cgroup v2 directory dir: the time this group's own runnable tasks
// were held off the CPU by throttling, whether its own cpu.max ran out or
// an ancestor's, summed per CPU. cpu.stat's throttled_usec, by contrast,
// counts only throttling by the group's own limit.
// The file format is
//
//	throttled_usec 160000
//
// ok is false when the kernel has no cpu.stat.local (before Linux 6.6) or
// the file has no throttled_usec line (the root cgroup's is empty).
func ReadLocalThrottledUsecV2(dir string) (usec uint64, ok bool, err error) {
	return readLocal(dir, "throttled_usec", 1)
}

// readLocal reads key from dir/cpu.stat.local and divides it by div to get
// microseconds.
func readLocal(dir, key string, div uint64) (uint64, bool, error) {
	var ok bool
	v, err := readFile(dir, "cpu.stat.local", func(b []byte) (v uint64, err error) {
		v, ok, err = parseLocalStat(b, key)
		return v, err
	})
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	return v / div, ok, err
}

// parseLocalStat returns the value of key in the text of a cpu.stat.local
// file; ok is false when the key is absent.
func parseLocalStat(b []byte, key string) (v uint64, ok bool, err error) {
	seen, err := parseKeyValues(b, map[string]*uint64{key: &v})
	if err != nil {
		return 0, false, err
	}
	return v, seen[key], nil
}

// parseKeyValues walks "key value" lines and stores the value of each key
// found in fields, returning which keys it saw. Lines of known keys must
// hold exactly one unsigned decimal value; other lines are skipped whatever
// they hold, so newer kernels that add keys keep parsing.
func parseKeyValues(b []byte, fields map[string]*uint64) (seen map[string]bool, err error) {
	seen = make(map[string]bool, len(fields))
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
