package main

import (
	"fmt"
	"io"
	"time"

	"github.com/poolagent/poolagent/cgroupfs"
	"github.com/poolagent/poolagent/observe"
)

// statIntervalJSON is one line of `poolagent stat --watch --format json`:
// what each group's counters grew by in the interval. In Pressure the
// totals are what they grew by too, while the averages are cpu.pressure's
// as read at the interval's end (they are the kernel's own moving
// averages).
type statIntervalJSON struct {
	Interval int              `json:"interval"`
	Seconds  float64          `json:"seconds"`
	Groups   []observe.Sample `json:"groups"`
}

// watchStat prints, at each time next returns, the deltas since the
// previous one (since start for the first), until next returns false or
// count intervals (0: no limit) have been printed. The times next returns
// measure the intervals.
func watchStat(w io.Writer, tree *cgroupfs.Reader, format string, wide bool, count int, start time.Time, next func() (time.Time, bool)) error {
	prev, err := tree.ReadAll()
	if err != nil {
		return err
	}
	last := start
	if format == "text" {
		fmt.Fprintf(w, "pool root %s (cgroup %s): deltas per interval\n", tree.Root(), tree.Version())
	}
	for n := 1; count == 0 || n <= count; n++ {
		now, ok := next()
		if !ok {
			return nil
		}
		cur, err := tree.ReadAll()
		if err != nil {
			return err
		}
		deltas := observe.Deltas(cur, prev)
		elapsed := now.Sub(last)
		if format == "json" {
			if err := writeStatJSON(w, statIntervalJSON{Interval: n, Seconds: elapsed.Seconds(), Groups: deltas}, true); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(w, "\ninterval %d: %.3fs\n", n, elapsed.Seconds())
			if err := observe.WriteTable(w, deltas, elapsed, wide); err != nil {
				return err
			}
		}
		prev, last = cur, now
	}
	return nil
}
