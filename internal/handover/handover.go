// Package handover makes `poolagent run` start as fast as the slim
// poolagent-run: imported by the poolagent binary, its init replaces the
// process with the poolagent-run installed beside it whenever the command
// is `run`, before the rest of the binary initialises.
//
// Go initialises every linked package before main, the poolagent binary's
// many (the Prometheus client, etcd's client and gRPC, protobuf, the
// CLI's documentation renderers), and a short query would pay for all of
// them. The order is fixed (the spec's "Package initialization": packages
// sorted by import path, each once its imports are initialised), so a
// package that imports nothing but syscall is initialised among the first
// few, right after syscall (GODEBUG=inittrace=1 shows it). That is why
// this package reads its arguments from /proc/self/cmdline and uses no
// other package: importing os, fmt or strings would put it after most of
// the heavy ones.
//
// poolagent-run, given client.HandedOver ("poolagent run") as its argv[0],
// behaves exactly as `poolagent run` (client.RunCommand, with poolagent's
// name in its messages). When it is not there, or the arguments cannot be read, the
// process goes on and runs the command itself after the full start.
package handover

import "syscall"

// argv0 is the argv[0] poolagent-run is given, client.HandedOver (which
// this package cannot import).
const argv0 = "poolagent run"

// maxCmdline bounds what is read of /proc/self/cmdline: longer command
// lines are not handed over.
const maxCmdline = 1 << 16

func init() {
	if argv, ok := runArgs(); ok {
		if slim, ok := besideSelf("poolagent-run"); ok {
			// On success this does not return; on failure the process
			// goes on as if it had not been tried.
			syscall.Exec(slim, append([]string{argv0}, argv...), syscall.Environ())
		}
	}
}

// runArgs returns the arguments after `run` when the process was started
// as `poolagent run ...`, and not for shell completion.
func runArgs() ([]string, bool) {
	fd, err := syscall.Open("/proc/self/cmdline", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer syscall.Close(fd)
	buf := make([]byte, maxCmdline+1)
	n := 0
	for n < len(buf) {
		m, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, false
		}
		if m == 0 {
			break
		}
		n += m
	}
	if n > maxCmdline {
		return nil, false
	}
	return parseCmdline(buf[:n])
}

// parseCmdline splits a /proc/PID/cmdline (arguments, each ended by a
// NUL) and returns the arguments after the first when that is "run" and
// the last is not urfave/cli's completion flag.
func parseCmdline(b []byte) ([]string, bool) {
	var args []string
	for start, i := 0, 0; i < len(b); i++ {
		if b[i] == 0 {
			args = append(args, string(b[start:i]))
			start = i + 1
		}
	}
	if len(b) > 0 && b[len(b)-1] != 0 {
		return nil, false // cut short, or not a command line
	}
	if len(args) < 2 || args[1] != "run" || args[len(args)-1] == "--generate-bash-completion" {
		return nil, false
	}
	return args[2:], true
}

// besideSelf returns the path of the executable file name in the
// directory of this process's executable.
func besideSelf(name string) (string, bool) {
	buf := make([]byte, 4096)
	n, err := syscall.Readlink("/proc/self/exe", buf)
	if err != nil || n == len(buf) {
		return "", false
	}
	dir := n
	for dir > 0 && buf[dir-1] != '/' {
		dir--
	}
	if dir == 0 {
		return "", false
	}
	path := string(buf[:dir]) + name
	if syscall.Access(path, 1 /* X_OK */) != nil {
		return "", false
	}
	return path, true
}
