package admission

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/protocol"
)

// fairPool is a pool of c slots with per-user limits u under the given
// policy, no queue limit.
func fairPool(c int, u UserLimits) Limits {
	return Limits{ConcurrentQueryLimit: c, QueueSize: Unlimited, LoadCPUThresholdPercent: Unlimited, Users: u}
}

// script drives one pool "p" of a Controller by query labels.
type script struct {
	t   *testing.T
	c   *Controller
	ids map[string]QueryID
	by  map[QueryID]string
	// started collects the labels of queued queries that started, in order.
	started []string
}

func newScript(t *testing.T, l Limits) *script {
	return &script{t: t, c: newController(t, map[string]Limits{"p": l}), ids: map[string]QueryID{}, by: map[QueryID]string{}}
}

func (s *script) note(events []Event) {
	for _, e := range events {
		if e.Err != nil {
			s.t.Fatalf("query %s failed: %v", s.by[e.ID], e.Err)
		}
		s.started = append(s.started, s.by[e.ID])
	}
}

// submit submits query label of user at d and reports whether it started
// at once.
func (s *script) submit(label, user string, d time.Duration) bool {
	s.t.Helper()
	id, started, err := s.c.Submit("p", user, at(d))
	if err != nil {
		s.t.Fatalf("submit %s: %v", label, err)
	}
	s.ids[label], s.by[id] = id, label
	return started
}

// submitN submits n queries of user, labelled user1..userN, at d.
func (s *script) submitN(user string, n int, d time.Duration) {
	for i := 1; i <= n; i++ {
		s.submit(fmt.Sprint(user, i), user, d)
	}
}

// end charges query label cpu and ends it at d.
func (s *script) end(label string, cpu, d time.Duration) {
	s.c.Charge(s.ids[label], cpu, at(d))
	s.note(s.c.Leave(s.ids[label], at(d)))
}

func (s *script) why(label string, d time.Duration) protocol.Wait {
	pl, ok := s.c.Place(s.ids[label], at(d))
	if !ok {
		s.t.Fatalf("%s is not queued", label)
	}
	return WhyWaiting(pl, poolStats(s.t, s.c, "p"), s.c.Load())
}

// TestFairOrder: which waiting query takes the next free slot.
func TestFairOrder(t *testing.T) {
	fair := UserLimits{Fair: true, HalfLife: 10 * time.Minute}
	tests := []struct {
		name  string
		l     Limits
		play  func(s *script)
		want  []string // labels of queued queries in the order they started
		check func(t *testing.T, s *script)
	}{
		{
			// Same running count, no usage: the older query goes first.
			name: "tie by arrival", l: fairPool(1, fair),
			play: func(s *script) {
				s.submit("run", "carol", 0)
				s.submit("b1", "bob", time.Second)
				s.submit("a1", "alice", 2*time.Second)
				s.end("run", 0, time.Minute)
			},
			want: []string{"b1"},
		},
		{
			name: "fewer running first", l: fairPool(3, fair),
			play: func(s *script) {
				s.submitN("alice", 2, 0) // alice runs 2
				s.submit("b0", "bob", 0) // bob runs 1: full
				s.submit("a3", "alice", time.Second)
				s.submit("b1", "bob", 2*time.Second)
				s.end("b0", 0, time.Minute) // bob 0, alice 2: bob's goes
			},
			want: []string{"b1"},
		},
		{
			name: "a flood waits behind a newcomer", l: fairPool(4, fair),
			play: func(s *script) {
				s.submitN("alice", 50, 0)
				s.submit("b1", "bob", time.Second)
				s.end("alice1", time.Second, time.Minute)
				s.end("alice2", time.Second, time.Minute)
			},
			want: []string{"b1", "alice5"},
		},
		{
			name: "fifo: a flood goes first", l: fairPool(4, UserLimits{}),
			play: func(s *script) {
				s.submitN("alice", 6, 0)
				s.submit("b1", "bob", time.Second)
				s.end("alice1", 0, time.Minute)
				s.end("alice2", 0, time.Minute)
				s.end("alice3", 0, time.Minute)
			},
			want: []string{"alice5", "alice6", "b1"},
		},
		{
			// Equal running: less CPU time used goes first.
			name: "less usage first", l: fairPool(2, fair),
			play: func(s *script) {
				s.submit("a0", "alice", 0)
				s.submit("b0", "bob", 0)
				s.submit("a1", "alice", time.Second)
				s.submit("b1", "bob", 2*time.Second)
				s.submit("a2", "alice", 3*time.Second)
				s.end("a0", 100*time.Second, time.Minute) // alice: 0 running, 100 s
				s.end("b0", 10*time.Second, time.Minute)  // bob: 0 running, 10 s; a1 took a0's slot
			},
			want: []string{"a1", "b1"},
		},
		{
			// 100 s an hour ago has halved six times (1.6 s): less than
			// 30 s half an hour ago (7.5 s).
			name: "half-life decay", l: fairPool(1, fair),
			play: func(s *script) {
				s.submit("a0", "alice", 0)
				s.end("a0", 100*time.Second, 0)
				s.submit("b0", "bob", 30*time.Minute)
				s.submit("a1", "alice", 31*time.Minute)
				s.submit("b1", "bob", 32*time.Minute)
				s.end("b0", 30*time.Second, time.Hour)
			},
			want: []string{"a1"},
		},
		{
			name: "no decay counts old usage", l: fairPool(1, UserLimits{Fair: true, HalfLife: 1000 * time.Hour}),
			play: func(s *script) {
				s.submit("a0", "alice", 0)
				s.end("a0", 100*time.Second, 0)
				s.submit("b0", "bob", 30*time.Minute)
				s.submit("a1", "alice", 31*time.Minute)
				s.submit("b1", "bob", 32*time.Minute)
				s.end("b0", 30*time.Second, time.Hour)
			},
			want: []string{"b1"},
		},
		{
			name: "half-life 0 counts running queries only", l: fairPool(1, UserLimits{Fair: true}),
			play: func(s *script) {
				s.submit("a0", "alice", 0)
				s.end("a0", 100*time.Second, 0)
				s.submit("b0", "bob", time.Second)
				s.submit("a1", "alice", 2*time.Second)
				s.submit("b1", "bob", 3*time.Second)
				s.end("b0", 0, time.Minute)
			},
			want: []string{"a1"},
		},
		{
			// A user who leaves the queue is gone from the order; the
			// next user's query takes the slot.
			name: "users leaving", l: fairPool(1, fair),
			play: func(s *script) {
				s.submit("run", "carol", 0)
				s.submit("a1", "alice", time.Second)
				s.submit("b1", "bob", 2*time.Second)
				s.submit("d1", "dave", 3*time.Second)
				s.c.Leave(s.ids["a1"], at(4*time.Second))
				s.end("run", 0, time.Minute)
				s.c.Leave(s.ids["d1"], at(2*time.Minute))
				s.end("b1", 0, 3*time.Minute)
			},
			want:  []string{"b1"},
			check: func(t *testing.T, s *script) { checkUsers(t, s.c, "") },
		},
		{
			// alice is at her limit of 1 with older queries waiting; the
			// pool has room, so bob starts at once (FIFO and fair alike).
			name: "a user at the limit never blocks another, fifo", l: fairPool(4, UserLimits{Running: 1}),
			play: func(s *script) {
				s.submitN("alice", 5, 0)
				if !s.submit("b1", "bob", time.Second) {
					s.t.Error("bob's query did not start at once")
				}
				s.end("alice1", 0, time.Minute)
			},
			want: []string{"alice2"},
			check: func(t *testing.T, s *script) {
				checkUsers(t, s.c, "alice 1 running 3 queued, bob 1 running 0 queued")
				if w := s.why("alice3", time.Minute); w.String() != "you have 1 running of your 1" {
					t.Errorf("why: %q", w.String())
				}
			},
		},
		{
			name: "a user at the limit never blocks another, fair", l: fairPool(3, UserLimits{Running: 2, Fair: true}),
			play: func(s *script) {
				s.submitN("alice", 3, 0) // 2 run, alice3 waits with a slot free
				s.submit("b1", "bob", time.Second)
				s.submit("b2", "bob", time.Second) // the pool is full now
				s.submit("d1", "dave", 2*time.Second)
				s.end("alice1", 0, time.Minute) // alice 1, bob 1, dave 0: dave
				s.end("b1", 0, time.Minute)     // alice 1, bob 0: bob
			},
			want: []string{"d1", "b2"},
		},
		{
			// The slot freed by alice (at her limit, 3 waiting) goes to
			// the only other user, however late.
			name: "a user's own end starts another user under the limit", l: fairPool(2, UserLimits{Running: 1}),
			play: func(s *script) {
				s.submitN("alice", 4, 0)
				s.submit("b1", "bob", time.Second)
				s.submit("b2", "bob", 2*time.Second)
				s.end("b1", 0, time.Minute)
			},
			want: []string{"b2"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newScript(t, tc.l)
			tc.play(s)
			if !slices.Equal(s.started, tc.want) {
				t.Errorf("started %v, want %v", s.started, tc.want)
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

// checkUsers compares pool p's per-user figures with want ("" for none).
func checkUsers(t *testing.T, c *Controller, want string) {
	t.Helper()
	var got []string
	for _, u := range poolStats(t, c, "p").Users {
		got = append(got, fmt.Sprintf("%s %d running %d queued", u.User, u.Running, u.Queued))
	}
	if s := strings.Join(got, ", "); s != want {
		t.Errorf("users %q, want %q", s, want)
	}
}

// TestUserLimits: the per-user running limit holds a user back while the
// pool has room; the per-user queue limit refuses at once, naming the
// user's figures beside the pool's.
func TestUserLimits(t *testing.T) {
	l := fairPool(10, UserLimits{Running: 2, Queue: 3, QueueLimited: true})
	l.QueueSize = 20
	s := newScript(t, l)
	s.submitN("alice", 5, 0)
	if st := poolStats(t, s.c, "p"); st.Running != 2 || st.Queued != 3 || st.UsersRunning != 1 || st.UsersQueued != 1 {
		t.Fatalf("pool %+v: want alice's 2 running and 3 queued", st)
	}
	_, _, err := s.c.Submit("p", "alice", at(time.Second))
	const want = "Request was rejected, user alice has 2 running and 3 delayed requests, which is the allowed limit 3 of delayed requests per user (concurrent query limit per user 2) for pool p; " +
		"the pool holds 5 delayed/running requests of allowed limit 20 (including concurrent query limit 10)\n" +
		"Query failed during adding/waiting in workload pool p"
	if !errors.Is(err, ErrQueueFull) || err.Error() != want {
		t.Fatalf("sixth query: %v\nwant: %s", err, want)
	}
	if st := poolStats(t, s.c, "p"); st.Rejected != 1 {
		t.Errorf("rejected %d, want 1", st.Rejected)
	}
	if !s.submit("b1", "bob", time.Second) {
		t.Error("bob waits behind alice's limit")
	}
	w := s.why("alice3", time.Second)
	if w.Reason != protocol.WaitUserLimit || w.UserRunning != 2 || w.UserLimit != 2 || w.String() != "you have 2 running of your 2" {
		t.Errorf("why alice3 waits: %+v %q", w, w)
	}
	// A lowered per-user queue fails the user's newest waiting query.
	l.Users.Queue = 1
	ev := s.c.Configure(map[string]Limits{"p": l}, at(2*time.Second))
	if len(ev) != 2 || ev[0].ID != s.ids["alice5"] || ev[1].ID != s.ids["alice4"] || !errors.Is(ev[0].Err, ErrQueueFull) {
		t.Fatalf("events %+v, want alice5 and alice4 refused", ev)
	}
	checkUsers(t, s.c, "alice 2 running 1 queued, bob 1 running 0 queued")
}

// TestWhyWaitingFair: the fair order's reasons, as `poolagent run` and
// `poolagent queries` say them.
func TestWhyWaitingFair(t *testing.T) {
	s := newScript(t, fairPool(4, UserLimits{Fair: true, HalfLife: time.Hour}))
	s.submitN("alice", 6, 0) // 4 run, 2 wait
	s.submit("b1", "bob", time.Second)
	s.submit("d1", "dave", time.Second)
	s.submit("e1", "erin", 2*time.Second)
	// bob, dave and erin run nothing: all before alice (4 running).
	for _, tc := range []struct {
		label, want string
		position    int
	}{
		{"alice5", "3 users ahead of you in the fair order; 4 of 4 running", 4},
		{"alice6", "3 users ahead of you in the fair order; 4 of 4 running", 5},
		{"b1", "4 of 4 running", 1},
		{"d1", "1 user ahead of you in the fair order; 4 of 4 running", 2},
		{"e1", "2 users ahead of you in the fair order; 4 of 4 running", 3},
	} {
		w := s.why(tc.label, 3*time.Second)
		pl, _ := s.c.Place(s.ids[tc.label], at(3*time.Second))
		if w.String() != tc.want || pl.Position != tc.position {
			t.Errorf("%s: %q at %d, want %q at %d", tc.label, w, pl.Position, tc.want, tc.position)
		}
	}
	s.submit("b2", "bob", 4*time.Second)
	if w := s.why("b2", 4*time.Second); w.String() != "behind 1 of your own; 4 of 4 running" {
		t.Errorf("b2: %q", w)
	}
}

// refPool is the rule of docs/pools.md for one pool, written again from
// the text for TestFairProperty: a flat list of waiting queries, each
// user's running count and usage, and the next start found by sorting.
type refPool struct {
	c, q, cu, qu int // -1: none
	fair         bool
	halfLife     float64 // seconds; 0: usage not counted
	running      map[string]int
	usage        map[string]float64
	usageAt      map[string]float64
	waiting      []refQuery // by arrival
	runningQ     map[int]string
}

type refQuery struct {
	id   int
	user string
}

func (r *refPool) decayed(user string, now float64) float64 {
	if r.halfLife == 0 {
		return 0
	}
	return r.usage[user] * math.Pow(0.5, (now-r.usageAt[user])/r.halfLife)
}

func (r *refPool) userMay(user string) bool { return r.cu < 0 || r.running[user] < r.cu }
func (r *refPool) poolMay() bool            { return r.c < 0 || len(r.runningQ) < r.c }

// submit returns "started", "queued" or "rejected".
func (r *refPool) submit(id int, user string) string {
	if r.poolMay() && r.userMay(user) {
		r.running[user]++
		r.runningQ[id] = user
		return "started"
	}
	mine := 0
	for _, w := range r.waiting {
		if w.user == user {
			mine++
		}
	}
	switch {
	case r.q >= 0 && r.c >= 0 && len(r.runningQ)+len(r.waiting)+1-r.c > r.q,
		r.q >= 0 && r.c < 0 && len(r.waiting)+1 > r.q,
		r.qu >= 0 && mine+1 > r.qu:
		return "rejected"
	}
	r.waiting = append(r.waiting, refQuery{id, user})
	return "queued"
}

// leave ends running query id, charging cpu seconds at now, and returns
// the ids that start.
func (r *refPool) leave(id int, cpu, now float64) []int {
	user := r.runningQ[id]
	delete(r.runningQ, id)
	r.running[user]--
	if r.halfLife > 0 {
		r.usage[user] = r.decayed(user, now) + cpu
		r.usageAt[user] = now
	}
	var started []int
	for r.poolMay() {
		var cands []refQuery
		seen := map[string]bool{}
		for _, w := range r.waiting { // each user's oldest, if they may start
			if !seen[w.user] && r.userMay(w.user) {
				cands = append(cands, w)
			}
			seen[w.user] = true
		}
		if len(cands) == 0 {
			break
		}
		sort.SliceStable(cands, func(i, j int) bool {
			a, b := cands[i], cands[j]
			if r.fair {
				if r.running[a.user] != r.running[b.user] {
					return r.running[a.user] < r.running[b.user]
				}
				if ua, ub := r.decayed(a.user, now), r.decayed(b.user, now); ua != ub {
					return ua < ub
				}
			}
			return a.id < b.id
		})
		next := cands[0]
		r.waiting = slices.DeleteFunc(r.waiting, func(w refQuery) bool { return w.id == next.id })
		r.running[next.user]++
		r.runningQ[next.id] = next.user
		started = append(started, next.id)
	}
	return started
}

// TestFairProperty plays random arrivals, ends and charges on a
// Controller and on refPool, over random pool settings, and compares
// every outcome: started at once, queued or refused, and which queued
// queries each end starts.
func TestFairProperty(t *testing.T) {
	users := []string{"alice", "bob", "carol", "dave", "erin"}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 24))
		pick := func(opts ...int) int { return opts[rng.IntN(len(opts))] }
		ref := &refPool{
			c: pick(1, 2, 3, 5), q: pick(-1, 4, 10), cu: pick(-1, 1, 2), qu: pick(-1, 0, 2, 5),
			fair: rng.IntN(3) > 0, halfLife: float64(pick(0, 60, 3600)),
			running: map[string]int{}, usage: map[string]float64{}, usageAt: map[string]float64{}, runningQ: map[int]string{},
		}
		if ref.cu > ref.c {
			ref.cu = ref.c
		}
		if ref.q >= 0 && ref.qu > ref.q {
			ref.qu = ref.q
		}
		u := UserLimits{Fair: ref.fair, HalfLife: time.Duration(ref.halfLife) * time.Second}
		if ref.cu > 0 {
			u.Running = ref.cu
		}
		if ref.qu >= 0 {
			u.Queue, u.QueueLimited = ref.qu, true
		}
		c := newController(t, map[string]Limits{"p": {ConcurrentQueryLimit: ref.c, QueueSize: ref.q, LoadCPUThresholdPercent: Unlimited, Users: u}})
		refID := map[QueryID]int{}
		now := 0.0
		for step := range 200 {
			now += float64(rng.IntN(30))
			if len(ref.runningQ) == 0 || rng.IntN(2) == 0 {
				user := users[rng.IntN(len(users))]
				id, started, err := c.Submit("p", user, at(time.Duration(now)*time.Second))
				got := "queued"
				switch {
				case err != nil:
					got = "rejected"
				case started:
					got = "started"
				}
				want := ref.submit(step, user)
				if got != want {
					t.Fatalf("seed %d step %d: %s's query %s, want %s (ref %+v)", seed, step, user, got, want, ref)
				}
				if err == nil {
					refID[id] = step
				}
				continue
			}
			var ids []int
			for id := range ref.runningQ {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			end := ids[rng.IntN(len(ids))]
			var qid QueryID
			for k, v := range refID {
				if v == end {
					qid = k
				}
			}
			cpu := float64(rng.IntN(100))
			c.Charge(qid, time.Duration(cpu)*time.Second, at(time.Duration(now)*time.Second))
			var got []int
			for _, e := range c.Leave(qid, at(time.Duration(now)*time.Second)) {
				got = append(got, refID[e.ID])
			}
			if want := ref.leave(end, cpu, now); !slices.Equal(got, want) {
				t.Fatalf("seed %d step %d: end of %d started %v, want %v (ref %+v)", seed, step, end, got, want, ref)
			}
		}
	}
}
