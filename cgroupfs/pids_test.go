package cgroupfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPidsLimits: the task limits go to pids.max of the pool and of its
// queries (v2, or v1's pids hierarchy), the pids controller is enabled
// where v2 needs it, a second apply writes nothing, a dropped limit goes
// back to "max", and the reader reads them back.
func TestPidsLimits(t *testing.T) {
	modes(t, func(t *testing.T, v2 bool) {
		w := newWorld(t, v2)
		w.addPids()
		tr := w.tree("poolagent", nil)
		d := seedDesired()
		d.Pools[2].Pool.PidsMax, d.Pools[2].Query.PidsMax = 200, 64
		if _, err := tr.Reconcile(d); err != nil {
			t.Fatal(err)
		}
		hiers, err := tr.hiers(uses{pids: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hiers {
			w.spawn(w.hierMount(h), 9)
		}
		if err := tr.PlaceQuery(*d.Pools[2], "q", 9); err != nil {
			t.Fatal(err)
		}
		pids := w.mounts.Unified
		if !v2 {
			pids = w.mounts.V1[HierPids]
		}
		for cgroup, want := range map[string]string{"olap": "200", "olap/q": "64", "etl": "max"} {
			if got := w.read(filepath.Join(pids, "poolagent", cgroup, filePidsMax)); got != want {
				t.Errorf("%s pids.max reads %q, want %q", cgroup, got, want)
			}
		}
		if again, _ := tr.Changes(d); len(again.Ops) != 0 {
			t.Errorf("second plan not empty:\n%s", again)
		}
		p, err := tr.Reader().Pids("olap/q")
		if err != nil || p == nil || p.Limit != 64 {
			t.Errorf("reader: %+v, %v; want the query's limit 64", p, err)
		}
		d.Pools[2].Pool.PidsMax = 0
		if _, err := tr.Reconcile(d); err != nil {
			t.Fatal(err)
		}
		if got := w.read(filepath.Join(pids, "poolagent/olap", filePidsMax)); got != "max" {
			t.Errorf("olap pids.max after the limit was dropped: %q, want max", got)
		}
	})
}

// TestPidsLimitWithoutController: a task limit where the pids controller
// is not there is refused before anything is written, saying what would
// be accepted.
func TestPidsLimitWithoutController(t *testing.T) {
	modes(t, func(t *testing.T, v2 bool) {
		w := newWorld(t, v2)
		tr := w.tree("poolagent", nil)
		d := seedDesired()
		d.Pools[1].Query.PidsMax = 10
		_, err := tr.Reconcile(d)
		want := "-1 for both"
		if v2 {
			want = `enable it with "+pids"`
		}
		if !errors.Is(err, ErrNoController) || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want ErrNoController saying %q", err, want)
		}
		cpu, _, _ := w.mounts.Controller("cpu")
		if _, err := os.Stat(filepath.Join(cpu, "poolagent")); !os.IsNotExist(err) {
			t.Error("something was written")
		}
	})
}
