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

// ThreadIDs lists the threads in cgroup dir and every cgroup below it, at
// most limit of them: v2's cgroup.threads, v1's tasks, one thread ID per
// line. truncated reports that more were there. A cgroup removed while it
// is read (a query that ended) is left out.
func ThreadIDs(dir string, v Version, limit int) (tids []int, truncated bool, err error) {
	name := "tasks"
	if v == V2 {
		name = "cgroup.threads"
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil && path != dir && errors.Is(err, fs.ErrNotExist) {
			return fs.SkipDir
		}
		if err != nil || !d.IsDir() {
			return err
		}
		b, err := os.ReadFile(filepath.Join(path, name))
		if errors.Is(err, fs.ErrNotExist) && path != dir {
			return fs.SkipDir
		}
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(string(b)) {
			tid, err := strconv.Atoi(f)
			if err != nil || tid < 1 {
				return fmt.Errorf("%s: %q is not a thread ID", filepath.Join(path, name), f)
			}
			if len(tids) == limit {
				truncated = true
				return fs.SkipAll
			}
			tids = append(tids, tid)
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("list threads below %s: %w", dir, err)
	}
	return tids, truncated, nil
}

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
