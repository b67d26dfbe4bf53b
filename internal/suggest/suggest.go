// Package suggest finds the name a typo most likely meant, for the errors
// and warnings that say "did you mean …?": the limits file's field names
// and choices, the server's RLS_ variables, and every command's flags.
package suggest

import "strings"

// MaxEdits is how far a name may be from the word and still be suggested:
// two edits catch a doubled, dropped or swapped letter, or a hyphen for an
// underscore, without suggesting unrelated short names.
const MaxEdits = 2

// Nearest returns the name within MaxEdits of word, compared in any case,
// that is nearest to it, the first of names on ties; "" when none is near
// or word is one of names as it is spelt (one that differs only in case is
// suggested in its right case).
func Nearest(word string, names []string) string {
	w := strings.ToLower(word)
	best, dist := "", MaxEdits+1
	for _, n := range names {
		if n == word {
			return ""
		}
		if d := editDistance(w, strings.ToLower(n)); d < dist {
			best, dist = n, d
		}
	}
	return best
}

// DidYouMean is msg, followed by ", did you mean NAME?" when Nearest
// finds one.
func DidYouMean(msg, word string, names []string) string {
	if best := Nearest(word, names); best != "" {
		return msg + ", did you mean " + best + "?"
	}
	return msg
}

// editDistance is the number of edits between a and b, in bytes: a
// letter inserted, dropped or changed, or two neighbours swapped (the
// optimal string alignment distance), so that ULR is one edit from URL.
func editDistance(a, b string) int {
	// Three rows of the table: two back (for a swap), one back, this one.
	back2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], back2[j-2]+1)
			}
		}
		back2, prev, cur = prev, cur, back2
	}
	return prev[len(b)]
}
