package systemd

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// listenNotify stands in for systemd: a unixgram socket named by
// $NOTIFY_SOCKET for the rest of the test.
func listenNotify(t *testing.T) *net.UnixConn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return conn
}

// recv reads one datagram, failing the test after a timeout.
func recv(t *testing.T, conn *net.UnixConn, timeout time.Duration) string {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no notification within %s: %v", timeout, err)
	}
	return string(buf[:n])
}

func TestNotifications(t *testing.T) {
	conn := listenNotify(t)
	var n Notifier
	tests := []struct {
		name string
		send func() error
		want string
	}{
		{"ready", func() error { return n.Ready("3 pools applied") }, "READY=1\nSTATUS=3 pools applied"},
		{"status on one line", func() error { return n.Status("reload refused:\npools.sql:3:7: bad\tvalue") }, "STATUS=reload refused: pools.sql:3:7: bad value"},
		{"reloading", n.Reloading, "RELOADING=1"},
		{"stopping", func() error { return n.Stopping("stopping: 2 queued clients told") }, "STOPPING=1\nSTATUS=stopping: 2 queued clients told"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.send(); err != nil {
				t.Fatal(err)
			}
			if got := recv(t, conn, time.Second); got != tc.want {
				t.Errorf("datagram %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNotifyWithoutSocketIsNoop(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	os.Unsetenv("NOTIFY_SOCKET")
	if err := (Notifier{}).Ready("x"); err != nil {
		t.Fatalf("Ready outside systemd: %v", err)
	}
}

func TestNotifySocketGoneIsError(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "missing"))
	if err := (Notifier{}).Ready("x"); err == nil {
		t.Fatal("Ready to a missing socket succeeded")
	}
}

func TestWatchdogPingsWhileHealthy(t *testing.T) {
	conn := listenNotify(t)
	t.Setenv("WATCHDOG_USEC", "100000") // 100 ms: pings every 50 ms
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	var sick atomic.Bool
	reported := make(chan error, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Watchdog(ctx, func() error {
			if sick.Load() {
				return errors.New("admission loop stuck")
			}
			return nil
		}, func(err error) { reported <- err })
	}()
	for range 3 {
		if got := recv(t, conn, 2*time.Second); got != "WATCHDOG=1" {
			t.Fatalf("datagram %q, want WATCHDOG=1", got)
		}
	}
	sick.Store(true)
	// Wait until the watchdog has seen the failure, then no more pings.
	select {
	case err := <-reported:
		if err.Error() != "admission loop stuck" {
			t.Fatalf("reported %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("unhealthy daemon not reported")
	}
	drain(conn)
	conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 64)
	if n, err := conn.Read(buf); err == nil {
		t.Fatalf("pinged %q while unhealthy", buf[:n])
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// drain discards datagrams already queued (a ping sent just before the
// health check failed).
func drain(conn *net.UnixConn) {
	buf := make([]byte, 64)
	for {
		conn.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := conn.Read(buf); err != nil {
			return
		}
	}
}

func TestWatchdogOffReturns(t *testing.T) {
	t.Setenv("WATCHDOG_USEC", "")
	os.Unsetenv("WATCHDOG_USEC")
	if err := Watchdog(context.Background(), func() error { return nil }, func(error) {}); err != nil {
		t.Fatal(err)
	}
}

func TestWatchdogForAnotherProcessReturns(t *testing.T) {
	t.Setenv("WATCHDOG_USEC", "100000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()+1))
	if err := Watchdog(context.Background(), func() error { return nil }, func(error) {}); err != nil {
		t.Fatal(err)
	}
}
