package admission

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/poolagent/poolagent/planner"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func newController(t *testing.T, pools map[string]Limits) *Controller {
	t.Helper()
	c, err := NewController(LoadConfig{}, pools)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func limits(concurrent, queue int) Limits {
	return Limits{ConcurrentQueryLimit: concurrent, QueueSize: queue, LoadCPUThresholdPercent: Unlimited}
}

// position is a query's Position in its pool's queue, 0 when it is not
// queued.
func position(c *Controller, id QueryID) int {
	pl, _ := c.Place(id, t0)
	return pl.Position
}

func poolStats(t *testing.T, c *Controller, name string) PoolStats {
	t.Helper()
	for _, s := range c.Pools() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("pool %q not found in %+v", name, c.Pools())
	return PoolStats{}
}

// TestTwoRunThreeQueueTenArrive is the case: limit 2, queue 3, ten
// queries at once.
func TestTwoRunThreeQueueTenArrive(t *testing.T) {
	c := newController(t, map[string]Limits{"olap": limits(2, 3)})
	const wantErr = "Request was rejected, number of local pending requests is 1, " +
		"number of global delayed/running requests is 5, sum of them is larger than " +
		"allowed limit 3 (including concurrent query limit 2) for pool olap\n" +
		"Query failed during adding/waiting in workload pool olap"

	var running, queued []QueryID
	rejected := 0
	for i := range 10 {
		id, started, err := c.Submit("olap", "alice", at(time.Duration(i)*time.Millisecond))
		switch {
		case err != nil:
			if !errors.Is(err, ErrQueueFull) || err.Error() != wantErr {
				t.Fatalf("query %d: error %q, want %q", i, err, wantErr)
			}
			rejected++
		case started:
			running = append(running, id)
		default:
			queued = append(queued, id)
		}
	}
	if len(running) != 2 || len(queued) != 3 || rejected != 5 {
		t.Fatalf("running %d, queued %d, rejected %d; want 2, 3, 5", len(running), len(queued), rejected)
	}

	// As runners finish, the queued start in arrival order.
	var started []QueryID
	for len(running) > 0 {
		id := running[0]
		running = running[1:]
		for _, e := range c.Leave(id, at(time.Second)) {
			if e.Err != nil {
				t.Fatalf("event %+v: want a start", e)
			}
			started = append(started, e.ID)
			running = append(running, e.ID)
		}
	}
	if !slices.Equal(started, queued) {
		t.Errorf("started %v, want FIFO order %v", started, queued)
	}
	s := poolStats(t, c, "olap")
	if s.Running != 0 || s.Queued != 0 || s.Admitted != 5 || s.Rejected != 5 {
		t.Errorf("end state %+v: want 0 running, 0 queued, 5 admitted, 5 rejected", s)
	}
}

func TestSubmit(t *testing.T) {
	tests := []struct {
		name    string
		limits  Limits
		before  int // queries submitted first
		started bool
		wantErr string
		is      error
	}{
		{name: "unlimited", limits: UnlimitedLimits(), before: 1000, started: true},
		{name: "zero limit refuses all", limits: limits(0, 10), is: ErrPoolDisabled,
			wantErr: "Resource pool p was disabled due to zero concurrent query limit\n" +
				"Query failed during adding/waiting in workload pool p"},
		{name: "below limit", limits: limits(2, 0), before: 1, started: true},
		{name: "queue size 0 rejects at the limit", limits: limits(2, 0), before: 2, is: ErrQueueFull,
			wantErr: "Request was rejected, number of local pending requests is 1, " +
				"number of global delayed/running requests is 2, sum of them is larger than " +
				"allowed limit 0 (including concurrent query limit 2) for pool p\n" +
				"Query failed during adding/waiting in workload pool p"},
		{name: "unlimited queue", limits: limits(1, Unlimited), before: 500},
		{name: "last queue place", limits: limits(1, 4), before: 4},
		{name: "unlimited concurrency, CPU threshold, queue counts alone",
			limits: Limits{ConcurrentQueryLimit: Unlimited, QueueSize: 2, LoadCPUThresholdPercent: 10},
			before: 3, is: ErrQueueFull,
			wantErr: "Request was rejected, number of local pending requests is 1, " +
				"number of global delayed/running requests is 3, sum of them is larger than " +
				"allowed limit 2 (including concurrent query limit -1) for pool p\n" +
				"Query failed during adding/waiting in workload pool p"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newController(t, map[string]Limits{"p": tt.limits})
			c.Sample(t0, 0)
			for i := range tt.before {
				if _, _, err := c.Submit("p", "alice", t0); err != nil {
					t.Fatalf("query %d before: %v", i, err)
				}
			}
			_, started, err := c.Submit("p", "alice", t0)
			if tt.is != nil {
				if !errors.Is(err, tt.is) || err.Error() != tt.wantErr {
					t.Fatalf("error %q, want %q (%v)", err, tt.wantErr, tt.is)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if started != tt.started {
				t.Errorf("started %v, want %v", started, tt.started)
			}
		})
	}
}

func TestSubmitUnknownPool(t *testing.T) {
	c := newController(t, nil)
	if _, _, err := c.Submit("nope", "alice", t0); !errors.Is(err, ErrUnknownPool) {
		t.Fatalf("error %v, want ErrUnknownPool", err)
	}
	if _, started, err := c.Submit(planner.DefaultPool, "alice", t0); err != nil || !started {
		t.Fatalf("default pool: started %v, error %v; want an immediate start", started, err)
	}
}

func TestQueueDeadline(t *testing.T) {
	l := limits(1, 10)
	l.CancelAfter = 5 * time.Second
	c := newController(t, map[string]Limits{"olap": l})
	first, _, _ := c.Submit("olap", "alice", t0)
	waiting, started, err := c.Submit("olap", "alice", at(time.Second))
	if err != nil || started {
		t.Fatalf("second query: started %v, error %v; want queued", started, err)
	}
	if ev := c.Tick(at(6*time.Second - time.Nanosecond)); len(ev) != 0 {
		t.Fatalf("events before the deadline: %+v", ev)
	}
	ev := c.Tick(at(6 * time.Second))
	want := "Delay deadline exceeded in pool olap\nQuery failed during adding/waiting in workload pool olap"
	if len(ev) != 1 || ev[0].ID != waiting || !errors.Is(ev[0].Err, ErrDelayDeadline) || ev[0].Err.Error() != want {
		t.Fatalf("events %+v, want query %d failing with %q", ev, waiting, want)
	}
	if ev[0].QueuedFor != 5*time.Second {
		t.Errorf("queued for %s, want 5s", ev[0].QueuedFor)
	}
	// The running query is not subject to the queue deadline.
	if ev := c.Leave(first, at(time.Minute)); len(ev) != 0 {
		t.Errorf("events on leave: %+v", ev)
	}
	s := poolStats(t, c, "olap")
	if s.Running != 0 || s.Queued != 0 || s.TimedOut != 1 || s.Failed != 0 {
		t.Errorf("end state %+v", s)
	}
}

func TestLeaveQueuedAndTwice(t *testing.T) {
	c := newController(t, map[string]Limits{"p": limits(1, 10)})
	a, _, _ := c.Submit("p", "alice", t0)
	b, _, _ := c.Submit("p", "alice", t0)
	d, _, _ := c.Submit("p", "alice", t0)
	if got := []int{position(c, a), position(c, b), position(c, d)}; !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("positions %v, want [0 1 2]", got)
	}
	if ev := c.Leave(b, t0); len(ev) != 0 {
		t.Fatalf("a queued query leaving started %+v", ev)
	}
	if position(c, d) != 1 {
		t.Errorf("position after the head left: %d, want 1", position(c, d))
	}
	ev := c.Leave(a, t0)
	if len(ev) != 1 || ev[0].ID != d {
		t.Fatalf("events %+v, want %d to start", ev, d)
	}
	if ev := c.Leave(a, t0); ev != nil {
		t.Errorf("second leave gave %+v", ev)
	}
	c.Leave(d, t0)
	if s := poolStats(t, c, "p"); s.Running != 0 || s.Queued != 0 {
		t.Errorf("end state %+v", s)
	}
}

func TestConfigure(t *testing.T) {
	c := newController(t, map[string]Limits{"p": limits(1, 5), "q": limits(1, 5)})
	run, _, _ := c.Submit("p", "alice", t0)
	var queued []QueryID
	for range 4 {
		id, _, _ := c.Submit("p", "alice", t0)
		queued = append(queued, id)
	}
	qRun, _, _ := c.Submit("q", "alice", t0)
	qWait, _, _ := c.Submit("q", "alice", t0)

	// Lower p's queue to 2: the two newest are rejected.
	ev := c.Configure(map[string]Limits{"p": limits(1, 2), "q": limits(1, 5)}, at(time.Second))
	if len(ev) != 2 || ev[0].ID != queued[3] || ev[1].ID != queued[2] || !errors.Is(ev[0].Err, ErrQueueFull) {
		t.Fatalf("events %+v, want %v and %v rejected", ev, queued[3], queued[2])
	}
	// Raise p's limit to 3: both queued start, oldest first.
	ev = c.Configure(map[string]Limits{"p": limits(3, 2), "q": limits(1, 5)}, at(2*time.Second))
	if len(ev) != 2 || ev[0].ID != queued[0] || ev[1].ID != queued[1] || ev[0].Err != nil {
		t.Fatalf("events %+v, want %v, %v started", ev, queued[0], queued[1])
	}
	// Drop q: its queued query fails, the running one keeps its slot.
	ev = c.Configure(map[string]Limits{"p": limits(3, 2)}, at(3*time.Second))
	if len(ev) != 1 || ev[0].ID != qWait || !errors.Is(ev[0].Err, ErrPoolDropped) {
		t.Fatalf("events %+v, want %v failing with ErrPoolDropped", ev, qWait)
	}
	if s := poolStats(t, c, "q"); !s.Dropped || s.Running != 1 {
		t.Errorf("dropped pool %+v, want 1 running", s)
	}
	if _, _, err := c.Submit("q", "alice", at(4*time.Second)); !errors.Is(err, ErrUnknownPool) {
		t.Errorf("submit to a dropped pool: %v", err)
	}
	c.Leave(qRun, at(5*time.Second))
	for _, s := range c.Pools() {
		if s.Name == "q" {
			t.Errorf("dropped pool still listed after its last query left: %+v", s)
		}
	}
	// Limit 0: the queue (p runs three, two wait) fails with ErrPoolDisabled.
	c.Submit("p", "alice", t0)
	c.Submit("p", "alice", t0)
	ev = c.Configure(map[string]Limits{"p": limits(0, 2)}, at(6*time.Second))
	if len(ev) != 2 || !errors.Is(ev[0].Err, ErrPoolDisabled) || !errors.Is(ev[1].Err, ErrPoolDisabled) {
		t.Fatalf("events %+v, want two ErrPoolDisabled", ev)
	}
	if s := poolStats(t, c, "p"); s.Running != 3 || s.Queued != 0 {
		t.Errorf("disabled pool %+v, want its 3 running kept", s)
	}
	if s := poolStats(t, c, planner.DefaultPool); s.Limits != UnlimitedLimits() {
		t.Errorf("default pool %+v, want unlimited", s)
	}
	for _, id := range append([]QueryID{run}, queued[:2]...) {
		c.Leave(id, at(7*time.Second))
	}
	if s := poolStats(t, c, "p"); s.Running != 0 {
		t.Errorf("end state %+v, want 0 running", s)
	}
}

func TestActive(t *testing.T) {
	c := newController(t, map[string]Limits{"a": limits(1, 1), "b": limits(1, 1)})
	if got := c.Active(); len(got) != 0 {
		t.Fatalf("active %v with no queries", got)
	}
	b, _, _ := c.Submit("b", "alice", t0)
	c.Submit(planner.DefaultPool, "alice", t0)
	if got := c.Active(); !slices.Equal(got, []string{"b", planner.DefaultPool}) {
		t.Errorf("active %v, want [b default]", got)
	}
	c.Leave(b, t0)
	if got := c.Active(); !slices.Equal(got, []string{planner.DefaultPool}) {
		t.Errorf("active %v, want [default]", got)
	}
	// An adopted query of a pool the limits lack makes it active; a
	// queued query that a leave starts keeps its pool active.
	adopted := c.Adopt("gone", "", t0)
	a1, _, _ := c.Submit("a", "alice", t0)
	a2, started, err := c.Submit("a", "bob", t0)
	if started || err != nil {
		t.Fatalf("second query of a pool of one: started %v, %v; want it queued", started, err)
	}
	c.Leave(a1, t0)
	if got := c.Active(); !slices.Equal(got, []string{"a", planner.DefaultPool, "gone"}) {
		t.Errorf("active %v, want [a default gone]", got)
	}
	c.Leave(adopted, t0)
	c.Leave(a2, t0)
	c.Leave(a2, t0) // a second leave changes nothing
	if got := c.Active(); !slices.Equal(got, []string{planner.DefaultPool}) {
		t.Errorf("active %v after the leaves, want [default]", got)
	}
}
