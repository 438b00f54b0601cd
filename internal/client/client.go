package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/poolagent/poolagent/internal/protocol"
	"golang.org/x/sys/unix"
)

// EnvCPULimit is set in the command's environment to its CPU cap in vCPUs
// (e.g. "1.5") when it was admitted, so runtimes can size their thread
// pools; the query cgroup's cpu.max carries the current cap.
const EnvCPULimit = "POOLAGENT_CPU_LIMIT"

// RunOptions describe one query run by a client.
type RunOptions struct {
	// Socket is the daemon's socket; DefaultSocket when empty.
	Socket string
	// Pool is the pool asked for; empty lets the daemon classify.
	Pool string
	// Args is the command and its arguments, as typed: the gate's shell
	// looks Args[0] up in the PATH of Env (the caller checks first that it
	// is there, so that a typo fails before the query waits).
	Args []string
	// App is the application name sent for classifiers' HAS_APP_NAME: the
	// base name of the command's executable (AppName gives it).
	App string
	// Env is the command's environment; EnvCPULimit is added to it.
	Env []string
	// Stdin, Stdout and Stderr are given to the command as they are.
	Stdin, Stdout, Stderr *os.File
	// Progress, when not nil, gets a one-line progress report while the
	// query is queued (position and time waited), redrawn in place: give
	// it a terminal.
	Progress io.Writer
	// Name starts the progress line, as it starts the client's messages:
	// "poolagent" or "poolagent-run"; "poolagent" when empty.
	Name string
	// Signals are the signals the client caught. While queued any of them
	// makes the client leave the queue; while running each is passed to
	// the command, except SIGINT and SIGQUIT when the client is in the
	// terminal's foreground process group, since the terminal sent those
	// to the command as well.
	Signals <-chan os.Signal
	// Unit says the client is a systemd service's process (InService):
	// the query is bound to the client (the daemon kills its processes if
	// the client dies first), a signal caught while it runs goes to every
	// process of the query, and so does SIGTERM once the command has
	// exited, to what it left behind, as systemd ends a unit's processes
	// when its main process exits. A line on Stderr says which cgroup the
	// query runs in.
	Unit bool
}

// Result is what a run ends with.
type Result struct {
	// ExitCode is the command's exit status, 128+N when signal N ended it
	// or ended the wait in the queue.
	ExitCode int
	// Ran says the command was started: ExitCode is its status even when
	// Run also returns an error (the daemon failed at the query's end).
	Ran bool
	// Signal is the signal that ended the command, or the wait in the
	// queue; 0 when the command exited.
	Signal syscall.Signal
	Pool   string
	Query  string
	// Stats are the query's statistics; nil when the daemon went away
	// before the query ended.
	Stats *protocol.Stats
}

// RefusedError is the daemon refusing the query: Code is a Code* constant,
// Message the daemon's text (YDB's wording for admission refusals).
type RefusedError struct {
	Code    string
	Message string
}

func (e *RefusedError) Error() string { return e.Message }

// ErrLeftQueue: a signal made the client leave the queue.
var ErrLeftQueue = errors.New("left the queue")

// Run asks the daemon to run a query, waits for admission, runs the
// command in the query cgroup and waits until the daemon reports the
// query's end (the command and every descendant gone).
func Run(opts RunOptions) (Result, error) {
	c, err := ask(opts, protocol.OpRun)
	if err != nil {
		return Result{}, err
	}
	defer c.conn.Close()
	admitted, res, err := c.wait()
	if err != nil {
		return res, err
	}
	return c.execute(admitted)
}

// ask dials the daemon and sends a query's first request, op (OpRun or
// OpExec), for opts; the caller waits for the answer and closes c.conn.
func ask(opts RunOptions, op string) (*client, error) {
	conn, err := Dial(opts.Socket)
	if err != nil {
		return nil, err
	}
	c := &client{opts: opts, conn: conn, enc: json.NewEncoder(conn), replies: make(chan protocol.Reply, 4)}
	go c.read(json.NewDecoder(conn))
	if err := c.enc.Encode(protocol.Request{Op: op, Pool: opts.Pool, App: opts.App, Progress: opts.Progress != nil, Bound: opts.Unit}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("send request: %w", err)
	}
	return c, nil
}

// AppName is the application name of a command found at path (where
// exec.LookPath found it): the base name of the executable, symbolic links
// resolved, as /proc/PID/exe shows it and libcgroup's cgrules matches
// commands (/usr/bin/python3 → python3.11). A path whose links cannot be
// resolved gives its own base name.
func AppName(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return filepath.Base(path)
}

// Dial connects to the daemon's socket (DefaultSocket when empty); its
// error names the socket and asks whether the daemon runs. The connection
// is an *os.File (deadlines work) rather than a net.Conn: linking package
// net makes a client start markedly slower (docs/performance.md
// "Admission" has the figures).
func Dial(socket string) (*os.File, error) {
	if socket == "" {
		socket = protocol.DefaultSocket
	}
	fd, err := connect(socket)
	if err != nil {
		return nil, err
	}
	// Non-blocking, so the runtime's poller serves it: reads wake on
	// Close and deadlines apply.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("connect to the poolagent daemon at %s: %w", socket, os.NewSyscallError("fcntl", err))
	}
	return os.NewFile(uintptr(fd), socket), nil
}

// connect returns a blocking, close-on-exec socket connected to the
// daemon's socket.
func connect(socket string) (int, error) {
	fail := func(err error) (int, error) {
		return -1, fmt.Errorf("connect to the poolagent daemon at %s (is `poolagent daemon` running?): %w", socket, err)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(os.NewSyscallError("socket", err))
	}
	for {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: socket})
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return fail(os.NewSyscallError("connect", err))
	}
	return fd, nil
}

type client struct {
	opts    RunOptions
	conn    *os.File
	enc     *json.Encoder
	replies chan protocol.Reply
}

func (c *client) read(dec *json.Decoder) {
	defer close(c.replies)
	for {
		var r protocol.Reply
		if err := dec.Decode(&r); err != nil {
			return
		}
		c.replies <- r
	}
}

var errDaemonGone = errors.New("the daemon closed the connection")

// wait waits in the queue until admitted.
func (c *client) wait() (protocol.Reply, Result, error) {
	arrived := time.Now()
	var redraw <-chan time.Time
	if c.opts.Progress != nil {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		redraw = t.C
	}
	var queued protocol.Reply
	for {
		select {
		case r, open := <-c.replies:
			if !open {
				c.clearProgress(queued)
				return r, Result{}, errDaemonGone
			}
			switch r.Type {
			case protocol.ReplyQueued:
				queued = r
				c.drawProgress(queued, arrived)
			case protocol.ReplyAdmitted, protocol.ReplyStarted:
				c.clearProgress(queued)
				return r, Result{Pool: r.Pool, Query: r.Query}, nil
			case protocol.ReplyError:
				c.clearProgress(queued)
				return r, Result{Pool: r.Pool}, &RefusedError{Code: r.Code, Message: r.Error}
			}
		case <-redraw:
			c.drawProgress(queued, arrived)
		case sig := <-c.opts.Signals:
			c.clearProgress(queued)
			c.conn.Close()
			return protocol.Reply{}, Result{ExitCode: 128 + signalNumber(sig), Signal: asSignal(sig), Pool: queued.Pool},
				fmt.Errorf("%w of pool %s after %s: %v", ErrLeftQueue, queued.Pool,
					time.Since(arrived).Round(100*time.Millisecond), sig)
		}
	}
}

func (c *client) drawProgress(q protocol.Reply, arrived time.Time) {
	if c.opts.Progress == nil || q.Type != protocol.ReplyQueued {
		return
	}
	name := c.opts.Name
	if name == "" {
		name = "poolagent"
	}
	why := ""
	if q.Wait != nil {
		why = ": " + q.Wait.String()
	}
	fmt.Fprintf(c.opts.Progress, "\r\033[K%s: queued in pool %s, position %d, waited %s%s",
		name, q.Pool, q.Position, time.Since(arrived).Truncate(100*time.Millisecond), why)
}

func (c *client) clearProgress(q protocol.Reply) {
	if c.opts.Progress != nil && q.Type == protocol.ReplyQueued {
		fmt.Fprint(c.opts.Progress, "\r\033[K")
	}
}

// execute starts the gate, has the daemon place it in the query cgroup,
// releases it and waits for the command and then for the daemon's report.
func (c *client) execute(admitted protocol.Reply) (Result, error) {
	res := Result{Pool: admitted.Pool, Query: admitted.Query}
	release, releaseW, err := os.Pipe()
	if err != nil {
		return res, fmt.Errorf("gate pipe: %w", err)
	}
	defer releaseW.Close()
	pidfd := -1
	env := commandEnv(c.opts.Env, admitted.CPULimit)
	cmd := &exec.Cmd{
		Path:       gateShell,
		Args:       append([]string{"sh", "-c", gateScript, "poolagent-gate"}, c.opts.Args...),
		Env:        env,
		Stdin:      c.opts.Stdin,
		Stdout:     c.opts.Stdout,
		Stderr:     c.opts.Stderr,
		ExtraFiles: []*os.File{release},
		// The gate's pidfd goes with the start request: the daemon
		// checks and moves that very process, whatever pid it has.
		SysProcAttr: &syscall.SysProcAttr{PidFD: &pidfd},
	}
	err = cmd.Start()
	release.Close()
	if err != nil {
		return res, fmt.Errorf("start the gate for %s: %w", c.opts.Args[0], err)
	}
	err = c.sendWithFD(protocol.Request{Op: protocol.OpStart, PID: cmd.Process.Pid}, pidfd)
	syscall.Close(pidfd)
	if err != nil {
		releaseW.Close()
		cmd.Wait()
		return res, fmt.Errorf("send start: %w", err)
	}
	if err := c.awaitStarted(); err != nil {
		releaseW.Close()
		cmd.Wait()
		return res, err
	}
	if _, err := releaseW.Write([]byte{'\n'}); err != nil {
		return res, fmt.Errorf("release the command: %w", err)
	}
	releaseW.Close()
	res.Ran = true
	if c.opts.Unit {
		c.tellWhere(cmd.Process.Pid, admitted)
	}

	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	foreground := inTerminalForeground()
	for running := true; running; {
		select {
		case sig := <-c.opts.Signals:
			if foreground && (sig == syscall.SIGINT || sig == syscall.SIGQUIT) {
				continue
			}
			if !c.opts.Unit || c.enc.Encode(protocol.Request{Op: protocol.OpSignal, Signal: signalNumber(sig)}) != nil {
				cmd.Process.Signal(sig)
			}
		case <-exited:
			running = false
		}
	}
	res.ExitCode = exitCode(cmd.ProcessState)
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = ws.Signal()
	}
	if c.opts.Unit {
		c.enc.Encode(protocol.Request{Op: protocol.OpSignal, Signal: int(syscall.SIGTERM)})
	}
	c.enc.Encode(protocol.Request{Op: protocol.OpExited})
	for r := range c.replies {
		switch r.Type {
		case protocol.ReplyDone:
			res.Stats = r.Stats
			return res, nil
		case protocol.ReplyError:
			return res, &RefusedError{Code: r.Code, Message: r.Error}
		}
	}
	return res, nil
}

// sendWithFD sends r with the descriptor fd attached (SCM_RIGHTS), in
// one sendmsg, so that the daemon receives the descriptor with the
// request's first byte.
func (c *client) sendWithFD(r protocol.Request, fd int) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return sendWithFD(c.conn, append(b, '\n'), fd)
}

// sendWithFD sends the message b on conn with the descriptor fd attached
// (SCM_RIGHTS), in one sendmsg.
func sendWithFD(conn *os.File, b []byte, fd int) error {
	raw, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	rights := unix.UnixRights(fd)
	var n int
	var sendErr error
	if err := raw.Write(func(s uintptr) bool {
		n, sendErr = unix.SendmsgN(int(s), b, rights, nil, 0)
		return sendErr != unix.EAGAIN
	}); err != nil {
		return err
	}
	if sendErr != nil {
		return sendErr
	}
	if n == len(b) {
		// NOTE: no write of nothing after it: on a socket the daemon
		// already closed (it refused the start) that fails with EPIPE.
		return nil
	}
	// The descriptor went with the first part; the rest is plain data.
	_, err = conn.Write(b[n:])
	return err
}

func (c *client) awaitStarted() error {
	for r := range c.replies {
		switch r.Type {
		case protocol.ReplyStarted:
			return nil
		case protocol.ReplyError:
			return &RefusedError{Code: r.Code, Message: r.Error}
		}
	}
	return errDaemonGone
}

// commandEnv is env with EnvCPULimit set to limit vCPUs (0: no cap, not
// set).
func commandEnv(env []string, limit float64) []string {
	env = env[:len(env):len(env)]
	if limit > 0 {
		env = append(env, EnvCPULimit+"="+strconv.FormatFloat(limit, 'f', -1, 64))
	}
	return env
}

// exitCode is a shell's view of how a process ended.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 1
}

// asSignal is sig as a syscall.Signal, 0 when it is none.
func asSignal(sig os.Signal) syscall.Signal {
	s, _ := sig.(syscall.Signal)
	return s
}

// inTerminalForeground reports whether this process's group is the
// foreground group of its controlling terminal: then keyboard signals
// reach the command directly.
func inTerminalForeground() bool {
	tty, err := os.Open("/dev/tty")
	if err != nil {
		return false
	}
	defer tty.Close()
	fg, err := unix.IoctlGetInt(int(tty.Fd()), unix.TIOCGPGRP)
	return err == nil && fg == unix.Getpgrp()
}
