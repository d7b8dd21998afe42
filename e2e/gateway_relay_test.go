package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Server-to-client requests and log messages through the gateway, end to
// end (docs/gateway-surface.md decisions 23 and 24): a session-era
// fixture that asks for sampling and logs while it serves a call, and
// two legacy sessions, one that declared sampling and one that did not.

// relaySession is a legacy session that declared caps.
func relaySession(t *testing.T, g *gw, caps string) string {
	t.Helper()
	r := g.mustPost(nil, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+caps+
		`,"clientInfo":{"name":"e2e","version":"1"}}}`)
	sid := r.header.Get("Mcp-Session-Id")
	if r.status != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	return sid
}

// callStream posts a tools/call on session sid, accepting an event
// stream, and returns its events.
func callStream(ctx context.Context, t *testing.T, g *gw, sid, tool string) <-chan map[string]any {
	t.Helper()
	return callStreamArgs(ctx, t, g, sid, tool, `{}`)
}

// callIDs numbers the calls of these tests: a session's calls in flight
// must have ids of their own.
var callIDs atomic.Int64

// callStreamArgs is callStream with arguments; the client accepts only
// an event stream.
func callStreamArgs(ctx context.Context, t *testing.T, g *gw, sid, tool, args string) <-chan map[string]any {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, callIDs.Add(1), tool, args)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("tools/call %s: %v %v", tool, err, resp)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return events(t, resp)
}

// resultText is the text of a tools/call result message.
func resultText(t *testing.T, m map[string]any) string {
	t.Helper()
	res, _ := m["result"].(map[string]any)
	content, _ := res["content"].([]any)
	if len(content) == 0 {
		t.Fatalf("not a tools/call result: %v", m)
	}
	text, _ := content[0].(map[string]any)["text"].(string)
	return text
}

// TestGatewaySampling: a downstream's sampling request reaches only the
// client whose call it serves, under an id of the gateway's, and that
// client's answer goes back to the downstream; for a client that did not
// declare sampling the downstream is refused (-32601) and the client is
// never asked. A log message sent during a call reaches that call's
// stream, tagged with the server's name. Both are audited by method.
func TestGatewaySampling(t *testing.T) {
	mark := newMark()
	dir := t.TempDir()
	rec, audit := filepath.Join(dir, "rec.log"), filepath.Join(dir, "audit.jsonl")
	g := startGateway(t, mark, fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "sample,log,slow", "FIXTURE_ERA": "legacy", "FIXTURE_LOG": rec},
		"protocol: legacy"), fmt.Sprintf("audit: {file: %q}\n", audit))
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	asker, other := relaySession(t, g, `{"sampling":{}}`), relaySession(t, g, `{}`)

	// The session that declared sampling is asked, on its call's stream.
	stream := callStream(ctx, t, g, asker, "fx.sample")
	ask := next(t, stream, "the sampling request")
	id, _ := ask["id"].(string)
	if ask["method"] != "sampling/createMessage" || !strings.HasPrefix(id, "gw-ask-") {
		t.Fatalf("the client was sent %v", ask)
	}
	answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"result":{"role":"assistant","content":{"type":"text","text":"answer from the asker"},"model":"m"}}`, id)
	// An answer on another session is not the asker's: it is dropped.
	if r, _ := g.post(ctx, map[string]string{"Mcp-Session-Id": other, "MCP-Protocol-Version": "2025-11-25"},
		strings.Replace(answer, "the asker", "another session", 1)); r.status != 202 {
		t.Errorf("a response on another session: HTTP %d", r.status)
	}
	if r, _ := g.post(ctx, map[string]string{"Mcp-Session-Id": asker, "MCP-Protocol-Version": "2025-11-25"}, answer); r.status != 202 {
		t.Fatalf("the answer: HTTP %d %s", r.status, r.body)
	}
	if text := resultText(t, next(t, stream, "the call's result")); !strings.Contains(text, "answer from the asker") {
		t.Errorf("the downstream got %q", text)
	}

	// The session that did not declare it is never asked: the downstream
	// is refused.
	// Its call is on an event stream, which could carry a request: the
	// capability it did not declare is what refuses.
	stream = callStream(ctx, t, g, other, "fx.sample")
	m := next(t, stream, "the other session's result")
	if m["method"] != nil {
		t.Fatalf("a session that did not declare sampling was sent %v", m)
	}
	if text := resultText(t, m); !strings.Contains(text, "-32601") || !strings.Contains(text, "did not declare sampling") {
		t.Errorf("the downstream got %q", text)
	}

	// With two calls in flight on the downstream, nothing tells which one
	// a request belongs to: it is refused, and no client is asked.
	// (The slow call's stream opens with its first event, its result:
	// it is posted on a goroutine of its own.)
	slowDone := make(chan (<-chan map[string]any), 1)
	go func() { slowDone <- callStreamArgs(ctx, t, g, asker, "fx.slow", `{"ms":1500}`) }()
	waitUntil(t, "the slow call in flight", func() bool { return strings.Contains(received(t, rec), `"slow"`) })
	stream = callStream(ctx, t, g, asker, "fx.sample")
	m = next(t, stream, "the sample call's result beside another call")
	if m["method"] != nil {
		t.Fatalf("with two calls in flight, a client was sent %v", m)
	}
	if text := resultText(t, m); !strings.Contains(text, "exactly one call is in flight") {
		t.Errorf("the downstream got %q", text)
	}
	if m := next(t, <-slowDone, "the slow call's result"); m["method"] != nil {
		t.Errorf("the slow call's stream carried %v", m)
	}

	// A log message during a call reaches that call's stream, with the
	// server's name in its logger.
	stream = callStream(ctx, t, g, asker, "fx.log")
	m = next(t, stream, "the log message")
	params, _ := m["params"].(map[string]any)
	if m["method"] != "notifications/message" || params["logger"] != "fx/work" || params["data"] != "fixture log line" {
		t.Errorf("the call's stream carried %v", m)
	}
	resultText(t, next(t, stream, "the log call's result"))

	// The downstream's own ids never reached a client, and the audit has
	// both decisions by method and tool.
	b, _ := os.ReadFile(audit)
	var allowed, denied bool
	for line := range strings.SplitSeq(string(b), "\n") {
		var e struct{ Method, Tool, Outcome, Reason string }
		if json.Unmarshal([]byte(line), &e) != nil || e.Method != "sampling/createMessage" || e.Tool != "fx.sample" {
			continue
		}
		allowed = allowed || e.Outcome == "allow"
		denied = denied || (e.Outcome == "deny" && e.Reason == "capability_not_declared")
	}
	if !allowed || !denied || strings.Contains(string(b), "answer from the asker") {
		t.Errorf("audit:\n%s", b)
	}
}

// TestGatewayRelayAnswerOneLine: a client's answer to a downstream's
// request reaches a stdio downstream as one line, whatever whitespace it
// holds: a raw newline in the answer (JSON whitespace) cannot frame a
// message of the client's own, which would pass the policy by.
func TestGatewayRelayAnswerOneLine(t *testing.T) {
	mark := newMark()
	rec := filepath.Join(t.TempDir(), "rec.log")
	body := "auth:\n  mode: none\npolicy:\n  rules:\n    - {id: sample-only, tools: [\"fx.sample\"], roles: [\"*\"]}\n" +
		"log:\n  level: debug\nservers:\n" +
		fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "sample,echo", "FIXTURE_ERA": "legacy", "FIXTURE_LOG": rec}, "protocol: legacy")
	g := startGatewayWith(t, mark, body)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	sid := relaySession(t, g, `{"sampling":{}}`)
	stream := callStream(ctx, t, g, sid, "fx.sample")
	ask := next(t, stream, "the sampling request")
	id, _ := ask["id"].(string)
	if ask["method"] != "sampling/createMessage" {
		t.Fatalf("the client was sent %v", ask)
	}
	injected := `{"jsonrpc":"2.0","id":4242,"method":"tools/call","params":{"name":"echo","arguments":{}}}`
	answer := fmt.Sprintf("{\"jsonrpc\":\"2.0\",\"id\":%q,\"result\":{\"role\":\"assistant\",\"content\":{\"type\":\"text\",\"text\":\"x\"},\"model\":\"m\",\"pad\":[\n%s\r\n]}}", id, injected)
	if r, _ := g.post(ctx, map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}, answer); r.status != 202 {
		t.Fatalf("the answer: HTTP %d %s", r.status, r.body)
	}
	waitUntil(t, "the answer at the downstream", func() bool { return strings.Contains(received(t, rec), `"id":4242`) })
	for line := range strings.SplitSeq(received(t, rec), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), `{"jsonrpc":"2.0","id":4242`) {
			t.Fatalf("the client's answer framed a message of its own at the downstream: %s", line)
		}
	}
	if text := resultText(t, next(t, stream, "the call's result")); !strings.Contains(text, `"pad":[{"jsonrpc"`) {
		t.Errorf("the downstream got %q", text)
	}
}

// TestGatewayRelaySSECompact: what the gateway puts on a client's event
// stream is compact JSON: a downstream's request whose params hold bare
// CRs (JSON whitespace, but the end of an SSE data line) reaches the
// client as one data line that parses whole.
func TestGatewayRelaySSECompact(t *testing.T) {
	mark := newMark()
	g := startGateway(t, mark, fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "sample-cr", "FIXTURE_ERA": "legacy"}, "protocol: legacy"), "")
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	sid := relaySession(t, g, `{"sampling":{}}`)
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fx.sample-cr","arguments":{}}}`, callIDs.Add(1))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("tools/call: %v %v", err, resp)
	}
	defer resp.Body.Close()
	// The first event, read as raw bytes up to its blank line.
	var ev []byte
	buf := make([]byte, 1)
	for !strings.HasSuffix(string(ev), "\n\n") {
		if _, err := resp.Body.Read(buf); err != nil {
			t.Fatalf("the stream ended after %q: %v", ev, err)
		}
		ev = append(ev, buf[0])
	}
	if strings.Contains(string(ev), "\r") {
		t.Fatalf("the event holds a bare CR, which ends its data line: %q", ev)
	}
	var data string
	for line := range strings.SplitSeq(string(ev), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			data = d
		}
	}
	var m struct {
		Method string
		Params struct{ MaxTokens int }
	}
	if err := json.Unmarshal([]byte(data), &m); err != nil || m.Method != "sampling/createMessage" || m.Params.MaxTokens != 10 {
		t.Fatalf("the client was sent %q (%v)", data, err)
	}
}

// TestGatewayRelaySlowClient: a client that stops reading its event
// stream while its call floods it with log messages does not stall the
// downstream for everyone: another caller's call on the same downstream
// is still answered.
func TestGatewayRelaySlowClient(t *testing.T) {
	mark := newMark()
	rec := filepath.Join(t.TempDir(), "rec.log")
	g := startGateway(t, mark, fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "flood,echo", "FIXTURE_ERA": "legacy", "FIXTURE_LOG": rec}, "protocol: legacy"), "")
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	sid := relaySession(t, g, `{}`)
	// The slow client: a tiny receive buffer, and it never reads.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	host := strings.TrimPrefix(g.base, "http://")
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"fx.flood","arguments":{}}}`, callIDs.Add(1))
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n"+
		"Mcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: %d\r\n\r\n%s", host, sid, len(body), body)
	waitUntil(t, "the flood call at the downstream", func() bool { return strings.Contains(received(t, rec), `"flood"`) })
	time.Sleep(time.Second) // the flood fills the slow client's connection

	other := relaySession(t, g, `{}`)
	echoCtx, echoCancel := context.WithTimeout(ctx, 10*time.Second)
	defer echoCancel()
	r, err := g.post(echoCtx, map[string]string{"Mcp-Session-Id": other, "MCP-Protocol-Version": "2025-11-25"},
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx.echo","arguments":{"x":1}}}`)
	if err != nil || r.status != 200 || !strings.Contains(string(r.body), `"result"`) {
		t.Fatalf("another caller's call on the same downstream: %v %d %s", err, r.status, r.body)
	}
}
