package daemon

import (
	"sync"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/peer"
)

// remoteBackend is an admission.Backend whose queued queries start without
// a call of the daemon, as in fleet mode when another host frees a slot:
// the events a Leave causes are not returned but sent later on Events.
type remoteBackend struct {
	*admission.Controller
	events chan admission.Event
}

func (b *remoteBackend) Leave(id admission.QueryID, now time.Time) []admission.Event {
	events := b.Controller.Leave(id, now)
	go func() {
		for _, ev := range events {
			b.events <- ev
		}
	}()
	return nil
}

func (b *remoteBackend) Events() <-chan admission.Event { return b.events }

// TestBackendEvents: a queued query starts on an event the backend sends
// by itself, and the whole ten-client case holds with such a backend.
func TestBackendEvents(t *testing.T) {
	policy := policyOf(t, olapPool(2, 3, ""))
	ctl, err := admission.NewController(admission.LoadConfig{}, admission.LimitsFromModel(policy.Model))
	if err != nil {
		t.Fatal(err)
	}
	backend := &remoteBackend{Controller: ctl, events: make(chan admission.Event)}
	cg := newFakeCgroups(t)
	d := startDaemon(t, Config{Admission: backend}, policy, cg, peer.SystemUsers{})
	twoThreeTen(t, d, cg.left)
}

// undecidedBackend decides as the Controller does but tells the daemon
// later, as fleet mode does while its etcd transaction is under way:
// Submit leaves every query of a pool with a global limit undecided, and
// its start, its refusal or its place in the queue comes as an event.
type undecidedBackend struct {
	*admission.Controller
	events    chan admission.Event
	mu        sync.Mutex
	undecided map[admission.QueryID]bool
	refused   admission.QueryID
}

func (b *undecidedBackend) Submit(pool, user string, now time.Time) (admission.QueryID, bool, error) {
	id, started, err := b.Controller.Submit(pool, user, now)
	if l, ok := b.PoolLimits(pool); !ok || !l.Global() {
		return id, started, err
	}
	ev := admission.Event{ID: id, Pool: pool, Err: err, Queued: err == nil && !started}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.refused++
		ev.ID = 1<<40 + b.refused // an id of its own, never a query's
	}
	b.undecided[ev.ID] = true
	go func() {
		time.Sleep(time.Millisecond)
		b.mu.Lock()
		delete(b.undecided, ev.ID)
		b.mu.Unlock()
		b.events <- ev
	}()
	return ev.ID, false, nil
}

func (b *undecidedBackend) Place(id admission.QueryID, now time.Time) (admission.Place, bool) {
	b.mu.Lock()
	undecided := b.undecided[id]
	b.mu.Unlock()
	if undecided {
		return admission.Place{}, false
	}
	return b.Controller.Place(id, now)
}

func (b *undecidedBackend) Events() <-chan admission.Event { return b.events }

// TestBackendUndecided: with a backend that decides after Submit, the
// ten-client case holds: starts, refusals with their text and the queue
// in arrival order, each told to its client once decided.
func TestBackendUndecided(t *testing.T) {
	policy := policyOf(t, olapPool(2, 3, ""))
	ctl, err := admission.NewController(admission.LoadConfig{}, admission.LimitsFromModel(policy.Model))
	if err != nil {
		t.Fatal(err)
	}
	backend := &undecidedBackend{Controller: ctl, events: make(chan admission.Event), undecided: map[admission.QueryID]bool{}}
	cg := newFakeCgroups(t)
	d := startDaemon(t, Config{Admission: backend}, policy, cg, peer.SystemUsers{})
	twoThreeTen(t, d, cg.left)
}
