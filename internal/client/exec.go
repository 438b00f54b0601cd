package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/poolagent/poolagent/internal/protocol"
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
// A query the daemon starts at once costs one request and one answer,
// written and read on the calling goroutine: nothing else runs, so the
// client's start stays close to the command's own. Signals are caught
// (QueueSignals, when opts.Signals is nil) only once the query waits in
// the queue, where one makes the client leave it; until the daemon's
// first answer a signal acts on the client as on any Go program (SIGINT,
// SIGTERM, SIGHUP end it as they would end the command).
//
// Exec returns only when the command did not start: refused, left the
// queue (ErrLeftQueue, with Result.ExitCode 128+N), the daemon gone, or
// the execve failed, which comes back as an *exec.Error in LookPath's
// words; or, with no error, Result.Ran and ExitCode 128+N, when a caught
// signal N came between the daemon's answer and the execve. The
// connection is close-on-exec, so the command does not inherit it.
func Exec(path string, opts RunOptions) (Result, error) {
	started, res, conn, err := askInPlace(&opts)
	if conn != nil {
		defer conn.Close()
	}
	if err != nil {
		return res, err
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

// QueueSignals are the signals a client catches while its query waits in
// the queue: any of them makes it leave.
var QueueSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// askInPlace sends an OpExec request for opts and returns the daemon's
// ReplyStarted. conn is the connection (nil when there is none), for the
// caller to close. An answer other than a plain one (ParseReply) is read
// by the client's reader, as Run reads its answers: the wait in the
// queue, with its progress line and signals (caught from here on into
// opts.Signals, when nil).
func askInPlace(opts *RunOptions) (protocol.Reply, Result, *os.File, error) {
	fd, err := connect(opts.Socket)
	if err != nil {
		return protocol.Reply{}, Result{}, nil, err
	}
	conn := os.NewFile(uintptr(fd), opts.Socket)
	req := protocol.Request{Op: protocol.OpExec, Pool: opts.Pool, App: opts.App, Progress: opts.Progress != nil}
	// No descriptor goes with the request: the daemon takes a path
	// handle of this process's standard error itself, to tell there when
	// one of the query's processes is killed at a memory limit, as the
	// command has replaced this client by then.
	if _, err := conn.Write(protocol.AppendRequest(nil, req)); err != nil {
		return protocol.Reply{}, Result{}, conn, fmt.Errorf("send request: %w", err)
	}
	line, rest, err := readLine(conn)
	if err != nil {
		return protocol.Reply{}, Result{}, conn, err
	}
	if r, plain := protocol.ParseReply(line); plain && r.Type != protocol.ReplyQueued {
		switch r.Type {
		case protocol.ReplyStarted:
			return r, Result{Pool: r.Pool, Query: r.Query}, conn, nil
		case protocol.ReplyError:
			return r, Result{Pool: r.Pool}, conn, &RefusedError{Code: r.Code, Message: r.Error}
		}
		return r, Result{Pool: r.Pool}, conn, fmt.Errorf("the daemon answered %q to an in-place run, want %q", r.Type, protocol.ReplyStarted)
	}
	if opts.Signals == nil {
		sigs := make(chan os.Signal, 4)
		signal.Notify(sigs, QueueSignals...)
		opts.Signals = sigs
	}
	c := &client{opts: *opts, conn: conn, enc: json.NewEncoder(conn), replies: make(chan protocol.Reply, 4)}
	go c.read(json.NewDecoder(io.MultiReader(bytes.NewReader(line), bytes.NewReader(rest), conn)))
	started, res, err := c.wait()
	if err == nil && started.Type != protocol.ReplyStarted {
		err = fmt.Errorf("the daemon answered %q to an in-place run, want %q", started.Type, protocol.ReplyStarted)
	}
	return started, res, conn, err
}

// readLine reads the daemon's first answer, line (with its newline), and
// rest, what came with it: at most protocol.MaxMessageBytes in all.
func readLine(conn *os.File) (line, rest []byte, err error) {
	buf := make([]byte, 0, 512)
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= protocol.MaxMessageBytes {
				return nil, nil, fmt.Errorf("the daemon's answer is longer than %d bytes", protocol.MaxMessageBytes)
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := conn.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			return buf[:i+1], buf[i+1:], nil
		}
		if errors.Is(err, io.EOF) {
			return nil, nil, errDaemonGone
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read the daemon's answer: %w", err)
		}
	}
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
