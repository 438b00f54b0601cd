// Package suggest finds the name a mistyped one was probably meant to be,
// for "did you mean --pools?" in the command lines' errors; [Distance] also
// serves the pool file's "did you mean" (package planner). It links only
// the standard library, so the slim client uses it too.
package suggest

import "strings"

// Nearest is the name among names nearest to word, when one is near enough
// to be a slip: at most a third of word's letters changed (one at least),
// or word a prefix of it or it of word; "" when none is. Single letters
// (-p, -n) are too short to guess at: none is suggested, nor for one.
func Nearest(word string, names []string) string {
	if len(word) < 2 {
		return ""
	}
	best, bestDist := "", 0
	for _, n := range names {
		if len(n) < 2 {
			continue
		}
		d := Distance(word, n)
		if strings.HasPrefix(n, word) || strings.HasPrefix(word, n) {
			d = min(d, 1)
		}
		if best == "" || d < bestDist {
			best, bestDist = n, d
		}
	}
	if best == "" || bestDist > max(1, len(word)/3) {
		return ""
	}
	return best
}

// Distance is the Levenshtein distance of a and b, in runes: how many
// runes must be inserted, deleted or replaced to turn one into the other.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
