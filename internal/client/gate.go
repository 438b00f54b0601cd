package client

// The gate is how a client starts its command inside the query cgroup
// without privileges. The client (`poolagent run`, `poolagent-run`) forks
// a POSIX shell as its child (running as the caller, like the command
// will) with the read end of a pipe as file descriptor 3:
//
//	sh -c 'read -r _ <&3 || exit 125; exec 3<&-; exec "$@"' poolagent-gate CMD ARGS...
//
// The shell blocks on the pipe while the daemon checks the child and moves
// it into the query cgroup; once the client writes a newline it closes the
// pipe and execs the command in place, so the process the daemon moved is
// the command itself and the command's first instruction already runs
// (and is accounted) in the query cgroup. If the pipe closes without a
// newline (the daemon refused the process, the client died) the gate exits
// with 125 (the run command's status for its own failures) and the command
// never runs. The shell looks the command up in PATH, and the command gets
// its argv exactly as typed.
//
// A small shell (dash, busybox) costs one more exec, far less than starting
// poolagent's own binary again would (docs/performance.md "Admission").

// gateShell is the shell that runs the gate.
const gateShell = "/bin/sh"

// gateScript waits for the release byte on fd 3 and execs "$@".
const gateScript = `read -r _ <&3 || exit 125; exec 3<&-; exec "$@"`
