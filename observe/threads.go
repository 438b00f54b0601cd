package observe

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ThreadStat is what /proc says about one thread's use of the CPU.
type ThreadStat struct {
	// RunNs is the time the thread ran, ns: the first field of
	// /proc/TID/schedstat ("RUN_NS WAIT_NS TIMESLICES").
	RunNs uint64
	// Runnable is whether the thread was running or runnable: state R in
	// /proc/TID/stat.
	Runnable bool
}

// ReadThreadStat reads thread tid's schedstat and state below procRoot
// (normally /proc). A thread that has ended reads as an error wrapping
// fs.ErrNotExist.
//
// NOTE: a thread that is exiting still has its /proc directory, but its
// files refuse reads with ESRCH until it is reaped; that is an ended
// thread too.
func ReadThreadStat(procRoot string, tid int) (ThreadStat, error) {
	dir := filepath.Join(procRoot, strconv.Itoa(tid))
	sched, err := readThreadFile(filepath.Join(dir, "schedstat"))
	if err != nil {
		return ThreadStat{}, err
	}
	stat, err := readThreadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return ThreadStat{}, err
	}
	var ts ThreadStat
	if ts.RunNs, err = parseSchedstat(sched); err != nil {
		return ThreadStat{}, fmt.Errorf("%s/schedstat: %w", dir, err)
	}
	state, err := parseStatState(stat)
	if err != nil {
		return ThreadStat{}, fmt.Errorf("%s/stat: %w", dir, err)
	}
	ts.Runnable = state == 'R'
	return ts, nil
}

// readThreadFile reads a file of a thread's /proc directory, an exiting
// thread's ESRCH as fs.ErrNotExist.
func readThreadFile(name string) ([]byte, error) {
	b, err := os.ReadFile(name)
	if errors.Is(err, syscall.ESRCH) {
		return nil, fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	return b, err
}

// parseSchedstat returns the run time of /proc/TID/schedstat: "RUN_NS
// WAIT_NS TIMESLICES".
func parseSchedstat(b []byte) (uint64, error) {
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return 0, fmt.Errorf("%q: want \"RUN_NS WAIT_NS TIMESLICES\"", b)
	}
	return strconv.ParseUint(f[0], 10, 64)
}

// parseStatState returns the state letter of /proc/TID/stat: "PID (COMM)
// S ...", where COMM may itself hold spaces and parentheses, so the state
// follows the last ')'.
func parseStatState(b []byte) (byte, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) || b[i+1] != ' ' {
		return 0, fmt.Errorf("%.40q: want \"PID (COMM) STATE ...\"", b)
	}
	return b[i+2], nil
}
