package daemon

import (
	"fmt"
	"os"
	"syscall"
)

// The gate is how a client starts its command inside the query cgroup
// without privileges: `poolagent run` starts its own executable again as a
// child, with gateEnv set and the read end of a pipe as file descriptor 3.
// That child (the gate) blocks on the pipe while the daemon moves it into
// the query cgroup, and execs the command once the client writes one byte.
// If the pipe closes without a byte (the daemon refused, the client died)
// the gate exits with ExitGateAbandoned and the command never runs.
//
// The gate runs from this package's init, before any other work of the
// program, so every binary that links the daemon package can serve as a
// gate (poolagent and this package's tests).

// gateEnv marks a gate process; its value is unused.
const gateEnv = "POOLAGENT_GATE"

// gateFD is the gate's release pipe.
const gateFD = 3

// Exit statuses of the gate, in the range `env` and `timeout` use for
// their own failures.
const (
	// ExitGateAbandoned: released without the go byte; nothing was run.
	ExitGateAbandoned = 125
	// ExitCannotExec: the command exists but exec failed.
	ExitCannotExec = 126
)

func init() {
	if _, ok := os.LookupEnv(gateEnv); ok {
		gate()
	}
}

// gate waits for release and execs os.Args[1] with argv os.Args[2:]. It
// never returns.
func gate() {
	os.Unsetenv(gateEnv)
	release := os.NewFile(gateFD, "release")
	var b [1]byte
	n, _ := release.Read(b[:])
	release.Close()
	if n != 1 || len(os.Args) < 3 {
		os.Exit(ExitGateAbandoned)
	}
	err := syscall.Exec(os.Args[1], os.Args[2:], os.Environ())
	fmt.Fprintf(os.Stderr, "poolagent: exec %s: %v\n", os.Args[1], err)
	os.Exit(ExitCannotExec)
}
