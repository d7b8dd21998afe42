package mcp

import (
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
		{``, `pre:null`},
	} {
		if got := string(appendCompact([]byte("pre:"), jsontext.Value(tc.in))); got != tc.want {
			t.Errorf("appendCompact(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
