package planner

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// The name and member rules are loops for start-up cost; these regexps are
// their specification.
var (
	nameSpec   = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$`)
	memberSpec = regexp.MustCompile(`^%?[A-Za-z0-9_][A-Za-z0-9_.@-]{0,255}\$?$`)
)

func TestNameRulesMatchSpec(t *testing.T) {
	fixed := []string{
		"", "a", "-a", "_", "olap", "the_ceo", "a-b", "a.b", "a/b", "..", "%", "%%a", "%a",
		"a$", "a$$", "$", "%$", "%a$", "user1@domain", "all-users@well-known", "a b", "é",
		strings.Repeat("a", 64), strings.Repeat("a", 65), strings.Repeat("a", 256),
		strings.Repeat("a", 257), "%" + strings.Repeat("a", 256) + "$",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "aZ9_-.@%$/ \x00é"
	var cases []string
	cases = append(cases, fixed...)
	for range 20000 {
		n := rng.IntN(8)
		if rng.IntN(10) == 0 {
			n = 60 + rng.IntN(200)
		}
		var b strings.Builder
		for range n {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		cases = append(cases, b.String())
	}
	for _, s := range cases {
		if got, want := validName(s), nameSpec.MatchString(s); got != want {
			t.Errorf("validName(%q) = %v, spec says %v", s, got, want)
		}
		if got, want := validMember(s), memberSpec.MatchString(s); got != want {
			t.Errorf("validMember(%q) = %v, spec says %v", s, got, want)
		}
	}
}
