package cgroupfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestQueryEnd follows a query cgroup from placement to removal on the
// emulated kernel: populated while a thread (or one in a nested cgroup)
// is in it, empty after, then removed from every hierarchy.
func TestQueryEnd(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		name := "v1"
		if v2 {
			name = "v2"
		}
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, v2)
			tr := w.tree("poolagent", nil)
			d := seedDesired()
			if _, err := tr.Reconcile(d); err != nil {
				t.Fatal(err)
			}
			hiers := hiersOf(t, tr, false)
			for _, h := range hiers {
				w.spawn(w.hierMount(h), 300)
			}
			if err := tr.PlaceQuery(*d.Pools[1], "q1", 300); err != nil {
				t.Fatal(err)
			}
			check := func(want bool) {
				t.Helper()
				got, err := tr.QueryPopulated("etl", "q1")
				if err != nil || got != want {
					t.Fatalf("populated %v, %v; want %v", got, err, want)
				}
			}
			// The emulated kernel keeps no thread list: write the one the
			// kernel would show. The placed process's thread keeps the
			// query populated, also after its leader left cgroup.procs
			// (the exit race), and so does a thread in a nested cgroup.
			threads := threadList(v2)
			q := filepath.Join(tr.Root(hiers[0]), "etl/q1")
			w.must(os.WriteFile(filepath.Join(q, threads), []byte("300\n"), 0o644))
			check(true)
			for _, h := range hiers {
				w.must(os.WriteFile(filepath.Join(tr.Root(h), "etl/q1", fileProcs), nil, 0o644))
			}
			check(true)
			w.must(os.WriteFile(filepath.Join(q, threads), nil, 0o644))
			for _, h := range hiers {
				w.must(os.Mkdir(filepath.Join(tr.Root(h), "etl/q1/inner"), 0o755))
				w.mkcg(filepath.Join(tr.Root(h), "etl/q1/inner"))
			}
			nested := filepath.Join(q, "inner")
			w.must(os.WriteFile(filepath.Join(nested, threads), []byte("301\n"), 0o644))
			check(true)
			w.must(os.WriteFile(filepath.Join(nested, threads), nil, 0o644))
			check(false)

			if err := tr.RemoveQuery("etl", "q1"); err != nil {
				t.Fatal(err)
			}
			for _, h := range hiers {
				if _, err := os.Stat(filepath.Join(tr.Root(h), "etl/q1")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s: query cgroup still there: %v", h, err)
				}
			}
			if _, err := tr.QueryPopulated("etl", "q1"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("populated of a removed query: %v, want not exist", err)
			}
		})
	}
}

func TestQueryEndRefusesBadNames(t *testing.T) {
	w := newWorld(t, true)
	tr := w.tree("poolagent", nil)
	for _, q := range [][2]string{{"..", "q"}, {"adhoc", "../../etc"}, {"adhoc", "cgroup.procs"}, {"", "q"}} {
		if _, err := tr.QueryPopulated(q[0], q[1]); !errors.Is(err, ErrInvalid) {
			t.Errorf("populated %q/%q: %v, want ErrInvalid", q[0], q[1], err)
		}
		if err := tr.RemoveQuery(q[0], q[1]); !errors.Is(err, ErrInvalid) {
			t.Errorf("remove %q/%q: %v, want ErrInvalid", q[0], q[1], err)
		}
	}
}
