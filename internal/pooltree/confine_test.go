package pooltree

import (
	"slices"
	"testing"
)

func TestLeftCgroups(t *testing.T) {
	for _, tc := range []struct {
		name, from, to string
		want           []string
	}{
		{"from a user session", "/user.slice/user-1000.slice/session-2.scope", "/poolagent/default/q1",
			[]string{"/user.slice/user-1000.slice/session-2.scope", "/user.slice/user-1000.slice", "/user.slice"}},
		{"root cgroup", "/", "/poolagent/default/q1", nil},
		{"sibling below a shared parent", "/a/b/c", "/a/poolagent/default/q1", []string{"/a/b/c", "/a/b"}},
		{"from another query", "/poolagent/olap/q1", "/poolagent/default/q2", []string{"/poolagent/olap/q1", "/poolagent/olap"}},
		{"a prefix that is no parent", "/pool", "/poolagent/default/q1", []string{"/pool"}},
		{"already there", "/poolagent/default/q1", "/poolagent/default/q1", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := leftCgroups(tc.from, tc.to); !slices.Equal(got, tc.want) {
				t.Fatalf("leftCgroups(%q, %q) = %q, want %q", tc.from, tc.to, got, tc.want)
			}
		})
	}
}
