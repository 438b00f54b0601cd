package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/poolagent/poolagent/internal/version"
)

// Handler serves the Prometheus text exposition of src at /metrics:
// poolagent's own metrics (docs/metrics.md), poolagent_build_info, and the
// client library's standard Go runtime (go_*) and process (process_*)
// collectors that every Go exporter has.
func Handler(src Source) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(src), NewBuildInfo(version.Current()),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.HTTPErrorOnError,
	}))
	return mux
}

// The endpoint's bounds on a client (docs/security.md): a request's
// headers must arrive within ReadHeaderTimeout and the whole request within
// ReadTimeout, the reply be read within WriteTimeout, a kept-alive
// connection is closed after IdleTimeout without a request, and headers
// are at most MaxHeaderBytes.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	WriteTimeout      = 30 * time.Second
	IdleTimeout       = 15 * time.Second
	MaxHeaderBytes    = 8 << 10
)

// Serve serves [Handler] on ln until ctx is done, then shuts the server down
// and returns nil; any other end of serving is returned as an error.
func Serve(ctx context.Context, ln net.Listener, src Source) error {
	srv := &http.Server{
		Handler:           Handler(src),
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdown); err != nil {
			return err
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}
