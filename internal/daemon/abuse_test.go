package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/client"
	"github.com/poolagent/poolagent/internal/guard"
	"github.com/poolagent/poolagent/internal/history"
	"github.com/poolagent/poolagent/internal/metrics"
	"github.com/poolagent/poolagent/internal/protocol"
	"github.com/poolagent/poolagent/planner"
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
	// second (guard.LongestPause) after the last failure.
	time.Sleep(guard.LongestPause)
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

// rawConns opens n connections to socket, sends msg on each and returns
// them with a channel per connection carrying every reply read on it.
func rawConns(t *testing.T, socket string, n int, msg string) ([]net.Conn, []chan protocol.Reply) {
	t.Helper()
	conns := make([]net.Conn, n)
	replies := make([]chan protocol.Reply, n)
	for i := range n {
		c, err := net.Dial("unix", socket)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, msg); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		ch := make(chan protocol.Reply, 16)
		go func() {
			defer close(ch)
			dec := json.NewDecoder(c)
			for {
				var r protocol.Reply
				if dec.Decode(&r) != nil {
					return
				}
				select {
				case ch <- r:
				default:
				}
			}
		}()
		conns[i], replies[i] = c, ch
	}
	return conns, replies
}

// next is the next reply on ch within 10 s; a closed connection gives
// the zero reply.
func next(t *testing.T, ch chan protocol.Reply) protocol.Reply {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no reply within 10 s")
		return protocol.Reply{}
	}
}

// poolRow is the named pool's row of the pools view.
func poolRow(t *testing.T, pools []protocol.Pool, name string) protocol.Pool {
	t.Helper()
	for _, p := range pools {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("pool %s not in the view %+v", name, pools)
	return protocol.Pool{}
}

// TestAbuseUnreadViews: 2,000 connections ask for a large queries view
// and never read. Only a few replies are written at once (4 per uid); the
// rest are refused at once, the ones written are given up after the
// write deadline, and the daemon's memory stays bounded.
func TestAbuseUnreadViews(t *testing.T) {
	requireRoot(t)
	d := startDaemonProc(t, daemonSpec{
		Pools:  olapPool(1, 3000, ""),
		Limits: Limits{ConnsPerUID: 5000, Start: time.Minute, Write: 3 * time.Second},
	})
	// A queries view of 1,500 rows: the first query holds the slot
	// without starting, the others queue.
	rawConns(t, d.socket, 1500, `{"op":"run","pool":"olap"}`+"\n")
	waitFor(t, "1,499 queries queued", func() bool { return poolRow(t, d.answers(t), "olap").QueuedQueries == 1499 })
	view, err := ask(d.socket, protocol.Request{Op: protocol.OpQueries}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(view)
	t.Logf("the queries view is %d KiB", len(b)>>10)
	if len(b) < 512<<10 {
		t.Fatalf("the queries view is %d bytes: too small to outgrow a socket's buffer", len(b))
	}
	_, before := d.memory(t)

	f := startFlood(t, floodSpec{Network: "unix", Addr: d.socket, Conns: 2000, Send: `{"op":"queries"}` + "\n"}, abuseUID)
	for range 5 {
		d.answers(t)
		time.Sleep(50 * time.Millisecond)
	}
	// Refused at once: all but the 4 being written, well before their
	// write deadline.
	waitFor(t, "the flood's view requests over the limit refused", func() bool { return f.poll(t).Closed >= 2000-4 })
	waitFor(t, "the unread replies given up at their write deadline", func() bool { return f.poll(t).Closed == 2000 })
	f.release()
	d.answers(t)
	t.Logf("peak resident set before the flood: %d MiB", before>>20)
	d.checkPeak(t, 128<<20)
}

// TestAbuseNeverStart: 300 queries of one user are admitted and never
// started. At most 64 are admitted at once, the others refused with the
// limit; each admitted one gives its slot back at the start deadline.
func TestAbuseNeverStart(t *testing.T) {
	d := startDaemonProc(t, daemonSpec{Limits: Limits{Start: 2 * time.Second}})
	_, replies := rawConns(t, d.socket, 300, `{"op":"run"}`+"\n")
	var admitted []chan protocol.Reply
	refused := 0
	for _, ch := range replies {
		switch r := next(t, ch); {
		case r.Type == protocol.ReplyAdmitted:
			admitted = append(admitted, ch)
		case r.Code == protocol.CodeLimit && strings.Contains(r.Error, "queries admitted and not started (at most 64 per user)"):
			refused++
		default:
			t.Fatalf("reply %+v, want admitted or refused by the limit", r)
		}
	}
	if len(admitted) != 64 || refused != 300-64 {
		t.Fatalf("%d admitted, %d refused; want 64 and 236", len(admitted), refused)
	}
	if p := poolRow(t, d.answers(t), planner.DefaultPool); p.RunningQueries != 64 {
		t.Errorf("pool %+v: want the 64 admitted running", p)
	}
	for _, ch := range admitted {
		if r := next(t, ch); r.Code != protocol.CodeTimeout || !strings.Contains(r.Error, "no \"start\" within 2s of admission") {
			t.Fatalf("reply %+v, want the start deadline", r)
		}
	}
	waitFor(t, "every slot given back", func() bool { return poolRow(t, d.answers(t), planner.DefaultPool).RunningQueries == 0 })
	if _, err := client.Run(client.RunOptions{Socket: d.socket, Args: []string{"true"}}); err != nil {
		t.Fatalf("a query after the 300: %v", err)
	}
	d.checkPeak(t, 64<<20)
}

// TestAbuseSlowloris: connections that send their messages a byte at a
// time, to the socket (a first request; a message after queueing) and to
// the metrics endpoint (headers; an idle kept-alive connection after a
// scrape). Each is closed at its deadline, and the socket and the metrics
// endpoint answer others meanwhile.
func TestAbuseSlowloris(t *testing.T) {
	d := startDaemonProc(t, daemonSpec{
		Pools:   olapPool(1, 500, ""),
		Metrics: true,
		Limits:  Limits{FirstRequest: time.Second, Message: time.Second, Start: time.Minute},
	})
	// Holds olap's slot, so the trickling queries queue.
	rawConns(t, d.socket, 1, `{"op":"run","pool":"olap"}`+"\n")
	const n = 30
	floods := map[string]*flood{
		"socket, first request": startFlood(t, floodSpec{Network: "unix", Addr: d.socket, Conns: n,
			Dribble: `{"op":"pools"}`, DribbleEvery: 100 * time.Millisecond, Read: true}, 0),
		"socket, after queueing": startFlood(t, floodSpec{Network: "unix", Addr: d.socket, Conns: n,
			Send: `{"op":"run","pool":"olap"}` + "\n", Dribble: `{"op":"exited"}`, DribbleEvery: 100 * time.Millisecond, Read: true}, 0),
		"metrics, headers": startFlood(t, floodSpec{Network: "tcp", Addr: d.metrics, Conns: n,
			Send: "GET /metrics HTTP/1.1\r\nHost: localhost\r\n", Dribble: "X-Slow: 1\r\n", DribbleEvery: 500 * time.Millisecond}, 0),
		"metrics, kept alive": startFlood(t, floodSpec{Network: "tcp", Addr: d.metrics, Conns: n,
			Send: "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n", Read: true}, 0),
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(metrics.IdleTimeout + 10*time.Second)
	for {
		d.answers(t)
		resp, err := hc.Get("http://" + d.metrics + "/metrics")
		if err != nil {
			t.Fatalf("scrape during the slowloris: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		open := 0
		for what, f := range floods {
			if st := f.poll(t); st.Closed < n {
				open++
				if time.Now().After(deadline) {
					t.Errorf("%s: %d of %d connections still open", what, n-st.Closed, n)
				}
			}
		}
		if open == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st := floods["socket, first request"].poll(t); st.Codes[protocol.CodeTimeout] != n {
		t.Errorf("first requests trickled: %+v, want each told %s", st, protocol.CodeTimeout)
	}
	if p := poolRow(t, d.answers(t), "olap"); p.QueuedQueries != 0 {
		t.Errorf("pool %+v: the trickling queries are still queued", p)
	}
	d.checkPeak(t, 64<<20)
}

// TestAbuseMetricsFlood: TCP connections flood the metrics endpoint,
// four times its connection cap. The endpoint holds at most its cap and
// answers the rest 503 at once, so the daemon never runs out of
// descriptors and its socket answers throughout; once the flood is
// released, scrapes work again.
func TestAbuseMetricsFlood(t *testing.T) {
	d := startDaemonProc(t, daemonSpec{Pools: olapPool(1, 0, ""), NoFile: metrics.MaxConns + 128, Metrics: true})
	f := startFlood(t, floodSpec{Network: "tcp", Addr: d.metrics, Conns: 4 * metrics.MaxConns}, 0)
	if st := f.poll(t); st.Opened != 4*metrics.MaxConns {
		t.Fatalf("flood %+v: want %d connections made", st, 4*metrics.MaxConns)
	}
	waitFor(t, "the connections past the cap refused", func() bool { return f.poll(t).Closed == 3*metrics.MaxConns })
	for range 5 {
		d.answers(t)
		time.Sleep(50 * time.Millisecond)
	}
	if n := d.logged(msgOutOfFDs); n != 0 {
		t.Errorf("the daemon ran out of descriptors (%d records):\n%s", n, d.tail())
	}
	f.release()
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + d.metrics + "/metrics")
	if err != nil {
		t.Fatalf("scrape after the flood: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("scrape after the flood: %s", resp.Status)
	}
	d.checkPeak(t, 64<<20)
}

// manyPools is a pool file of n pools, each open to every user.
func manyPools(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "CREATE RESOURCE POOL p%04d WITH (CONCURRENT_QUERY_LIMIT=4, QUEUE_SIZE=16);\n", i)
		fmt.Fprintf(&b, "GRANT USE ON RESOURCE POOL p%04d TO 'all-users@well-known';\n", i)
	}
	return b.String()
}

// scrapeBody GETs url and returns the reply's body, failing the test
// unless it is 200 OK.
func scrapeBody(t *testing.T, hc *http.Client, url string) []byte {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s, %v", resp.Status, err)
	}
	return body
}

// Bounds of TestAbuseMetricsScrapes: the daemon's peak resident set with
// 1,000 pools under the attacks, and how much slower another user's
// queries may start: their median at most scrapeAbuseRatio times the
// median without the attack, or scrapeAbuseSlack over it, whichever is
// more (the slack absorbs other work on a loaded test host).
const (
	scrapeAbusePeak  = 96 << 20
	scrapeAbuseRatio = 4
	scrapeAbuseSlack = 100 * time.Millisecond
)

// TestAbuseMetricsScrapes: with 1,000 pools, another uid opens 250
// connections that send GET /metrics and never read, then runs 64
// scrapers in a loop. The daemon's memory stays bounded, another user's
// queries start about as fast as without the attack, the watchdog is fed
// throughout, and the pools' stats are gathered by one scrape at a time,
// scrapes arriving meanwhile sharing its output.
func TestAbuseMetricsScrapes(t *testing.T) {
	requireRoot(t)
	wd := listenWatchdog(t)
	const watchdogSec = 4 * time.Second
	d := startDaemonProc(t, daemonSpec{
		PoolCount: 1000, Metrics: true, PoolStats: true,
		// No prediction: every read of the pools' stats is a scrape's.
		PredictEvery: time.Hour,
		Notify:       wd.path, WatchdogUsec: watchdogSec.Microseconds(),
	})
	url := "http://" + d.metrics + "/metrics"
	hc := &http.Client{Timeout: 20 * time.Second}
	t.Logf("a scrape of 1,000 pools: %d KiB", len(scrapeBody(t, hc, url))>>10)

	// Scrapes at once share one gather's output.
	bodies := make([][]byte, 16)
	var wg sync.WaitGroup
	for i := range bodies {
		wg.Go(func() { bodies[i] = scrapeBody(t, hc, url) })
	}
	wg.Wait()
	for i, b := range bodies[1:] {
		if !bytes.Equal(b, bodies[0]) {
			t.Errorf("scrapes 0 and %d at once differ: each gathered for itself", i+1)
			break
		}
	}

	const during = 8 * time.Second
	cpu0 := d.cpu(t)
	quiet, quietMax := startTimesFor(t, d.socket, during)
	quietCPU := d.cpu(t) - cpu0
	t.Logf("starts without the attack: median %v, slowest %v", quiet, quietMax)
	rss0, _ := d.memory(t)
	begin := time.Now()

	attacks := []struct {
		name string
		spec floodSpec
	}{
		{"250 unread scrapes", floodSpec{Network: "tcp", Addr: d.metrics, Conns: 250, Send: "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n"}},
		{"64 scrapers in a loop", floodSpec{Scrapers: 64, URL: url}},
	}
	for _, a := range attacks {
		cpu0 := d.cpu(t)
		f := startFlood(t, a.spec, abuseUID)
		// The memory is watched while queries start, and the attack
		// ended early once past the bound.
		stop := make(chan struct{})
		var peak uint64
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				rss, _ := d.memory(t)
				if peak = max(peak, rss); rss > scrapeAbusePeak {
					// Ends the attack: its connections close with
					// the process.
					f.cmd.Process.Kill()
					return
				}
			}
		}()
		p50, slowest := startTimesFor(t, d.socket, during)
		close(stop)
		<-watched
		cpu := d.cpu(t) - cpu0
		var st floodStatus
		if peak <= scrapeAbusePeak {
			st = f.poll(t)
		}
		f.release()
		t.Logf("%s: starts median %v (%.1f× without), slowest %v; daemon resident set up to %d MiB (%d MiB before), CPU %v (%v without); the attacker's CPU %v; flood %d connections (%d closed by the daemon), scrapes %v",
			a.name, p50, float64(p50)/float64(quiet), slowest, peak>>20, rss0>>20, cpu.Round(time.Millisecond), quietCPU.Round(time.Millisecond),
			(f.cmd.ProcessState.UserTime() + f.cmd.ProcessState.SystemTime()).Round(time.Millisecond), st.Opened, st.Closed, st.Scrapes)
		if peak > scrapeAbusePeak {
			t.Errorf("%s: the daemon's resident set reached %d MiB, past the bound of %d MiB", a.name, peak>>20, scrapeAbusePeak>>20)
		}
		if p50 > max(scrapeAbuseRatio*quiet, quiet+scrapeAbuseSlack) {
			t.Errorf("%s: another user's starts took %v (median), %.1f× the %v without the attack (at most %d× or %v more)",
				a.name, p50, float64(p50)/float64(quiet), quiet, scrapeAbuseRatio, scrapeAbuseSlack)
		}
		if gap := wd.longestGap(begin); gap >= watchdogSec {
			t.Errorf("%s: no watchdog ping for %v (WatchdogSec %v): systemd would restart the daemon", a.name, gap.Round(time.Millisecond), watchdogSec)
		}
	}
	if n := d.logged("watchdog"); n > 0 {
		t.Errorf("the health check failed %d times:\n%s", n, d.tail())
	}
	// Scrapes work again once the attacks end: the replies the attacker
	// left waiting give their turns back.
	ended := time.Now()
	for {
		resp, err := hc.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Logf("a scrape answered %v after the attacks ended", time.Since(ended).Round(time.Millisecond))
				break
			}
		}
		if time.Since(ended) > metrics.MaxReplyWait+5*time.Second {
			t.Fatalf("no scrape answered within %v of the attacks' end: %v", metrics.MaxReplyWait+5*time.Second, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.stop(t)
	calls, most := d.statReads(t)
	t.Logf("the pools' stats were read %d times, at most %d at once", calls, most)
	if most != 1 {
		t.Errorf("the pools' stats were read by %d scrapes at once, want one at a time", most)
	}
}

// startTimesFor is startTimes for queries run one after the other for
// about dur.
func startTimesFor(t *testing.T, socket string, dur time.Duration) (p50, slowest time.Duration) {
	t.Helper()
	var took []time.Duration
	for end := time.Now().Add(dur); time.Now().Before(end) || len(took) < 5; {
		begin := time.Now()
		if _, err := client.Run(client.RunOptions{Socket: socket, Args: []string{"true"}}); err != nil {
			t.Fatalf("a query: %v", err)
		}
		took = append(took, time.Since(begin))
	}
	slices.Sort(took)
	return took[len(took)/2], took[len(took)-1]
}

// TestAbuseUnreadHistory: a user asks for a pool's history on 4
// connections (its view limit) and reads none of the replies, each too
// large for the socket's buffer. Another user's history request is
// answered at once: the unread replies hold their own uid's turn only.
// On the tree before, one history reply was written at a time in the
// whole daemon, and the other user waited for the write deadline (10 s)
// of each unread reply ahead.
func TestAbuseUnreadHistory(t *testing.T) {
	requireRoot(t)
	d := startDaemonProc(t, daemonSpec{
		Pools:       olapPool(1, 10, ""),
		PoolStats:   true,
		History:     history.Config{Window: 10 * time.Minute, CPUs: 2},
		HistoryFill: 5000,
	})
	req := protocol.Request{Op: protocol.OpHistory, Pool: "olap"}
	began := time.Now()
	r, err := ask(d.socket, req, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	quiet := time.Since(began)
	b, _ := json.Marshal(r)
	if len(b) < 512<<10 {
		t.Fatalf("the history reply is %d bytes: too small to outgrow a socket's buffer", len(b))
	}
	line, _ := json.Marshal(req)
	f := startFlood(t, floodSpec{Network: "unix", Addr: d.socket, Conns: 4, Send: string(line) + "\n"}, abuseUID)
	// The 4 replies are being written once the daemon has refused
	// nothing and answers: give it a moment to take the 4 requests.
	time.Sleep(500 * time.Millisecond)
	var took []time.Duration
	for range 3 {
		began := time.Now()
		if _, err := ask(d.socket, req, 30*time.Second); err != nil {
			t.Errorf("another user's history beside 4 unread replies: %v", err)
		}
		took = append(took, time.Since(began))
	}
	t.Logf("history reply of %d KiB; another user's: %v quiet, %v beside 4 unread replies of uid %d", len(b)>>10, quiet, took, abuseUID)
	for _, d := range took {
		// The unread replies hold the write deadline, 10 s: an answer
		// that waited for one takes that long.
		if d > 5*time.Second {
			t.Errorf("another user's history took %v beside the unread replies: it waited for them", d)
		}
	}
	if st := f.poll(t); st.Closed != 0 {
		t.Errorf("flood %+v: the daemon refused a request within the view limit", st)
	}
	f.release()
}
