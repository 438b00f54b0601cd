package cgroupfs

import "testing"

// Lookups runs f twice: resolving names with openat2, and with the
// component walk used where openat2 is refused (ENOSYS), so both keep the
// same guarantees.
func Lookups(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) {
			was := openat2Missing.Load()
			openat2Missing.Store(walk)
			t.Cleanup(func() { openat2Missing.Store(was) })
			f(t)
		})
	}
}

// KillQueryFreezing is KillQuery by the freezer's way, skipping
// cgroup.kill, for the test of the fallback on a kernel that has both.
func (t *Tree) KillQueryFreezing(pool, query string) error { return t.killQuery(pool, query, false) }
