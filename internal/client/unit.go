package client

import (
	"bytes"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/poolagent/poolagent/internal/protocol"
	"golang.org/x/sys/unix"
)

// A client started by systemd as a service's process (ExecStart= of a
// service or of a timer's service) must leave the unit whole: systemd
// tracks a service by its cgroup, signals that cgroup's processes on
// `systemctl stop` and `kill`, and ends the unit when its main process
// exits. A client that became its command in the query cgroup would take
// the command out of systemd's sight, so there the client stays in the
// unit's cgroup as its main process, the command runs through the gate in
// the query cgroup, and RunOptions.Unit has the daemon carry systemd's
// signals to the query (docs/operate.md, "Services and timers in a pool").

// InService reports whether this process is a systemd service's: systemd
// set INVOCATION_ID (invocationID) for the unit, and the process is in a
// service's own cgroup, the path that procCgroup (/proc/self/cgroup)
// gives ending in ".service". A process of a scope, such as a login
// session or `systemd-run --scope`, is not, even with INVOCATION_ID
// inherited from a service: systemd signals a scope's processes too, but
// owns none of them, and a process moved out of one is no longer its.
func InService(invocationID string, procCgroup []byte) bool {
	if invocationID == "" {
		return false
	}
	cg := ""
	for line := range bytes.Lines(procCgroup) {
		f := strings.SplitN(strings.TrimSuffix(string(line), "\n"), ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			cg = f[2]
		case f[1] == "name=systemd" && cg == "":
			cg = f[2]
		}
	}
	return strings.HasSuffix(cg, ".service")
}

// inService is InService of this process. Outside systemd's services
// (no INVOCATION_ID) nothing is read: the read of /proc/self/cgroup would
// cost a query's start the file and the runtime's poller it sets up.
func inService() bool {
	id := os.Getenv("INVOCATION_ID")
	if id == "" {
		return false
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	return err == nil && InService(id, b)
}

// tellWhere writes on Stderr, once the command runs, the line that says in
// the unit's journal where it runs: the query, its pool and the cgroup of
// process pid (the command) as /proc shows it, the first hierarchy's that
// ends in the query's name (v2's, or the cpu controller's on v1).
func (c *client) tellWhere(pid int, admitted protocol.Reply) {
	where := ""
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup"); err == nil {
		for line := range bytes.Lines(b) {
			f := strings.SplitN(strings.TrimSpace(string(line)), ":", 3)
			if len(f) == 3 && where == "" && admitted.Query != "" && strings.HasSuffix(f[2], "/"+admitted.Query) {
				where = " in cgroup " + f[2]
			}
		}
	}
	fmt.Fprintf(c.opts.Stderr, "%s: query %s of pool %s runs%s (process %d); this process stays the unit's "+
		"and passes stop and kill signals on to every process of the query\n", c.opts.Name, admitted.Query, admitted.Pool, where, pid)
}

// exitBy ends this process by sig, as the command ended, so that systemd
// sees the signal (a stop that went as asked) rather than an exit status
// of 128+N (a failure). It returns if sig did not end the process.
func exitBy(sig syscall.Signal) {
	if sig == 0 {
		return
	}
	signal.Reset(sig)
	unix.Kill(unix.Getpid(), sig)
	time.Sleep(100 * time.Millisecond)
}
