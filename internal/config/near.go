package config

import "strings"

// resembles returns the known variable that name, an MCP_* variable not
// in the table, is likely a misspelling of, or "". Likely means the same
// letters in another case or with other separators, or a small edit
// distance: one edit for names of up to ten letters after MCP_, two for
// the longer ones. The bounds
// keep the names MCP clients set for themselves (MCP_TIMEOUT,
// MCP_TOOL_TIMEOUT, MCP_BEARER_TOKEN, …) out of it: each is at least four
// edits from every name here.
func resembles(name string) string {
	if near := sameLetters(name); near != "" {
		return near
	}
	n := strings.TrimPrefix(normalize(name), "MCP")
	best, bestD := "", 0
	for _, v := range table {
		k := strings.TrimPrefix(normalize(v.name), "MCP")
		limit := 2
		if len(k) <= 10 {
			limit = 1
		}
		if d := editDistance(n, k, limit); d <= limit && (best == "" || d < bestD) {
			best, bestD = v.name, d
		}
	}
	return best
}

// sameLetters returns the known variable whose name equals name once
// case and separators are ignored, or "".
func sameLetters(name string) string {
	n := normalize(name)
	for _, v := range table {
		if v.name != name && normalize(v.name) == n {
			return v.name
		}
	}
	return ""
}

// normalize upper-cases name and drops the characters people use as
// separators.
func normalize(name string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '_', '-', '.', ' ':
			return -1
		}
		if 'a' <= r && r <= 'z' {
			return r - 'a' + 'A'
		}
		return r
	}, name)
}

// editDistance is the optimal-string-alignment distance between a and b
// (insertions, deletions, substitutions and transpositions of adjacent
// bytes), or limit+1 as soon as it must exceed limit. Names are short
// ASCII, so bytes and a full table are fine; a library would be a
// dependency for twenty lines.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
