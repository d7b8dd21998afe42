package gateway

import (
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// echoResult is the benchmark's echo tool result (bench/echohttp): the
// text back as structuredContent and as one text block.
var echoResult = jsontext.Value(`{"content":[{"type":"text","text":"{\"text\":\"hello\"}"}],"structuredContent":{"text":"hello"}}`)

// BenchmarkParseResult reads a small result as every relayed tools/call
// does: the one pass before the result is checked and re-encoded.
func BenchmarkParseResult(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseResult(echoResult); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFoldedDuplicate walks a content array of a few blocks with
// nested objects, the case-folding check's usual input.
func BenchmarkFoldedDuplicate(b *testing.B) {
	v := jsontext.Value(`[{"type":"text","text":"hello","annotations":{"audience":["user"],"priority":0.5}},` +
		`{"type":"resource","resource":{"uri":"docs://a/b","mimeType":"text/plain","text":"x"}},` +
		`{"type":"text","text":"Ünïcödé ſ names","_meta":{"Straße":1,"k":2}}]`)
	b.ReportAllocs()
	for b.Loop() {
		if _, dup := foldedDuplicate(v); dup {
			b.Fatal("duplicate")
		}
	}
}
