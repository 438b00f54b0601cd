package metrics

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// countingSource is fixture() whose host CPUs are the number of the call,
// so that outputs of different gathers differ; it counts the calls under
// way at once, and each call waits for gate when gate is not nil.
type countingSource struct {
	calls, now, most atomic.Int64
	gate             chan struct{}
}

func (c *countingSource) MetricsSnapshot() (Snapshot, error) {
	n := c.calls.Add(1)
	now := c.now.Add(1)
	defer c.now.Add(-1)
	for most := c.most.Load(); now > most && !c.most.CompareAndSwap(most, now); most = c.most.Load() {
	}
	if c.gate != nil {
		<-c.gate
	}
	s := fixture()
	s.Host.CPUs = float64(n)
	return s, nil
}

func exposerOf(src Source) *Exposer {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(src))
	return NewExposer(reg)
}

// TestExposerSharesGathers: scrapes arriving while a gather runs wait for
// it and are answered with its output; only one gather runs at a time.
func TestExposerSharesGathers(t *testing.T) {
	src := &countingSource{gate: make(chan struct{})}
	srv := httptest.NewServer(exposerOf(src))
	defer srv.Close()
	const n = 20
	bodies := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, err := http.Get(srv.URL)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			bodies[i], _ = io.ReadAll(resp.Body)
		})
	}
	// Every scrape has arrived (the first gathers, the rest wait) before
	// the gather may end.
	waitUntil(t, func() bool { return src.calls.Load() == 1 })
	time.Sleep(100 * time.Millisecond)
	close(src.gate)
	wg.Wait()
	if calls, most := src.calls.Load(), src.most.Load(); calls != 1 || most != 1 {
		t.Errorf("%d scrapes at once gathered %d times, %d at once; want once", n, calls, most)
	}
	for i, b := range bodies {
		if !bytes.Contains(b, []byte("\npoolagent_host_cpus 1\n")) || !bytes.Equal(b, bodies[0]) {
			t.Fatalf("scrape %d: %q..., want the one gather's output", i, b[:min(len(b), 200)])
		}
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
	}
}

// TestExposerReuse: an output answers the scrapes within ReuseFor of its
// gather (longer, if the gather itself was slow: each scrape is then
// timed against the output's own freshness, so a slow machine does not
// decide the test); later ones gather again, unless MaxOutputs outputs
// are being written: then they get the latest output, however old.
func TestExposerReuse(t *testing.T) {
	src := &countingSource{}
	e := exposerOf(src)
	t0 := time.Now()
	first := e.take(t0)
	if first.fresh.Before(t0.Add(ReuseFor)) {
		t.Errorf("an output is fresh until %v after its gather, want at least ReuseFor (%v)", first.fresh.Sub(t0), ReuseFor)
	}
	if again := e.take(t0.Add(ReuseFor / 2)); again != first {
		t.Errorf("a scrape within ReuseFor gathered again")
	}
	later := first.fresh.Add(time.Millisecond)
	second := e.take(later)
	if second == first || src.calls.Load() != 2 {
		t.Fatalf("a scrape after the output's freshness did not gather again (%d gathers)", src.calls.Load())
	}
	// first and second are held (being written): MaxOutputs of them.
	stale := second.fresh.Add(time.Millisecond)
	if held := e.take(stale); held != second || src.calls.Load() != 2 {
		t.Errorf("with %d outputs being written a scrape gathered anew (%d gathers), want the latest output", MaxOutputs, src.calls.Load())
	}
	e.release(first)
	e.release(first)
	if third := e.take(stale); third == second || src.calls.Load() != 3 {
		t.Errorf("with one output being written a stale scrape did not gather (%d gathers)", src.calls.Load())
	}
}

// TestExposerPace: replies take turns at ReplyBytesPerSecond; one whose
// turn is past MaxReplyWait is refused at once, and one whose request
// ends while it waits gives its time back.
func TestExposerPace(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/metrics", nil)
	second := int(ReplyBytesPerSecond)

	e := exposerOf(&countingSource{})
	if !e.wait(r, 2*int(MaxReplyWait.Seconds())*second) {
		t.Fatal("the first reply waited")
	}
	turn := e.turn
	begin := time.Now()
	if e.wait(r, 1) {
		t.Error("a reply whose turn is past MaxReplyWait was written")
	}
	if took := time.Since(begin); took >= MaxReplyWait || e.turn != turn {
		t.Errorf("the refusal took %v and moved the next turn by %v, want at once and none", took, e.turn.Sub(turn))
	}

	e = exposerOf(&countingSource{})
	if !e.wait(r, second) {
		t.Fatal("the first reply waited")
	}
	turn = e.turn
	// Its turn is a second away, and its request has ended.
	if e.wait(r, second) {
		t.Error("a reply whose request ended was written")
	}
	if e.turn != turn {
		t.Errorf("a reply whose request ended kept its time: the next turn moved by %v", e.turn.Sub(turn))
	}
}

// TestExposerGzip: a client that accepts gzip gets the same exposition
// gzipped.
func TestExposerGzip(t *testing.T) {
	srv := httptest.NewServer(exposerOf(SourceFunc(func() (Snapshot, error) { return fixture(), nil })))
	defer srv.Close()
	get := func(encoding string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("Accept-Encoding", encoding)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	_, plain := get("identity")
	resp, zipped := get("gzip")
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding %q, want gzip", resp.Header.Get("Content-Encoding"))
	}
	z, err := gzip.NewReader(bytes.NewReader(zipped))
	if err != nil {
		t.Fatal(err)
	}
	unzipped, err := io.ReadAll(z)
	if err != nil || !bytes.Equal(unzipped, plain) {
		t.Errorf("the gzipped reply is not the plain one (%v)", err)
	}
}

func TestAcceptsGzip(t *testing.T) {
	for header, want := range map[string]bool{
		"":                          false,
		"gzip":                      true,
		"GZIP":                      true,
		"deflate, gzip;q=0.5":       true,
		"gzip;q=0":                  false,
		"gzip; q=0.0, identity":     false,
		"br, zstd":                  false,
		"x-gzip":                    false,
		"identity;q=1, gzip ; q=1 ": true,
	} {
		if got := acceptsGzip(header); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", header, got, want)
		}
	}
}

// TestServeRefusesPastMaxConns: with MaxConns connections open, one more
// is answered 503 and closed at once; once one closes, a scrape works.
func TestServeRefusesPastMaxConns(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, ln, SourceFunc(func() (Snapshot, error) { return fixture(), nil })) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for range MaxConns {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("connection %d: %v, want a 503", MaxConns+1, err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), strconv.Itoa(MaxConns)+" metrics connections are open") {
		t.Errorf("connection %d: %s %q, want 503 naming the limit", MaxConns+1, resp.Status, body)
	}
	open[0].Close()
	open = open[1:]
	hc := &http.Client{Timeout: 5 * time.Second}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := hc.Get("http://" + ln.Addr().String() + "/metrics")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no scrape within 5 s of a connection closing: %v", err)
		}
	}
}

// BenchmarkGather1000Pools is one gather of the exposition for 1,000
// pools as a daemon's (fixture's olap, renamed), encoded plain and
// gzipped: what a scrape costs when it is not shared. It reports the
// bytes of each encoding.
func BenchmarkGather1000Pools(b *testing.B) {
	snap := fixture()
	olap := snap.Pools[0]
	snap.Pools = nil
	for i := range 1000 {
		p := olap
		p.Name = fmt.Sprintf("p%04d", i)
		snap.Pools = append(snap.Pools, p)
	}
	e := exposerOf(SourceFunc(func() (Snapshot, error) { return snap, nil }))
	b.ReportAllocs()
	var o *output
	for b.Loop() {
		o = e.gather(time.Now())
	}
	if o.err != nil {
		b.Fatal(o.err)
	}
	b.ReportMetric(float64(len(o.text)), "text-bytes")
	b.ReportMetric(float64(len(o.zipped)), "gzip-bytes")
}
