package cgroupfs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// recordFS notes every name read or written below its root.
type recordFS struct {
	FS
	names *[]string
}

func (f recordFS) note(name string) { *f.names = append(*f.names, name) }

func (f recordFS) ReadFile(name string) ([]byte, error) {
	f.note(name)
	return f.FS.ReadFile(name)
}

func (f recordFS) ReadDir(name string) ([]string, error) {
	f.note(name)
	return f.FS.ReadDir(name)
}

func (f recordFS) WriteFile(name, value string) error {
	f.note(name)
	return f.FS.WriteFile(name, value)
}

func (f recordFS) Mkdir(name string) error {
	f.note(name)
	return f.FS.Mkdir(name)
}

func (f recordFS) Rmdir(name string) error {
	f.note(name)
	return f.FS.Rmdir(name)
}

func (f recordFS) Close() error {
	if c, ok := f.FS.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// recorded is a populated world whose tree notes in names every name it
// reads or writes below its roots.
func recorded(t *testing.T, v2 bool) (w *world, tr *Tree, names *[]string) {
	w, names = newWorld(t, v2), new([]string)
	tr = w.tree("poolagent", func(f FS) FS {
		return recordFS{FS: f, names: names}
	})
	populate(t, w, tr)
	return w, tr, names
}

// TestReconcilePools: a change confined to olap reads and writes nothing
// of the other pools, and leaves the tree as Reconcile would (olap
// tightened, its empty query cgroup removed); a memory limit coming into
// use, which every pool's cgroups need on v1, reconciles the whole tree.
func TestReconcilePools(t *testing.T) {
	modes(t, func(t *testing.T, v2 bool) {
		_, tr, names := recorded(t, v2)
		// Keep the record to what the confined change does.
		*names = nil
		d := seedDesired()
		d.Pools[2].Pool = cg(300000, 100000, 0, 100, 0)
		d.Pools[2].Query = cg(150000, 100000, 0, 0, 0)
		res, err := tr.ReconcilePools(d, []string{"olap"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Writes == 0 {
			t.Fatalf("the confined change made %d writes; want olap's", res.Writes)
		}
		for _, n := range *names {
			for _, other := range []string{"etl", "default"} {
				if slices.Contains(strings.Split(n, "/"), other) {
					t.Errorf("the change confined to olap touched %s", n)
				}
			}
		}
		if c, err := tr.Changes(d); err != nil || len(c.Ops) != 0 {
			t.Errorf("after the confined change the whole tree still needs (%v):\n%s", err, c)
		}

		if _, err := tr.ReconcilePools(d, []string{"olap", "nope"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "nope") {
			t.Errorf("a pool the desired state lacks: %v; want ErrInvalid naming it", err)
		}

		// A tree without processes (v2 enables no controller for a pool
		// with processes of its own).
		tr = newWorld(t, v2).tree("poolagent", nil)
		if _, err := tr.Reconcile(seedDesired()); err != nil {
			t.Fatal(err)
		}
		d = seedDesired()
		d.Pools[2].Pool.MemoryBytes = 1 << 30
		if _, err := tr.ReconcilePools(d, []string{"olap"}); err != nil {
			t.Fatal(err)
		}
		if c, err := tr.Changes(d); err != nil || len(c.Ops) != 0 {
			t.Errorf("after a memory limit came into use the whole tree still needs (%v):\n%s", err, c)
		}
	})
}

// TestTrust: a whole-tree change does not read the values of the query
// cgroups it trusts, and leaves another writer's change to one of them
// (which the change without trust repairs); it still lists them, reads
// the processes of one not kept but not of those kept, and reads and
// repairs one missing in a hierarchy of the change.
func TestTrust(t *testing.T) {
	modes(t, func(t *testing.T, v2 bool) {
		w, tr, names := recorded(t, v2)
		d := seedDesired()
		if _, err := tr.Reconcile(d); err != nil {
			t.Fatal(err)
		}
		file, drift := fileCFSQuota, "50000"
		if v2 {
			file, drift = fileCPUMax, "50000 100000"
		}
		cpuRoot := tr.Root(hiersOf(t, tr, false)[0])
		w.must(os.WriteFile(filepath.Join(cpuRoot, "etl/q1", file), []byte(drift), 0o644))
		trusted := map[string]bool{"etl/q1": true, "etl/q2": true, "olap/q3": true}
		kept := map[string]bool{"etl/q1": true, "etl/q2": true}
		tr.Trust(trusted)
		tr.Keep(kept)
		*names = nil
		c, err := tr.Changes(d)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Ops) != 0 {
			t.Errorf("with etl/q1 trusted the change writes:\n%s", c)
		}
		read := map[string]bool{}
		for _, n := range *names {
			read[n] = true
		}
		for q := range trusted {
			if read[q+"/"+file] {
				t.Errorf("the change read the trusted %s/%s", q, file)
			}
			if read[q+"/"+fileProcs] == kept[q] {
				t.Errorf("the change read the processes of %s, trusted and kept %v: %v; want them read only when not kept", q, kept[q], read[q+"/"+fileProcs])
			}
		}
		if !read["etl/"+file] {
			t.Errorf("the change did not read the pool etl's %s", file)
		}
		tr.Trust(nil)
		c, err = tr.Changes(d)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(c.String(), "etl/q1/"+file) {
			t.Errorf("without trust the change does not repair etl/q1/%s:\n%s", file, c)
		}
		if hiers := hiersOf(t, tr, false); len(hiers) > 1 {
			// Missing in a hierarchy: read, made and written as any other.
			other := tr.Root(hiers[1])
			w.must(os.RemoveAll(filepath.Join(other, "etl/q1")))
			tr.Trust(trusted)
			*names = nil
			c, err := tr.Changes(d)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(c.String(), "etl/q1/"+file) {
				t.Errorf("etl/q1 missing in %s: the change does not repair its %s:\n%s", hiers[1], file, c)
			}
			if !slices.Contains(*names, "etl/q1/"+fileProcs) {
				t.Errorf("etl/q1 missing in %s: the change did not read its processes, to join them to it", hiers[1])
			}
		}
	})
}
