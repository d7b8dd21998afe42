package catalog

import (
	"net/url"
	"strings"
	"testing"
)

// TestNotNormal: each rule of a template-routed URI's normal form, on
// the spellings that reach one resource by two names.
func TestNotNormal(t *testing.T) {
	for _, tc := range []struct{ uri, why string }{
		{"file:///srv/docs/private/salaries.md", ""},
		{"file:///srv/docs/", ""},
		{"file:///", ""},
		{"file://host/a/b", NotNormalAuthority},
		{"file://localhost/srv/docs/private/salaries.md", NotNormalAuthority},
		{"file://LOCALHOST/srv/docs/private/salaries.md", NotNormalAuthority},
		{"file:/srv/docs/private/salaries.md", NotNormalAuthority}, // file:///srv/… (RFC 8089)
		{"file:srv/docs/x", NotNormalAuthority},
		{"db://Prod/users", NotNormalAuthority},
		{"db://prod/users", ""},
		{"users://42/profile", ""},
		{"users:42/profile", ""},
		{"urn:isbn:0451450523", ""},
		{"file:///srv/docs/a%20b.md", ""},
		{"file:///srv/docs/100%25.md", ""},
		{"file:///srv/docs/q?a=/&b=x//y#frag/y", ""}, // the query and fragment are not path
		{"file:///srv/docs/q?path=../x", NotNormalDotSegment},
		{"file:///srv/docs/q?a=1&b=..", NotNormalDotSegment},
		{"file:///srv/docs/q#frag/./y", NotNormalDotSegment},
		{"file:///srv/docs/q?v=1..2", ""},
		{"file:///srv/docs/caf%C3%A9", ""},
		{"file:///srv/docs/café", NotNormalNonASCII},
		{"db://prod/users?dump=all#:file:///public/x", ""},

		{"FILE:///srv/docs/a", NotNormalScheme},
		{"File:///srv/docs/a", NotNormalScheme},
		{"1file:///a", NotNormalScheme},
		{":///a", NotNormalScheme},
		{"noscheme", NotNormalScheme},
		{"fi le:///a", NotNormalScheme},
		{"file:///srv/docs/a b", NotNormalSpace},
		{"file:///srv/docs/a\tb", NotNormalSpace},
		{"file:///srv/docs/a\x7fb", NotNormalSpace},
		{"file:///srv/docs/a?q=\n", NotNormalSpace},
		{"file:///srv/docs/%", NotNormalPercent},
		{"file:///srv/docs/%4", NotNormalPercent},
		{"file:///srv/docs/%G0", NotNormalPercent},
		{"file:///srv/docs/%c3%a9", NotNormalHexCase},
		{"file:///srv/docs/%2f", NotNormalHexCase},
		{"file:///srv/docs/%70rivate/salaries.md", NotNormalUnreserved},
		{"file:///srv/docs/%2E/private", NotNormalUnreserved},
		{"file:///shared/%72eadme.md", NotNormalUnreserved},
		{"file:///srv/docs/a?x=%7E", NotNormalUnreserved},
		{"file:///srv/docs/private%2Fsalaries.md", NotNormalEncoded},
		{"file:///srv/docs/private%5Csalaries.md", NotNormalEncoded},
		{"file:///srv/docs/a%00", NotNormalEncoded},
		{"file:///srv/docs/a%1F", NotNormalEncoded},
		{"file:///srv/docs/a%7F", NotNormalEncoded},
		{"file:///srv/docs/private%3Fx", NotNormalEncoded},    // p%3Fq is p?q to a server that decodes first
		{"file:///srv/docs/private%23x", NotNormalEncoded},    // and p%23q is p#q
		{"file:///srv/docs/q?next=a%3Fb%23c", ""},             // in the query, a value's own
		{"file:///srv/docs/%2570rivate", NotNormalEncoded},    // %70 to a server that decodes twice
		{"file:///srv/docs/q?p=%252E%252E", NotNormalEncoded}, // .. to one that decodes twice
		{"file:///srv/docs/100%25", ""},
		{"file:///srv/docs/a?x=%2F%00", NotNormalEncoded},
		{`file:///srv/docs\private\salaries.md`, NotNormalBackslash},
		{`file://host\x/a`, NotNormalBackslash},
		{"file:///srv/docs/./private/salaries.md", NotNormalDotSegment},
		{"file:///srv/docs/x/../private/salaries.md", NotNormalDotSegment},
		{"file:///srv/docs/../../etc/passwd", NotNormalDotSegment},
		{"file:///srv/docs/..", NotNormalDotSegment},
		{"file:///shared/./readme.md", NotNormalDotSegment},
		{"users:./x", NotNormalDotSegment},
		{"file:///srv/docs//private/salaries.md", NotNormalEmptySegment},
		{"file:///shared//readme.md", NotNormalEmptySegment},
		{"file:////etc/passwd", NotNormalEmptySegment},
		{"users:a//b", NotNormalEmptySegment},
	} {
		if got := NotNormal(tc.uri); got != tc.why {
			t.Errorf("NotNormal(%q) = %q, want %q", tc.uri, got, tc.why)
		}
	}
}

// FuzzNotNormal: a URI in normal form has no dot or empty path segment
// even after its percent-encodings are decoded, no raw space, control
// or non-ASCII character, and a lower-case scheme; and a refusal is one of the
// reasons, which never name the URI.
func FuzzNotNormal(f *testing.F) {
	for _, s := range []string{"file:///srv/docs/a.md", "file:///srv/docs/%70rivate", "file:///srv/docs/./x",
		"file:///a//b", "file:///a%2Fb", "FILE:///a", "file:///a?b=%zz", "users:42/profile"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		why := NotNormal(uri)
		if why != "" {
			switch why {
			case NotNormalScheme, NotNormalSpace, NotNormalPercent, NotNormalHexCase, NotNormalUnreserved,
				NotNormalEncoded, NotNormalBackslash, NotNormalDotSegment, NotNormalEmptySegment, NotNormalNonASCII, NotNormalAuthority:
			default:
				t.Fatalf("NotNormal(%q) = %q, not one of the reasons", uri, why)
			}
			return
		}
		scheme, rest, ok := strings.Cut(uri, ":")
		if !ok || scheme != strings.ToLower(scheme) || strings.ContainsFunc(uri, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
			t.Fatalf("%q is called normal", uri)
		}
		path := rest
		if i := strings.IndexAny(path, "?#"); i >= 0 {
			path = path[:i]
		}
		if strings.HasPrefix(path, "//") {
			if i := strings.IndexByte(path[2:], '/'); i >= 0 {
				path = path[2+i:]
			} else {
				path = ""
			}
		}
		dec, err := url.PathUnescape(path)
		if err != nil {
			t.Fatalf("%q is called normal, but its path does not decode: %v", uri, err)
		}
		if dec != path && strings.ContainsAny(dec, "/\\") != strings.ContainsAny(path, "/\\") {
			t.Fatalf("%q: decoding adds a separator", uri)
		}
		if strings.ContainsAny(dec, "?#") {
			t.Fatalf("%q is called normal, but its decoded path holds a query or a fragment", uri)
		}
		if twice, err := url.PathUnescape(dec); err == nil && twice != dec {
			t.Fatalf("%q is called normal, but its path decodes twice", uri)
		}
		segs := strings.Split(strings.ReplaceAll(dec, "\\", "/"), "/")
		for i, s := range segs {
			if s == "." || s == ".." || s == "" && i > 0 && i < len(segs)-1 {
				t.Fatalf("%q is called normal, but its decoded path has segment %q", uri, s)
			}
		}
	})
}
