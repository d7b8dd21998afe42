package front_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcp-bastion/bastion/internal/gateway"
	"github.com/mcp-bastion/bastion/internal/gateway/audit"
	"github.com/mcp-bastion/bastion/internal/gateway/config"
	"github.com/mcp-bastion/bastion/internal/gateway/front"
	"github.com/mcp-bastion/bastion/internal/gateway/ledger"
	"github.com/mcp-bastion/bastion/internal/gateway/policy"
	"github.com/mcp-bastion/bastion/internal/mcp"
)

// The in-process benchmarks of one tools/call over HTTP, one call at a
// time: through the gateway's front to an HTTP downstream, and, as the
// baseline measured beside it, through a bare httputil.ReverseProxy to the
// same downstream. Everything runs in one process over real loopback HTTP,
// so the figures are CPU and hand-offs, not the network; the difference
// between the two is what the gateway does beyond forwarding bytes. The
// downstream answers at once, so that its cost does not drown the
// gateway's (bench/run-gateway-load.sh measures whole processes against
// the official SDK's server).
//
//	go test -run '^$' -bench 'Call$' -count 6 ./internal/gateway/front/

// echoDownstream is a minimal legacy-session MCP server over HTTP with the
// echo tool of bench/echoserver: it answers at once, with no validation of
// its own.
func echoDownstream(tb testing.TB) *httptest.Server {
	const tool = `{"name":"echo","description":"Echoes its text.","inputSchema":{"type":"object","properties":{"text":{"type":"string","maxLength":1024}},"required":["text"],"additionalProperties":false},` +
		`"outputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false},"annotations":{"readOnlyHint":true}}`
	const result = `{"content":[{"type":"text","text":"{\"text\":\"hello\"}"}],"structuredContent":{"text":"hello"}}`
	answers := map[string]string{
		"initialize": `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"echo","version":"1"}}`,
		"tools/list": `{"tools":[` + tool + `]}`,
		"tools/call": result,
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.Unmarshal(body, &m); err != nil || m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "s1")
		res, ok := answers[m.Method]
		if !ok {
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, m.ID)
			return
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, res)
	}))
	tb.Cleanup(hs.Close)
	return hs
}

// gatewayFront serves a started gateway's front over real HTTP (Serve:
// the front's own http.Server and its timeouts), in front of the
// downstream at dsURL, as bench/run-gateway-load.sh configures it.
func gatewayFront(b *testing.B, dsURL string) string {
	dir := b.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	yaml := fmt.Sprintf("listen: %s\nauth: {mode: none}\npolicy: {rules: [{id: all, tools: [\"*\"], roles: [\"*\"]}]}\n"+
		"log: {level: warn}\nstate_dir: %q\naudit: {file: %q}\nadmission: {first_use: pin}\nservers:\n  - name: echo\n    url: %s\n",
		ln.Addr(), dir, filepath.Join(dir, "audit.jsonl"), dsURL)
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	g := gateway.New(cfg, nil)
	st, err := ledger.Open(filepath.Join(dir, "ledger.db"), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	g.UseLedger(st)
	pol, err := policy.Compile(cfg.PolicyRules())
	if err != nil {
		b.Fatal(err)
	}
	sink, err := audit.Open(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sink.Close() })
	g.Authorize(pol, cfg.FilterToolsList(), sink)
	g.Start()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = g.Close(ctx)
	})
	for deadline := time.Now().Add(10 * time.Second); !g.Ready(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("not ready: %+v", g.Status())
		}
	}
	srv, err := front.New(front.Options{Config: cfg, Gateway: g, Info: mcp.Implementation{Name: "bench", Version: "1"},
		Key: bytes.Repeat([]byte("k"), 32)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, nil) }()
	b.Cleanup(func() { cancel(); <-done })
	return "http://" + ln.Addr().String() + "/mcp"
}

// benchCalls opens a legacy session at u as bench/mcpload does and calls
// the tool name, one call at a time.
func benchCalls(b *testing.B, u, name string) {
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer c.CloseIdleConnections()
	post := func(sid, body string) (*http.Response, []byte) {
		req, _ := http.NewRequest(http.MethodPost, u, bytes.NewBufferString(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return resp, got
	}
	resp, got := post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		b.Fatalf("initialize: %d %s", resp.StatusCode, got)
	}
	post(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + name + `","arguments":{"text":"hello"}}}`
	b.ReportAllocs()
	for b.Loop() {
		if resp, got := post(sid, call); resp.StatusCode != http.StatusOK || !bytes.Contains(got, []byte(`"structuredContent":{"text":"hello"}`)) {
			b.Fatalf("tools/call: %d %s", resp.StatusCode, got)
		}
	}
}

// BenchmarkGatewayCall: one tools/call through the gateway's front.
func BenchmarkGatewayCall(b *testing.B) {
	ds := echoDownstream(b)
	benchCalls(b, gatewayFront(b, ds.URL), "echo.echo")
}

// BenchmarkProxyCall: the same call through a bare reverse proxy, the
// floor of one more HTTP hop in this process.
func BenchmarkProxyCall(b *testing.B) {
	ds := echoDownstream(b)
	to, _ := url.Parse(ds.URL)
	hs := httptest.NewServer(httputil.NewSingleHostReverseProxy(to))
	b.Cleanup(hs.Close)
	benchCalls(b, hs.URL, "echo")
}

// BenchmarkDirectCall: the same call to the downstream itself.
func BenchmarkDirectCall(b *testing.B) {
	benchCalls(b, echoDownstream(b).URL, "echo")
}
