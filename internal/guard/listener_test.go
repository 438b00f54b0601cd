package guard

import (
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStalled: a loop waiting in Accept is not stalled; one that took a
// connection and has not come back within acceptStall is, and the error
// names it.
func TestStalled(t *testing.T) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "s.sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(ln, "socket s.sock", slog.Default(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	defer g.DropReserve()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := g.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	time.Sleep(10 * time.Millisecond)
	if err := g.Stalled(time.Now().Add(time.Hour)); err != nil {
		t.Fatalf("a loop waiting in accept: %v", err)
	}
	c, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	(<-accepted).Close()
	if err := g.Stalled(time.Now()); err != nil {
		t.Fatalf("a loop just out of accept: %v", err)
	}
	err = g.Stalled(time.Now().Add(2 * acceptStall))
	if err == nil || !strings.Contains(err.Error(), "the accept loop of socket s.sock has not come back to accept") {
		t.Fatalf("a loop away for twice acceptStall: %v, want it named", err)
	}
}
