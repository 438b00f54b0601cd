package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/metrics"
	"github.com/poolagent/poolagent/planner"
)

// fakeDaemon serves nothing: it is listening at once and until ctx ends.
type fakeDaemon struct {
	listening chan struct{}
	// reloads are the results of the reloads asked, in turn.
	reloads []error
	// unhealthy, while set, fails the health check.
	unhealthy atomic.Bool
}

func (f *fakeDaemon) MetricsSnapshot() (metrics.Snapshot, error) { return metrics.Snapshot{}, nil }
func (f *fakeDaemon) Listening() <-chan struct{}                 { return f.listening }
func (f *fakeDaemon) RunPredictor(ctx context.Context, _ time.Duration) {
	<-ctx.Done()
}
func (f *fakeDaemon) Status() string { return "2 pools" }

func (f *fakeDaemon) Serve(ctx context.Context) error {
	close(f.listening)
	<-ctx.Done()
	return nil
}

func (f *fakeDaemon) Reload() ([]planner.Warning, error) {
	err := f.reloads[0]
	f.reloads = f.reloads[1:]
	return nil, err
}

func (f *fakeDaemon) Healthy() error {
	if f.unhealthy.Load() {
		return errors.New("stuck")
	}
	return nil
}

// TestRunNotifies drives Run as systemd would: READY=1 once the daemon
// listens, WATCHDOG=1 only while it is healthy, RELOADING=1 and READY=1
// with the result on each SIGHUP, STOPPING=1 on SIGTERM, after which Run
// returns.
func TestRunNotifies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	t.Setenv("WATCHDOG_USEC", "100000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	// recv returns the next notification other than WATCHDOG=1, and how
	// many of those came first.
	recv := func() (string, int) {
		t.Helper()
		pings := 0
		for {
			sock.SetReadDeadline(time.Now().Add(10 * time.Second))
			buf := make([]byte, 4096)
			n, err := sock.Read(buf)
			if err != nil {
				t.Fatalf("no notification: %v", err)
			}
			if got := string(buf[:n]); got != "WATCHDOG=1" {
				return got, pings
			}
			pings++
		}
	}

	d := &fakeDaemon{listening: make(chan struct{}), reloads: []error{errors.New("reload refused, running pools kept: pools.sql:1:1: bad"), nil}}
	d.unhealthy.Store(true)
	sigs := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), d, Options{Signals: sigs, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}()
	if got, _ := recv(); got != "READY=1\nSTATUS=2 pools" {
		t.Fatalf("first notification %q", got)
	}
	// Unhealthy for 300 ms, three watchdog intervals: no ping.
	time.Sleep(300 * time.Millisecond)
	sigs <- syscall.SIGHUP
	got, pings := recv()
	if got != "RELOADING=1" || pings != 0 {
		t.Fatalf("notification %q after %d pings from an unhealthy daemon, want RELOADING=1 and none", got, pings)
	}
	if got, _ := recv(); got != "READY=1\nSTATUS=reload refused, running pools kept: pools.sql:1:1: bad" {
		t.Fatalf("after a refused reload %q", got)
	}
	d.unhealthy.Store(false)
	time.Sleep(300 * time.Millisecond)
	sigs <- syscall.SIGHUP
	if got, pings := recv(); got != "RELOADING=1" || pings == 0 {
		t.Fatalf("notification %q after %d pings from a healthy daemon, want RELOADING=1 after some", got, pings)
	}
	if got, _ := recv(); got != "READY=1\nSTATUS=reloaded: 2 pools" {
		t.Fatalf("after a reload %q", got)
	}
	sigs <- syscall.SIGTERM
	if got, _ := recv(); !strings.HasPrefix(got, "STOPPING=1\nSTATUS=stopping on terminated (2 pools)") {
		t.Fatalf("on SIGTERM %q", got)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10 s of SIGTERM")
	}
}
