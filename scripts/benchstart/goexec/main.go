// Command goexec replaces itself with the command its arguments name (an
// absolute path, then its arguments) and does nothing else: the least any
// Go program costs that starts a command in place, as poolagent-run does.
// With -ask SOCKET first, it asks the poolagent daemon at SOCKET for a
// query in place before the execve: one connection, the request written
// as bytes and the first answer line read, nothing parsed, looked up or
// checked but that the answer is "started" (the daemon has moved this
// process into the query cgroup). That is the least any client of the
// daemon costs: the Go start, one round trip, the execve. benchstart
// times both beside the other ways, as floors.
package main

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
)

func main() {
	args := os.Args[1:]
	if len(args) >= 2 && args[0] == "-ask" {
		if err := ask(args[1]); err != nil {
			fmt.Fprintf(os.Stderr, "goexec: ask %s: %v\n", args[1], err)
			os.Exit(125)
		}
		args = args[2:]
	}
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "usage: goexec [-ask SOCKET] /ABSOLUTE/PATH [ARGS...]")
		os.Exit(2)
	}
	err := syscall.Exec(args[0], args, os.Environ())
	fmt.Fprintf(os.Stderr, "goexec: %s: %v\n", args[0], err)
	os.Exit(127)
}

// ask runs the in-place request on a blocking, close-on-exec socket: the
// request, then the daemon's first answer line, which must say started.
func ask(socket string) error {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: socket}); err != nil {
		return err
	}
	if _, err := syscall.Write(fd, []byte("{\"op\":\"exec\"}\n")); err != nil {
		return err
	}
	buf := make([]byte, 0, 4096)
	for !bytes.Contains(buf, []byte("\n")) {
		if len(buf) == cap(buf) {
			return fmt.Errorf("an answer line longer than %d bytes", cap(buf))
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("the daemon closed the connection after %q", buf)
		}
		buf = buf[:len(buf)+n]
	}
	if !bytes.Contains(buf, []byte(`"type":"started"`)) {
		return fmt.Errorf("the daemon answered %q, not started", bytes.TrimSpace(buf))
	}
	return nil
}
