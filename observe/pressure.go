package observe

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Pressure is a cgroup v2 cpu.pressure file (pressure stall information):
//
//	some avg10=1.53 avg60=0.87 avg300=0.32 total=1234567
//	full avg10=0.00 avg60=0.00 avg300=0.00 total=0
//
// "some" is time in which at least one task of the group waited for a CPU,
// "full" time in which all non-idle tasks did (the cpu "full" line exists
// since Linux 5.13; Full is nil before that).
type Pressure struct {
	Some PressureLine  `json:"some"`
	Full *PressureLine `json:"full,omitempty"`
}

// PressureLine is one line of a PSI file: the share of wall time stalled,
// in percent, averaged over 10, 60 and 300 seconds, and the total stalled
// time in microseconds.
type PressureLine struct {
	Avg10Percent  float64 `json:"avg10_percent"`
	Avg60Percent  float64 `json:"avg60_percent"`
	Avg300Percent float64 `json:"avg300_percent"`
	TotalUsec     uint64  `json:"total_usec"`
}

// ParsePressure parses a PSI file (cpu.pressure, memory.pressure). A "some" line is required;
// lines of other kinds and fields other than avg10, avg60, avg300 and total
// are skipped.
func ParsePressure(b []byte) (Pressure, error) {
	var p Pressure
	var haveSome bool
	s := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; s.Scan(); n++ {
		f := strings.Fields(s.Text())
		if len(f) == 0 || (f[0] != "some" && f[0] != "full") {
			continue
		}
		line, err := parsePressureLine(f[1:])
		if err != nil {
			return Pressure{}, fmt.Errorf("line %d: %s: %w", n, f[0], err)
		}
		if f[0] == "some" {
			p.Some, haveSome = line, true
		} else {
			p.Full = &line
		}
	}
	if err := s.Err(); err != nil {
		return Pressure{}, err
	}
	if !haveSome {
		return Pressure{}, errors.New(`no "some" line: want "some avg10=P avg60=P avg300=P total=USEC"`)
	}
	return p, nil
}

// parsePressureLine parses the key=value fields after "some" or "full".
// All four of avg10, avg60, avg300 and total must be present.
func parsePressureLine(fields []string) (PressureLine, error) {
	var l PressureLine
	avgs := map[string]*float64{"avg10": &l.Avg10Percent, "avg60": &l.Avg60Percent, "avg300": &l.Avg300Percent}
	seen := make(map[string]bool, 4)
	for _, kv := range fields {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return PressureLine{}, fmt.Errorf("field %q: want key=value", kv)
		}
		if p, ok := avgs[k]; ok {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 || x > 100 {
				return PressureLine{}, fmt.Errorf("%s=%q: want a percentage 0..100", k, v)
			}
			*p = x
			seen[k] = true
		} else if k == "total" {
			x, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return PressureLine{}, fmt.Errorf("total=%q: want microseconds, an unsigned integer: %w", v, err)
			}
			l.TotalUsec = x
			seen[k] = true
		}
	}
	if len(seen) != 4 {
		return PressureLine{}, fmt.Errorf("%q: want avg10=P avg60=P avg300=P total=USEC", strings.Join(fields, " "))
	}
	return l, nil
}
