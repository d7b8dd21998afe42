package guard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// Limits bounds the structure of tool arguments. Every field must be at
// least 1; [Limits.Validate] says whether it is. A limit of zero or less
// makes [Sanitize] refuse everything rather than lift the bound.
type Limits struct {
	// MaxDepth is the deepest nesting of objects and arrays allowed. The
	// arguments object itself is depth 1, so {"a":{"b":1}} has depth 2.
	MaxDepth int
	// MaxItems is the most members an object, or elements an array, may
	// hold.
	MaxItems int
	// MaxKeyLen is the longest member name allowed, in bytes.
	MaxKeyLen int
	// AnyNames lets a member name be any text that passes the checks of
	// a string value, not only an identifier. The identifier rule is for
	// tools whose schemas this project writes; a gateway's tools are
	// other servers', whose schemas may well name "user-id" or
	// "Content-Type", and judge the names themselves once pinned.
	AnyNames bool
}

// DefaultLimits returns the limits used when the operator sets none:
// depth 8, 1000 items per container, member names of up to 128 bytes.
func DefaultLimits() Limits {
	return Limits{MaxDepth: 8, MaxItems: 1000, MaxKeyLen: 128}
}

// Validate reports an error naming the first field of l that is below 1.
func (l Limits) Validate() error {
	switch {
	case l.MaxDepth < 1:
		return fmt.Errorf("guard: MaxDepth must be at least 1, got %d", l.MaxDepth)
	case l.MaxItems < 1:
		return fmt.Errorf("guard: MaxItems must be at least 1, got %d", l.MaxItems)
	case l.MaxKeyLen < 1:
		return fmt.Errorf("guard: MaxKeyLen must be at least 1, got %d", l.MaxKeyLen)
	}
	return nil
}

// Problem details for refusals that never name a limit or a code point.
// They are API: peers and tests match them.
const (
	detailNotObject   = "arguments must be a JSON object"
	detailInvalidJSON = "arguments are not valid JSON"
	detailNotFinite   = "a number is out of range for a 64-bit float"
	detailBadUTF8     = "a string value contains invalid UTF-8 or a surrogate code point"
)

// Sanitize checks the structure of args, the raw arguments of a tools/call,
// against lim. It returns nil if args is acceptable and otherwise a
// [*problem.Problem] with code [problem.Validation].
//
// args must be a JSON object. Every member name at any depth must match
// ^[A-Za-z_][A-Za-z0-9_]*$ (unless lim.AnyNames, when it must pass the
// checks of a string value) and be at most lim.MaxKeyLen bytes long; nesting
// must not exceed lim.MaxDepth; no object or array may hold more than
// lim.MaxItems entries; every number must be finite as a float64. String
// values, once unescaped, must not contain C0 controls other than TAB, LF
// and CR, DEL, C1 controls, the bidirectional controls (U+061C, U+200E,
// U+200F, U+202A–U+202E, U+2066–U+2069), surrogates or invalid UTF-8 (which
// a lenient decoder would have turned into U+FFFD). A correctly encoded
// U+FFFD is accepted: it is a character, not an encoding fault.
//
// The problem's InvalidParams holds the top-level member under which the
// fault lies, or nothing when the fault is in the arguments object itself
// (its shape or syntax, its member count or a top-level member name). Its
// Detail states the rule and never repeats a string value; it quotes a
// refused member name with [problem.Quote].
//
// Sanitize is safe for concurrent use. It does not retain args.
func Sanitize(args jsontext.Value, lim Limits) error {
	s := sanitizers.Get().(*sanitizer)
	defer s.release()
	if p := s.run(args, lim); p != nil {
		return p
	}
	return nil
}

// SanitizeData is Sanitize for an object that is data rather than a
// tool's arguments — a client's answer to a server's request, whose member
// names the server chose (an elicitation form's fields): Sanitize with
// lim.AnyNames set.
func SanitizeData(v jsontext.Value, lim Limits) error {
	lim.AnyNames = true
	return Sanitize(v, lim)
}

// sanitizers recycles decoders: Sanitize runs on every call and a fresh
// jsontext.Decoder costs several allocations.
var sanitizers = sync.Pool{New: func() any { return new(sanitizer) }}

// maxPooledScratch is the largest unescape buffer kept between runs.
const maxPooledScratch = 64 << 10

// sanitizer is the state of one Sanitize run.
type sanitizer struct {
	src bytes.Buffer // wraps args; the decoder reads it without copying
	dec jsontext.Decoder
	lim Limits
	// unq holds the unescaped form of the string being checked.
	unq []byte
	// param is the top-level member being walked, empty while none is.
	// It is kept as bytes so that accepted calls never build a string.
	param []byte
}

func (s *sanitizer) release() {
	// Drop the reference to the caller's bytes before pooling.
	s.src = bytes.Buffer{}
	s.dec.Reset(&s.src)
	s.param = s.param[:0]
	// One long escaped string must not pin a large buffer in the pool.
	if cap(s.unq) > maxPooledScratch {
		s.unq = nil
	}
	sanitizers.Put(s)
}

func (s *sanitizer) run(args []byte, lim Limits) *problem.Problem {
	s.lim = lim
	s.param = s.param[:0]
	s.src = *bytes.NewBuffer(args)
	s.dec.Reset(&s.src)

	switch s.dec.PeekKind() {
	case '{':
	case 0: // empty or not JSON at all
		_, err := s.dec.ReadToken()
		return s.invalidJSON(err)
	default:
		return problem.New(problem.Validation, detailNotObject)
	}
	if p := s.object(1); p != nil {
		return p
	}
	if _, err := s.dec.ReadToken(); err != io.EOF {
		if err == nil {
			err = errors.New("trailing data after the arguments object")
		}
		return s.invalidJSON(err)
	}
	return nil
}

// value checks the next value, found inside a container of depth depth-1.
func (s *sanitizer) value(depth int) *problem.Problem {
	switch s.dec.PeekKind() {
	case '{':
		return s.object(depth)
	case '[':
		return s.array(depth)
	case '"':
		v, err := s.dec.ReadValue()
		if err != nil {
			return s.invalidJSON(err)
		}
		return s.checkString(v)
	case '0':
		v, err := s.dec.ReadValue()
		if err != nil {
			return s.invalidJSON(err)
		}
		// A number is only Inf after parsing if it overflows float64; NaN
		// cannot be written in JSON. ParseFloat reports overflow as an
		// error too, which is refused alike.
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return s.fail(detailNotFinite)
		}
		return nil
	default: // null, true, false, or a syntax error ReadValue reports
		if _, err := s.dec.ReadValue(); err != nil {
			return s.invalidJSON(err)
		}
		return nil
	}
}

func (s *sanitizer) object(depth int) *problem.Problem {
	if depth > s.lim.MaxDepth {
		return s.failf("arguments nest deeper than %d levels", s.lim.MaxDepth)
	}
	if _, err := s.dec.ReadToken(); err != nil {
		return s.invalidJSON(err)
	}
	for n := 1; s.dec.PeekKind() != '}'; n++ {
		if depth == 1 {
			s.param = s.param[:0]
		}
		if n > s.lim.MaxItems {
			return s.failf("an object has more than %d members", s.lim.MaxItems)
		}
		raw, err := s.dec.ReadValue() // a syntax error if not a name
		if err != nil {
			return s.invalidJSON(err)
		}
		name, err := s.unquote(raw)
		if err != nil {
			return s.invalidJSON(err)
		}
		if p := s.checkName(name); p != nil {
			return p
		}
		if depth == 1 {
			s.param = append(s.param, name...)
		}
		if p := s.value(depth + 1); p != nil {
			return p
		}
	}
	if _, err := s.dec.ReadToken(); err != nil {
		return s.invalidJSON(err)
	}
	return nil
}

func (s *sanitizer) array(depth int) *problem.Problem {
	if depth > s.lim.MaxDepth {
		return s.failf("arguments nest deeper than %d levels", s.lim.MaxDepth)
	}
	if _, err := s.dec.ReadToken(); err != nil {
		return s.invalidJSON(err)
	}
	for n := 1; s.dec.PeekKind() != ']'; n++ {
		if n > s.lim.MaxItems {
			return s.failf("an array has more than %d elements", s.lim.MaxItems)
		}
		if p := s.value(depth + 1); p != nil {
			return p
		}
	}
	if _, err := s.dec.ReadToken(); err != nil {
		return s.invalidJSON(err)
	}
	return nil
}

// unquote returns the unescaped content of the JSON string raw. The result
// aliases the input or s.unq and is valid until the next call.
func (s *sanitizer) unquote(raw []byte) ([]byte, error) {
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return body, nil
	}
	var err error
	s.unq, err = jsontext.AppendUnquote(s.unq[:0], raw)
	return s.unq, err
}

func (s *sanitizer) checkName(name []byte) *problem.Problem {
	if len(name) > s.lim.MaxKeyLen {
		return s.failf("a member name is longer than %d bytes", s.lim.MaxKeyLen)
	}
	if s.lim.AnyNames {
		return s.checkText(name)
	}
	if !isIdentifier(name) {
		return s.failf("member name %s is not an identifier (ASCII letters, digits and underscores, not starting with a digit)",
			problem.Quote(string(name)))
	}
	return nil
}

func (s *sanitizer) checkString(raw []byte) *problem.Problem {
	text, err := s.unquote(raw)
	if err != nil {
		return s.invalidJSON(err)
	}
	return s.checkText(text)
}

// checkText applies the string checks to unescaped text.
func (s *sanitizer) checkText(text []byte) *problem.Problem {
	r, why := scanText(text)
	switch why {
	case textOK:
		return nil
	case textControl:
		return s.failf("a string value contains the control character U+%04X", r)
	case textBidi:
		return s.failf("a string value contains the bidirectional control U+%04X", r)
	default:
		return s.fail(detailBadUTF8)
	}
}

// fail returns a validation problem blaming the top-level member being
// walked, if any.
func (s *sanitizer) fail(detail string) *problem.Problem {
	if len(s.param) == 0 {
		return problem.New(problem.Validation, detail)
	}
	name := string(s.param)
	return problem.New(problem.Validation, "argument "+problem.Quote(name)+": "+detail, name)
}

func (s *sanitizer) failf(format string, args ...any) *problem.Problem {
	return s.fail(fmt.Sprintf(format, args...))
}

// invalidJSON reports input the decoder refused. Callers are meant to have
// checked syntax already, so this is a second line, not the usual path, and
// it blames no argument: a syntax error cannot be pinned on one.
func (s *sanitizer) invalidJSON(err error) *problem.Problem {
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return problem.New(problem.Validation, detailInvalidJSON).WithCause(fmt.Errorf("guard: sanitize: %w", err))
}

// isIdentifier reports whether b matches ^[A-Za-z_][A-Za-z0-9_]*$.
func isIdentifier(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for i, c := range b {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// textFault says why scanText refused a string.
type textFault int

const (
	textOK textFault = iota
	textControl
	textBidi
	textBadUTF8
)

// scanText returns the first refused code point in the unescaped string b
// and why it is refused, or textOK.
func scanText(b []byte) (rune, textFault) {
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f {
				return rune(c), textControl
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			// The decoder refuses invalid UTF-8 and lone surrogate escapes
			// before we get here; this catches them should that ever be
			// switched off. UTF-8-encoded surrogates (as in CESU-8 or
			// WTF-8) are invalid UTF-8, so they land here too: DecodeRune
			// never returns a surrogate.
			return r, textBadUTF8
		case r <= 0x9f: // C1 controls; r >= 0x80 here
			return r, textControl
		case isBidiControl(r):
			return r, textBidi
		}
		i += size
	}
	return 0, textOK
}

// isBidiControl reports whether r has the Unicode Bidi_Control property:
// characters that reorder how text displays without being visible.
func isBidiControl(r rune) bool {
	switch {
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case 0x202a <= r && r <= 0x202e:
		return true
	case 0x2066 <= r && r <= 0x2069:
		return true
	}
	return false
}
