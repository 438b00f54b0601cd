package daemon

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Limits bound what local users can make the daemon hold: every user may
// connect to its socket, so each of these is a limit on what one hostile
// user can take from the others (docs/security.md gives the reasons for
// the values). A zero field takes its default.
type Limits struct {
	// ConnsPerUID is how many connections one uid may have open at once:
	// its queued and running queries and its operator requests. Default
	// 512.
	ConnsPerUID int
	// NotStartedPerUID is how many of one uid's queries may be admitted
	// and not yet started (no OpStart). Default 64.
	NotStartedPerUID int
	// ViewsPerUID and Views bound the system-view replies being written
	// at once, for one uid and in all: a reply nobody reads holds its
	// encoded rows until its write deadline. Defaults 4 and 32.
	ViewsPerUID int
	Views       int
	// FirstRequest is how long a connection may take to send its first
	// request whole. Default 10 s.
	FirstRequest time.Duration
	// Message is how long any later message may take to arrive whole once
	// its first byte has. Default 10 s.
	Message time.Duration
	// Write is how long a reply may wait for the client to read it.
	// Default 10 s.
	Write time.Duration
	// Start is how long an admitted query may wait for its OpStart before
	// its slot is freed. Default 10 s.
	Start time.Duration
	// MessagesPerSecond and MessageBurst are each connection's message
	// budget after its first request: a token bucket; a connection over
	// it is not read until it has a token again. Defaults 4 and 8.
	MessagesPerSecond float64
	MessageBurst      int
}

// DefaultLimits are the limits a zero field of Config.Limits stands for;
// docs/security.md says why each value.
var DefaultLimits = Limits{ConnsPerUID: 512, NotStartedPerUID: 64, ViewsPerUID: 4, Views: 32,
	FirstRequest: 10 * time.Second, Message: 10 * time.Second, Write: 10 * time.Second, Start: 10 * time.Second,
	MessagesPerSecond: 4, MessageBurst: 8}

// withDefaults fills the zero fields.
func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	d := DefaultLimits
	def(&l.ConnsPerUID, d.ConnsPerUID)
	def(&l.NotStartedPerUID, d.NotStartedPerUID)
	def(&l.ViewsPerUID, d.ViewsPerUID)
	def(&l.Views, d.Views)
	def(&l.MessageBurst, d.MessageBurst)
	defDur(&l.FirstRequest, d.FirstRequest)
	defDur(&l.Message, d.Message)
	defDur(&l.Write, d.Write)
	defDur(&l.Start, d.Start)
	if l.MessagesPerSecond == 0 {
		l.MessagesPerSecond = d.MessagesPerSecond
	}
	return l
}

// check refuses negative limits.
func (l Limits) check() error {
	for _, v := range []struct {
		name string
		n    int
	}{{"ConnsPerUID", l.ConnsPerUID}, {"NotStartedPerUID", l.NotStartedPerUID}, {"ViewsPerUID", l.ViewsPerUID}, {"Views", l.Views}, {"MessageBurst", l.MessageBurst}} {
		if v.n < 0 {
			return fmt.Errorf("limit %s %d: want a positive count", v.name, v.n)
		}
	}
	for _, v := range []struct {
		name string
		d    time.Duration
	}{{"FirstRequest", l.FirstRequest}, {"Message", l.Message}, {"Write", l.Write}, {"Start", l.Start}} {
		if v.d < 0 {
			return fmt.Errorf("limit %s %s: want a positive duration", v.name, v.d)
		}
	}
	if l.MessagesPerSecond < 0 {
		return fmt.Errorf("limit MessagesPerSecond %g: want a positive rate", l.MessagesPerSecond)
	}
	return nil
}

// perUser counts what each uid holds against Limits, and the connections
// still reading their first request, so a stop can end those reads (the
// sessions past it end with the daemon's context, telling their clients). Its lock is a leaf: nothing
// is called while it is held.
type perUser struct {
	limits Limits

	mu         sync.Mutex
	conns      map[uint32]int
	notStarted map[uint32]int
	views      map[uint32]int
	viewsAll   int
	first      map[*net.UnixConn]struct{}
	stopping   bool
}

func newPerUser(l Limits) *perUser {
	return &perUser{limits: l, conns: map[uint32]int{}, notStarted: map[uint32]int{}, views: map[uint32]int{}, first: map[*net.UnixConn]struct{}{}}
}

// take adds one to m[uid] unless it has reached limit, and returns the
// function that gives it back.
func (p *perUser) take(m map[uint32]int, uid uint32, limit int) (func(), bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m[uid] >= limit {
		return nil, false
	}
	m[uid]++
	return sync.OnceFunc(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if m[uid]--; m[uid] == 0 {
			delete(m, uid)
		}
	}), true
}

// connect counts conn, from uid, as open; the returned function forgets it.
func (p *perUser) connect(uid uint32, conn *net.UnixConn) (func(), error) {
	release, ok := p.take(p.conns, uid, p.limits.ConnsPerUID)
	if !ok {
		return nil, fmt.Errorf("%w: uid %d has %d connections open to the daemon (at most %d per user): wait for some of its queries to end",
			errLimit, uid, p.limits.ConnsPerUID, p.limits.ConnsPerUID)
	}
	// The first request's deadline is set here, under the lock stop
	// takes: set later, it could undo stop's, and a connection accepted
	// as the daemon stops would hold the stop up for the whole wait.
	p.mu.Lock()
	p.first[conn] = struct{}{}
	deadline := time.Now().Add(p.limits.FirstRequest)
	if p.stopping {
		deadline = time.Now()
	}
	conn.SetReadDeadline(deadline)
	p.mu.Unlock()
	return func() {
		p.firstRead(conn)
		release()
	}, nil
}

// firstRead says conn has read its first request (or given up on it).
func (p *perUser) firstRead(conn *net.UnixConn) {
	p.mu.Lock()
	delete(p.first, conn)
	p.mu.Unlock()
}

// admitted counts one more of uid's queries as admitted and not started.
func (p *perUser) admitted(uid uint32) (func(), error) {
	release, ok := p.take(p.notStarted, uid, p.limits.NotStartedPerUID)
	if !ok {
		return nil, fmt.Errorf("%w: uid %d has %d queries admitted and not started (at most %d per user); the slot was given back",
			errLimit, uid, p.limits.NotStartedPerUID, p.limits.NotStartedPerUID)
	}
	return release, nil
}

// view counts one more system-view reply of uid being written.
func (p *perUser) view(uid uint32) (func(), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.viewsAll >= p.limits.Views:
		return nil, fmt.Errorf("%w: %d system-view replies are being written (at most %d at once): try again in a few seconds",
			errLimit, p.viewsAll, p.limits.Views)
	case p.views[uid] >= p.limits.ViewsPerUID:
		return nil, fmt.Errorf("%w: uid %d has %d system-view replies not yet read (at most %d per user)",
			errLimit, uid, p.views[uid], p.limits.ViewsPerUID)
	}
	p.viewsAll++
	p.views[uid]++
	return sync.OnceFunc(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.viewsAll--
		if p.views[uid]--; p.views[uid] == 0 {
			delete(p.views, uid)
		}
	}), nil
}

// stop ends the reads of first requests, now and later: the daemon stops.
func (p *perUser) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopping = true
	for c := range p.first {
		c.SetReadDeadline(time.Now())
	}
}

// errLimit marks a refusal by one of the Limits (protocol.CodeLimit).
var errLimit = errors.New("limit reached")
