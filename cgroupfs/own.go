package cgroupfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// ErrOwned is wrapped when another process owns the pool root ([Tree.Own]).
var ErrOwned = errors.New("the pool root is owned by another process")

// Own marks the pool root as this process's until release is called or the
// process ends (the kernel then drops the mark): an exclusive flock(2) on
// the root's directory in the cpu controller's hierarchy, made first when
// missing. A daemon owns its root while it runs, and `poolagent apply`
// while it writes, so neither writes a tree another one keeps: a second
// Own of the same root fails with ErrOwned naming the owner's pid, command
// and start time (from /proc/locks and /proc/PID).
func (t *Tree) Own() (release func() error, err error) {
	h := t.order[0]
	root := t.roots[h]
	var n int
	if err := t.do(Op{Kind: OpMkdir, Hier: h, Dir: root, Path: "."}, &n); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("own pool root %s: %w", root, err)
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("own pool root: %w", &os.PathError{Op: "open", Path: root, Err: err})
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is owned by %s; stop it, or use another pool root", ErrOwned, root, owner(fd))
		}
		return nil, fmt.Errorf("own pool root %s: flock: %w", root, err)
	}
	return func() error { return unix.Close(fd) }, nil
}

// owner describes the process holding the flock on fd's file: "process
// PID (COMMAND, running since TIME)", or "another process" when
// /proc/locks does not say.
func owner(fd int) string {
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
