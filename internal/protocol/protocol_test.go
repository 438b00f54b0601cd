package protocol

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// TestStandardLibraryOnly keeps the protocol a package of its own: both
// ends import it, so it imports nothing of poolagent's (its replies never
// carry state's or sysview's types) and nothing outside the standard
// library (the slim poolagent-run links it).
func TestStandardLibraryOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list -deps: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg != "github.com/poolagent/poolagent/internal/protocol" {
			t.Errorf("package protocol imports %s; it may import only the standard library", pkg)
		}
	}
}

// TestOOMMessage: the message names the query, its pool, the limit and
// the parameter that set it.
func TestOOMMessage(t *testing.T) {
	o := OOMKill{Limit: OOMLimitQuery, LimitBytes: 512 << 20, Parameter: "QUERY_MEMORY_LIMIT_PERCENT_PER_NODE", Percent: 5, NodeBytes: 10 << 30}
	want := "poolagent: query q-7 in pool olap was killed by the kernel's OOM killer: the query's memory limit 512 MiB (QUERY_MEMORY_LIMIT_PERCENT_PER_NODE=5 of 10 GiB) was reached"
	if got := o.Message("poolagent", "q-7", "olap"); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	for b, want := range map[int64]string{100: "100 B", 4096: "4 KiB", 104439808: "99.6 MiB", 3 << 40: "3 TiB", 1<<30 + 1<<29: "1.5 GiB"} {
		if got := FormatBytes(b); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", b, got, want)
		}
	}
}

// TestForkMessage names the query, the pool and the limit that refused
// the forks, both limits when the kernel's counts cannot tell which.
func TestForkMessage(t *testing.T) {
	for _, tt := range []struct {
		f    ForkRefused
		want string
	}{
		{ForkRefused{Limit: "query", Refused: 1, QueryLimit: 64},
			"poolagent: query q-7 in pool olap could not start a process or thread once: the query's task limit 64 (QUERY_PIDS_LIMIT) was reached"},
		{ForkRefused{Limit: "pool", Refused: 12, PoolLimit: 200},
			"poolagent: query q-7 in pool olap could not start a process or thread 12 times: the pool's task limit 200 (TOTAL_PIDS_LIMIT) was reached"},
		{ForkRefused{Limit: "pool", Refused: 5, PoolLimit: 200, InPool: true},
			"poolagent: query q-7 ran while pool olap's queries could not start a process or thread 5 times: the pool's task limit 200 (TOTAL_PIDS_LIMIT) was reached"},
		{ForkRefused{Limit: ForkLimitEither, Refused: 2, QueryLimit: 64, PoolLimit: 200},
			"poolagent: query q-7 in pool olap could not start a process or thread 2 times: the query's task limit 64 (QUERY_PIDS_LIMIT) or the pool's task limit 200 (TOTAL_PIDS_LIMIT) was reached"},
	} {
		if got := tt.f.Message("poolagent", "q-7", "olap"); got != tt.want {
			t.Errorf("%+v:\n%s\nwant\n%s", tt.f, got, tt.want)
		}
	}
}
