package problem

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
)

// TestTable pins the one table: each code's type, title, status and
// JSON-RPC code. The statuses are those of DESIGN.md.
func TestTable(t *testing.T) {
	tests := []struct {
		code    Code
		typ     string
		title   string
		status  int
		rpcCode int
	}{
		{Validation, "urn:mcp-bastion:problem:validation-error", "Invalid tool arguments", 422, -32602},
		{QueryViolation, "urn:mcp-bastion:problem:query-violation", "Query refused by policy", 403, -32602},
		{AccessDenied, "urn:mcp-bastion:problem:access-denied", "Access to the requested resource is denied", 403, -32602},
		{NotFound, "urn:mcp-bastion:problem:not-found", "Resource not found", 404, -32602},
		{PayloadTooLarge, "urn:mcp-bastion:problem:payload-too-large", "Payload too large", 413, -32602},
		{ConcurrencyLimit, "urn:mcp-bastion:problem:concurrency-limit", "Too many concurrent tool calls", 429, -32603},
		{ExecutionTimeout, "urn:mcp-bastion:problem:execution-timeout", "Tool execution timed out", 504, -32603},
		{Internal, "urn:mcp-bastion:problem:internal-error", "Internal error", 500, -32603},
	}
	var codes []Code
	for _, tt := range tests {
		codes = append(codes, tt.code)
		p := New(tt.code, "detail")
		if p.Type != tt.typ || p.Title != tt.title || p.Status != tt.status || p.Code != tt.code {
			t.Errorf("New(%s) = type %q title %q status %d code %s; want %q %q %d %s",
				tt.code, p.Type, p.Title, p.Status, p.Code, tt.typ, tt.title, tt.status, tt.code)
		}
		if got := p.RPCCode(); got != tt.rpcCode {
			t.Errorf("%s RPCCode = %d, want %d", tt.code, got, tt.rpcCode)
		}
	}
	if got := Codes(); !slices.Equal(got, codes) {
		t.Errorf("Codes() = %v, want %v", got, codes)
	}
}

// TestCodesDistinct checks the table's invariants over Codes(): distinct
// codes, types and titles; every type is the prefix plus the code as a
// slug; the rows agree with the code names.
func TestCodesDistinct(t *testing.T) {
	types := map[string]Code{}
	titles := map[string]Code{}
	seen := map[Code]bool{}
	for _, c := range Codes() {
		if seen[c] {
			t.Errorf("code %s listed twice", c)
		}
		seen[c] = true
		if !strings.HasPrefix(string(c), "MCP_") {
			t.Errorf("code %s lacks the MCP_ prefix", c)
		}
		p := New(c, "")
		if other, dup := types[p.Type]; dup {
			t.Errorf("%s and %s share type %s", c, other, p.Type)
		}
		types[p.Type] = c
		if other, dup := titles[p.Title]; dup {
			t.Errorf("%s and %s share title %q", c, other, p.Title)
		}
		titles[p.Title] = c
		slug := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(string(c), "MCP_"), "_", "-"))
		if p.Type != TypePrefix+slug {
			t.Errorf("%s type = %q, want %q", c, p.Type, TypePrefix+slug)
		}
		if p.Status < 400 || p.Status > 599 {
			t.Errorf("%s status %d is not an error status", c, p.Status)
		}
		if rc := p.RPCCode(); rc != RPCInvalidParams && rc != RPCInternalError {
			t.Errorf("%s RPCCode %d", c, rc)
		}
		// Server-side failures never travel as invalid params.
		if p.Status >= 500 && p.RPCCode() != RPCInternalError {
			t.Errorf("%s: status %d with RPC code %d", c, p.Status, p.RPCCode())
		}
	}
	if len(seen) != 8 {
		t.Errorf("%d codes, want the 8 of DESIGN.md", len(seen))
	}
	if TypePrefix != "urn:mcp-bastion:problem:" || RPCInvalidParams != -32602 || RPCInternalError != -32603 || MaxEcho != 256 {
		t.Error("package constants changed")
	}
}

func TestNewUnknownCode(t *testing.T) {
	for _, c := range []Code{"", "MCP_TEAPOT", "mcp_not_found", "MCP_NOT_FOUND "} {
		p := New(c, "d", "x")
		want := New(Internal, "d", "x")
		if p.Type != want.Type || p.Title != want.Title || p.Status != want.Status || p.Code != Internal {
			t.Errorf("New(%q) = %+v, want the internal error %+v", c, p, want)
		}
		if p.RPCCode() != RPCInternalError {
			t.Errorf("New(%q).RPCCode() = %d", c, p.RPCCode())
		}
	}
	// A problem whose code was changed afterwards still maps to a row.
	p := New(NotFound, "d")
	p.Code = "MCP_BOGUS"
	if p.RPCCode() != RPCInternalError {
		t.Errorf("RPCCode of an unknown code = %d, want %d", p.RPCCode(), RPCInternalError)
	}
}

func TestNewDefaults(t *testing.T) {
	p := New(Validation, "bad query", "query", "max_rows")
	if p.Detail != "bad query" || !slices.Equal(p.InvalidParams, []string{"query", "max_rows"}) {
		t.Errorf("New = %+v", p)
	}
	q := New(Validation, "d")
	if q.InvalidParams == nil || len(q.InvalidParams) != 0 || q.Metadata == nil || len(q.Metadata) != 0 {
		t.Errorf("New without params: InvalidParams %#v, Metadata %#v; want empty, not nil", q.InvalidParams, q.Metadata)
	}
	r := Newf(AccessDenied, []string{"relative_path"}, "path %s is outside the sandbox", Quote("../x"))
	if r.Detail != `path "../x" is outside the sandbox` || !slices.Equal(r.InvalidParams, []string{"relative_path"}) || r.Code != AccessDenied {
		t.Errorf("Newf = %+v", r)
	}
	if got := Newf(Internal, nil, "x").InvalidParams; got == nil {
		t.Error("Newf with nil params has nil InvalidParams")
	}
}

func TestErrorAndCause(t *testing.T) {
	cause := errors.New("pq: password authentication failed")
	p := New(ExecutionTimeout, "the query ran too long").WithCause(cause)
	if got, want := p.Error(), "MCP_EXECUTION_TIMEOUT: the query ran too long"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(p, cause) || p.Unwrap() != cause {
		t.Error("the cause is not reachable with errors.Is / Unwrap")
	}
	var target *Problem
	if !errors.As(fmt.Errorf("wrapped: %w", p), &target) || target != p {
		t.Error("errors.As does not find a wrapped Problem")
	}
	if New(Internal, "x").Unwrap() != nil {
		t.Error("Unwrap without a cause is not nil")
	}
}

func TestWithMetadata(t *testing.T) {
	p := New(ConcurrencyLimit, "busy").WithMetadata("retry_after_ms", 100).WithMetadata("slots", 16)
	if p.Metadata["retry_after_ms"] != 100 || p.Metadata["slots"] != 16 {
		t.Errorf("Metadata = %v", p.Metadata)
	}
	var zero Problem
	zero.WithMetadata("k", "v")
	if zero.Metadata["k"] != "v" {
		t.Error("WithMetadata on a nil map lost the value")
	}
}

// TestJSONMembers checks the wire form with both JSON packages: exactly
// the seven members, never the cause.
func TestJSONMembers(t *testing.T) {
	p := New(NotFound, "no such file", "relative_path").
		WithCause(errors.New("open /srv/data/secret: no such file")).
		WithMetadata("k", "v")
	want := []string{"code", "detail", "invalid_params", "metadata", "status", "title", "type"}
	for name, marshal := range map[string]func(any) ([]byte, error){
		"encoding/json": json.Marshal,
		"json/v2":       func(v any) ([]byte, error) { return jsonv2.Marshal(v, jsonv2.Deterministic(true)) },
	} {
		b, err := marshal(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var got []string
		for k := range m {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s members = %q, want %q", name, got, want)
		}
		if strings.Contains(string(b), "/srv/data") || strings.Contains(strings.ToLower(string(b)), "cause") {
			t.Errorf("%s: the cause reached the JSON: %s", name, b)
		}
	}
	b, _ := jsonv2.Marshal(New(Validation, "d"), jsonv2.Deterministic(true))
	if got, want := string(b), `{"type":"urn:mcp-bastion:problem:validation-error","title":"Invalid tool arguments","status":422,"detail":"d","code":"MCP_VALIDATION_ERROR","invalid_params":[],"metadata":{}}`; got != want {
		t.Errorf("JSON =\n %s\nwant\n %s", got, want)
	}
}

func TestQuote(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"plain", "users", `"users"`},
		{"empty", "", `""`},
		{"quotes and backslash", `a"b\c`, `"a\"b\\c"`},
		{"controls", "a\x00b\nc\x1b[31m\x7f", `"a\x00b\nc\x1b[31m\x7f"`},
		{"C1 control", "\u0085", `"\u0085"`},
		{"right-to-left override", "abc\u202etxt.exe", `"abc\u202etxt.exe"`},
		{"bidi isolates", "\u2066\u2067\u2068\u2069", `"\u2066\u2067\u2068\u2069"`},
		{"bidi marks", "\u200e\u200f\u061c", `"\u200e\u200f\u061c"`},
		{"bidi embeddings", "\u202a\u202b\u202c\u202d", `"\u202a\u202b\u202c\u202d"`},
		{"zero width", "a\u200bb\ufeff", `"a\u200bb\ufeff"`},
		{"line separators", "\u2028\u2029", `"\u2028\u2029"`},
		{"printable non-ASCII kept", "café 😀", `"café 😀"`},
		{"invalid UTF-8", "a\xffb", `"a\xffb"`},
		{"exactly MaxEcho", strings.Repeat("a", 256), `"` + strings.Repeat("a", 256) + `"`},
		{"MaxEcho+1", strings.Repeat("a", 257), `"` + strings.Repeat("a", 256) + `…"`},
		{"long", strings.Repeat("ab", 1000), `"` + strings.Repeat("ab", 128) + `…"`},
		// Runes, not bytes: 256 two-byte characters fit, and a long run
		// is cut on a character boundary.
		{"MaxEcho runes of two bytes", strings.Repeat("é", 256), `"` + strings.Repeat("é", 256) + `"`},
		{"runes not bytes", strings.Repeat("é", 300), `"` + strings.Repeat("é", 256) + `…"`},
		{"astral runes", strings.Repeat("😀", 257), `"` + strings.Repeat("😀", 256) + `…"`},
		{"escapes count once", strings.Repeat("\x00", 257), `"` + strings.Repeat(`\x00`, 256) + `…"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Quote(tt.in); got != tt.want {
				t.Errorf("Quote(%.40q) = %.80s, want %.80s", tt.in, got, tt.want)
			}
		})
	}
}

// TestQuoteProperties checks, for random strings, that the echo is a
// prefix of the input of at most MaxEcho runes and that the quoted form
// holds only printable characters.
func TestQuoteProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pieces := []string{"a", "é", "😀", "\x00", "\n", "\u202e", "\u2066", "\u200f", "\xff", "\"", "\\", " ", "\u0085", "\ufeff"}
	for range 3000 {
		var b strings.Builder
		for n := rng.IntN(600); n > 0; n-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		in := b.String()
		q := Quote(in)
		for _, r := range q {
			if r == utf8.RuneError || !unicode.IsPrint(r) || unicode.Is(unicode.Bidi_Control, r) {
				t.Fatalf("Quote(%q) = %q holds %U", in, q, r)
			}
		}
		echo, err := strconv.Unquote(q)
		if err != nil {
			t.Fatalf("Quote(%q) = %q does not unquote: %v", in, q, err)
		}
		cut := strings.HasSuffix(echo, "…") && utf8.RuneCountInString(in) > MaxEcho
		if cut {
			echo = strings.TrimSuffix(echo, "…")
		}
		if !strings.HasPrefix(in, echo) {
			t.Fatalf("Quote(%q) echoes %q, not a prefix", in, echo)
		}
		n := utf8.RuneCountInString(echo)
		if n > MaxEcho || (cut && n != MaxEcho) || (!cut && echo != in) {
			t.Fatalf("Quote of %d runes echoes %d runes (cut %v)", utf8.RuneCountInString(in), n, cut)
		}
	}
}

func TestCap(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"short", "relation \"x\" does not exist", "relation \"x\" does not exist"},
		{"empty", "", ""},
		{"controls kept: Cap does not quote", "a\nb\u202e", "a\nb\u202e"},
		{"exactly MaxEcho", strings.Repeat("a", 256), strings.Repeat("a", 256)},
		{"MaxEcho+1", strings.Repeat("a", 257), strings.Repeat("a", 256) + "…"},
		{"runes not bytes", strings.Repeat("é", 256), strings.Repeat("é", 256)},
		{"multibyte cut on a boundary", strings.Repeat("😀", 300), strings.Repeat("😀", 256) + "…"},
		{"invalid bytes count as characters", strings.Repeat("\xff", 257), strings.Repeat("\xff", 256) + "…"},
	}
	for _, tt := range tests {
		if got := Cap(tt.in); got != tt.want {
			t.Errorf("%s: Cap(%.40q) = %.60q, want %.60q", tt.name, tt.in, got, tt.want)
		}
		// Quote is Cap, then quoting.
		if got, want := Quote(tt.in), strconv.Quote(tt.want); got != want {
			t.Errorf("%s: Quote = %.60s, want %.60s", tt.name, got, want)
		}
	}
}
