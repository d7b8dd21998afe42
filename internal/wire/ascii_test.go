package wire

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
)

// isASCII reports whether b is 7-bit ASCII without DEL.
func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf || c == 0x7f {
			return false
		}
	}
	return true
}

func TestAppendASCII(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "", ""},
		{"ASCII untouched", `{"a":"b c","n":[1,2.5e3,true,null]}`, `{"a":"b c","n":[1,2.5e3,true,null]}`},
		{"existing escapes untouched", `"\n\t\"\\\u00e9\ud83d\ude00"`, `"\n\t\"\\\u00e9\ud83d\ude00"`},
		{"controls are not touched", "\"\x00\x1f\"", "\"\x00\x1f\""},
		{"DEL", "\"a\x7fb\"", `"a\u007fb"`},
		{"two-byte", `"é"`, `"\u00e9"`},
		{"U+0080", "\"\u0080\"", `"\u0080"`},
		{"three-byte", `"€"`, `"\u20ac"`},
		{"line separator", "\"\u2028\"", `"\u2028"`},
		{"paragraph separator", "\"\u2029\"", `"\u2029"`},
		{"bidi override", "\"\u202e\"", `"\u202e"`},
		{"BOM", "\"\ufeff\"", `"\ufeff"`},
		{"last BMP", "\"\uffff\"", `"\uffff"`},
		{"replacement character", "\"\ufffd\"", `"\ufffd"`},
		{"first astral", "\"\U00010000\"", `"\ud800\udc00"`},
		{"emoji", `"😀"`, `"\ud83d\ude00"`},
		{"last astral", "\"\U0010ffff\"", `"\udbff\udfff"`},
		{"mixed", `{"k€y":"a😀b\u0041"}`, `{"k\u20acy":"a\ud83d\ude00b\u0041"}`},
		{"invalid byte", "\"\xff\"", `"\ufffd"`},
		{"truncated sequence", "\"\xe2\x82\"", `"\ufffd\ufffd"`},
		{"UTF-8 encoded surrogate", "\"\xed\xa0\x80\"", `"\ufffd\ufffd\ufffd"`},
		{"overlong encoding", "\"\xc0\xaf\"", `"\ufffd\ufffd"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendASCII(nil, []byte(tt.in))
			if string(got) != tt.want {
				t.Errorf("AppendASCII(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if !isASCII(got) {
				t.Errorf("AppendASCII(%q) = %q is not ASCII", tt.in, got)
			}
			// dst is appended to, not overwritten.
			if got := AppendASCII([]byte("prefix:"), []byte(tt.in)); string(got) != "prefix:"+tt.want {
				t.Errorf("AppendASCII with prefix = %q, want %q", got, "prefix:"+tt.want)
			}
		})
	}
}

// TestAppendASCIIEveryRune checks the escape of every Unicode scalar value
// against unicode/utf16.
func TestAppendASCIIEveryRune(t *testing.T) {
	var in, got, want []byte
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if utf16.IsSurrogate(r) {
			continue
		}
		in = utf8.AppendRune(in[:0], r)
		got = AppendASCII(got[:0], in)
		want = want[:0]
		if r < utf8.RuneSelf && r != 0x7f {
			want = append(want, byte(r))
		} else {
			for _, u := range utf16.AppendRune(nil, r) {
				want = appendEscape(want, rune(u))
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendASCII(%U) = %q, want %q", r, got, want)
		}
	}
}

// randomString returns a string mixing ASCII, controls, the separators and
// runes from every plane.
func randomString(rng *rand.Rand) string {
	var b strings.Builder
	for n := rng.IntN(24); n > 0; n-- {
		var r rune
		switch rng.IntN(7) {
		case 0:
			r = rune(rng.IntN(0x80))
		case 1:
			r = []rune{0x7f, 0x2028, 0x2029, 0x202e, 0xfeff, 0xfffd, 0xffff, '"', '\\', '<', '&'}[rng.IntN(11)]
		case 2:
			r = rune(0x80 + rng.IntN(0x800-0x80))
		case 3:
			r = rune(0x800 + rng.IntN(0xd800-0x800))
		case 4:
			r = rune(0xe000 + rng.IntN(0x10000-0xe000))
		default:
			r = rune(0x10000 + rng.IntN(utf8.MaxRune+1-0x10000))
		}
		b.WriteRune(r)
	}
	return b.String()
}

// randomValue returns a JSON value whose strings and names are random.
func randomValue(rng *rand.Rand, depth int) any {
	k := rng.IntN(6)
	if depth > 3 {
		k = rng.IntN(3)
	}
	switch k {
	case 0:
		return randomString(rng)
	case 1:
		return float64(rng.IntN(1000)) / 8
	case 2:
		return rng.IntN(2) == 0
	case 3:
		return nil
	case 4:
		a := make([]any, rng.IntN(4))
		for i := range a {
			a[i] = randomValue(rng, depth+1)
		}
		return a
	default:
		m := map[string]any{}
		for n := rng.IntN(4); n > 0; n-- {
			m[randomString(rng)] = randomValue(rng, depth+1)
		}
		return m
	}
}

// TestAppendASCIIRoundTrip is a property test: for random JSON text, the
// output is ASCII and decodes to the same value as the input.
func TestAppendASCIIRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		v := randomValue(rng, 0)
		// The v2 encoder leaves every non-ASCII rune raw, U+2028 and
		// U+2029 included; encoding/json decodes, as an independent check.
		in, err := jsonv2.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}

		out := AppendASCII(nil, in)
		if !isASCII(out) {
			t.Fatalf("case %d: output not ASCII: %q", i, out)
		}
		var got, want any
		if err := json.Unmarshal(in, &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("case %d: output %q is not JSON: %v", i, out, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d: round trip changed the value\n in: %q\nout: %q", i, in, out)
		}
	}
}

func TestIsASCIILine(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"", true},
		{`{"a":"\u00e9"}`, true},
		{"\t{} ", true},
		{"a\nb", false},
		{"a\rb", false},
		{"a\x7fb", false},
		{"é", false},
		{"\x80", false},
	}
	for _, tt := range tests {
		if got := IsASCIILine([]byte(tt.in)); got != tt.want {
			t.Errorf("IsASCIILine(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
	// Every output of AppendASCII for JSON text passes.
	if out := AppendASCII(nil, []byte("\"\u2028\x7f😀\"")); !IsASCIILine(out) {
		t.Errorf("IsASCIILine(%q) = false", out)
	}
}
