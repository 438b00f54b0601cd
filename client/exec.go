package client

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/poolagent/poolagent/protocol"
	"golang.org/x/sys/unix"
)

// Exec runs a query in place (protocol.OpExec): it waits in the queue as
// Run does, and once the daemon has moved this very process into the
// query cgroup it becomes the command: execve of path (where
// exec.LookPath found opts.Args[0]) with opts.Args as typed, opts.Env
// with EnvCPULimit, and opts.Stdin, Stdout and Stderr as file descriptors
// 0, 1 and 2. No gate, no child, no client left running: the command's
// status and signals are the caller's to see directly, and the daemon
// holds the query's slot until the query cgroup is empty.
//
// Exec returns only when the command did not start: refused, left the
// queue (ErrLeftQueue, with Result.ExitCode 128+N), the daemon gone, or
// the execve failed, which comes back as an *exec.Error in LookPath's
// words; or, with no error, Result.Ran and ExitCode 128+N, when signal N
// came between the daemon's answer and the execve. The connection is close-on-exec, so the command does not
// inherit it.
func Exec(path string, opts RunOptions) (Result, error) {
	c, err := ask(opts, protocol.OpExec)
	if err != nil {
		return Result{}, err
	}
	defer c.conn.Close()
	started, res, err := c.wait()
	if err != nil {
		return res, err
	}
	if started.Type != protocol.ReplyStarted {
		return res, fmt.Errorf("the daemon answered %q to an in-place run, want %q", started.Type, protocol.ReplyStarted)
	}
	// A signal caught since the daemon's answer was meant for the
	// command: it ends the query as the signal's default action would
	// have ended the command, with the shell's 128+N. The execve gives
	// the command the default action of every signal the client caught.
	select {
	case sig := <-opts.Signals:
		res.Ran, res.ExitCode = true, 128+signalNumber(sig)
		return res, nil
	default:
	}
	return res, execve(path, opts, commandEnv(opts.Env, started.CPULimit))
}

// execve replaces the process with the command, its standard files made
// file descriptors 0, 1 and 2 first. A file the kernel will not execute
// as a program (ENOEXEC: a script without "#!") is run by the shell, as
// a POSIX shell's exec does.
func execve(path string, opts RunOptions, env []string) error {
	for fd, f := range []*os.File{opts.Stdin, opts.Stdout, opts.Stderr} {
		if f == nil || f.Fd() == uintptr(fd) {
			continue
		}
		if err := unix.Dup3(int(f.Fd()), fd, 0); err != nil {
			return fmt.Errorf("make %s file descriptor %d: %w", f.Name(), fd, err)
		}
	}
	err := syscall.Exec(path, opts.Args, env)
	if errors.Is(err, syscall.ENOEXEC) {
		err = syscall.Exec(gateShell, append([]string{"sh", path}, opts.Args[1:]...), env)
	}
	return &exec.Error{Name: opts.Args[0], Err: err}
}
