package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/poolagent/poolagent/protocol"
)

// The abuse suite: each test plays a hostile local user against a daemon
// in its own process (abuse_harness_test.go) and checks that the daemon
// keeps answering other clients, that its peak resident set stays under a
// bound, and that it stops cleanly afterwards. docs/security.md lists the
// limits they exercise. The bounds are generous invariants (an idle daemon
// of this test binary holds about 15 MiB), not measurements.

// abuseUID is the uid the tests' attackers run as when the daemon must
// tell them from the test's own (root) clients: any uid works, none needs
// a user entry.
const abuseUID = 60001

// TestAbuseFDFlood: connections flood the socket past the daemon's file
// descriptor limit. The accept loop keeps going: it logs once, refuses
// the connections it has no descriptor for with a message, serves a query
// that was running before the flood to its end, and answers again once
// the flood is released.
func TestAbuseFDFlood(t *testing.T) {
	d := startDaemonProc(t, daemonSpec{
		Pools:  olapPool(1, 0, ""),
		NoFile: 96,
		// Above the descriptor limit, so that it is the descriptors
		// that run out.
		Limits: Limits{ConnsPerUID: 10000, FirstRequest: time.Minute},
	})
	before := startInProc(t, d.socket, "olap")
	waitFor(t, "the query before the flood to start", before.isStarted)

	f := startFlood(t, floodSpec{Network: "unix", Addr: d.socket, Conns: 300, Read: true}, 0)
	waitFor(t, "the daemon to run out of descriptors", func() bool { return d.logged(msgOutOfFDs) == 1 })
	waitFor(t, "flooding connections refused", func() bool { return f.poll(t).Codes[protocol.CodeLimit] > 0 })
	st := f.poll(t)
	t.Logf("flood: %d connections made, %d refused for want of descriptors: %q", st.Opened, st.Codes[protocol.CodeLimit], st.FirstErrors)

	// The query that was running is served to its end meanwhile.
	before.release.Close()
	<-before.done
	if before.err != nil {
		t.Fatalf("query running during the flood: %v", before.err)
	}

	f.release()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := ask(d.socket, protocol.Request{Op: protocol.OpPools}, time.Second)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon does not answer 10 s after the flood ended: %v\n%s", err, d.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
	after := startInProc(t, d.socket, "olap")
	waitFor(t, "a query after the flood to start", after.isStarted)
	after.release.Close()
	<-after.done
	if after.err != nil {
		t.Fatalf("query after the flood: %v", after.err)
	}
	// The burst's end is logged at the first connection accepted a
	// second (longestAcceptPause) after the last failure.
	time.Sleep(longestAcceptPause)
	d.answers(t)
	waitFor(t, "the end of the burst logged", func() bool { return d.logged(msgFDsBack) == 1 })
	if n, m := d.logged(msgOutOfFDs), d.logged(msgFDsBack); n != 1 || m != 1 {
		t.Errorf("logged %d exhaustion and %d recovery records, want one of each for one burst:\n%s", n, m, d.tail())
	}
	d.checkPeak(t, 64<<20)
}

// TestAbuseConnsPerUser: one user opens far more connections than its
// share; the rest are refused with a message naming the limit, the daemon
// never runs out of descriptors, and other users are answered throughout.
func TestAbuseConnsPerUser(t *testing.T) {
	requireRoot(t)
	// Descriptors for all 300 at once: the connections over the limit
	// are accepted before they are refused.
	d := startDaemonProc(t, daemonSpec{Pools: olapPool(1, 0, ""), NoFile: 1024, Limits: Limits{ConnsPerUID: 32, FirstRequest: time.Minute}})
	f := startFlood(t, floodSpec{Network: "unix", Addr: d.socket, Conns: 300, Read: true}, abuseUID)
	for range 5 {
		d.answers(t)
		time.Sleep(50 * time.Millisecond)
	}
	waitFor(t, "the connections over the limit to be refused", func() bool { return f.poll(t).Codes[protocol.CodeLimit] == 300-32 })
	if st := f.poll(t); st.Opened != 300 || !strings.Contains(st.FirstErrors[0], "uid 60001 has 32 connections open to the daemon (at most 32 per user)") {
		t.Errorf("flood %+v: want 300 made, the refusals naming the limit", st)
	}
	if n := d.logged(msgOutOfFDs); n != 0 {
		t.Errorf("the daemon ran out of descriptors (%d records)", n)
	}
	f.release()
	d.answers(t)
	d.checkPeak(t, 64<<20)
}

// TestAbuseHugeRequest: a 300 MB request is refused once it passes
// protocol.MaxMessageBytes; the daemon does not buffer it.
func TestAbuseHugeRequest(t *testing.T) {
	d := startDaemonProc(t, daemonSpec{Pools: olapPool(1, 0, "")})
	conn, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	const total = 300 << 20
	sent, err := io.WriteString(conn, `{"op":"sql","source":"-e","sql":"`)
	chunk := bytes.Repeat([]byte("a"), 1<<20)
	for err == nil && sent < total {
		var n int
		n, err = conn.Write(chunk)
		sent += n
	}
	t.Logf("the daemon stopped reading after %d of %d bytes", sent, total)
	if sent >= total {
		t.Fatal("the daemon read the whole 300 MB request")
	}
	var r protocol.Reply
	if err := json.NewDecoder(bufio.NewReader(conn)).Decode(&r); err == nil {
		if r.Code != protocol.CodeBadRequest || !strings.Contains(r.Error, "more than 262144 bytes") {
			t.Errorf("reply %+v, want bad_request naming the limit", r)
		}
	} else if !errors.Is(err, net.ErrClosed) {
		t.Logf("no refusal read (the daemon closed the connection on the unread request): %v", err)
	}
	d.answers(t)
	d.checkPeak(t, 64<<20)
}

// Log messages the tests count.
const (
	msgOutOfFDs = "out of file descriptors: connections are refused until some close"
	msgFDsBack  = "file descriptors available again: accepting connections"
)
