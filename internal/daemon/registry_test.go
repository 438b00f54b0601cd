package daemon

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/poolagent/poolagent/internal/admission"
	"github.com/poolagent/poolagent/internal/history"
)

// leaveBackend ends a query and starts none in its place.
type leaveBackend struct{ admission.Backend }

func (leaveBackend) Leave(admission.QueryID, time.Time) []admission.Event { return nil }
func (leaveBackend) Charge(admission.QueryID, time.Duration, time.Time)   {}

// TestRunningEnded lists the running queries by pool and, taken with the
// list, what those that left it used as each one's end read it: an end
// not read counts as unread, and a query never admitted (never listed)
// counts for nothing. A list once returned does not change.
func TestRunningEnded(t *testing.T) {
	r := newRegistry(leaveBackend{}, Policy{})
	src := sampled{reg: r}
	q := func(qid admission.QueryID, name string, usec uint64, read bool) *query {
		q := &query{queryView: queryView{pool: "olap", qid: qid, name: name}, endUsec: usec, endRead: read}
		r.begin(q)
		return q
	}
	a, b := q(1, "olap-1", 5_000, true), q(2, "olap-2", 0, false)
	queued, unsubmitted := q(3, "", 0, false), q(0, "", 0, false)
	running, ended := src.Running()
	if got := slices.Sorted(slices.Values(running["olap"])); !slices.Equal(got, []string{"olap-1", "olap-2"}) || len(ended) != 0 {
		t.Fatalf("two admitted: running %q, ended %v", got, ended)
	}
	for _, q := range []*query{a, queued, unsubmitted} {
		r.release(q)
	}
	running2, ended2 := src.Running()
	if !slices.Equal(running2["olap"], []string{"olap-2"}) || ended2["olap"] != (history.Ended{Usec: 5_000}) {
		t.Errorf("olap-1 ended having used 5 ms, and two never admitted: running %q, ended %+v", running2["olap"], ended2)
	}
	r.release(b)
	running3, ended3 := src.Running()
	if len(running3["olap"]) != 0 || ended3["olap"] != (history.Ended{Usec: 5_000, Unread: 1}) {
		t.Errorf("olap-2 ended unread: running %q, ended %+v", running3["olap"], ended3)
	}
	if len(running2["olap"]) != 1 || !maps.Equal(ended2, map[string]history.Ended{"olap": {Usec: 5_000}}) {
		t.Errorf("an earlier list changed: running %q, ended %+v", running2["olap"], ended2)
	}
}
