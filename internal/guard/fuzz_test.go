package guard

import (
	"bytes"
	"errors"
	"io"
	"math"
	"regexp"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// node is a fully decoded JSON value, built by the naive reference.
type node struct {
	kind  jsontext.Kind
	str   string  // strings
	num   float64 // numbers
	names []string
	kids  []*node // object member values or array elements
}

// parseNaive decodes b into a tree with no limits of its own beyond the
// decoder's, so that the rules can then be checked on plain Go values.
func parseNaive(b []byte) (*node, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	n, err := readNode(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errors.New("not exactly one value")
	}
	return n, nil
}

func readNode(dec *jsontext.Decoder) (*node, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	n := &node{kind: tok.Kind()}
	switch n.kind {
	case '{':
		for dec.PeekKind() != '}' {
			name, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			n.names = append(n.names, name.String())
			kid, err := readNode(dec)
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, kid)
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
	case '[':
		for dec.PeekKind() != ']' {
			kid, err := readNode(dec)
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, kid)
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
	case '"':
		n.str = tok.String()
	case '0':
		n.num, _ = tok.Float() // ±Inf on overflow
	}
	return n, nil
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// refusedRune is the rule for string values, written from the Unicode
// tables rather than by hand.
func refusedRune(r rune) bool {
	switch {
	case r == '\t' || r == '\n' || r == '\r':
		return false
	case unicode.IsControl(r): // C0, DEL and C1
		return true
	case unicode.Is(unicode.Bidi_Control, r):
		return true
	case unicode.Is(unicode.Cs, r): // surrogates
		return true
	}
	return false
}

// naiveOK reports whether the tree n, found at depth, obeys lim.
func naiveOK(n *node, lim Limits, depth int) bool {
	switch n.kind {
	case '{', '[':
		if depth > lim.MaxDepth || len(n.kids) > lim.MaxItems {
			return false
		}
		for _, name := range n.names {
			if len(name) > lim.MaxKeyLen || !identRE.MatchString(name) {
				return false
			}
		}
		for _, kid := range n.kids {
			if !naiveOK(kid, lim, depth+1) {
				return false
			}
		}
	case '"':
		if !utf8.ValidString(n.str) {
			return false
		}
		for _, r := range n.str {
			if refusedRune(r) {
				return false
			}
		}
	case '0':
		if math.IsInf(n.num, 0) || math.IsNaN(n.num) {
			return false
		}
	}
	return true
}

// naiveSanitize is the reference: decode everything, then judge.
func naiveSanitize(b []byte, lim Limits) bool {
	n, err := parseNaive(b)
	return err == nil && n.kind == '{' && naiveOK(n, lim, 1)
}

func FuzzSanitize(f *testing.F) {
	// Multi-kilobyte rows (the default-limit boundaries) are left out: each
	// new input the fuzzer derives from one costs seconds to minimise, and
	// the small limits below reach the same boundaries with short inputs.
	for _, tc := range sanitizeCases() {
		if len(tc.args) <= 512 {
			f.Add([]byte(tc.args))
		}
	}
	small := Limits{MaxDepth: 3, MaxItems: 4, MaxKeyLen: 6}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, lim := range []Limits{DefaultLimits(), small} {
			err := Sanitize(in, lim)
			want := naiveSanitize(in, lim)
			if got := err == nil; got != want {
				t.Fatalf("Sanitize(%q, %+v) = %v; reference accepts: %v", in, lim, err, want)
			}
			if err == nil {
				continue
			}
			var p *problem.Problem
			if !errors.As(err, &p) || p.Code != problem.Validation {
				t.Fatalf("Sanitize(%q) = %#v, want a validation problem", in, err)
			}
			if len(p.InvalidParams) > 1 {
				t.Fatalf("InvalidParams = %q, want at most one name", p.InvalidParams)
			}
			// A blamed argument is always a valid top-level name.
			for _, name := range p.InvalidParams {
				if !identRE.MatchString(name) || len(name) > lim.MaxKeyLen {
					t.Fatalf("InvalidParams names %q, not an acceptable member name", name)
				}
				if !bytes.Contains(in, []byte(name)) && !bytes.Contains(in, []byte(`\u`)) {
					t.Fatalf("InvalidParams names %q, absent from the input", name)
				}
			}
			if !utf8.ValidString(p.Detail) {
				t.Fatalf("Detail %q is not valid UTF-8", p.Detail)
			}
			for _, r := range p.Detail {
				if refusedRune(r) {
					t.Fatalf("Detail %q carries the refused code point %U", p.Detail, r)
				}
			}
		}
	})
}
