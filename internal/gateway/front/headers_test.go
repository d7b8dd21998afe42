package front_test

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcp-bastion/bastion/internal/gateway/config"
)

// TestHeaderRules: what the front decides from headers alone, each case a
// rule of the README's error table or the spec's transport.
func TestHeaderRules(t *testing.T) {
	cfg, err := config.Parse([]byte(fuzzConfig), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	list := modernReq("1", "tools/list", "")
	future := strings.ReplaceAll(list, "2026-07-28", "2099-01-01")
	for _, tc := range []struct {
		name    string
		in      fuzzInput
		session bool
		status  int
		want    string // in the body
	}{
		{"a version both header and body name, not spoken: -32022 with what is", fuzzInput{op: 0, body: []byte(future), ct: ctJSON, accept: acceptBoth,
			version: "2099-01-01", method: "tools/list"}, false, http.StatusBadRequest, `"code":-32022`},
		{"the version header twice", fuzzInput{op: 0, body: []byte(list), ct: ctJSON, accept: acceptBoth,
			version: "2026-07-28\n2026-07-28", method: "tools/list"}, false, http.StatusBadRequest, "more than once"},
		{"a zero weight in another spelling refuses", fuzzInput{op: 0, body: []byte(list), ct: ctJSON,
			accept: "application/json;q=0.0, text/event-stream;q=0.000", version: "2026-07-28", method: "tools/list"}, false, http.StatusNotAcceptable, ""},
		{"a name that is no string is refused for its params, not its headers", fuzzInput{op: 0, body: []byte(modernReq("1", "tools/call", `"name":5`)),
			ct: ctJSON, accept: acceptBoth, version: "2026-07-28", method: "tools/call"}, false, http.StatusOK, `"code":-32602`},
		{"so is a uri that is no string", fuzzInput{op: 0, body: []byte(modernReq("1", "resources/read", `"uri":true`)),
			ct: ctJSON, accept: acceptBoth, version: "2026-07-28", method: "resources/read", name: "true"}, false, http.StatusOK, `"code":-32602`},
		{"a string name the header does not carry is a mismatch", fuzzInput{op: 0, body: []byte(modernReq("1", "tools/call", `"name":"5"`)),
			ct: ctJSON, accept: acceptBoth, version: "2026-07-28", method: "tools/call"}, false, http.StatusBadRequest, `"code":-32020`},
		{"no Mcp-Method header says so", fuzzInput{op: 0, body: []byte(list), ct: ctJSON, accept: acceptBoth,
			version: "2026-07-28"}, false, http.StatusBadRequest, "Mcp-Method header is missing"},
		{"a GET naming a version no session speaks", fuzzInput{op: 1, ct: ctJSON, accept: "text/event-stream", version: "2099-01-01"}, true, http.StatusBadRequest, ""},
		{"a DELETE naming two versions", fuzzInput{op: 2, version: "2025-11-25\n2025-03-26"}, true, http.StatusBadRequest, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFuzzFront(t, cfg)
			sid := ""
			if tc.session {
				sid = srv.initialize(t, "2025-11-25")
			}
			got := srv.serve(t, tc.in, sid)
			if got.status != tc.status || !strings.Contains(string(got.body), tc.want) {
				t.Errorf("HTTP %d %q, want %d with %q", got.status, got.body, tc.status, tc.want)
			}
		})
	}
}

// TestRateLimitedStream: a request past the rate that asked for an event
// stream is refused as one that asked for JSON is: 429 with Retry-After.
func TestRateLimitedStream(t *testing.T) {
	cfg, err := config.Parse([]byte(fuzzConfig+"policy: {rate: {per_principal: 1/m, burst: 1}}\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	srv := newFuzzFront(t, cfg)
	in := fuzzInput{op: 0, body: []byte(modernReq("1", "tools/list", "")), ct: ctJSON, accept: "text/event-stream",
		version: "2026-07-28", method: "tools/list"}
	if got := srv.serve(t, in, ""); got.status != http.StatusOK {
		t.Fatalf("the first request: HTTP %d %q", got.status, got.body)
	}
	got := srv.serve(t, in, "")
	if got.status != http.StatusTooManyRequests || got.header.Get("Retry-After") == "" {
		t.Errorf("past the rate: HTTP %d, Retry-After %q: %q", got.status, got.header.Get("Retry-After"), got.body)
	}
}

// TestStreamEndsWithSession: a GET notification stream ends when its
// session expires, rather than holding its slot, and hearing of changes,
// for an id no longer served.
func TestStreamEndsWithSession(t *testing.T) {
	cfg, err := config.Parse([]byte(fuzzConfig), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	// Below the configuration's minute, which would make a slow test: ids
	// carry their time of issue in seconds, so this one lives 2 to 3 s.
	cfg.Sessions.TTL = config.Duration(3 * time.Second)
	srv := newFuzzFront(t, cfg)
	sid := srv.initialize(t, "2025-11-25")
	r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/mcp", nil)
	r.Host = fuzzPublicHost
	r.Header.Set("Accept", "text/event-stream")
	r.Header.Set("MCP-Protocol-Version", "2025-11-25")
	r.Header.Set("Mcp-Session-Id", sid)
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.h.ServeHTTP(rec, r)
	}()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the stream outlived its session by more than 12 s")
	}
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/event-stream" {
		t.Errorf("the stream was not opened: HTTP %d %q", rec.Code, rec.Body)
	}
}

// TestHeadersGivenTwice: a header read as one value is refused when it
// comes twice, so that no reader of the other copy (an intermediary, a
// downstream, a later check) sees another request than the gateway
// judged: the session id on each method, the body's type, the Origin.
func TestHeadersGivenTwice(t *testing.T) {
	cfg, err := config.Parse([]byte(fuzzConfig), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	srv := newFuzzFront(t, cfg)
	list := legacyReq("1", "tools/list", "")
	own := "https://" + fuzzPublicHost
	for _, tc := range []struct {
		name, method, body string
		header             func(sid, other string) http.Header
		status             int
	}{
		{"a POST's session id", http.MethodPost, list, func(sid, other string) http.Header { return http.Header{"Mcp-Session-Id": {sid, other}} }, http.StatusBadRequest},
		{"a GET's session id", http.MethodGet, "", func(sid, other string) http.Header { return http.Header{"Mcp-Session-Id": {sid, other}} }, http.StatusBadRequest},
		{"a DELETE's session id", http.MethodDelete, "", func(sid, other string) http.Header { return http.Header{"Mcp-Session-Id": {sid, other}} }, http.StatusBadRequest},
		{"the body's type", http.MethodPost, list, func(sid, _ string) http.Header {
			return http.Header{"Mcp-Session-Id": {sid}, "Content-Type": {ctJSON, "text/plain"}}
		}, http.StatusUnsupportedMediaType},
		{"an empty Origin, then a foreign one", http.MethodPost, list, func(sid, _ string) http.Header {
			return http.Header{"Mcp-Session-Id": {sid}, "Origin": {"", "https://evil.example"}}
		}, http.StatusForbidden},
		{"the gateway's own Origin", http.MethodPost, list, func(sid, _ string) http.Header {
			return http.Header{"Mcp-Session-Id": {sid}, "Origin": {own, own}}
		}, http.StatusForbidden},
		{"once each, as a control", http.MethodPost, list, func(sid, _ string) http.Header {
			return http.Header{"Mcp-Session-Id": {sid}, "Origin": {own}}
		}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sid, other := srv.initialize(t, "2025-11-25"), srv.initialize(t, "2025-11-25")
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			r := httptest.NewRequestWithContext(ctx, tc.method, "/mcp", strings.NewReader(tc.body))
			r.Host = fuzzPublicHost
			r.Header.Set("Content-Type", ctJSON)
			r.Header.Set("Accept", acceptBoth)
			if tc.method == http.MethodGet {
				r.Header.Set("Accept", "text/event-stream")
			}
			r.Header.Set("MCP-Protocol-Version", "2025-11-25")
			maps.Copy(r.Header, tc.header(sid, other))
			rec := httptest.NewRecorder()
			srv.h.ServeHTTP(cancelOnFlush{rec, cancel}, r)
			if rec.Code != tc.status {
				t.Errorf("HTTP %d %q, want %d", rec.Code, rec.Body, tc.status)
			}
		})
	}
}
