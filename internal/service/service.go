// Package service runs the daemon as a system service: it serves the
// daemon's socket and, when asked, its metrics endpoint; tells systemd
// READY=1, RELOADING=1, STOPPING=1 and STATUS=; feeds the watchdog while
// the daemon is healthy; and reloads on SIGHUP and stops on SIGTERM or
// SIGINT. It knows the daemon only by the Daemon interface.
package service

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/poolagent/poolagent/internal/guard"
	"github.com/poolagent/poolagent/internal/metrics"
	"github.com/poolagent/poolagent/internal/systemd"
	"github.com/poolagent/poolagent/planner"
)

// Daemon is what the service runs: *daemon.Server.
type Daemon interface {
	// MetricsSnapshot is what the metrics endpoint serves.
	metrics.Source
	// Serve serves the socket until ctx ends.
	Serve(ctx context.Context) error
	// Listening is closed once Serve accepts clients.
	Listening() <-chan struct{}
	// RunPredictor steps the throttling prediction every interval until
	// ctx ends.
	RunPredictor(ctx context.Context, every time.Duration)
	// Reload reads the pool file and the persisted changes again.
	Reload() ([]planner.Warning, error)
	// Status is the daemon's state in one line, for STATUS=.
	Status() string
	// Healthy fails when the daemon is stuck (see daemon.Server.Healthy).
	Healthy() error
}

// Options tune Run.
type Options struct {
	// Log receives the service's events; slog.Default() when nil.
	Log *slog.Logger
	// MetricsListen is the address of the Prometheus endpoint, such as
	// 127.0.0.1:9561; "" serves none.
	MetricsListen string
	// PredictEvery is the interval of the throttling prediction; 1 s when 0.
	PredictEvery time.Duration
	// Signals replaces the process's SIGHUP, SIGTERM and SIGINT when set
	// (tests).
	Signals <-chan os.Signal
}

// Run runs d as a service until SIGTERM or SIGINT or the end of ctx. It
// serves the socket and, when asked, the metrics; tells systemd (when
// systemd started it) READY=1 with a status line once the socket accepts
// clients (the first apply succeeded when d was made), WATCHDOG=1 while
// the daemon is healthy, and STOPPING=1; and on SIGHUP reloads the pool
// file and the persisted changes: RELOADING=1, then READY=1 with the
// result in STATUS=, so a refused reload, which keeps the running pools,
// says why there and in the log. On stop, queued clients are told the
// daemon is stopping; running queries keep running and the next daemon
// adopts them.
func Run(ctx context.Context, d Daemon, opt Options) error {
	// Deferred calls run last first: the goroutines are told to end
	// (cancel) before Run waits for them.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := runner{d: d, log: opt.Log}
	if r.log == nil {
		r.log = slog.Default()
	}
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
	healthy := d.Healthy
	if opt.MetricsListen != "" {
		var err error
		if healthy, err = r.serveMetrics(ctx, &wg, opt.MetricsListen, failed); err != nil {
			return err
		}
	}
	wg.Go(func() { d.RunPredictor(ctx, opt.PredictEvery) })

	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx) }()
	select {
	case <-d.Listening():
	case err := <-served:
		return err
	}
	r.log.Info("ready", "status", d.Status())
	r.notified(r.notify.Ready(d.Status()))
	wg.Go(func() {
		report := func(err error) { r.log.Error("watchdog", "err", err) }
		if err := systemd.Watchdog(ctx, healthy, report); err != nil {
			report(err)
		}
	})
	return r.until(ctx, cancel, served, failed, sigs)
}

// serveMetrics serves the metrics endpoint at addr on wg until ctx ends,
// sending a failure to failed. The daemon is then healthy only while the
// endpoint's listener is not stalled too: healthy says so.
func (r runner) serveMetrics(ctx context.Context, wg *sync.WaitGroup, addr string, failed chan<- error) (healthy func() error, err error) {
	ln, err := listenMetrics(addr, r.log)
	if err != nil {
		return nil, err
	}
	wg.Go(func() {
		defer ln.DropReserve()
		if err := metrics.Serve(ctx, ln, r.d); err != nil {
			failed <- fmt.Errorf("metrics endpoint: %w", err)
		}
	})
	return func() error {
		if err := ln.Stalled(time.Now()); err != nil {
			return err
		}
		return r.d.Healthy()
	}, nil
}

// until runs the ready service until the socket's server ends (its result
// is Run's), the metrics endpoint fails, ctx ends, or SIGTERM or SIGINT
// stops it (STOPPING=1); SIGHUP reloads. Stopping cancels the server and
// waits for it.
func (r runner) until(ctx context.Context, cancel context.CancelFunc, served <-chan error, failed <-chan error, sigs <-chan os.Signal) error {
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
			if sig == syscall.SIGHUP {
				r.reload()
				continue
			}
			r.log.Info("stopping", "signal", sig.String(), "status", r.d.Status())
			r.notified(r.notify.Stopping(fmt.Sprintf("stopping on %v (%s): queued clients are told, running queries keep running", sig, r.d.Status())))
			cancel()
			return <-served
		}
	}
}

// runner is what Run tells systemd and the log.
type runner struct {
	d      Daemon
	log    *slog.Logger
	notify systemd.Notifier
}

// notified logs a notification that could not be sent: that does not
// stop the daemon.
func (r runner) notified(err error) {
	if err != nil {
		r.log.Warn("systemd notification", "err", err)
	}
}

// reload reloads the daemon on SIGHUP: RELOADING=1, then READY=1 either
// way (the daemon runs on, with the new pools or the old) and the result
// in STATUS=.
func (r runner) reload() {
	r.notified(r.notify.Reloading())
	warns, err := r.d.Reload()
	for _, w := range warns {
		r.log.Warn("pool file", "warning", w.String())
	}
	status := "reloaded: " + r.d.Status()
	if err != nil {
		status = err.Error()
	}
	r.notified(r.notify.Ready(status))
}

// metricsRefusal is what a connection to the metrics endpoint gets when
// the daemon has no descriptor for it.
var metricsRefusal = func() string {
	body := "poolagent daemon: out of file descriptors; retry\n"
	return fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

// listenMetrics opens the metrics endpoint at addr, guarded against
// descriptor exhaustion (metrics.Serve caps its connections).
func listenMetrics(addr string, log *slog.Logger) (*guard.Listener, error) {
	tcp, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics endpoint: %w", err)
	}
	ln, err := guard.New(tcp, "metrics "+tcp.Addr().String(), log, []byte(metricsRefusal))
	if err != nil {
		tcp.Close()
		return nil, fmt.Errorf("metrics endpoint: %w", err)
	}
	log.Info("metrics endpoint", "url", "http://"+ln.Addr().String()+"/metrics")
	return ln, nil
}
