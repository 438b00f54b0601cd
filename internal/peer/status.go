package peer

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// procStatus is what placing a process needs of its /proc/PID/status,
// one read for all of it.
type procStatus struct {
	tgid, ppid int
	// tracer is the pid of the process tracing it, 0 when none.
	tracer int
	// ruid, euid and suid are its real, effective and saved uid.
	ruid, euid, suid uint32
}

// pidfdInfo is struct pidfd_info as Linux 6.13 first gave it
// (PIDFD_INFO_SIZE_VER0): the ids of a pidfd's process, in the caller's
// pid namespace.
type pidfdInfo struct {
	Mask, CgroupID                                                    uint64
	PID, TGID, PPID, RUID, RGID, EUID, EGID, SUID, SGID, FSUID, FSGID uint32
	_                                                                 uint32
}

// pidfdGetInfo is PIDFD_GET_INFO, _IOWR(0xFF, 11, struct pidfd_info).
const pidfdGetInfo = 3<<30 | uintptr(unsafe.Sizeof(pidfdInfo{}))<<16 | 0xFF<<8 | 11

// statusOf is what placing process p needs of its status: asked of its
// pidfd where the kernel answers PIDFD_GET_INFO (Linux 6.13 and later: one
// ioctl, where the first read of a process's /proc/PID/status costs a
// start a fifth of a millisecond), else read from /proc/PID/status. The
// pidfd's answer has no tracer (tracer 0); a pidfd whose process has
// another pid than p's is refused.
func statusOf(procRoot string, p Process) (procStatus, error) {
	var info pidfdInfo
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(p.FD), pidfdGetInfo, uintptr(unsafe.Pointer(&info)))
	switch {
	case errno == unix.ENOTTY || errno == unix.EINVAL:
		return readStatus(procRoot, p.PID)
	case errno != 0:
		return procStatus{}, fmt.Errorf("process %d: PIDFD_GET_INFO: %w", p.PID, errno)
	case int(info.PID) != p.PID:
		return procStatus{}, fmt.Errorf("process %d: its pidfd names process %d", p.PID, info.PID)
	}
	return procStatus{tgid: int(info.TGID), ppid: int(info.PPID), ruid: info.RUID, euid: info.EUID, suid: info.SUID}, nil
}

// readStatus reads process pid's status from the proc filesystem at
// procRoot.
func readStatus(procRoot string, pid int) (procStatus, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "status"))
	if err != nil {
		return procStatus{}, fmt.Errorf("process %d: %w", pid, err)
	}
	st, err := parseStatus(b)
	if err != nil {
		return procStatus{}, fmt.Errorf("process %d: %s/%d/status: %w", pid, procRoot, pid, err)
	}
	return st, nil
}

// statusKeys are the lines of /proc/PID/status that parseStatus reads.
var statusKeys = []string{"Tgid", "PPid", "TracerPid", "Uid"}

// parseStatus reads the Tgid, PPid, TracerPid and Uid lines of a
// /proc/PID/status, whose lines are "Key:\tvalue", the Uid line four
// uids (real, effective, saved, filesystem). The first line of each key
// counts; the kernel escapes the process's name on its Name line, so no
// other line can pose as one of these. All four are required.
func parseStatus(b []byte) (procStatus, error) {
	var pids [3]int
	var uids [3]uint32
	seen := make([]bool, len(statusKeys))
	for line := range bytes.Lines(b) {
		key, value, ok := bytes.Cut(bytes.TrimSuffix(line, []byte("\n")), []byte(":"))
		k := slices.Index(statusKeys, string(key))
		if !ok || k < 0 || seen[k] {
			continue
		}
		seen[k] = true
		fields := bytes.Fields(value)
		if statusKeys[k] == "Uid" {
			if len(fields) != 4 {
				return procStatus{}, fmt.Errorf("Uid line %q: want four uids", value)
			}
			for i := range uids {
				u, err := strconv.ParseUint(string(fields[i]), 10, 32)
				if err != nil {
					return procStatus{}, fmt.Errorf("Uid line %q: want four uids", value)
				}
				uids[i] = uint32(u)
			}
			continue
		}
		n := -1
		if len(fields) == 1 {
			n, _ = strconv.Atoi(string(fields[0]))
		}
		if n < 0 || len(fields) != 1 || string(fields[0]) != strconv.Itoa(n) {
			return procStatus{}, fmt.Errorf("%s line %q: want one pid", key, value)
		}
		pids[k] = n
	}
	for k, name := range statusKeys {
		if !seen[k] {
			return procStatus{}, fmt.Errorf("no %s line", name)
		}
	}
	return procStatus{tgid: pids[0], ppid: pids[1], tracer: pids[2], ruid: uids[0], euid: uids[1], suid: uids[2]}, nil
}

// Owner returns the uid and gid that own process pid's directory in the
// proc filesystem at procRoot: the process's effective uid and gid (the
// kernel shows root's for a process that is not dumpable, such as one
// that changed its uid).
func Owner(procRoot string, pid int) (uid, gid uint32, err error) {
	fi, err := os.Stat(filepath.Join(procRoot, strconv.Itoa(pid)))
	if err != nil {
		return 0, 0, fmt.Errorf("process %d: %w", pid, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, fmt.Errorf("process %d: %s has no owner", pid, fi.Name())
	}
	return st.Uid, st.Gid, nil
}
