package upstream

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkHTTPCall is one tools/call through the HTTP connector, as the
// gateway makes it for a caller (identity headers, a legacy session),
// against a downstream over real loopback HTTP that answers at once: the
// connector's own cost per call, with net/http's on both sides.
func BenchmarkHTTPCall(b *testing.B) {
	const result = `{"content":[{"type":"text","text":"{\"text\":\"hello\"}"}],"structuredContent":{"text":"hello"}}`
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := idOf(body)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case id == "":
			w.WriteHeader(http.StatusAccepted)
		case bytes.Contains(body, []byte(`"server/discover"`)):
			w.Write([]byte(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32601,"message":"Method not found"}}`))
		case bytes.Contains(body, []byte(`"initialize"`)):
			w.Header().Set("Mcp-Session-Id", "s1")
			w.Write([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"b","version":"1"}}}`))
		default:
			w.Write([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":` + result + `}`))
		}
	}))
	defer hs.Close()
	states := make(chan State, 16)
	s := NewHTTP(HTTPOptions{Name: "b", URL: hs.URL, MaxMessage: 1 << 20, OnState: func(st State, _ *Client) { states <- st }})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Close(ctx)
	}()
	for st := range states {
		if st == Connected {
			break
		}
	}
	opts := CallOptions{Name: "echo", Identity: &Identity{Subject: "alice@example.com", Issuer: "https://issuer.example", Roles: []string{"support"}, RequestID: "01JD3Q4X5Y6Z7A8B9C0D1E2F3G"}}
	params := []byte(`{"name":"echo","arguments":{"text":"hello"}}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Call(ctx, "tools/call", params, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// idOf is a request's id as written, "" for a notification.
func idOf(body []byte) string {
	i := bytes.Index(body, []byte(`"id":`))
	if i < 0 {
		return ""
	}
	rest := body[i+5:]
	return string(rest[:bytes.IndexAny(rest, ",}")])
}
