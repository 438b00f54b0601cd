package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/protocol"
)

// Why a client's message was not read.
var (
	// errTooLong: a message passed protocol.MaxMessageBytes.
	errTooLong = errors.New("message too long")
	// errTooSlow: a message did not arrive whole in time.
	errTooSlow = errors.New("message too slow")
	// errClosing: the session ended while the reader waited.
	errClosing = errors.New("session over")
)

// msgReader reads a connection's messages, JSON objects one per line,
// within the Limits: none longer than protocol.MaxMessageBytes, the first
// whole within FirstRequest of the connection, a later one whole within
// Message of its first byte, and later ones no faster than the message
// budget. It keeps the descriptor an OpRun query's start sent (fds).
type msgReader struct {
	conn   *net.UnixConn
	fds    *fdReader
	br     *bufio.Reader
	limits Limits
	// The message budget: a token bucket.
	tokens float64
	filled time.Time
}

func newMsgReader(conn *net.UnixConn, l Limits) *msgReader {
	fds := newFDReader(conn)
	return &msgReader{conn: conn, fds: fds, br: bufio.NewReaderSize(fds, 4096), limits: l, tokens: float64(l.MessageBurst), filled: time.Now()}
}

// first reads the connection's first request, within the deadline
// perUser.connect set.
func (r *msgReader) first(req *protocol.Request) error {
	if err := r.read(req, r.limits.FirstRequest); err != nil {
		return err
	}
	r.conn.SetReadDeadline(time.Time{})
	return nil
}

// next reads a later message. The client may stay silent as long as it
// likes (a queued or running query has nothing to say) but, once a
// message begins, it must arrive whole within Limits.Message. A
// connection over its message budget is not read until it has a token
// again, or done is closed.
func (r *msgReader) next(req *protocol.Request, done <-chan struct{}) error {
	if err := r.spend(done); err != nil {
		return err
	}
	if _, err := r.br.Peek(1); err != nil {
		return err
	}
	r.conn.SetReadDeadline(time.Now().Add(r.limits.Message))
	if err := r.read(req, r.limits.Message); err != nil {
		return err
	}
	r.conn.SetReadDeadline(time.Time{})
	return nil
}

// spend takes a token from the message budget, waiting for one if need be.
func (r *msgReader) spend(done <-chan struct{}) error {
	now := time.Now()
	r.tokens = min(float64(r.limits.MessageBurst), r.tokens+now.Sub(r.filled).Seconds()*r.limits.MessagesPerSecond)
	r.filled = now
	if r.tokens < 1 {
		wait := time.Duration((1 - r.tokens) / r.limits.MessagesPerSecond * float64(time.Second))
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-done:
			return errClosing
		case <-t.C:
		}
		r.tokens, r.filled = 1, time.Now()
	}
	r.tokens--
	return nil
}

// read reads one line into req; blank lines are skipped. within is the
// deadline in force, for the error.
func (r *msgReader) read(req *protocol.Request, within time.Duration) error {
	var msg []byte
	for {
		frag, err := r.br.ReadSlice('\n')
		if len(msg)+len(frag) > protocol.MaxMessageBytes {
			return fmt.Errorf("%w: more than %d bytes without a newline (the protocol's limit, protocol.MaxMessageBytes)", errTooLong, protocol.MaxMessageBytes)
		}
		msg = append(msg, frag...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, os.ErrDeadlineExceeded):
			return fmt.Errorf("%w: no whole message (a JSON object and a newline) within %s", errTooSlow, within)
		case errors.Is(err, io.EOF) && len(bytes.TrimSpace(msg)) > 0:
			return fmt.Errorf("read request: %w (a message must end with a newline)", io.ErrUnexpectedEOF)
		case err != nil:
			return fmt.Errorf("read request: %w", err)
		}
		if len(bytes.TrimSpace(msg)) == 0 {
			msg = msg[:0]
			continue
		}
		if err := json.Unmarshal(msg, req); err != nil {
			return fmt.Errorf("read request: %w", err)
		}
		return nil
	}
}

// readErrorCode is the reply code for a first request that could not be
// read.
func readErrorCode(err error) string {
	if errors.Is(err, errTooSlow) {
		return protocol.CodeTimeout
	}
	return protocol.CodeBadRequest
}

// maxReceivedFDs is how many descriptors one read of a client's messages
// accepts: the start request carries one pidfd; more are closed at once.
const maxReceivedFDs = 1

// fdReader reads a client's messages and keeps the descriptor sent with
// them (SCM_RIGHTS) that the start request of an OpRun query carries: its
// child's pidfd. A descriptor is taken into the daemon's table only once
// accept is set (the first request was an OpRun), and only one: every
// other read passes the kernel no room for descriptors, so a descriptor
// sent with any other message is dropped by the kernel without ever being
// the daemon's to close. A close calls the file's flush, which can sleep
// for good (a FUSE server that never answers), whereas the kernel's drop
// only lets go of its reference. Descriptors beyond maxReceivedFDs are
// dropped by the kernel too (MSG_CTRUNC).
type fdReader struct {
	conn   *net.UnixConn
	oob    []byte
	accept atomic.Bool

	mu sync.Mutex
	fd int // -1: none
}

func newFDReader(conn *net.UnixConn) *fdReader {
	return &fdReader{conn: conn, oob: make([]byte, unix.CmsgSpace(4*maxReceivedFDs)), fd: -1}
}

// Read implements io.Reader.
func (r *fdReader) Read(p []byte) (int, error) {
	var oob []byte
	if r.accept.Load() {
		oob = r.oob
	}
	n, oobn, _, _, err := r.conn.ReadMsgUnix(p, oob)
	if oobn > 0 {
		r.keep(oob[:oobn])
	}
	// NOTE: ReadMsgUnix may return n = -1 with an error (a deadline);
	// io.Reader allows no negative count.
	return max(n, 0), err
}

// keep takes the descriptor out of control messages and accepts no
// more: a connection hands the daemon at most one.
func (r *fdReader) keep(oob []byte) {
	r.accept.Store(false)
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds { // one at most: room for one was given
			unix.CloseOnExec(fd)
			r.mu.Lock()
			r.fd = fd
			r.mu.Unlock()
		}
	}
}

// take returns the descriptor last received, -1 if none, and forgets it:
// the caller closes it.
func (r *fdReader) take() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	fd := r.fd
	r.fd = -1
	return fd
}

// close closes a descriptor received and not taken.
func (r *fdReader) close() {
	if fd := r.take(); fd >= 0 {
		unix.Close(fd)
	}
}
