package mcp

import (
	"bytes"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// BenchmarkAppendRelayedResult re-encodes a small tools/call result for a
// legacy client, as the gateway does for every relayed call.
func BenchmarkAppendRelayedResult(b *testing.B) {
	e, err := NewEncoder(Implementation{Name: "bench", Version: "1"}, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	content := jsontext.Value(`[{"type":"text","text":"{\"text\":\"hello\"}"}]`)
	structured := jsontext.Value(`{"text":"hello"}`)
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		dst = e.AppendRelayedResult(dst[:0], V20251125, content, structured, false)
	}
}

// TestAppendCompact: a relayed value is re-encoded without whitespace
// after what dst holds; what is not one JSON value becomes null, and
// nothing of it is copied.
func TestAppendCompact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"{ \"a\" : [ 1 , \"x y\" ] }\n", `pre:{"a":[1,"x y"]}`},
		{`"\u00e9"`, `pre:"\u00e9"`},
		{`{"a":1} {"b":2}`, `pre:null`},
		{`{"a":`, `pre:null`},
		{`{"secret":"s3cr3t", `, `pre:null`},
		{``, `pre:null`},
	} {
		out := appendCompact(append(make([]byte, 0, 64), "pre:"...), jsontext.Value(tc.in))
		if got := string(out); got != tc.want {
			t.Errorf("appendCompact(%q) = %s, want %s", tc.in, got, tc.want)
		}
		if spare := out[len(out):cap(out)]; bytes.ContainsFunc(spare, func(r rune) bool { return r != 0 }) {
			t.Errorf("appendCompact(%q) left the refused value in the spare capacity: %q", tc.in, out[:cap(out)])
		}
	}
}
