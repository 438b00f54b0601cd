package daemon

import (
	"testing"
	"time"

	"github.com/poolagent/poolagent/admission"
	"github.com/poolagent/poolagent/peer"
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
