// Package glob matches names against patterns in which `*` is the only
// wildcard. It is not path.Match: that stops `*` at `/` and gives `[`,
// `\` and `?` meaning, while the names matched here (SQL identifiers,
// qualified tool names) may contain any of them, and a policy pattern
// such as `*.admin_*` must let `*` cross dots.
package glob

// Match reports whether pattern matches the whole of name, where `*`
// matches any run of bytes and every other byte only itself. Callers fold
// case first when case must not matter. Greedy matching with backtracking
// to the last star keeps it at O(len(pattern) × len(name)) at worst.
func Match(pattern, name string) bool {
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case p < len(pattern) && pattern[p] == name[n]:
			p++
			n++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
