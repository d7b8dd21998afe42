package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The HTTP connector is tried against the official Go SDK's Streamable
// HTTP server, in-process over real HTTP (httptest), so that what it reads
// is what an implementation nobody here wrote sends.

// sdkServer is a go-sdk MCP server with an echo tool, a tool that blocks
// until its call is cancelled, and a progress tool.
type sdkServer struct {
	cancelled chan struct{}
}

// closeSessions ends the sessions a go-sdk server still holds (one whose
// client never sent DELETE, as in a test that swapped the handler), so
// that their goroutines end before the leak check.
func closeSessions(srv *mcp.Server) {
	for ss := range srv.Sessions() {
		_ = ss.Close()
	}
}

func newSDKServer(t *testing.T) (*mcp.Server, *sdkServer) {
	st := &sdkServer{cancelled: make(chan struct{}, 8)}
	srv := mcp.NewServer(&mcp.Implementation{Name: "sdk", Version: "1.0.0"}, &mcp.ServerOptions{PageSize: 1})
	object := json.RawMessage(`{"type":"object"}`)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: object}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "block", InputSchema: object}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-ctx.Done()
		st.cancelled <- struct{}{}
		return nil, ctx.Err()
	})
	srv.AddTool(&mcp.Tool{Name: "progress", InputSchema: object}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		for i := 1; i <= 2; i++ {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: 2})
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	})
	t.Cleanup(func() { closeSessions(srv) })
	return srv, st
}

// swappable serves through a handler the test can replace: a new go-sdk
// handler has forgotten every session, as a restarted server has.
type swappable struct {
	mu sync.Mutex
	h  http.Handler
	n  atomic.Int64
}

func (s *swappable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.n.Add(1)
	s.mu.Lock()
	h := s.h
	s.mu.Unlock()
	h.ServeHTTP(w, r)
}

func (s *swappable) set(h http.Handler) {
	s.mu.Lock()
	s.h = h
	s.mu.Unlock()
}

func startHTTP(t *testing.T, url string, states chan State) (*HTTPServer, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	s := NewHTTP(HTTPOptions{Name: "h", URL: url, MaxMessage: 1 << 16,
		Logger:  slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnState: func(st State, _ *Client) { states <- st }})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, logs
}

func awaitState(t *testing.T, states chan State, want State, logs *logBuffer) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case s := <-states:
			if s == want {
				return
			}
		case <-timeout:
			t.Fatalf("state %s not reached; log:\n%s", want, logs.String())
		}
	}
}

func TestHTTPAgainstGoSDK(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *mcp.StreamableHTTPOptions
	}{
		{"sse", nil},
		{"json", &mcp.StreamableHTTPOptions{JSONResponse: true}},
		{"stateless", &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := newSDKServer(t)
			hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, tc.opts))
			t.Cleanup(hs.Close)
			states := make(chan State, 16)
			s, logs := startHTTP(t, hs.URL, states)
			awaitState(t, states, Connected, logs)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			res, err := s.Call(ctx, "tools/call", []byte(`{"name":"echo","arguments":{"a":1}}`), CallOptions{Name: "echo"})
			if err != nil || !strings.Contains(string(res), `{\"a\":1}`) {
				t.Fatalf("echo: %s %v; log:\n%s", res, err, logs.String())
			}
			// Pages of one tool each: the cursor loop is the client's.
			list, err := s.Call(ctx, "tools/list", nil, CallOptions{})
			if err != nil || !strings.Contains(string(list), `"nextCursor"`) {
				t.Fatalf("tools/list: %s %v", list, err)
			}
			var got []string
			var mu sync.Mutex
			res, err = s.Call(ctx, "tools/call", []byte(`{"name":"progress","arguments":{}}`), CallOptions{
				Name: "progress", ProgressToken: jsontext.Value(`"mine"`),
				Progress: func(p jsontext.Value) { mu.Lock(); got = append(got, string(p)); mu.Unlock() },
			})
			if err != nil || !strings.Contains(string(res), "done") {
				t.Fatalf("progress: %s %v", res, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if tc.opts == nil { // only an SSE answer can carry progress before the result
				if len(got) != 2 || !strings.Contains(got[0], `"progressToken":"mine"`) {
					t.Errorf("progress relayed: %v", got)
				}
			}
			for _, p := range got {
				if strings.Contains(p, "gw-") {
					t.Errorf("the gateway's token leaked to the caller: %s", p)
				}
			}
		})
	}
}

func TestHTTPCancellationReachesServer(t *testing.T) {
	srv, st := newSDKServer(t)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	states := make(chan State, 16)
	s, logs := startHTTP(t, hs.URL, states)
	awaitState(t, states, Connected, logs)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := s.Call(ctx, "tools/call", []byte(`{"name":"block","arguments":{}}`), CallOptions{Name: "block"})
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // the call is in flight
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Call returned %v, want the caller's cancellation", err)
	}
	select {
	case <-st.cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the server's handler was never cancelled")
	}
}

// TestHTTPSessionExpired: when the server forgets the session (404), the
// connector initializes again and calls go through.
func TestHTTPSessionExpired(t *testing.T) {
	sw := &swappable{}
	srv, _ := newSDKServer(t)
	sw.set(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true}))
	hs := httptest.NewServer(sw)
	t.Cleanup(hs.Close)
	states := make(chan State, 16)
	s, logs := startHTTP(t, hs.URL, states)
	awaitState(t, states, Connected, logs)
	c1, _ := s.Client()
	if info, _ := c1.Info(); info.Modern {
		t.Skip("the SDK server answered server/discover: a stateless downstream has no session to expire")
	}
	srv2, _ := newSDKServer(t)
	sw.set(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv2 }, &mcp.StreamableHTTPOptions{JSONResponse: true}))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := s.Call(ctx, "tools/call", []byte(`{"name":"echo","arguments":{}}`), CallOptions{Name: "echo"}); err == nil {
		t.Fatal("a call in a forgotten session succeeded")
	}
	awaitState(t, states, Connected, logs)
	if _, err := s.Call(ctx, "tools/call", []byte(`{"name":"echo","arguments":{}}`), CallOptions{Name: "echo"}); err != nil {
		t.Fatalf("after re-initializing: %v; log:\n%s", err, logs.String())
	}
	if s.Restarts() < 1 {
		t.Errorf("Restarts = %d", s.Restarts())
	}
}

// TestHTTPRefusesRedirects: a redirect is never followed, so a downstream
// cannot send the gateway (and its credentials) elsewhere.
func TestHTTPRefusesRedirects(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(other.Close)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(hs.Close)
	states := make(chan State, 16)
	s, logs := startHTTP(t, hs.URL, states)
	awaitState(t, states, Failed, logs)
	if s.Connected() || elsewhere.Load() != 0 {
		t.Errorf("connected %v, requests elsewhere %d", s.Connected(), elsewhere.Load())
	}
	if !strings.Contains(logs.String(), "downstream refused the request") {
		t.Errorf("log:\n%s", logs.String())
	}
}

// peekBody reads r's body and puts it back, for a test server that
// answers some requests itself and hands the rest on.
func peekBody(r *http.Request) []byte {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body
}

// idAndName finds a request's id and tools/call name in its body.
var idAndName = regexp.MustCompile(`"id":(\d+),"method":"tools/call","params":\{"name":"([a-z]+)"`)

// TestHTTPOversizedAnswer: a response over the cap is dropped and counted,
// the call fails, and the connector stays up.
func TestHTTPOversizedAnswer(t *testing.T) {
	srv, _ := newSDKServer(t)
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := peekBody(r)
		if m := idAndName.FindSubmatch(body); m != nil && string(m[2]) == "huge" {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m[1]) + `,"result":{"x":"` + strings.Repeat("a", 1<<17) + `"}}`))
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	states := make(chan State, 16)
	s, logs := startHTTP(t, hs.URL, states)
	awaitState(t, states, Connected, logs)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := s.Call(ctx, "tools/call", []byte(`{"name":"huge","arguments":{}}`), CallOptions{Name: "huge"}); err == nil {
		t.Fatal("an oversized answer was accepted")
	}
	if s.Stats().Oversized.Load() != 1 {
		t.Errorf("Oversized = %d", s.Stats().Oversized.Load())
	}
	if _, err := s.Call(ctx, "tools/call", []byte(`{"name":"echo","arguments":{}}`), CallOptions{Name: "echo"}); err != nil {
		t.Errorf("after the oversized answer: %v", err)
	}
}

// TestHTTPListChanged: a tool the server adds after the connection is
// made is heard of between calls, on the stream the connector holds open
// (the legacy GET stream, or a 2026-07-28 subscriptions/listen), which is
// open by the time the server is reported connected.
func TestHTTPListChanged(t *testing.T) {
	srv, _ := newSDKServer(t)
	var gets, listens atomic.Int64
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The stream opens late, and is counted once it opens: a client
		// that reported Connected without waiting for it would be seen
		// with none open, whatever the scheduling.
		switch {
		case r.Method == http.MethodGet:
			time.Sleep(time.Second)
			gets.Add(1)
		case r.Header.Get("Mcp-Method") == "subscriptions/listen":
			time.Sleep(time.Second)
			listens.Add(1)
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	states := make(chan State, 16)
	notes := make(chan Notification, 16)
	logs := &logBuffer{}
	s := NewHTTP(HTTPOptions{Name: "h", URL: hs.URL, MaxMessage: 1 << 16,
		Logger:   slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnState:  func(st State, _ *Client) { states <- st },
		OnNotify: func(n Notification) { notes <- n }})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	awaitState(t, states, Connected, logs)
	c, _ := s.Client()
	info, _ := c.Info()
	t.Logf("era: %s; GET streams %d, subscriptions %d", info.Version, gets.Load(), listens.Load())
	if gets.Load()+listens.Load() != 1 {
		t.Fatalf("GET streams %d, subscriptions %d when connected; want one stream", gets.Load(), listens.Load())
	}
	srv.AddTool(&mcp.Tool{Name: "late", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	timeout := time.After(10 * time.Second)
	for {
		select {
		case n := <-notes:
			if n.Method == "notifications/tools/list_changed" {
				return
			}
		case <-timeout:
			t.Fatalf("no list_changed; log:\n%s", logs.String())
		}
	}
}

// TestEventCap: an SSE event is held within the size cap while it grows,
// whatever the number of data lines, and dropped whole when it goes past
// it; the next event is read afresh.
func TestEventCap(t *testing.T) {
	ev := event{max: 1024}
	line := bytes.Repeat([]byte("a"), 100)
	for range 10_000 { // 1 MB of data lines in one event
		ev.data(line)
		if ev.buf.Len() > 1024 {
			t.Fatalf("the event holds %d bytes, past the cap of 1024", ev.buf.Len())
		}
	}
	if msg, oversized := ev.end(); msg != nil || !oversized {
		t.Errorf("end of an oversized event = %q, %v", msg, oversized)
	}
	ev.data([]byte(`{"a":`))
	ev.data([]byte(`1}`))
	if msg, oversized := ev.end(); string(msg) != "{\"a\":\n1}" || oversized {
		t.Errorf("the next event = %q, %v", msg, oversized)
	}
	if msg, oversized := ev.end(); msg != nil || oversized {
		t.Errorf("an event without data = %q, %v", msg, oversized)
	}
}

// TestSSELines: an event stream's lines end at CRLF, LF or a lone CR,
// wherever the reads fall (one byte at a time puts a CRLF across two);
// a leading byte order mark is dropped; a line past the cap is consumed
// and reported; a last line without an end is not a line.
func TestSSELines(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string // "!" for errLineTooLong
	}{
		{"LF", "data: a\n\ndata: b\n\n", []string{"data: a", "", "data: b", ""}},
		{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"data: a", "", "data: b", ""}},
		{"CR", "data: a\r\rdata: b\r\r", []string{"data: a", "", "data: b", ""}},
		{"mixed", "data: a\r\ndata: b\rdata: c\n\r\n", []string{"data: a", "data: b", "data: c", ""}},
		{"CR then LF is one end, LF then CR two", "a\r\nb\n\rc\n", []string{"a", "b", "", "c"}},
		{"BOM", "\uFEFFdata: a\n\n", []string{"data: a", ""}},
		{"a BOM after the start is data", "data: a\n\uFEFFb\n", []string{"data: a", "\uFEFFb"}},
		{"too long", "data: 0123456789\rok\n", []string{"!", "ok"}},
		{"no end", "data: a\ndata: b", []string{"data: a"}},
	} {
		for _, oneByte := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/onebyte=%v", tc.name, oneByte), func(t *testing.T) {
				var r io.Reader = strings.NewReader(tc.in)
				if oneByte {
					r = iotest.OneByteReader(r)
				}
				lines := newSSELines(r)
				var got []string
				for {
					line, err := lines.next(12)
					if errors.Is(err, errLineTooLong) {
						got = append(got, "!")
						continue
					}
					if err != nil {
						break
					}
					got = append(got, string(line))
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("got %q, want %q", got, tc.want)
				}
			})
		}
	}
}

// TestHTTPDiscoverRefusedWithNullID: a server that refuses server/discover
// with HTTP 400 and a JSON-RPC error whose id is null (what the official
// TypeScript SDK's Streamable HTTP server answers a version it does not
// know) is initialized at once, in the session era.
func TestHTTPDiscoverRefusedWithNullID(t *testing.T) {
	srv, _ := newSDKServer(t)
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("MCP-Protocol-Version") == "2026-07-28" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Unsupported protocol version: 2026-07-28"},"id":null}`))
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	states := make(chan State, 16)
	start := time.Now()
	s, logs := startHTTP(t, hs.URL, states)
	awaitState(t, states, Connected, logs)
	if took := time.Since(start); took > handshakeTimeout/2 {
		t.Errorf("connected after %v: the refusal was not taken as server/discover's answer", took)
	}
	if c, err := s.Client(); err == nil {
		if i, _ := c.Info(); i.Modern {
			t.Error("the session era was not chosen")
		}
	}
}

// TestHeaderNamesCanonical: the names the connector sets without Set are
// canonical, so that each replaces a configured header of the same name
// (configuration refuses these names, and this is the second line)
// instead of travelling beside it for a downstream to pick one.
func TestHeaderNamesCanonical(t *testing.T) {
	for _, k := range []string{hdrSessionID, hdrVersion, hdrMethod, hdrName, hdrContentType, hdrAccept,
		hdrSubject, hdrIssuer, hdrRole, hdrRequestID} {
		if c := textproto.CanonicalMIMEHeaderKey(k); c != k {
			t.Errorf("%q is set as written, but is %q in canonical form", k, c)
		}
	}
	// A configured header of a reserved name, as a configuration that
	// skipped validation would hold it, is overridden, not doubled.
	s := &HTTPServer{fixed: http.Header{}}
	s.fixed.Set("x-mcp-gateway-role", "admin")
	s.fixed.Set("mcp-session-id", "forged")
	s.sessionID = "real"
	req := httptest.NewRequest(http.MethodPost, "http://downstream.example/mcp", nil)
	req.Header = s.headers(outgoing{identity: &Identity{Subject: "bob", Issuer: "static", Roles: []string{"viewer"}}}).h
	if got := req.Header.Values("X-Mcp-Gateway-Role"); len(got) != 1 || got[0] != "viewer" {
		t.Errorf("X-MCP-Gateway-Role: %q", got)
	}
	if got := req.Header.Values("Mcp-Session-Id"); len(got) != 1 || got[0] != "real" {
		t.Errorf("Mcp-Session-Id: %q", got)
	}
	if len(req.Header) != 4 {
		t.Errorf("headers: %v", req.Header)
	}
}

// TestRequestHeader: the values set share one array, yet each stays its
// own: appending to one does not change another, and more headers than
// the array was sized for are still all set.
func TestRequestHeader(t *testing.T) {
	fixed := http.Header{"Authorization": {"Bearer x"}}
	h := newRequestHeader(fixed)
	want := map[string]string{"Authorization": "Bearer x"}
	for i := range gatewayHeaders + 3 {
		k, v := fmt.Sprintf("X-H%d", i), fmt.Sprintf("v%d", i)
		h.set(k, v)
		want[k] = v
	}
	h.h["X-H0"] = append(h.h["X-H0"], "extra")
	want["X-H0"] = "v0"
	for k, v := range want {
		if got := h.h.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	if got := h.h.Values("X-H1"); len(got) != 1 {
		t.Errorf("X-H1 after an append to X-H0: %q", got)
	}
	if len(fixed) != 1 || fixed.Get("Authorization") != "Bearer x" {
		t.Errorf("the configured headers changed: %v", fixed)
	}
}

// TestHTTPUnreadableAnswerFailsAtOnce: the response to a call's POST is
// that call's answer, so a response that does not answer it fails the
// call at once with ErrMalformed, not at its deadline; and the connector
// stays up.
func TestHTTPUnreadableAnswerFailsAtOnce(t *testing.T) {
	answers := map[string]func(id string) (int, string, string){
		"accepted": func(string) (int, string, string) { return http.StatusAccepted, "", "" },
		"empty":    func(string) (int, string, string) { return http.StatusOK, "application/json", "" },
		"notjson":  func(string) (int, string, string) { return http.StatusOK, "application/json", "<html>" },
		"badutf": func(id string) (int, string, string) {
			return http.StatusOK, "application/json", `{"jsonrpc":"2.0","id":` + id + `,"result":{"x":"` + "\xff" + `"}}`
		},
		"otherid": func(id string) (int, string, string) {
			return http.StatusOK, "application/json", `{"jsonrpc":"2.0","id":` + id + `0,"result":{}}`
		},
		"deep": func(id string) (int, string, string) {
			return http.StatusOK, "application/json", `{"jsonrpc":"2.0","id":` + id + `,"result":{"x":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}}`
		},
		"onlyanote": func(string) (int, string, string) {
			return http.StatusOK, "application/json", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`
		},
		"nullresult": func(id string) (int, string, string) {
			return http.StatusOK, "application/json", `{"jsonrpc":"2.0","id":` + id + `}`
		},
	}
	srv, _ := newSDKServer(t)
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := peekBody(r)
		if m := idAndName.FindSubmatch(body); m != nil && answers[string(m[2])] != nil {
			status, ct, text := answers[string(m[2])](string(m[1]))
			if ct != "" {
				w.Header().Set("Content-Type", ct)
			}
			w.WriteHeader(status)
			w.Write([]byte(text))
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	states := make(chan State, 16)
	s, logs := startHTTP(t, hs.URL, states)
	awaitState(t, states, Connected, logs)
	t.Run("each", func(t *testing.T) {
		for name := range answers {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				// A call left waiting ends at this deadline, with the
				// deadline's error, not ErrMalformed.
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				defer cancel()
				_, err := s.Call(ctx, "tools/call", []byte(`{"name":"`+name+`","arguments":{}}`), CallOptions{Name: name})
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("err = %v, want ErrMalformed", err)
				}
			})
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := s.Call(ctx, "tools/call", []byte(`{"name":"echo","arguments":{}}`), CallOptions{Name: "echo"}); err != nil {
		t.Errorf("after the unreadable answers: %v", err)
	}
}

// TestHTTPAnswerToAnAnswerIsNotRead: a downstream that answers the
// gateway's answer to its ping with another ping is not heard: the body of
// a POST that carries a response or a notification is never delivered.
// Were it, each round would be answered from inside the send of the one
// before, a frame deeper, until the gateway's stack overflowed.
func TestHTTPAnswerToAnAnswerIsNotRead(t *testing.T) {
	var answered atomic.Int64
	srv, _ := newSDKServer(t)
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := peekBody(r)
		ping := func() {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jsonrpc":"2.0","id":"p","method":"ping"}`))
		}
		switch {
		case bytes.Contains(body, []byte(`"id":"p"`)) && bytes.Contains(body, []byte(`"result"`)):
			// The gateway's answer to a ping: answered with another,
			// for a bounded number of rounds so that a failing run ends.
			if answered.Add(1) < 200 {
				ping()
				return
			}
			w.WriteHeader(http.StatusAccepted)
		case bytes.Contains(body, []byte(`"name":"pingloop"`)):
			ping()
		default:
			inner.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(hs.Close)
	states := make(chan State, 16)
	s, logs := startHTTP(t, hs.URL, states)
	awaitState(t, states, Connected, logs)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := s.Call(ctx, "tools/call", []byte(`{"name":"pingloop","arguments":{}}`), CallOptions{Name: "pingloop"}); !errors.Is(err, ErrMalformed) {
		t.Errorf("err = %v, want ErrMalformed", err)
	}
	if n := answered.Load(); n != 1 {
		t.Errorf("the gateway answered %d pings, want 1: the body of its answer was read", n)
	}
	if s.Stats().Unexpected.Load() == 0 {
		t.Error("the unread body was not counted")
	}
}

// TestHTTPForgottenSessionBacksOff: a server that forgets each session as
// soon as it is made (here, a 404 to its first GET stream) is initialized
// again after a backoff that doubles, not in a loop as fast as the
// network allows. The gaps are checked from below only: a timer never
// fires early, whatever the load.
func TestHTTPForgottenSessionBacksOff(t *testing.T) {
	var (
		mu    sync.Mutex
		inits []time.Time
	)
	idOf := regexp.MustCompile(`"id":(\d+)`)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		body, _ := io.ReadAll(r.Body)
		m := idOf.FindSubmatch(body)
		if m == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if !bytes.Contains(body, []byte(`"method":"initialize"`)) {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`, m[1])
			return
		}
		mu.Lock()
		inits = append(inits, time.Now())
		mu.Unlock()
		w.Header().Set("Mcp-Session-Id", "s1")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"x","version":"1"}}}`, m[1])
	}))
	t.Cleanup(hs.Close)
	states := make(chan State, 64)
	go func() {
		for range states {
		}
	}()
	t.Cleanup(func() { close(states) }) // after the server's Close, which startHTTP registers later
	startHTTP(t, hs.URL, states)
	var got []time.Time
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		got = slices.Clone(inits)
		mu.Unlock()
		if len(got) >= 5 {
			break
		}
	}
	if len(got) < 5 {
		t.Fatalf("%d handshakes in 30 s", len(got))
	}
	for i := 1; i < 5; i++ {
		t.Logf("handshake %d after %v", i+1, got[i].Sub(got[i-1]))
	}
	for i := 2; i < 5; i++ {
		if gap, least := got[i].Sub(got[i-1]), minBackoff<<(i-1); gap < least {
			t.Errorf("handshake %d came %v after the one before, want at least %v", i+1, gap, least)
		}
	}
}

// TestHeaderValue: a value travels plain only when it is visible ASCII
// that cannot be read as the sentinel, in any case of its prefix.
func TestHeaderValue(t *testing.T) {
	tests := []struct{ in, want string }{
		{"alice@example.com", "alice@example.com"},
		{" padded ", "=?base64?IHBhZGRlZCA=?="},
		{"Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="},
		{"line1\nline2", "=?base64?bGluZTEKbGluZTI=?="},
		{"=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="},
		{"=?BASE64?YWRtaW4=?=", "=?base64?PT9CQVNFNjQ/WVdSdGFXND0/PQ==?="},
		{"=?Base64?x?=", "=?base64?PT9CYXNlNjQ/eD89?="},
		{"=?base64?", "=?base64?"},
		{"x=?base64?y?=", "x=?base64?y?="},
	}
	for _, tt := range tests {
		if got := HeaderValue(tt.in); got != tt.want {
			t.Errorf("HeaderValue(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
