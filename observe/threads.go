package observe

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
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
	var buf [threadFileMax]byte
	sched, err := readThreadFile(filepath.Join(dir, "schedstat"), buf[:])
	if err != nil {
		return ThreadStat{}, err
	}
	var ts ThreadStat
	if ts.RunNs, err = parseSchedstat(sched); err != nil {
		return ThreadStat{}, fmt.Errorf("%s/schedstat: %w", dir, err)
	}
	stat, err := readThreadFile(filepath.Join(dir, "stat"), buf[:])
	if err != nil {
		return ThreadStat{}, err
	}
	state, err := parseStatState(stat)
	if err != nil {
		return ThreadStat{}, fmt.Errorf("%s/stat: %w", dir, err)
	}
	ts.Runnable = state == 'R'
	return ts, nil
}

// threadFileMax bounds what is read of a thread's schedstat or stat: a
// stat line is 52 decimal fields and a name of at most 64 bytes, well
// under this.
const threadFileMax = 4096

// readThreadFile reads a file of a thread's /proc directory into buf, an
// exiting thread's ESRCH as fs.ErrNotExist. The history reads these files
// hundreds of times a second, so it reads with bare system calls: open,
// read and close, where os.ReadFile also asks the file's size and flags
// and hands it to the runtime's poller. A read that leaves room in buf
// had all the file holds (/proc answers a read with as much of the file
// as fits, as does a regular file).
func readThreadFile(name string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, threadFileError("open", name, err)
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, threadFileError("read", name, err)
		}
		if n += m; m < len(buf)-(n-m) {
			return buf[:n], nil
		}
	}
	return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("longer than %d bytes: not a thread's schedstat or stat", len(buf))}
}

// threadFileError is err of op on name as an *fs.PathError, ESRCH (an
// exiting thread) also as fs.ErrNotExist.
func threadFileError(op, name string, err error) error {
	err = &fs.PathError{Op: op, Path: name, Err: err}
	if errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	return err
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
