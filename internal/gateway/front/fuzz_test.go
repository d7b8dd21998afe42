package front_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/gateway"
	"github.com/mcp-bastion/bastion/internal/gateway/config"
	"github.com/mcp-bastion/bastion/internal/gateway/front"
	"github.com/mcp-bastion/bastion/internal/jsonrpc"
	"github.com/mcp-bastion/bastion/internal/mcp"
)

// The front under fuzz: one stdio server that is never started (the
// gateway is built but not started), so the catalog stays empty and every
// tools/call takes an error path. The public URL and the listen address
// differ, so that both Host values are allowed and only one Origin is. The
// public host has a k, which a Unicode case fold (U+212A KELVIN SIGN) would
// match: Host and Origin compare in ASCII only.
const fuzzConfig = `
listen: 127.0.0.1:8080
public_url: https://gw.kiosk.example/mcp
auth: {mode: none}
servers:
  - name: docs
    command: [/nonexistent/fuzz-never-started]
limits: {body: 4KiB, batch: 8}
sessions: {ttl: 1h}
`

const (
	fuzzPublicHost = "gw.kiosk.example"
	fuzzListenHost = "127.0.0.1:8080"
	fuzzOrigin     = "https://gw.kiosk.example"
	fuzzBodyLimit  = 4 << 10
	fuzzBatchLimit = 8
	// fuzzMarkerSession is a session id that was never minted: an
	// invalid session id is replaced by it to see whether the answer
	// depends on the id's value.
	fuzzMarkerSession = "fuzz-marker-not-a-session-id"
	// handlerTimeout is how long one request may take before the
	// handler counts as hung. Nothing the front does without a
	// downstream waits: streams end at their first flush (see
	// cancelOnFlush), so this is only hit by a real hang.
	handlerTimeout = 10 * time.Second
)

// The op byte of a fuzz input.
const (
	opMethodMask = 3      // 0 POST, 1 GET, 2 DELETE, 3 PUT
	opSession    = 1 << 2 // initialize first; the request carries the minted id followed by sessionID
	opV20250326  = 1 << 3 // that session is 2025-03-26 (batches allowed) instead of 2025-11-25
	opPathShift  = 4      // bits 4-5: 0-2 the MCP path, 3 a health path
	opReadyz     = 1 << 6 // the health path is /readyz instead of /healthz
	opListenHost = 1 << 7 // an empty Host defaults to the listen address instead of the public host
)

var fuzzMethods = [4]string{http.MethodPost, http.MethodGet, http.MethodDelete, http.MethodPut}

// fuzzInput is one request: the op byte, the body, and the header values.
// A header value with newlines is sent as several values; an empty one
// is not sent. An empty host is the configured one.
type fuzzInput struct {
	op                                byte
	body                              []byte
	ct, accept, version, method, name string
	sessionID, origin, host           string
}

func (in fuzzInput) httpMethod() string { return fuzzMethods[in.op&opMethodMask] }

func (in fuzzInput) path() string {
	switch {
	case (in.op>>opPathShift)&3 != 3:
		return "/mcp"
	case in.op&opReadyz != 0:
		return "/readyz"
	}
	return "/healthz"
}

func (in fuzzInput) hostHeader() string {
	switch {
	case in.host != "":
		return in.host
	case in.op&opListenHost != 0:
		return fuzzListenHost
	}
	return fuzzPublicHost
}

func (in fuzzInput) sessionVersion() string {
	if in.op&opV20250326 != 0 {
		return mcp.V20250326
	}
	return mcp.V20251125
}

const (
	ctJSON     = "application/json"
	acceptBoth = "application/json, text/event-stream"
)

func legacyInit(version string) string {
	return `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":{},"clientInfo":{"name":"fuzz","version":"1.0"}}}`
}

func modernReq(id, method, params string) string {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
	if params == "" {
		params = "{" + meta + "}"
	} else {
		params = "{" + params + "," + meta + "}"
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + `}`
}

func legacyReq(id, method, params string) string {
	s := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `"`
	if params != "" {
		s += `,"params":` + params
	}
	return s + "}"
}

// fuzzSeeds are the f.Add seeds: one or more of every era and shape.
var fuzzSeeds = []fuzzInput{
	// Legacy handshake.
	{op: 0, body: []byte(legacyInit("2025-11-25")), ct: ctJSON, accept: acceptBoth},
	{op: 0, body: []byte(legacyInit("2024-11-05")), ct: ctJSON, accept: "text/event-stream"},
	{op: 0, body: []byte(legacyInit("1999-01-01")), ct: ctJSON, accept: ctJSON, version: "2025-06-18"},
	// Legacy requests in a session.
	{op: opSession, body: []byte(legacyReq("1", "tools/list", "")), ct: ctJSON, accept: acceptBoth},
	{op: opSession, body: []byte(legacyReq(`"a"`, "tools/list", `{"cursor":"bm90IGEgY3Vyc29y"}`)), ct: ctJSON, accept: acceptBoth, version: "2025-11-25"},
	{op: opSession, body: []byte(legacyReq("2", "ping", "")), ct: ctJSON, accept: acceptBoth, version: "2025-06-18"},
	{op: opSession, body: []byte(legacyReq("3", "tools/call", `{"name":"docs.search","arguments":{"q":"x"},"_meta":{"progressToken":"p1"}}`)), ct: ctJSON, accept: acceptBoth},
	{op: opSession, body: []byte(legacyReq("4", "tools/call", `{"name":"docs.search","arguments":[1]}`)), ct: ctJSON, accept: "text/event-stream"},
	{op: opSession, body: []byte(legacyReq("5", "initialize", `{}`)), ct: ctJSON, accept: acceptBoth},
	{op: opSession, body: []byte(legacyReq("6", "tools/list", "")), ct: ctJSON, accept: acceptBoth, sessionID: "x"},
	{op: 0, body: []byte(legacyReq("7", "tools/list", "")), ct: ctJSON, accept: acceptBoth, sessionID: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
	{op: 0, body: []byte(legacyReq("8", "tools/list", "")), ct: ctJSON, accept: acceptBoth},
	// Notifications.
	{op: opSession, body: []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), ct: ctJSON, accept: acceptBoth},
	{op: opSession, body: []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`), ct: ctJSON, accept: acceptBoth},
	{op: 0, body: []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), ct: ctJSON, accept: acceptBoth, sessionID: "not-a-session"},
	{op: opSession, body: []byte(`{"jsonrpc":"2.0","id":9,"result":{}}`), ct: ctJSON, accept: acceptBoth},
	// Batches: only in a 2025-03-26 session.
	{op: opSession | opV20250326, body: []byte(`[` + legacyReq("1", "ping", "") + `,` + legacyReq(`"two"`, "tools/list", "") +
		`,{"jsonrpc":"2.0","method":"notifications/initialized"},` + legacyReq("3", "initialize", `{}`) + `,42,{"jsonrpc":"2.0","id":1.5,"method":"ping"}]`), ct: ctJSON, accept: acceptBoth},
	{op: opSession | opV20250326, body: []byte(`[{"jsonrpc":"2.0","method":"notifications/initialized"}]`), ct: ctJSON, accept: acceptBoth},
	{op: opSession, body: []byte(`[` + legacyReq("1", "ping", "") + `]`), ct: ctJSON, accept: acceptBoth},
	{op: opSession | opV20250326, body: []byte(`[` + strings.Repeat(legacyReq("1", "ping", "")+",", 8) + legacyReq("1", "ping", "") + `]`), ct: ctJSON, accept: acceptBoth},
	{op: 0, body: []byte(`[]`), ct: ctJSON, accept: acceptBoth},
	// 2026-07-28, stateless.
	{op: 0, body: []byte(modernReq("1", "tools/list", "")), ct: ctJSON, accept: acceptBoth, version: "2026-07-28", method: "tools/list"},
	{op: 0, body: []byte(modernReq(`"d"`, "server/discover", "")), ct: ctJSON, accept: ctJSON, version: "2026-07-28", method: "server/discover"},
	{op: 0, body: []byte(modernReq("2", "tools/call", `"name":"docs.search","arguments":{}`)), ct: ctJSON, accept: acceptBoth, version: "2026-07-28", method: "tools/call", name: "docs.search"},
	{op: 0, body: []byte(modernReq("3", "tools/call", `"name":"docs.héllo","arguments":{}`)), ct: ctJSON, accept: acceptBoth, version: "2026-07-28", method: "tools/call", name: "=?base64?ZG9jcy5ow6lsbG8=?="},
	{op: 0, body: []byte(modernReq("4", "subscriptions/listen", `"notifications":{"toolsListChanged":true}`)), ct: ctJSON, accept: acceptBoth, version: "2026-07-28", method: "subscriptions/listen"},
	{op: 0, body: []byte(modernReq("5", "ping", "")), ct: ctJSON, accept: acceptBoth, version: "2026-07-28", method: "ping"},
	// Header mismatches.
	{op: 0, body: []byte(modernReq("6", "tools/list", "")), ct: ctJSON, accept: acceptBoth, version: "2026-07-28", method: "tools/call"},
	{op: 0, body: []byte(modernReq("7", "tools/list", "")), ct: ctJSON, accept: acceptBoth, version: "2025-11-25", method: "tools/list"},
	{op: 0, body: []byte(modernReq("8", "tools/list", "")), ct: ctJSON, accept: acceptBoth, version: "2026-07-28", method: "tools/list\ntools/list"},
	{op: 0, body: []byte(modernReq("9", "tools/call", `"name":"docs.héllo","arguments":{}`)), ct: ctJSON, accept: acceptBoth, version: "2026-07-28", method: "tools/call", name: "docs.héllo"},
	{op: 0, body: []byte(legacyReq("10", "tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2030-01-01"}}`)), ct: ctJSON, accept: acceptBoth},
	// Ids of every awkward kind.
	{op: opSession, body: []byte(legacyReq("9223372036854775807", "ping", "")), ct: ctJSON, accept: acceptBoth},
	{op: opSession, body: []byte(legacyReq("-9223372036854775808", "ping", "")), ct: ctJSON, accept: acceptBoth},
	{op: opSession, body: []byte(legacyReq("9223372036854775808", "ping", "")), ct: ctJSON, accept: acceptBoth},
	{op: opSession, body: []byte(legacyReq("1e400", "ping", "")), ct: ctJSON, accept: acceptBoth},
	{op: opSession, body: []byte(legacyReq("-0", "ping", "")), ct: ctJSON, accept: acceptBoth},
	{op: opSession, body: []byte(legacyReq("null", "ping", "")), ct: ctJSON, accept: acceptBoth},
	{op: opSession, body: []byte(legacyReq(`{"a":[1]}`, "ping", "")), ct: ctJSON, accept: acceptBoth},
	{op: opSession, body: []byte(legacyReq(strconv.Quote(strings.Repeat("x", 100)), "ping", "")), ct: ctJSON, accept: acceptBoth},
	{op: 0, body: []byte(modernReq(`"sub-1"`, "subscriptions/listen", `"notifications":{}`)), ct: ctJSON, accept: "text/event-stream", version: "2026-07-28", method: "subscriptions/listen"},
	// Garbage and the checks before parsing.
	{op: 0, body: []byte(`{"jsonrpc":"2.0","id":1,"method":`), ct: ctJSON, accept: acceptBoth},
	{op: 0, body: []byte("\xff\xfe"), ct: ctJSON, accept: acceptBoth},
	{op: opSession, body: []byte(`{"jsonrpc":"2.0","id":1,"method":"ping","id":2}`), ct: ctJSON, accept: acceptBoth},
	{op: 0, body: []byte(legacyInit("2025-11-25")), ct: "text/plain", accept: acceptBoth},
	{op: 0, body: []byte(legacyInit("2025-11-25")), ct: "application/json; charset=utf-8", accept: "text/html"},
	{op: 0, body: []byte(legacyInit("2025-11-25")), ct: ctJSON, accept: "application/json;q=0, */*"},
	{op: 0, body: bytes.Repeat([]byte(" "), fuzzBodyLimit+1), ct: ctJSON, accept: acceptBoth},
	// Streams and session ends.
	{op: opSession | 1, accept: "text/event-stream"},
	{op: opSession | 1, accept: ctJSON},
	{op: 1, accept: "text/event-stream"},
	{op: 1, accept: "text/event-stream", sessionID: "bogus-session-id-bogus"},
	{op: opSession | 2},
	{op: opSession | 2, sessionID: "AA"},
	{op: 2},
	{op: 3, body: []byte("{}")},
	// Host and Origin.
	{op: 0, body: []byte(legacyInit("2025-11-25")), ct: ctJSON, accept: acceptBoth, origin: "https://evil.example"},
	{op: 0, body: []byte(legacyInit("2025-11-25")), ct: ctJSON, accept: acceptBoth, origin: "HTTPS://GW.KIOSK.EXAMPLE"},
	{op: 0, body: []byte(legacyInit("2025-11-25")), ct: ctJSON, accept: acceptBoth, origin: "https://gw.kiosk.example:443"},
	{op: 0, body: []byte(legacyInit("2025-11-25")), ct: ctJSON, accept: acceptBoth, host: "evil.example"},
	{op: opListenHost, body: []byte(legacyInit("2025-11-25")), ct: ctJSON, accept: acceptBoth},
	{op: 3<<opPathShift | 1, host: "GW.Kiosk.EXAMPLE"},
	{op: 3<<opPathShift | opReadyz | 1},
	{op: 3 << opPathShift},
}

// FuzzFront fuzzes the HTTP front's reading of a request, its body and its
// headers, and checks on every input that
//
//   - the handler neither panics nor hangs, and answers with a status of
//     the front's error table;
//   - a wrong Host, and a present Origin that is not the public one, are
//     403 (but for a GET of /healthz or /readyz), and 403 is only for them;
//   - every application/json answer is strict JSON and a JSON-RPC response
//     (or an array of them): jsonrpc "2.0", exactly one of result and
//     error, error.code an integer, error.message a string;
//   - every event-stream answer is well-formed SSE whose data are
//     JSON-RPC messages, a POST's stream ending with the response;
//   - an answer to a valid request carries the request's id; a success
//     answers a request (a notification gets 202 and no body), a batch
//     answers each of its requests, only in a 2025-03-26 session;
//   - a session id that was not minted is never served (404, except that
//     initialize ignores it), and the answer does not depend on its value
//     (so it is never echoed): the same request with another invalid id
//     gets the same status, headers and body;
//   - a 2026-07-28 success had agreeing MCP-Protocol-Version and
//     Mcp-Method headers; a legacy success in a session had no other
//     version in MCP-Protocol-Version;
//   - Mcp-Session-Id is only sent with a successful initialize;
//   - a session ended with DELETE is not served any more.
//
// With opSession the iteration first initializes a real session and sends
// the request with the minted id (followed by sessionID, which makes it
// invalid unless empty). Every iteration has a front of its own, so that
// what one input does (revocations, streams) never changes another's
// outcome.
func FuzzFront(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.op, s.body, s.ct, s.accept, s.version, s.method, s.name, s.sessionID, s.origin, s.host)
	}
	cfg, err := config.Parse([]byte(fuzzConfig), func(string) (string, bool) { return "", false })
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, op byte, body []byte, ct, accept, version, mcpMethod, mcpName, sessionID, origin, host string) {
		in := fuzzInput{op: op, body: body, ct: ct, accept: accept, version: version, method: mcpMethod, name: mcpName,
			sessionID: sessionID, origin: origin, host: host}
		srv := newFuzzFront(t, cfg)
		sid, valid := sessionID, false
		if op&opSession != 0 {
			sid, valid = srv.initialize(t, in.sessionVersion())+sessionID, sessionID == ""
		}
		got := srv.serve(t, in, sid)
		checkExchange(t, in, sid, valid, got)
		if valid && in.httpMethod() == http.MethodDelete && got.status == http.StatusNoContent {
			ping := fuzzInput{body: []byte(legacyReq("1", "ping", "")), ct: ctJSON, accept: acceptBoth}
			if after := srv.serve(t, ping, sid); after.status != http.StatusNotFound {
				t.Fatalf("a session ended with DELETE is still served: %d %q", after.status, after.body)
			}
		}
		if sid != "" && !valid {
			// The answer must not depend on which invalid id was sent.
			again := srv.serve(t, in, fuzzMarkerSession)
			if got.status != again.status || !bytes.Equal(got.body, again.body) || !sameHeaders(got.header, again.header) {
				t.Fatalf("the answer depends on the value of an invalid session id:\nwith %q: %d %v %q\nwith %q: %d %v %q",
					sid, got.status, got.header, got.body, fuzzMarkerSession, again.status, again.header, again.body)
			}
		}
	})
}

type fuzzFront struct {
	h http.Handler
}

func newFuzzFront(tb testing.TB, cfg *config.Config) *fuzzFront {
	g := gateway.New(cfg, nil) // never started: no downstream runs
	srv, err := front.New(front.Options{Config: cfg, Gateway: g,
		Info: mcp.Implementation{Name: "fuzz-gateway", Version: "0.0.1"},
		Key:  bytes.Repeat([]byte("k"), 32)})
	if err != nil {
		tb.Fatal(err)
	}
	return &fuzzFront{h: srv.Handler()}
}

// initialize opens a legacy session of version and returns its id.
func (s *fuzzFront) initialize(t *testing.T, version string) string {
	in := fuzzInput{op: 0, body: []byte(legacyInit(version)), ct: ctJSON, accept: acceptBoth}
	got := s.serve(t, in, "")
	id := got.header.Get("Mcp-Session-Id")
	if got.status != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d %v %q", got.status, got.header, got.body)
	}
	return id
}

// exchangeResult is what the front answered.
type exchangeResult struct {
	status int
	header http.Header
	body   []byte
}

// cancelOnFlush ends the request's context at the first flush: an event
// stream (a GET stream, a subscriptions/listen) flushes once its headers
// are written, and then ends, instead of waiting for list changes.
type cancelOnFlush struct {
	*httptest.ResponseRecorder
	cancel context.CancelFunc
}

func (w cancelOnFlush) Flush() {
	w.ResponseRecorder.Flush()
	w.cancel()
}

func addValues(h http.Header, name, v string) {
	if v == "" {
		return
	}
	for _, part := range strings.Split(v, "\n") {
		h.Add(name, part)
	}
}

// serve sends one request with session id sid ("" for none).
func (s *fuzzFront) serve(t *testing.T, in fuzzInput, sid string) exchangeResult {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := httptest.NewRequestWithContext(ctx, in.httpMethod(), in.path(), bytes.NewReader(in.body))
	r.Host = in.hostHeader()
	addValues(r.Header, "Content-Type", in.ct)
	addValues(r.Header, "Accept", in.accept)
	addValues(r.Header, "MCP-Protocol-Version", in.version)
	addValues(r.Header, "Mcp-Method", in.method)
	addValues(r.Header, "Mcp-Name", in.name)
	if sid != "" {
		r.Header.Set("Mcp-Session-Id", sid)
	}
	if in.origin != "" {
		r.Header.Set("Origin", in.origin)
	}
	rec := httptest.NewRecorder()
	done := make(chan string, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Sprintf("%v\n%s", p, debug.Stack())
				return
			}
			done <- ""
		}()
		s.h.ServeHTTP(cancelOnFlush{rec, cancel}, r)
	}()
	timer := time.NewTimer(handlerTimeout)
	defer timer.Stop()
	select {
	case p := <-done:
		if p != "" {
			t.Fatalf("the handler panicked: %s", p)
		}
	case <-timer.C:
		t.Fatalf("the handler did not return within %s", handlerTimeout)
	}
	return exchangeResult{status: rec.Code, header: rec.Header().Clone(), body: rec.Body.Bytes()}
}

// sameHeaders compares two answers' headers, but for the session id that
// initialize mints anew each time.
func sameHeaders(a, b http.Header) bool {
	a, b = a.Clone(), b.Clone()
	a.Del("Mcp-Session-Id")
	b.Del("Mcp-Session-Id")
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// asciiLower lowers ASCII letters only.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func mediaType(h http.Header) string {
	ct := h.Get("Content-Type")
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.TrimSpace(ct)
}

// checkExchange checks one answer against the request.
func checkExchange(t *testing.T, in fuzzInput, sid string, validSession bool, got exchangeResult) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s %s (Host %q, Origin %q, session %q valid %v) answered %d %v %q:\n%s",
			in.httpMethod(), in.path(), in.hostHeader(), in.origin, sid, validSession, got.status, got.header, got.body,
			fmt.Sprintf(format, args...))
	}
	host := in.hostHeader()
	hostOK := asciiLower(host) == fuzzPublicHost || asciiLower(host) == fuzzListenHost
	originOK := in.origin == "" || asciiLower(in.origin) == fuzzOrigin
	// The probes answer a GET whatever its Host and Origin (a kubelet asks
	// by the pod's address); they say nothing a rebound name could use.
	probe := in.httpMethod() == http.MethodGet && (in.path() == "/healthz" || in.path() == "/readyz")
	if probe {
		hostOK, originOK = true, true
	}
	if !hostOK || !originOK {
		if got.status != http.StatusForbidden {
			fail("a wrong Host or Origin must be refused with 403")
		}
		return
	}
	if got.status == http.StatusForbidden {
		fail("403 for the gateway's own Host and Origin")
	}
	if v := got.header.Get("Mcp-Session-Id"); v != "" && v == sid {
		fail("the request's session id was sent back")
	}
	mt := mediaType(got.header)

	switch in.path() {
	case "/healthz", "/readyz":
		want := http.StatusOK
		if in.path() == "/readyz" {
			want = http.StatusServiceUnavailable // the servers are never discovered
		}
		if in.httpMethod() != http.MethodGet {
			want = http.StatusMethodNotAllowed
		}
		if got.status != want {
			fail("want status %d", want)
		}
		if want != http.StatusMethodNotAllowed && (mt != ctJSON || !jsontext.Value(bytes.TrimSuffix(got.body, []byte("\n"))).IsValid()) {
			fail("a health answer is a JSON object")
		}
		return
	}

	if got.header.Get("Mcp-Session-Id") != "" && in.httpMethod() != http.MethodPost {
		fail("Mcp-Session-Id is only minted by initialize")
	}
	switch in.httpMethod() {
	case http.MethodPut:
		if got.status != http.StatusMethodNotAllowed {
			fail("PUT is 405")
		}
	case http.MethodGet:
		checkGet(fail, sid, validSession, sessionVersionOK(in), got, mt)
	case http.MethodDelete:
		versionOK := sessionVersionOK(in)
		switch got.status {
		case http.StatusNoContent:
			if !validSession || !versionOK {
				fail("DELETE of a session that does not exist, or with a bad version header, succeeded")
			}
		case http.StatusBadRequest:
			if sid != "" && versionOK {
				fail("400 for DELETE with a session id and a good version header")
			}
		case http.StatusNotFound:
			if sid == "" || validSession || !versionOK {
				fail("404 for DELETE of a live session, of none, or with a bad version header")
			}
		default:
			fail("status not in the DELETE table")
		}
	case http.MethodPost:
		checkPost(fail, in, sid, validSession, got, mt)
	}
}

// sessionVersionOK reports whether a GET's or a DELETE's
// MCP-Protocol-Version is acceptable: absent, or one session-era version.
func sessionVersionOK(in fuzzInput) bool {
	if in.version == "" {
		return true
	}
	parts := strings.Split(in.version, "\n")
	return len(parts) == 1 && mcp.IsLegacy(parts[0])
}

func checkGet(fail func(string, ...any), sid string, validSession, versionOK bool, got exchangeResult, mt string) {
	switch got.status {
	case http.StatusBadRequest:
		if versionOK {
			fail("400 for a GET with a good version header")
		}
	case http.StatusOK:
		if !validSession || !versionOK {
			fail("a stream was opened for a session that does not exist, or with a bad version header")
		}
		if mt != "text/event-stream" {
			fail("a GET stream is text/event-stream")
		}
		for _, data := range parseSSE(fail, got.body) {
			if _, isResp := checkMessage(fail, data); isResp {
				fail("a GET stream carries notifications only")
			}
		}
	case http.StatusNotFound:
		if sid == "" || validSession {
			fail("404 for a GET with a live session, or with none")
		}
	case http.StatusMethodNotAllowed:
		if sid != "" {
			fail("405 for a GET with a session id")
		}
	case http.StatusNotAcceptable, http.StatusTooManyRequests:
	default:
		fail("status not in the GET table")
	}
}

// postStatuses are the statuses a POST may be answered with when no
// downstream is involved.
var postStatuses = []int{http.StatusOK, http.StatusAccepted, http.StatusBadRequest, http.StatusNotFound,
	http.StatusNotAcceptable, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusTooManyRequests}

func checkPost(fail func(string, ...any), in fuzzInput, sid string, validSession bool, got exchangeResult, mt string) {
	if !slices.Contains(postStatuses, got.status) {
		fail("status not in the POST table")
	}
	if got.status == http.StatusNotFound && (sid == "" || validSession) {
		fail("404 for a POST with a live session, or with none")
	}
	if got.status == http.StatusRequestEntityTooLarge && len(in.body) <= fuzzBodyLimit {
		fail("413 for a body within the limit")
	}
	// What the request was, as the strict decoder reads it.
	var frame jsonrpc.Frame
	if len(in.body) <= fuzzBodyLimit {
		frame = jsonrpc.DecodeFrame(in.body)
	}
	var req *jsonrpc.Message // a single valid message
	noReply := false         // a single notification or response, valid or not
	if len(frame.Items) == 1 && !frame.Batch {
		req = frame.Items[0].Msg
		noReply = (req != nil && req.Kind != jsonrpc.KindRequest) || (req == nil && frame.Items[0].Err.NoReply)
	}
	isRequest := req != nil && req.Kind == jsonrpc.KindRequest
	isInitialize := isRequest && req.Method == "initialize"
	ok2xx := got.status/100 == 2

	if got.header.Get("Mcp-Session-Id") != "" && !(isInitialize && ok2xx) {
		fail("Mcp-Session-Id is only sent with a successful initialize")
	}
	if ok2xx && sid != "" && !validSession && !isInitialize {
		fail("a request with a session id that was never minted (or was altered) was served")
	}
	if ok2xx && frame.Batch && !(validSession && in.sessionVersion() == mcp.V20250326) {
		fail("a batch was served outside a 2025-03-26 session")
	}
	if ok2xx && len(frame.Items) == 0 {
		fail("success for a body over the limit")
	}
	if ok2xx && len(frame.Items) > 0 && !frame.Batch && req == nil {
		fail("success for an invalid message")
	}
	if req != nil && !isRequest && ok2xx && (got.status != http.StatusAccepted || len(got.body) != 0) {
		fail("a notification or response is answered 202 without a body")
	}
	if got.status == http.StatusAccepted && len(got.body) != 0 {
		fail("202 with a body")
	}
	if got.status == http.StatusAccepted && isRequest {
		fail("a request was not answered")
	}

	var responses []jsontext.Value
	switch {
	case len(got.body) == 0:
		if got.status == http.StatusOK {
			fail("200 without a body")
		}
		if got.status != http.StatusAccepted && !noReply {
			fail("an error without a body, for something that is not a notification")
		}
		return
	case mt == ctJSON:
		v := jsontext.Value(bytes.TrimSuffix(got.body, []byte("\n")))
		if !v.IsValid() {
			fail("the application/json body is not strict JSON")
		}
		if v.Kind() == '[' {
			var arr []jsontext.Value
			if err := json.Unmarshal(v, &arr); err != nil || len(arr) == 0 {
				fail("a batch answer is a non-empty array: %v", err)
			}
			if !frame.Batch || got.status != http.StatusOK {
				fail("an array answers only a served batch")
			}
			for _, a := range arr {
				if _, isResp := checkMessage(fail, a); !isResp {
					fail("a batch answer holds responses only")
				}
			}
			checkBatch(fail, frame, arr)
			return
		}
		if _, isResp := checkMessage(fail, v); !isResp {
			fail("a JSON answer is a response")
		}
		if frame.Batch && ok2xx {
			fail("a served batch is answered with an array")
		}
		responses = []jsontext.Value{v}
	case mt == "text/event-stream":
		if got.status != http.StatusOK {
			fail("an event stream is 200")
		}
		if !isRequest {
			fail("only a request is answered with a stream")
		}
		events := parseSSE(fail, got.body)
		for i, data := range events {
			if _, isResp := checkMessage(fail, data); isResp {
				if i != len(events)-1 {
					fail("nothing follows the response in a stream")
				}
				responses = append(responses, data)
			}
		}
		if req.Method == "subscriptions/listen" {
			checkListen(fail, req, events)
		} else if len(responses) != 1 {
			fail("a stream ends with the response")
		}
	default:
		fail("a POST is answered with JSON or an event stream, not %q", mt)
	}

	for _, resp := range responses {
		id, hasID := responseID(fail, resp)
		if isRequest && req.ID.IsValid() {
			if ok2xx && !hasID {
				fail("a success carries no id")
			}
			if hasID && id != req.ID {
				fail("the answer's id %s is not the request's %s", idJSON(id), idJSON(req.ID))
			}
		}
	}
	if !ok2xx || !isRequest || isInitialize || len(responses) != 1 || !isResult(responses[0]) {
		return
	}
	// A successful result: the era's header rules held.
	h := http.Header{}
	addValues(h, "MCP-Protocol-Version", in.version)
	addValues(h, "Mcp-Method", in.method)
	if sid == "" {
		metaV, ok := metaVersionOf(req.Params)
		if !ok || metaV != mcp.V20260728 {
			fail("a request without a session, without _meta's version 2026-07-28, got a result")
		}
		if vs := h.Values("MCP-Protocol-Version"); len(vs) == 0 || vs[0] != mcp.V20260728 {
			fail("a 2026-07-28 result for a MCP-Protocol-Version header %q", vs)
		}
		if vs := h.Values("Mcp-Method"); len(vs) != 1 || vs[0] != req.Method {
			fail("a 2026-07-28 result for a Mcp-Method header %q, method %q", vs, req.Method)
		}
	} else if vs := h.Values("MCP-Protocol-Version"); len(vs) > 0 && vs[0] != "" && !mcp.IsLegacy(vs[0]) {
		fail("a result in a %s session for a MCP-Protocol-Version header %q, which is no session-era version", in.sessionVersion(), vs)
	}
}

// checkBatch checks the answers to a served batch: one per request and one
// per invalid member that is not a notification, each request's id among
// them.
func checkBatch(fail func(string, ...any), frame jsonrpc.Frame, answers []jsontext.Value) {
	if len(frame.Items) > fuzzBatchLimit {
		fail("a batch over the limit was served")
	}
	want := 0
	var ids []jsonrpc.ID
	for _, it := range frame.Items {
		switch {
		case it.Err != nil:
			if !it.Err.NoReply {
				want++
			}
		case it.Msg.Kind == jsonrpc.KindRequest:
			want++
			ids = append(ids, it.Msg.ID)
		}
	}
	if len(answers) != want {
		fail("%d answers for a batch that needs %d", len(answers), want)
	}
	var got []jsonrpc.ID
	for _, a := range answers {
		if id, ok := responseID(fail, a); ok {
			got = append(got, id)
		}
	}
	for _, id := range ids {
		i := slices.Index(got, id)
		if i < 0 {
			fail("no answer with id %s", idJSON(id))
		}
		got = slices.Delete(got, i, i+1)
	}
}

// checkListen checks a subscriptions/listen stream: the acknowledgement
// names the request's id as the subscription id.
func checkListen(fail func(string, ...any), req *jsonrpc.Message, events []jsontext.Value) {
	if len(events) == 0 {
		fail("a subscription stream begins with its acknowledgement")
	}
	var ack struct {
		Method string `json:"method"`
		Params struct {
			Meta map[string]jsontext.Value `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal(events[0], &ack); err != nil || ack.Method != "notifications/subscriptions/acknowledged" {
		fail("the first event is not the acknowledgement: %v", err)
	}
	sub, ok := ack.Params.Meta["io.modelcontextprotocol/subscriptionId"]
	if !ok {
		fail("the acknowledgement has no subscription id")
	}
	if id, ok := parseID(sub); !ok || id != req.ID {
		fail("the subscription id %s is not the request id %s", sub, idJSON(req.ID))
	}
}

var sseEvent = regexp.MustCompile(`\Aevent: message\ndata: ([^\n]*)\z`)

// parseSSE splits an event stream into its events' data; every event is
// "event: message" with one data line.
func parseSSE(fail func(string, ...any), body []byte) []jsontext.Value {
	if len(body) == 0 {
		return nil
	}
	if !bytes.HasSuffix(body, []byte("\n\n")) {
		fail("the stream does not end with a whole event")
	}
	var out []jsontext.Value
	for _, ev := range bytes.Split(body[:len(body)-2], []byte("\n\n")) {
		m := sseEvent.FindSubmatch(ev)
		if m == nil {
			fail("malformed event %q", ev)
		}
		out = append(out, jsontext.Value(m[1]))
	}
	return out
}

// checkMessage checks that v is a strict JSON-RPC response or notification
// and says which.
func checkMessage(fail func(string, ...any), v jsontext.Value) (method string, isResponse bool) {
	if !v.IsValid() {
		fail("not strict JSON: %q", v)
	}
	var m map[string]jsontext.Value
	if v.Kind() != '{' || json.Unmarshal(v, &m) != nil {
		fail("a message is a JSON object: %q", v)
	}
	if s, ok := stringOf(m["jsonrpc"]); !ok || s != "2.0" {
		fail(`"jsonrpc" is not "2.0" in %q`, v)
	}
	if mv, ok := m["method"]; ok {
		// A notification.
		s, isStr := stringOf(mv)
		if !isStr {
			fail("method is not a string in %q", v)
		}
		for k, mv := range m {
			switch {
			case k == "jsonrpc", k == "method":
			case k == "params" && mv.Kind() == '{':
			default:
				fail("member %q of a notification %q", k, v)
			}
		}
		return s, false
	}
	_, hasResult := m["result"]
	e, hasError := m["error"]
	if hasResult == hasError {
		fail("a response has exactly one of result and error: %q", v)
	}
	for k := range m {
		if k != "jsonrpc" && k != "id" && k != "result" && k != "error" {
			fail("member %q of a response %q", k, v)
		}
	}
	if hasResult && m["result"].Kind() != '{' {
		fail("a result is an object: %q", v)
	}
	if hasError {
		var em map[string]jsontext.Value
		if e.Kind() != '{' || json.Unmarshal(e, &em) != nil {
			fail("error is an object: %q", v)
		}
		if c, ok := em["code"]; !ok || !isInteger(c) {
			fail("error.code is an integer: %q", v)
		}
		if _, ok := stringOf(em["message"]); !ok {
			fail("error.message is a string: %q", v)
		}
		for k := range em {
			if k != "code" && k != "message" && k != "data" {
				fail("member %q of an error %q", k, v)
			}
		}
	}
	return "", true
}

func isResult(v jsontext.Value) bool {
	var m map[string]jsontext.Value
	_ = json.Unmarshal(v, &m)
	_, ok := m["result"]
	return ok
}

// responseID returns a response's id when it has a valid one.
func responseID(fail func(string, ...any), v jsontext.Value) (jsonrpc.ID, bool) {
	var m map[string]jsontext.Value
	_ = json.Unmarshal(v, &m)
	raw, ok := m["id"]
	if !ok {
		return jsonrpc.ID{}, false
	}
	return parseID(raw)
}

var integerLiteral = regexp.MustCompile(`\A-?(0|[1-9][0-9]*)\z`)

func isInteger(v jsontext.Value) bool {
	if v.Kind() != '0' || !integerLiteral.Match(v) {
		return false
	}
	_, err := strconv.ParseInt(string(v), 10, 64)
	return err == nil
}

// parseID reads a JSON-RPC id as MCP admits it: a string or an integer.
func parseID(v jsontext.Value) (jsonrpc.ID, bool) {
	if s, ok := stringOf(v); ok {
		return jsonrpc.StringID(s), true
	}
	if isInteger(v) && string(v) != "-0" {
		n, _ := strconv.ParseInt(string(v), 10, 64)
		return jsonrpc.Int64ID(n), true
	}
	return jsonrpc.ID{}, false
}

// idJSON writes id as JSON, whole (jsonrpc.ID.String cuts it for logs).
func idJSON(id jsonrpc.ID) string { return string(id.AppendJSON(nil)) }

func stringOf(v jsontext.Value) (string, bool) {
	if v.Kind() != '"' {
		return "", false
	}
	b, err := jsontext.AppendUnquote(nil, v)
	return string(b), err == nil
}

func metaVersionOf(params []byte) (string, bool) {
	var p struct {
		Meta map[string]jsontext.Value `json:"_meta"`
	}
	if params == nil || json.Unmarshal(params, &p) != nil {
		return "", false
	}
	return stringOf(p.Meta["io.modelcontextprotocol/protocolVersion"])
}
