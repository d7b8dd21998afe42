package guard

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// sanitizeCase is one row of the sanitizer table. An empty detail means
// the arguments must be accepted.
type sanitizeCase struct {
	name   string
	args   string
	lim    *Limits // nil means DefaultLimits
	detail string
	params []string
}

const identDetail = " is not an identifier (ASCII letters, digits and underscores, not starting with a digit)"

// nestObjects returns an arguments object whose nesting depth is depth.
func nestObjects(depth int) string {
	return strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
}

// nestArrays returns an arguments object holding arrays nested so that the
// whole value has depth depth.
func nestArrays(depth int) string {
	return `{"a":` + strings.Repeat("[", depth-1) + "1" + strings.Repeat("]", depth-1) + "}"
}

// members returns an object with n members at the top level.
func members(n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":0`, i)
	}
	b.WriteByte('}')
	return b.String()
}

// elements returns an arguments object whose member "a" is an array of n
// elements.
func elements(n int) string {
	return `{"a":[` + strings.TrimSuffix(strings.Repeat("0,", n), ",") + "]}"
}

// sanitizeCases returns the sanitizer table. The fuzz target seeds from it.
func sanitizeCases() []sanitizeCase {
	key128 := strings.Repeat("k", 128)
	key129 := strings.Repeat("k", 129)
	cases := []sanitizeCase{
		// Accepted shapes.
		{name: "empty object", args: `{}`},
		{name: "realistic", args: `{"query":"SELECT 1","max_rows":10}`},
		{name: "every kind", args: `{"n":null,"t":true,"f":false,"i":-12,"x":1.5e3,"s":"x","a":[],"o":{}}`},
		{name: "whitespace", args: " \t\r\n{ \"a\" : [ 1 , 2 ] }\n"},
		{name: "escaped name", args: `{"\u0071uery":"x"}`},
		{name: "identifier underscore", args: `{"_":1,"_0":2,"A_b9":3}`},
		{name: "tab lf cr in value", args: `{"a":"x\ty\nz\r"}`},
		{name: "tab lf cr literal escapes", args: `{"a":"\u0009\u000a\u000d"}`},
		{name: "non-ASCII text", args: `{"a":"héllo 世界 😀 مرحبا"}`},
		{name: "surrogate pair escape", args: `{"a":"\ud83d\ude00"}`},
		{name: "replacement character", args: "{\"a\":\"\uFFFD\"}"},
		{name: "replacement character escaped", args: `{"a":"\ufffd"}`},
		{name: "after C1 controls", args: `{"a":"\u00a0\u00ff"}`},
		{name: "around bidi controls", args: `{"a":"\u061b\u061d\u200d\u2029\u202f\u2065\u206a"}`},
		{name: "escaped solidus and quote", args: `{"a":"\/\"\\"}`},
		{name: "largest float", args: `{"a":1.7976931348623157e308,"b":-1.7976931348623157e308}`},
		{name: "underflow is finite", args: `{"a":1e-400}`},
		{name: "long integer", args: `{"a":123456789012345678901234567890}`},
		{name: "string that looks infinite", args: `{"a":"1e400"}`},

		// Top level.
		{name: "array top level", args: `[]`, detail: detailNotObject},
		{name: "string top level", args: `"x"`, detail: detailNotObject},
		{name: "number top level", args: `1`, detail: detailNotObject},
		{name: "null top level", args: `null`, detail: detailNotObject},
		{name: "bool top level", args: `true`, detail: detailNotObject},
		{name: "empty input", args: ``, detail: detailInvalidJSON},
		{name: "truncated", args: `{"a":`, detail: detailInvalidJSON},
		{name: "trailing value", args: `{} {}`, detail: detailInvalidJSON},
		{name: "trailing comma", args: `{"a":1,}`, detail: detailInvalidJSON},
		{name: "duplicate name", args: `{"a":1,"a":2}`, detail: detailInvalidJSON},
		{name: "duplicate escaped name", args: `{"a":1,"\u0061":2}`, detail: detailInvalidJSON},
		{name: "lone surrogate escape", args: `{"a":"\ud800"}`, detail: detailInvalidJSON},
		{name: "invalid UTF-8", args: "{\"a\":\"\xff\"}", detail: detailInvalidJSON},

		// Depth.
		{name: "depth 8 objects", args: nestObjects(8)},
		{name: "depth 9 objects", args: nestObjects(9), detail: `argument "a": arguments nest deeper than 8 levels`, params: []string{"a"}},
		{name: "depth 8 arrays", args: nestArrays(8)},
		{name: "depth 9 arrays", args: nestArrays(9), detail: `argument "a": arguments nest deeper than 8 levels`, params: []string{"a"}},
		{name: "depth 2 under limit 2", args: `{"a":{}}`, lim: &Limits{MaxDepth: 2, MaxItems: 10, MaxKeyLen: 10}},
		{name: "depth 2 over limit 1", args: `{"a":[]}`, lim: &Limits{MaxDepth: 1, MaxItems: 10, MaxKeyLen: 10}, detail: `argument "a": arguments nest deeper than 1 levels`, params: []string{"a"}},
		{name: "zero limits refuse all", args: `{}`, lim: &Limits{}, detail: `arguments nest deeper than 0 levels`},

		// Items.
		{name: "1000 members", args: members(1000)},
		{name: "1001 members", args: members(1001), detail: `an object has more than 1000 members`},
		{name: "1000 elements", args: elements(1000)},
		{name: "1001 elements", args: elements(1001), detail: `argument "a": an array has more than 1000 elements`, params: []string{"a"}},
		{name: "1001 nested members", args: `{"a":` + members(1001) + `}`, detail: `argument "a": an object has more than 1000 members`, params: []string{"a"}},
		{name: "items at small limit", args: `{"a":[1,2],"b":2}`, lim: &Limits{MaxDepth: 2, MaxItems: 2, MaxKeyLen: 1}},
		{name: "items over small limit", args: `{"a":[1,2,3]}`, lim: &Limits{MaxDepth: 2, MaxItems: 2, MaxKeyLen: 1}, detail: `argument "a": an array has more than 2 elements`, params: []string{"a"}},

		// Member names.
		{name: "key 128 bytes", args: `{"` + key128 + `":1}`},
		{name: "key 129 bytes", args: `{"` + key129 + `":1}`, detail: `a member name is longer than 128 bytes`},
		{name: "nested key 129 bytes", args: `{"a":{"` + key129 + `":1}}`, detail: `argument "a": a member name is longer than 128 bytes`, params: []string{"a"}},
		{name: "escaped key counted unescaped", args: `{"` + strings.Repeat(`\u006b`, 128) + `":1}`},
		{name: "empty key", args: `{"":1}`, detail: `member name ""` + identDetail},
		{name: "key starts with digit", args: `{"1a":1}`, detail: `member name "1a"` + identDetail},
		{name: "key with dash", args: `{"max-rows":1}`, detail: `member name "max-rows"` + identDetail},
		{name: "key with space", args: `{"a b":1}`, detail: `member name "a b"` + identDetail},
		{name: "key with dot", args: `{"a.b":1}`, detail: `member name "a.b"` + identDetail},
		{name: "non-ASCII key", args: `{"é":1}`, detail: `member name "é"` + identDetail},
		{name: "key with tab", args: `{"a\t":1}`, detail: `member name "a\t"` + identDetail},
		{name: "key with LF", args: `{"a\n":1}`, detail: `member name "a\n"` + identDetail},
		{name: "key with CR", args: `{"a\r":1}`, detail: `member name "a\r"` + identDetail},
		{name: "key with NUL", args: `{"a\u0000":1}`, detail: `member name "a\x00"` + identDetail},
		{name: "key with bidi", args: `{"a\u202e":1}`, detail: `member name "a\u202e"` + identDetail},
		{name: "nested bad key", args: `{"filter":{"a-b":1}}`, detail: `argument "filter": member name "a-b"` + identDetail, params: []string{"filter"}},
		{name: "bad key in array", args: `{"rows":[{"ok":1},{"no way":1}]}`, detail: `argument "rows": member name "no way"` + identDetail, params: []string{"rows"}},

		// Numbers.
		{name: "overflowing number", args: `{"a":1e400}`, detail: `argument "a": a number is out of range for a 64-bit float`, params: []string{"a"}},
		{name: "overflowing negative number", args: `{"a":-1e400}`, detail: `argument "a": a number is out of range for a 64-bit float`, params: []string{"a"}},
		{name: "just past the largest float", args: `{"a":1.8e308}`, detail: `argument "a": a number is out of range for a 64-bit float`, params: []string{"a"}},
		{name: "overflow in array", args: `{"a":[1,2,1e999]}`, detail: `argument "a": a number is out of range for a 64-bit float`, params: []string{"a"}},

		// String values: DEL and C1 controls, literal and escaped.
		{name: "DEL literal", args: "{\"a\":\"SECRET\x7f\"}", detail: `argument "a": a string value contains the control character U+007F`, params: []string{"a"}},
		{name: "DEL escaped", args: `{"a":"SECRET\u007f"}`, detail: `argument "a": a string value contains the control character U+007F`, params: []string{"a"}},
		{name: "faults blame the right argument", args: `{"ok":"fine","bad":["x","SECRET\u0085"]}`, detail: `argument "bad": a string value contains the control character U+0085`, params: []string{"bad"}},
		{name: "escaped argument name quoted", args: `{"\u0071":"\u0007"}`, detail: `argument "q": a string value contains the control character U+0007`, params: []string{"q"}},
	}
	// Every C0 control except TAB, LF and CR, escaped (JSON forbids them raw).
	for c := rune(0); c < 0x20; c++ {
		if c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		cases = append(cases, sanitizeCase{
			name:   fmt.Sprintf("C0 U+%04X", c),
			args:   fmt.Sprintf(`{"a":"SECRET\u%04x"}`, c),
			detail: fmt.Sprintf(`argument "a": a string value contains the control character U+%04X`, c),
			params: []string{"a"},
		})
	}
	// C1 controls at both ends and in between.
	for _, c := range []rune{0x80, 0x85, 0x9b, 0x9f} {
		detail := fmt.Sprintf(`argument "a": a string value contains the control character U+%04X`, c)
		cases = append(cases,
			sanitizeCase{name: fmt.Sprintf("C1 U+%04X literal", c), args: `{"a":"SECRET` + string(c) + `"}`, detail: detail, params: []string{"a"}},
			sanitizeCase{name: fmt.Sprintf("C1 U+%04X escaped", c), args: fmt.Sprintf(`{"a":"SECRET\u%04x"}`, c), detail: detail, params: []string{"a"}},
		)
	}
	// Every bidirectional control, literal and escaped, at the top level
	// and deep inside.
	for _, c := range []rune{0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069} {
		detail := fmt.Sprintf(`argument "q": a string value contains the bidirectional control U+%04X`, c)
		cases = append(cases,
			sanitizeCase{name: fmt.Sprintf("bidi U+%04X literal", c), args: `{"q":"SECRET` + string(c) + `"}`, detail: detail, params: []string{"q"}},
			sanitizeCase{name: fmt.Sprintf("bidi U+%04X escaped", c), args: fmt.Sprintf(`{"q":"SECRET\u%04x"}`, c), detail: detail, params: []string{"q"}},
			sanitizeCase{name: fmt.Sprintf("bidi U+%04X escaped upper", c), args: fmt.Sprintf(`{"q":"SECRET\u%04X"}`, c), detail: detail, params: []string{"q"}},
			sanitizeCase{name: fmt.Sprintf("bidi U+%04X nested", c), args: fmt.Sprintf(`{"q":{"b":[{"c":"SECRET\u%04x"}]}}`, c), detail: detail, params: []string{"q"}},
		)
	}
	return cases
}

func TestSanitize(t *testing.T) {
	t.Parallel()
	for _, tc := range sanitizeCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lim := DefaultLimits()
			if tc.lim != nil {
				lim = *tc.lim
			}
			err := Sanitize([]byte(tc.args), lim)
			if tc.detail == "" {
				if err != nil {
					t.Fatalf("Sanitize() = %v, want nil", err)
				}
				return
			}
			var p *problem.Problem
			if !errors.As(err, &p) {
				t.Fatalf("Sanitize() = %v, want a *problem.Problem", err)
			}
			if p.Code != problem.Validation {
				t.Errorf("Code = %s, want %s", p.Code, problem.Validation)
			}
			if p.Detail != tc.detail {
				t.Errorf("Detail:\n got %q\nwant %q", p.Detail, tc.detail)
			}
			want := tc.params
			if want == nil {
				want = []string{}
			}
			if !slices.Equal(p.InvalidParams, want) {
				t.Errorf("InvalidParams = %q, want %q", p.InvalidParams, want)
			}
			if strings.Contains(p.Detail, "SECRET") {
				t.Errorf("Detail %q echoes a string value", p.Detail)
			}
		})
	}
}

// TestSanitizeInvalidJSONCause checks that a syntax error keeps the
// decoder's error for the log, wrapped, while the peer sees a fixed text.
func TestSanitizeInvalidJSONCause(t *testing.T) {
	err := Sanitize([]byte(`{"a":`), DefaultLimits())
	var p *problem.Problem
	if !errors.As(err, &p) {
		t.Fatalf("Sanitize() = %v, want a *problem.Problem", err)
	}
	if p.Cause == nil || !strings.HasPrefix(p.Cause.Error(), "guard: sanitize: ") {
		t.Errorf("Cause = %v, want the wrapped decoder error", p.Cause)
	}
	if errors.Unwrap(p.Cause) == nil {
		t.Errorf("Cause %v does not wrap the decoder error", p.Cause)
	}
}

// TestSanitizeDoesNotRetain checks that Sanitize leaves the caller's bytes
// alone and that pooled state from one call does not leak into the next.
func TestSanitizeDoesNotRetain(t *testing.T) {
	args := []byte(`{"deep":{"x":"\u202e"}}`)
	orig := string(args)
	if err := Sanitize(args, DefaultLimits()); err == nil {
		t.Fatal("Sanitize() = nil, want a refusal")
	}
	if string(args) != orig {
		t.Errorf("Sanitize modified its input: %q", args)
	}
	// The next call must not inherit the previous argument name.
	err := Sanitize([]byte(`{"a":1} x`), DefaultLimits())
	var p *problem.Problem
	if !errors.As(err, &p) || len(p.InvalidParams) != 0 {
		t.Errorf("Sanitize() = %#v, want a problem with no invalid params", err)
	}
}

// TestScanText covers what the decoder normally stops first: raw invalid
// UTF-8 and UTF-8-encoded surrogates must still be refused.
func TestScanText(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want textFault
		r    rune
	}{
		{"empty", "", textOK, 0},
		{"plain", "SELECT 1", textOK, 0},
		{"tab lf cr", "\t\n\r", textOK, 0},
		{"replacement character", "\uFFFD", textOK, 0},
		{"nul", "\x00", textControl, 0},
		{"esc", "a\x1b[31m", textControl, 0x1b},
		{"del", "\x7f", textControl, 0x7f},
		{"c1 first", "\u0080", textControl, 0x80},
		{"c1 last", "\u009f", textControl, 0x9f},
		{"nbsp", "\u00a0", textOK, 0},
		{"bidi", "ab\u2067", textBidi, 0x2067},
		{"invalid byte", "a\xffb", textBadUTF8, 0xfffd},
		{"truncated rune", "\xe2\x80", textBadUTF8, 0xfffd},
		{"CESU-8 surrogate", "\xed\xa0\x80", textBadUTF8, 0xfffd},
		{"overlong slash", "\xc0\xaf", textBadUTF8, 0xfffd},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, why := scanText([]byte(tt.in))
			if why != tt.want || r != tt.r {
				t.Errorf("scanText(%q) = %U, %d; want %U, %d", tt.in, r, why, tt.r, tt.want)
			}
		})
	}
}

// TestSanitizeEveryBidiControl checks the bidi set against the Unicode
// Bidi_Control property, so a code point missing from the switch fails.
func TestSanitizeEveryBidiControl(t *testing.T) {
	for r := rune(0); r <= 0x10ffff; r++ {
		want := r == 0x061c || r == 0x200e || r == 0x200f ||
			(0x202a <= r && r <= 0x202e) || (0x2066 <= r && r <= 0x2069)
		if got := isBidiControl(r); got != want {
			t.Errorf("isBidiControl(%U) = %v, want %v", r, got, want)
		}
	}
}

func TestDefaultLimits(t *testing.T) {
	want := Limits{MaxDepth: 8, MaxItems: 1000, MaxKeyLen: 128}
	if got := DefaultLimits(); got != want {
		t.Errorf("DefaultLimits() = %+v, want %+v", got, want)
	}
	if err := DefaultLimits().Validate(); err != nil {
		t.Errorf("DefaultLimits().Validate() = %v", err)
	}
}

func TestLimitsValidate(t *testing.T) {
	tests := []struct {
		lim  Limits
		want string
	}{
		{Limits{MaxDepth: 1, MaxItems: 1, MaxKeyLen: 1}, ""},
		{Limits{MaxDepth: 0, MaxItems: 1, MaxKeyLen: 1}, "guard: MaxDepth must be at least 1, got 0"},
		{Limits{MaxDepth: 1, MaxItems: -1, MaxKeyLen: 1}, "guard: MaxItems must be at least 1, got -1"},
		{Limits{MaxDepth: 1, MaxItems: 1, MaxKeyLen: 0}, "guard: MaxKeyLen must be at least 1, got 0"},
	}
	for _, tt := range tests {
		err := tt.lim.Validate()
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%+v.Validate() = %q, want %q", tt.lim, got, tt.want)
		}
	}
}

// TestSanitizeData: data held to Sanitize's checks, except that a member
// name may be any text a string value may be.
func TestSanitizeData(t *testing.T) {
	lim := DefaultLimits()
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`{"content":{"first name":"Ada","e-mail":"a@b","1st":true}}`, true},
		{`{"content":{"name":"\u202etxt.exe"}}`, false},
		{`{"content":{"x\u0007":1}}`, false},
		{`{"content":{"\u202e":1}}`, false},
		{`{"n":1e400}`, false},
		{`{"` + strings.Repeat("k", lim.MaxKeyLen+1) + `":1}`, false},
		{`[1]`, false},
	} {
		if err := SanitizeData([]byte(tc.in), lim); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.in, err)
		}
	}
	// Sanitize itself keeps the identifier grammar after a SanitizeData
	// (the pooled state is reset).
	if err := Sanitize([]byte(`{"first name":1}`), lim); err == nil {
		t.Error("Sanitize accepted a member name that is not an identifier")
	}
}
