package mcp

import (
	"mime"
	"testing"
)

// TestMediaType holds MediaType to mime.ParseMediaType, the fast path
// included.
func TestMediaType(t *testing.T) {
	for _, v := range []string{
		"application/json", "text/event-stream", "Application/JSON", "application/json; charset=utf-8",
		"text/event-stream;charset=utf-8", " application/json", "application/json ", "application/json;",
		"application/json; q", "application/jsonx", "text/html", "", ";", "application/", "*/*",
	} {
		want, _, wantErr := mime.ParseMediaType(v)
		got, err := MediaType(v)
		if got != want || (err == nil) != (wantErr == nil) {
			t.Errorf("MediaType(%q) = %q, %v; ParseMediaType: %q, %v", v, got, err, want, wantErr)
		}
	}
}
