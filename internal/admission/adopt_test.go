package admission

import "testing"

// TestAdoptTakesSlotsWithoutAdmitting: two queries found running in a pool
// with CONCURRENT_QUERY_LIMIT=2 fill it; the next one queues, and starts
// when an adopted one leaves.
func TestAdoptTakesSlotsWithoutAdmitting(t *testing.T) {
	c := newController(t, map[string]Limits{"olap": limits(2, 1)})
	a := c.Adopt("olap", "", at(0))
	c.Adopt("olap", "", at(0))
	if s := poolStats(t, c, "olap"); s.Running != 2 || s.Admitted != 0 {
		t.Fatalf("after adopting two: running %d admitted %d, want 2 and 0", s.Running, s.Admitted)
	}
	id, started, err := c.Submit("olap", "alice", at(1))
	if err != nil || started {
		t.Fatalf("third query: started %v err %v, want queued", started, err)
	}
	events := c.Leave(a, at(2))
	if len(events) != 1 || events[0].ID != id || events[0].Err != nil {
		t.Fatalf("leave of an adopted query: events %+v, want the queued query started", events)
	}
	if s := poolStats(t, c, "olap"); s.Running != 2 || s.Queued != 0 {
		t.Fatalf("running %d queued %d, want 2 and 0", s.Running, s.Queued)
	}
}

// TestAdoptIntoMissingPool: a query left running in a pool the model no
// longer has keeps a dropped pool until it leaves.
func TestAdoptIntoMissingPool(t *testing.T) {
	c := newController(t, nil)
	id := c.Adopt("etl", "", at(0))
	s := poolStats(t, c, "etl")
	if !s.Dropped || s.Running != 1 {
		t.Fatalf("etl %+v, want dropped with one running", s)
	}
	if _, _, err := c.Submit("etl", "alice", at(1)); err == nil {
		t.Fatal("a new query was admitted into a dropped pool")
	}
	c.Leave(id, at(2))
	for _, s := range c.Pools() {
		if s.Name == "etl" {
			t.Fatalf("dropped pool kept after its last query left: %+v", s)
		}
	}
}
