package metrics

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/poolagent/poolagent/internal/version"
)

// Handler serves the Prometheus text exposition of src at /metrics:
// poolagent's own metrics (docs/metrics.md), poolagent_build_info, and the
// client library's standard Go runtime (go_*) and process (process_*)
// collectors that every Go exporter has. Scrapes share gathers (see
// [Exposer]).
func Handler(src Source) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(src), NewBuildInfo(version.Current()),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", NewExposer(reg))
	return mux
}

// The endpoint's bounds on its clients (docs/security.md): a request's
// headers must arrive within ReadHeaderTimeout and the whole request within
// ReadTimeout, the reply be read within WriteTimeout, a kept-alive
// connection is closed after IdleTimeout without a request, headers are at
// most MaxHeaderBytes, and at most MaxConns connections are open at once:
// one more is answered 503 and closed.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	WriteTimeout      = 10 * time.Second
	IdleTimeout       = 15 * time.Second
	MaxHeaderBytes    = 8 << 10
	MaxConns          = 64
)

// The bounds on the work and memory of scrapes (see [Exposer]): a
// gather's output answers the scrapes that arrive within ReuseFor of its
// start, or within ReuseGathers times the gather's own duration when that
// is longer (so gathering takes at most about 1/ReuseGathers of one CPU
// however often scrapes come); and at most MaxOutputs gathers' outputs are
// held by replies being written: past that a scrape gets the latest
// output, however old, rather than a new gather.
const (
	ReuseFor     = 250 * time.Millisecond
	ReuseGathers = 10
	MaxOutputs   = 2
)

// The replies' pace: all together, replies are written at ReplyBytesPerSecond
// at most, each waiting its turn (first come, first served); a reply whose
// turn is more than MaxReplyWait away is answered 503 at once instead. So
// scrapers in a loop cost the daemon a bounded amount of copying however
// many they are, and a scraper among them waits at most MaxReplyWait.
const (
	ReplyBytesPerSecond = 32 << 20
	MaxReplyWait        = 5 * time.Second
)

// Exposer is an http.Handler serving a gatherer's metrics in the text
// format (version 0.0.4), gzipped when the client accepts it. A scrape
// costs the daemon one gather and one encoding only when no other has
// been made in the last ReuseFor: one gather runs at a time, scrapes
// arriving during it wait for it and share its output, and the encoded
// bytes are written to every reply from the one copy. So any number of
// scrapers in a loop cost at most a gather every ReuseFor, and replies
// nobody reads hold at most MaxOutputs encoded outputs, however many they
// are.
type Exposer struct {
	g prometheus.Gatherer

	mu     sync.Mutex
	latest *output
	flight *flight // the gather under way; nil when none
	// held counts the outputs replies are writing.
	held int
	// turn is when the next reply may be written (see ReplyBytesPerSecond).
	turn time.Time
}

// NewExposer serves g's metrics.
func NewExposer(g prometheus.Gatherer) *Exposer { return &Exposer{g: g} }

// output is one gather's encoded text, shared by the replies serving it.
type output struct {
	// start is when the gather began; it answers scrapes until fresh.
	start, fresh time.Time
	// text is the exposition, zipped the same gzipped.
	text, zipped []byte
	err          error
	// writers counts the replies writing it (Exposer.mu).
	writers int
}

// flight is a gather under way; done is closed once out is set.
type flight struct {
	done chan struct{}
	out  *output
}

// take returns the output a scrape at now serves, held until release.
func (e *Exposer) take(now time.Time) *output {
	e.mu.Lock()
	if o := e.latest; o != nil && (now.Before(o.fresh) || e.held >= MaxOutputs) {
		e.holdLocked(o)
		e.mu.Unlock()
		return o
	}
	if f := e.flight; f != nil {
		e.mu.Unlock()
		<-f.done
		e.mu.Lock()
		e.holdLocked(f.out)
		e.mu.Unlock()
		return f.out
	}
	f := &flight{done: make(chan struct{})}
	e.flight = f
	e.mu.Unlock()

	f.out = e.gather(now)
	e.mu.Lock()
	e.latest, e.flight = f.out, nil
	e.holdLocked(f.out)
	e.mu.Unlock()
	close(f.done)
	return f.out
}

// holdLocked counts a reply writing o; e.mu is held.
func (e *Exposer) holdLocked(o *output) {
	if o.writers == 0 {
		e.held++
	}
	o.writers++
}

// release ends a reply's hold on o.
func (e *Exposer) release(o *output) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if o.writers--; o.writers == 0 {
		e.held--
	}
}

// wait waits for the turn of a reply of n bytes: false when the turn is
// past MaxReplyWait or the request ended first (its time is then given
// back).
func (e *Exposer) wait(r *http.Request, n int) bool {
	e.mu.Lock()
	now := time.Now()
	start := now
	if e.turn.After(now) {
		start = e.turn
	}
	if start.Sub(now) > MaxReplyWait {
		e.mu.Unlock()
		return false
	}
	took := time.Duration(n) * time.Second / ReplyBytesPerSecond
	e.turn = start.Add(took)
	e.mu.Unlock()
	if start == now {
		return true
	}
	t := time.NewTimer(start.Sub(now))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		// The reply will not be written: its time goes to the
		// replies that come next (those already waiting keep their
		// turns), so a scraper that hangs up while it waits, as
		// every one of a flood does when it ends, does not keep
		// others waiting.
		e.mu.Lock()
		e.turn = e.turn.Add(-took)
		e.mu.Unlock()
		return false
	}
}

// gather gathers the metrics and encodes them, plain and gzipped.
func (e *Exposer) gather(start time.Time) *output {
	o := &output{start: start}
	began := time.Now()
	if o.text, o.err = e.encode(); o.err == nil {
		var b bytes.Buffer
		z := gzip.NewWriter(&b)
		z.Write(o.text) // a bytes.Buffer takes every byte
		z.Close()
		o.zipped = b.Bytes()
	}
	o.fresh = start.Add(max(ReuseFor, ReuseGathers*time.Since(began)))
	return o
}

// encode gathers and encodes the metrics in the text format.
func (e *Exposer) encode() ([]byte, error) {
	families, err := e.g.Gather()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range families {
		if err := enc.Encode(mf); err != nil {
			return nil, fmt.Errorf("encode %s: %w", mf.GetName(), err)
		}
	}
	return b.Bytes(), nil
}

// ServeHTTP answers a scrape: the latest output in its turn, 503 when
// its turn is too far, or a gather's failure as 500 with the error.
func (e *Exposer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o := e.take(time.Now())
	defer e.release(o)
	if o.err != nil {
		http.Error(w, "An error has occurred while serving metrics:\n\n"+o.err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	body := o.text
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		body = o.zipped
		h.Set("Content-Encoding", "gzip")
	}
	if !e.wait(r, len(body)) {
		h.Del("Content-Encoding")
		h.Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("poolagent daemon: the metrics endpoint is busy writing %d MiB a second of replies, the most it writes; retry", ReplyBytesPerSecond>>20),
			http.StatusServiceUnavailable)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	// A write of the whole slice goes from it to the connection: no
	// reply copies the output.
	w.Write(body)
}

// acceptsGzip reports whether an Accept-Encoding header names gzip with a
// weight above 0.
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		name, params, _ := strings.Cut(part, ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		q, ok := strings.CutPrefix(strings.TrimSpace(params), "q=")
		if w, err := strconv.ParseFloat(q, 64); ok && err == nil && w == 0 {
			return false
		}
		return true
	}
	return false
}

// refusal is what a connection past MaxConns is told.
var refusal = func() []byte {
	body := fmt.Sprintf("poolagent daemon: %d metrics connections are open, the most it serves at once; retry\n", MaxConns)
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

// capped is a listener that keeps at most cap(slots) connections open:
// one past them is written refusal and closed at once.
type capped struct {
	net.Listener
	slots chan struct{}
}

func (l *capped) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &slotConn{Conn: c, free: sync.OnceFunc(func() { <-l.slots })}, nil
		default:
			// A few bytes into a new connection's empty buffer: the
			// deadline is never reached but by a broken peer.
			c.SetWriteDeadline(time.Now().Add(time.Second))
			c.Write(refusal)
			c.Close()
		}
	}
}

// slotConn gives its slot back when closed.
type slotConn struct {
	net.Conn
	free func()
}

func (c *slotConn) Close() error {
	c.free()
	return c.Conn.Close()
}

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
	go func() { done <- srv.Serve(&capped{Listener: ln, slots: make(chan struct{}, MaxConns)}) }()
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
