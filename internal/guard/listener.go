// Package guard keeps an accept loop serving when the process runs out of
// file descriptors, caps the connections it holds open, and says when the
// loop stopped coming back to accept (for a health check).
package guard

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// LongestPause is the longest pause of an accept loop out of file
// descriptors between tries: from firstAcceptPause the pauses double up
// to it (as net/http's do for its own loop). The end of a burst of
// exhaustion is logged at the first connection accepted LongestPause
// after the last failure.
const LongestPause = time.Second

const (
	firstAcceptPause = 5 * time.Millisecond
	// shedPerTurn bounds how many pending connections one pause closes.
	shedPerTurn = 64
	// acceptStall is how long an accept loop may stay away from accept
	// before Stalled says it is stuck.
	acceptStall = 5 * time.Second
)

// Listener is an accept loop's listener that keeps serving when the
// process runs out of file descriptors (EMFILE, or ENFILE for the host).
// Accept then does not return the error: it logs once per burst, closes a
// reserve descriptor it holds to make room, accepts the pending
// connections it can, writes each a short refusal and closes it (so the
// clients that flood it are told and let go), reopens the reserve, and
// tries again after a pause. It records when the loop last left Accept,
// for a health check (Stalled).
type Listener struct {
	net.Listener
	what    string // "socket /run/poolagent/agent.sock", for the log
	log     *slog.Logger
	refusal []byte // written to each connection closed for want of descriptors
	raw     syscall.RawConn

	// outside is when the loop last returned from Accept with a
	// connection (unix nanoseconds); 0 while it waits in Accept.
	outside atomic.Int64
	closed  chan struct{}
	once    sync.Once

	// Only Accept's goroutine uses these.
	reserve *os.File
	burst   time.Time // when the current burst of exhaustion began
	last    time.Time // when accept last failed for want of descriptors
	shed    int       // connections closed in the burst
}

// New wraps ln, a *net.UnixListener or a *net.TCPListener: what names it
// in the log and errors ("socket /run/poolagent/agent.sock"), and refusal
// is written to each connection closed for want of descriptors.
func New(ln net.Listener, what string, log *slog.Logger, refusal []byte) (*Listener, error) {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("%s: listener %T has no descriptor", what, ln)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	g := &Listener{Listener: ln, what: what, log: log, refusal: refusal, raw: raw, closed: make(chan struct{})}
	if g.reserve, err = os.Open(os.DevNull); err != nil {
		return nil, fmt.Errorf("%s: reserve descriptor: %w", what, err)
	}
	return g, nil
}

// Accept returns the next connection, riding out descriptor exhaustion.
func (g *Listener) Accept() (net.Conn, error) {
	g.outside.Store(0)
	c, err := g.accept()
	g.outside.Store(time.Now().UnixNano())
	return c, err
}

func (g *Listener) accept() (net.Conn, error) {
	pause := firstAcceptPause
	for {
		c, err := g.Listener.Accept()
		if err == nil {
			g.endBurst()
			return c, nil
		}
		if !outOfDescriptors(err) {
			return nil, err
		}
		g.last = time.Now()
		if g.burst.IsZero() {
			g.burst = g.last
			g.log.Error("out of file descriptors: connections are refused until some close", "listener", g.what, "err", err)
		}
		g.shedPending()
		select {
		case <-g.closed:
			return nil, net.ErrClosed
		case <-time.After(pause):
		}
		pause = min(2*pause, LongestPause)
	}
}

// Close closes the listener; Accept returns net.ErrClosed.
func (g *Listener) Close() error {
	g.once.Do(func() { close(g.closed) })
	return g.Listener.Close()
}

// DropReserve closes the reserve descriptor, once the loop has ended.
func (g *Listener) DropReserve() {
	if g.reserve != nil {
		g.reserve.Close()
		g.reserve = nil
	}
}

// outOfDescriptors reports whether an accept failed for want of a file
// descriptor or of the memory for one.
func outOfDescriptors(err error) bool {
	for _, e := range []error{unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// shedPending gives up the reserve descriptor, accepts without waiting
// up to shedPerTurn pending connections, refuses and closes each, and
// takes the reserve again.
func (g *Listener) shedPending() {
	g.DropReserve()
	// The listener is non-blocking: accept4 returns EAGAIN at once when
	// nothing is pending.
	g.raw.Control(func(fd uintptr) {
		for range shedPerTurn {
			nfd, _, err := unix.Accept4(int(fd), unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK)
			if err != nil {
				break
			}
			unix.Write(nfd, g.refusal) // a few bytes into an empty socket: never blocks
			unix.Close(nfd)
			g.shed++
		}
	})
	// If another goroutine took the freed descriptor, the next pause
	// tries again.
	g.reserve, _ = os.Open(os.DevNull)
}

// endBurst logs the end of a burst of exhaustion, if one was on and
// accept has not failed for the longest pause: a burst is one record at
// its start and one at its end, however often descriptors come and go in
// it.
func (g *Listener) endBurst() {
	if g.burst.IsZero() || time.Since(g.last) < LongestPause {
		return
	}
	g.log.Warn("file descriptors available again: accepting connections", "listener", g.what,
		"refused", g.shed, "after", time.Since(g.burst).Round(time.Millisecond))
	g.burst, g.shed = time.Time{}, 0
}

// Stalled reports an accept loop that took a connection and has not come
// back to Accept within acceptStall: it stopped, or is stuck.
func (g *Listener) Stalled(now time.Time) error {
	out := g.outside.Load()
	if out == 0 {
		return nil
	}
	if away := now.Sub(time.Unix(0, out)); away > acceptStall {
		return fmt.Errorf("the accept loop of %s has not come back to accept for %s", g.what, away.Round(time.Second))
	}
	return nil
}
