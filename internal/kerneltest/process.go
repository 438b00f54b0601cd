package kerneltest

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// ProcessCPU is a process's user plus system time so far, from
// /proc/PID/stat (fields 14 and 15, in clock ticks of 10 ms), for
// benchmarks that report what a process cost.
func ProcessCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// The command name (field 2) may hold spaces; fields count from
	// after its closing parenthesis, which is field 2.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	var utime, stime int64
	fmt.Sscan(f[11], &utime)
	fmt.Sscan(f[12], &stime)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// ProcessRSSMiB is a process's resident memory (VmRSS of
// /proc/PID/status), MiB.
func ProcessRSSMiB(tb testing.TB, pid int) float64 {
	tb.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	var kib float64
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			fmt.Sscan(f[1], &kib)
		}
	}
	return kib / 1024
}
