package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/poolagent/poolagent/internal/peer"
	"github.com/poolagent/poolagent/internal/protocol"
)

// socketPair is a connected pair of Unix stream sockets.
func socketPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conns [2]*net.UnixConn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c.(*net.UnixConn)
		t.Cleanup(func() { c.Close() })
	}
	return conns[0], conns[1]
}

// TestMessageBudget: a client that sends messages as fast as it can is
// read no faster than its budget allows: the burst, then the rate.
func TestMessageBudget(t *testing.T) {
	daemonEnd, clientEnd := socketPair(t)
	l := Limits{}.withDefaults()
	go clientEnd.Write([]byte(strings.Repeat(`{"op":"exited"}`+"\n", 100)))
	in := newMsgReader(daemonEnd, l)
	done := make(chan struct{})
	start := time.Now()
	n := 0
	for time.Since(start) < time.Second {
		var r protocol.Request
		if err := in.next(&r, done); err != nil {
			t.Fatal(err)
		}
		n++
	}
	elapsed := time.Since(start).Seconds()
	most := float64(l.MessageBurst) + l.MessagesPerSecond*elapsed + 1
	t.Logf("%d messages read in %.2f s (budget: %d at once, %g a second)", n, elapsed, l.MessageBurst, l.MessagesPerSecond)
	if n < l.MessageBurst || float64(n) > most {
		t.Errorf("read %d messages in %.2f s: want the burst of %d and at most %.0f", n, elapsed, l.MessageBurst, most)
	}
}

// TestMessageLimits: a message longer than protocol.MaxMessageBytes, or
// one that trickles past its deadline, is refused with a reason.
func TestMessageLimits(t *testing.T) {
	l := Limits{Message: 200 * time.Millisecond}.withDefaults()
	t.Run("too long", func(t *testing.T) {
		daemonEnd, clientEnd := socketPair(t)
		go clientEnd.Write([]byte(`{"op":"sql","sql":"` + strings.Repeat("a", protocol.MaxMessageBytes)))
		var r protocol.Request
		err := newMsgReader(daemonEnd, l).next(&r, nil)
		if err == nil || !strings.Contains(err.Error(), "more than 262144 bytes without a newline") {
			t.Fatalf("error %v, want the message refused as too long", err)
		}
	})
	t.Run("trickle", func(t *testing.T) {
		daemonEnd, clientEnd := socketPair(t)
		go func() {
			for _, b := range []byte(`{"op":"exited"}`) {
				if _, err := clientEnd.Write([]byte{b}); err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
		var r protocol.Request
		err := newMsgReader(daemonEnd, l).next(&r, nil)
		if err == nil || !strings.Contains(err.Error(), "no whole message (a JSON object and a newline) within 200ms") {
			t.Fatalf("error %v, want the trickle refused", err)
		}
	})
}

// TestSocketDirRemoved: the daemon removes at exit the socket's directory
// it made (as /run/poolagent), and only that: a directory that was there
// stays, and so does one another file is in.
func TestSocketDirRemoved(t *testing.T) {
	parent := socketDir(t)
	for _, tc := range []struct {
		name  string
		made  bool // the directory is missing before the daemon starts
		other bool // another file is put in it while the daemon runs
		gone  bool
	}{
		{"made", true, false, true},
		{"there before", false, false, false},
		{"made, another file in it", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(parent, strings.ReplaceAll(tc.name, " ", "-"))
			if !tc.made {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			srv, err := New(Config{Socket: filepath.Join(dir, "agent.sock"), LoadSample: 10 * time.Millisecond,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, policyOf(t, ""), newFakeCgroups(t), peer.SystemUsers{}, &fixedLoad{})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ctx) }()
			<-srv.Listening()
			if tc.other {
				if err := os.WriteFile(filepath.Join(dir, "other"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cancel()
			if err := <-served; err != nil {
				t.Fatal(err)
			}
			_, err = os.Stat(dir)
			if gone := errors.Is(err, os.ErrNotExist); gone != tc.gone {
				t.Errorf("directory gone after the daemon: %v, want %v (%v)", gone, tc.gone, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "agent.sock")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("socket left behind: %v", err)
			}
		})
	}
}

// TestListenRefusesNonSocket: a --socket path that names a file that is
// not a socket is refused and left as it was; a stale socket is replaced.
func TestListenRefusesNonSocket(t *testing.T) {
	dir := socketDir(t)
	file := dir + "/pools.sql"
	if err := os.WriteFile(file, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := listen(file); err == nil || !strings.Contains(err.Error(), "exists and is not a socket (a regular file)") {
		t.Fatalf("listen on a regular file: %v, want a refusal", err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "precious" {
		t.Fatalf("the file after the refusal: %q, %v", b, err)
	}
	stale := dir + "/stale.sock"
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	ln, _, err = listen(stale)
	if err != nil {
		t.Fatalf("listen on a stale socket: %v", err)
	}
	ln.Close()
}

// TestStopCutsFirstRequest: once the daemon stops, a connection it has
// counted waits no longer for its first request, even if it is read only
// after the stop: nothing after connect sets the first request's deadline
// again, so none undoes the stop's.
func TestStopCutsFirstRequest(t *testing.T) {
	limits := DefaultLimits
	limits.FirstRequest = time.Hour
	p := newPerUser(limits)
	conn, _ := socketPair(t)
	forget, err := p.connect(1000, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer forget()
	p.stop()
	read := make(chan error, 1)
	go func() {
		var req protocol.Request
		read <- newMsgReader(conn, limits).first(&req)
	}()
	select {
	case err := <-read:
		if !errors.Is(err, errTooSlow) {
			t.Fatalf("first request after the stop: %v, want it cut short (errTooSlow)", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the first request was still awaited 30 s after the stop, with an hour's deadline")
	}
}

// TestFDReaderTakesOneOnlyWhenAsked: a descriptor sent with a message
// read before accept is set (any request but an OpRun query's start) is
// dropped by the kernel and never enters this process's table; once
// accept is set the first one is kept, and any later one dropped again.
func TestFDReaderTakesOneOnlyWhenAsked(t *testing.T) {
	daemonEnd, clientEnd := socketPair(t)
	r := newFDReader(daemonEnd)
	raw, err := clientEnd.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	send := func(msg string) {
		t.Helper()
		var serr error
		raw.Control(func(fd uintptr) {
			serr = unix.Sendmsg(int(fd), []byte(msg+"\n"), unix.UnixRights(0), nil, 0)
		})
		if serr != nil {
			t.Fatal(serr)
		}
	}
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	buf := make([]byte, 512)
	before := fds()
	send(`{"op":"exec"}`)
	if _, err := r.Read(buf); err != nil {
		t.Fatal(err)
	}
	if fd := r.take(); fd >= 0 || fds() != before {
		t.Fatalf("unasked: took descriptor %d, this process has %d descriptors, had %d", fd, fds(), before)
	}
	r.accept.Store(true)
	send(`{"op":"start"}`)
	if _, err := r.Read(buf); err != nil {
		t.Fatal(err)
	}
	fd := r.take()
	if fd < 0 {
		t.Fatal("asked: no descriptor taken")
	}
	unix.Close(fd)
	send(`{"op":"exited"}`)
	if _, err := r.Read(buf); err != nil {
		t.Fatal(err)
	}
	if fd := r.take(); fd >= 0 || fds() != before {
		t.Fatalf("after the one asked for: took descriptor %d, this process has %d descriptors, had %d", fd, fds(), before)
	}
}

// TestSendClearsDeadline: a reply is written within Limits.Write, and no
// write deadline is left in force once it is: a deadline left would wake
// the daemon when it passed, for every open connection of a running query.
func TestSendClearsDeadline(t *testing.T) {
	daemonEnd, clientEnd := socketPair(t)
	const write = time.Second
	se := &session{s: &Server{limits: Limits{Write: write}}, conn: daemonEnd, enc: json.NewEncoder(daemonEnd)}
	if err := se.send(protocol.Reply{Type: protocol.ReplyStarted}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(write + 100*time.Millisecond) // past the reply's deadline
	if _, err := daemonEnd.Write([]byte("\n")); err != nil {
		t.Errorf("a write after the reply's deadline passed: %v, want none in force", err)
	}
	buf := make([]byte, 64)
	if n, err := clientEnd.Read(buf); err != nil || !strings.Contains(string(buf[:n]), protocol.ReplyStarted) {
		t.Errorf("the client read %q, %v: want the reply", buf[:n], err)
	}
}
