// Package suggest finds the likely intended name behind a typo, for the
// "did you mean" of error messages (policy keys, flags, S3 policy actions).
package suggest

import "strings"

// Closest returns the candidate closest to s (ignoring case) when it is
// close enough to be a typo: at most 2 edits away (1 for names of up to 3
// characters) and fewer edits than s has characters. Otherwise "".
func Closest(s string, candidates []string) string {
	best, bestDist := "", -1
	for _, c := range candidates {
		d := Distance(strings.ToLower(s), strings.ToLower(c))
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	limit := 2
	if len(s) <= 3 {
		limit = 1
	}
	if bestDist < 0 || bestDist > limit || bestDist >= len(s) {
		return ""
	}
	return best
}

// Distance is the Levenshtein distance of a and b, capped at 64 for longer
// inputs so that a huge name cannot cost quadratic time.
func Distance(a, b string) int {
	const maxLen = 64
	if len(a) > maxLen || len(b) > maxLen {
		return maxLen
	}
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
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
