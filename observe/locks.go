package observe

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// FlockOwner describes the process holding the flock(2) on fd's file:
// "process PID (COMMAND, running since TIME)", from /proc/locks and
// /proc/PID, or "another process" when /proc/locks does not say. It
// names who holds a pool root or a state directory.
func FlockOwner(fd int) string {
	var st unix.Stat_t
	b, err := os.ReadFile("/proc/locks")
	if err != nil || unix.Fstat(fd, &st) != nil {
		return "another process"
	}
	pid := flockHolder(b, unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	if pid <= 0 {
		return "another process"
	}
	desc := fmt.Sprintf("process %d", pid)
	if p, err := procfs.NewProc(pid); err == nil {
		if cmd, err := p.CmdLine(); err == nil && len(cmd) > 0 {
			desc += " (" + strings.Join(cmd, " ")
			if s, err := p.Stat(); err == nil {
				if start, err := s.StartTime(); err == nil {
					desc += ", running since " + time.Unix(int64(start), 0).UTC().Format(time.RFC3339)
				}
			}
			desc += ")"
		}
	}
	return desc
}

// flockHolder returns the pid holding a FLOCK on the file of device
// major:minor and inode ino, from /proc/locks, whose lines read
//
//	1: FLOCK  ADVISORY  WRITE 4242 00:1c:112885 0 EOF
//	1: -> FLOCK  ADVISORY  WRITE 4343 00:1c:112885 0 EOF
//
// (device numbers in hex; "->" marks a waiter). 0 when none is listed.
func flockHolder(locks []byte, major, minor uint32, ino uint64) int {
	want := fmt.Sprintf("%02x:%02x:%d", major, minor, ino)
	s := bufio.NewScanner(bytes.NewReader(locks))
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) < 6 || f[1] != "FLOCK" || f[5] != want {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil {
			return pid
		}
	}
	return 0
}
