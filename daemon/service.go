package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/poolagent/poolagent/metrics"
	"github.com/poolagent/poolagent/systemd"
)

// ServiceOptions tune [Server.RunService].
type ServiceOptions struct {
	// MetricsListen is the address of the Prometheus endpoint, such as
	// 127.0.0.1:9561; "" serves none.
	MetricsListen string
	// PredictEvery is the interval of the throttling prediction; 1 s when 0.
	PredictEvery time.Duration
	// Signals replaces the process's SIGHUP, SIGTERM and SIGINT when set
	// (tests).
	Signals <-chan os.Signal
}

// healthTimeout bounds the watchdog's health check.
const healthTimeout = 5 * time.Second

// RunService runs the daemon as a service until SIGTERM or SIGINT or the
// end of ctx. It serves the socket and, when asked, the metrics; tells
// systemd (when systemd started it) READY=1 with a status line once the
// socket accepts clients (the first apply succeeded in New), WATCHDOG=1
// while the daemon answers, and STOPPING=1; and on SIGHUP reloads the pool
// file and the persisted changes (see Reload): RELOADING=1, then READY=1
// with the result in STATUS=, so a refused reload, which keeps the running
// pools, says why there and in the log. On stop, queued clients are told
// the daemon is stopping; running queries keep running and the next daemon
// adopts them.
func (s *Server) RunService(ctx context.Context, opt ServiceOptions) error {
	// Deferred calls run last first: the goroutines are told to end
	// (cancel) before RunService waits for them.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var notify systemd.Notifier
	sigs := opt.Signals
	if sigs == nil {
		ch := make(chan os.Signal, 4)
		signal.Notify(ch, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
		defer signal.Stop(ch)
		sigs = ch
	}
	if opt.PredictEvery == 0 {
		opt.PredictEvery = time.Second
	}
	failed := make(chan error, 1)
	if opt.MetricsListen != "" {
		tcp, err := net.Listen("tcp", opt.MetricsListen)
		if err != nil {
			return fmt.Errorf("metrics endpoint: %w", err)
		}
		ln, err := guard(tcp, "metrics "+tcp.Addr().String(), s.cfg.Log, []byte(metricsRefusal))
		if err != nil {
			tcp.Close()
			return fmt.Errorf("metrics endpoint: %w", err)
		}
		ln.capConns(metricsConns)
		s.cfg.Log.Info("metrics endpoint", "url", "http://"+ln.Addr().String()+"/metrics")
		s.loops.Store(ln, struct{}{})
		wg.Go(func() {
			defer ln.dropReserve()
			defer s.loops.Delete(ln)
			if err := metrics.Serve(ctx, ln, s); err != nil {
				failed <- fmt.Errorf("metrics endpoint: %w", err)
			}
		})
	}
	wg.Go(func() { s.RunPredictor(ctx, opt.PredictEvery) })

	listening := make(chan struct{})
	s.cfg.Listening = func() { close(listening) }
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	select {
	case <-listening:
	case err := <-served:
		return err
	}
	// A notification that cannot be sent does not stop the daemon; it is
	// logged.
	notified := func(err error) {
		if err != nil {
			s.cfg.Log.Warn("systemd notification", "err", err)
		}
	}
	s.cfg.Log.Info("ready", "socket", s.cfg.Socket, "status", s.Status())
	notified(notify.Ready(s.Status()))
	wg.Go(func() {
		report := func(err error) { s.cfg.Log.Error("watchdog", "err", err) }
		if err := systemd.Watchdog(ctx, s.healthy, report); err != nil {
			report(err)
		}
	})
	for {
		select {
		case err := <-served:
			return err
		case err := <-failed:
			cancel()
			<-served
			return err
		case <-ctx.Done():
			return <-served
		case sig := <-sigs:
			if sig != syscall.SIGHUP {
				s.cfg.Log.Info("stopping", "signal", sig.String(), "status", s.Status())
				notified(notify.Stopping(fmt.Sprintf("stopping on %v (%s): queued clients are told, running queries keep running", sig, s.Status())))
				cancel()
				return <-served
			}
			notified(notify.Reloading())
			warns, err := s.Reload()
			for _, w := range warns {
				s.cfg.Log.Warn("pool file", "warning", w.String())
			}
			status := "reloaded: " + s.Status()
			if err != nil {
				status = err.Error()
			}
			// READY=1 ends the reload either way: the daemon runs on,
			// with the new pools or the old.
			notified(notify.Ready(status))
		}
	}
}

// metricsConns caps the metrics endpoint's open connections: beyond it,
// clients wait in the kernel's backlog (docs/security.md).
const metricsConns = 256

// metricsRefusal is what a connection to the metrics endpoint gets when
// the daemon has no descriptor for it.
var metricsRefusal = func() string {
	body := "poolagent daemon: out of file descriptors; retry\n"
	return fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

// healthy reports whether every accept loop is at accept or has just left
// it (none stalled: see guardedListener.stalled), the admission state can
// be taken within healthTimeout, and the pool root it has open is still
// the one at its path: a daemon that stopped accepting, is stuck holding
// the state, or writes below a removed pool root (where every placement
// fails) gets no watchdog ping, and systemd restarts it.
func (s *Server) healthy() error {
	now := time.Now()
	var stalled error
	s.loops.Range(func(k, _ any) bool {
		stalled = k.(*guardedListener).stalled(now)
		return stalled == nil
	})
	if stalled != nil {
		return stalled
	}
	if rw, ok := s.cg.(rootWatcher); ok {
		if err := rw.RootInPlace(); err != nil {
			return fmt.Errorf("%w; a restart of the daemon makes it again", err)
		}
	}
	done := make(chan struct{})
	go func() {
		s.reg.mu.Lock()
		s.reg.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(healthTimeout):
		return errors.New("the admission state has been locked for over 5s")
	}
}
