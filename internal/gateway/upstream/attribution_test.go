package upstream

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/jsonrpc"
)

// legacyHTTP is a hand-written session-era Streamable HTTP server: its
// GET stream sends what the test puts on get; a tools/call named n is
// answered on an SSE response that first sends what the test puts on
// calls[n], then waits for release[n]. What the gateway POSTs that is no
// request (answers to the server's requests) goes to answers.
type legacyHTTP struct {
	get     chan string
	getOpen chan struct{}
	answers chan string
	mu      sync.Mutex
	calls   map[string]chan string
}

func (h *legacyHTTP) call(name string) chan string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls[name] == nil {
		h.calls[name] = make(chan string, 4)
	}
	return h.calls[name]
}

func sse(w http.ResponseWriter, msg string) {
	fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg)
	w.(http.Flusher).Flush()
}

func (h *legacyHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		close(h.getOpen)
		for {
			select {
			case m := <-h.get:
				sse(w, m)
			case <-r.Context().Done():
				return
			}
		}
	}
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	b, _ := io.ReadAll(r.Body)
	var m struct {
		ID     jsontext.Value `json:"id"`
		Method string         `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	_ = json.Unmarshal(b, &m)
	switch m.Method {
	case "initialize":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "s1")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"h","version":"1"}}}`, m.ID)
	case "tools/call":
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case s := <-h.call(m.Params.Name):
				if s == "" {
					sse(w, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, m.ID))
					return
				}
				sse(w, s)
			case <-r.Context().Done():
				return
			}
		}
	case "":
		h.answers <- string(b)
		w.WriteHeader(http.StatusAccepted)
	default:
		w.WriteHeader(http.StatusAccepted)
	}
}

func startLegacyHTTP(t *testing.T) (*legacyHTTP, *Client) {
	t.Helper()
	h := &legacyHTTP{get: make(chan string, 4), getOpen: make(chan struct{}), answers: make(chan string, 4), calls: map[string]chan string{}}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	states := make(chan State, 16)
	logs := &logBuffer{}
	s := NewHTTP(HTTPOptions{Legacy: true, Name: "h", URL: hs.URL, MaxMessage: 1 << 16,
		Logger:  slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnState: func(st State, _ *Client) { states <- st }})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		hs.CloseClientConnections()
		_ = s.Close(ctx)
	})
	awaitState(t, states, Connected, logs)
	select {
	case <-h.getOpen:
	case <-time.After(10 * time.Second):
		t.Fatal("no GET stream")
	}
	c, _ := s.Client()
	return h, c
}

// asked records the requests relayed to one call, and its log messages.
type asked struct {
	requests chan string
	messages chan string
}

func (a *asked) opts(name string) CallOptions {
	return CallOptions{Name: name,
		Requests: func(_ context.Context, method string, params jsontext.Value) (jsontext.Value, *jsonrpc.Error) {
			a.requests <- method + " " + string(params)
			return jsontext.Value(`{"role":"assistant","content":{"type":"text","text":"from ` + name + `"},"model":"m"}`), nil
		},
		Messages: func(params jsontext.Value) { a.messages <- string(params) }}
}

func newAsked() *asked { return &asked{requests: make(chan string, 4), messages: make(chan string, 4)} }

func answerOf(t *testing.T, h *legacyHTTP, id string) string {
	t.Helper()
	select {
	case a := <-h.answers:
		if !strings.Contains(a, `"id":"`+id+`"`) {
			t.Fatalf("the server was answered %s, want an answer to %s", a, id)
		}
		return a
	case <-time.After(10 * time.Second):
		t.Fatalf("the server's request %s was not answered", id)
	}
	return ""
}

// TestHTTPGetStreamRequestNotAttributed: a request (or a log message) a
// server sends on its standalone GET stream belongs to no call, even
// while exactly one is in flight: the request is refused (-32601) and
// the call's caller is never asked, nor sent the log message.
func TestHTTPGetStreamRequestNotAttributed(t *testing.T) {
	h, c := startLegacyHTTP(t)
	a := newAsked()
	done := make(chan error, 1)
	go func() {
		_, err := c.Call(context.Background(), "tools/call", []byte(`{"name":"one","arguments":{}}`), a.opts("one"))
		done <- err
	}()
	h.call("one") <- `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"x","progress":1}}`
	waitFor(t, func() bool { return c.InFlight() == 1 })
	h.get <- `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"background"}}`
	h.get <- `{"jsonrpc":"2.0","id":"bg-1","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`
	if ans := answerOf(t, h, "bg-1"); !strings.Contains(ans, `-32601`) {
		t.Errorf("the GET stream's request was answered %s", ans)
	}
	select {
	case r := <-a.requests:
		t.Errorf("a request on the GET stream was relayed to the call in flight: %s", r)
	case m := <-a.messages:
		t.Errorf("a log message on the GET stream was relayed to the call in flight: %s", m)
	default:
	}
	h.call("one") <- ""
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestHTTPCallStreamRequestAttributed: a request and a log message on a
// call's own response stream are that call's, even while another call
// is in flight; the other call's caller hears of neither.
func TestHTTPCallStreamRequestAttributed(t *testing.T) {
	h, c := startLegacyHTTP(t)
	one, two := newAsked(), newAsked()
	done := make(chan error, 2)
	for name, a := range map[string]*asked{"one": one, "two": two} {
		go func() {
			_, err := c.Call(context.Background(), "tools/call", []byte(`{"name":"`+name+`","arguments":{}}`), a.opts(name))
			done <- err
		}()
	}
	waitFor(t, func() bool { return c.InFlight() == 2 })
	h.call("two") <- `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"for two"}}`
	h.call("two") <- `{"jsonrpc":"2.0","id":"s-2","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}`
	if ans := answerOf(t, h, "s-2"); !strings.Contains(ans, `from two`) {
		t.Errorf("the call's request was answered %s", ans)
	}
	select {
	case r := <-two.requests:
		if !strings.HasPrefix(r, "sampling/createMessage ") {
			t.Errorf("call two was asked %s", r)
		}
	default:
		t.Error("call two was not asked")
	}
	select {
	case m := <-two.messages:
		if !strings.Contains(m, "for two") {
			t.Errorf("call two was sent %s", m)
		}
	case <-time.After(5 * time.Second):
		t.Error("call two was not sent its log message")
	}
	select {
	case r := <-one.requests:
		t.Errorf("call one was asked %s", r)
	case m := <-one.messages:
		t.Errorf("call one was sent %s", m)
	default:
	}
	h.call("one") <- ""
	h.call("two") <- ""
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	if !eventually(cond) {
		t.Fatal("timed out")
	}
}

// eventually polls cond until it holds, for at most 30 s. The bound is
// generous because it costs nothing when cond comes true: a child process
// started under -race on a loaded two-core machine can take seconds to
// answer. Only waits for something to happen use it, never checks that
// something does not.
func eventually(cond func() bool) bool {
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}
