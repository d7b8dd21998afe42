package sandboxfs

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// Path limits, in bytes, as the kernel counts them.
const (
	// MaxPathBytes is PATH_MAX (4096) less the terminating NUL: the longest
	// path the kernel accepts. Refusing here means the kernel never sees a
	// path it would reject as too long.
	MaxPathBytes = 4095
	// MaxComponentBytes is NAME_MAX, the longest file name.
	MaxComponentBytes = 255
)

// checkPath is the lexical gate every path crosses before any system call.
// It is a first line only: containment is decided by the kernel (or
// os.Root), which also sees symlinks. Its own jobs are to refuse input no
// file name should carry, and to refuse a ".." that would climb above the
// root before anything is looked up, so that such a path is denied the same
// way whether or not its target, or any component on the way, exists.
func checkPath(p string) *problem.Problem {
	invalid := func(detail string) *problem.Problem {
		return problem.New(problem.Validation, detail, "relative_path")
	}
	switch {
	case p == "":
		return invalid("relative_path must not be empty")
	case len(p) > MaxPathBytes:
		return invalid("relative_path is longer than 4095 bytes")
	case !utf8.ValidString(p):
		return invalid("relative_path is not valid UTF-8")
	}
	for _, r := range p {
		switch {
		case r == 0:
			return invalid("relative_path contains a NUL character")
		case unicode.IsControl(r):
			return invalid("relative_path contains a control character")
		case unicode.Is(unicode.Bidi_Control, r):
			// A bidi override makes the name a human reviews differ from
			// the name that is opened.
			return invalid("relative_path contains a bidirectional formatting character")
		}
	}
	if p[0] == '/' {
		// Not echoed: an absolute path is a host path, even the caller's.
		return problem.New(problem.AccessDenied,
			"relative_path must be relative to the sandbox; absolute paths are refused", "relative_path")
	}
	depth := 0
	for c := range strings.SplitSeq(p, "/") {
		switch {
		case len(c) > MaxComponentBytes:
			return invalid("relative_path has a component longer than 255 bytes")
		case c == "" || c == ".":
		case c == "..":
			depth--
			if depth < 0 {
				return problem.Newf(problem.AccessDenied, []string{"relative_path"},
					"%s resolves outside the sandbox", problem.Quote(p))
			}
		default:
			depth++
		}
	}
	return nil
}
