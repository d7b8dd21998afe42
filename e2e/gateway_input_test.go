package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestGatewayInputRequired: a 2026-07-28 downstream asks for the caller's
// input by answering input_required (multi round-trip requests). For a
// caller that can be asked — a legacy session that declared the
// capability, here the official Go SDK client with an elicitation
// handler — the gateway asks it on the call's stream and calls again with
// the answer and the downstream's requestState, which never reaches the
// caller; the retry is the downstream's own new request. A caller that did
// not declare the capability is never asked and gets -32003, as does one
// of a server that asks without end; every request asked or refused is
// audited by method and tool.
func TestGatewayInputRequired(t *testing.T) {
	mark := newMark()
	dir := t.TempDir()
	rec, audit := filepath.Join(dir, "rec.log"), filepath.Join(dir, "audit.jsonl")
	g := startGateway(t, mark, fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "ask,ask-forever", "FIXTURE_LOG": rec}),
		fmt.Sprintf("audit: {file: %q}\n", audit))
	ctx := ctxT(t)

	asked := 0
	client := sdkmcp.NewClient(&sdkmcp.Implementation{Name: "bastion-e2e-gosdk", Version: "1.0.0"}, &sdkmcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdkmcp.ElicitRequest) (*sdkmcp.ElicitResult, error) {
			asked++
			return &sdkmcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "from the caller"}}, nil
		}})
	cs, err := client.Connect(ctx, &sdkmcp.StreamableClientTransport{Endpoint: g.url}, &sdkmcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdkmcp.CallToolParams{Name: "fx.ask", Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("fx.ask: %v", err)
	}
	if text := contentText(res); asked != 1 || !strings.Contains(text, `answered {"action":"accept","content":{"name":"from the caller"}}`) {
		t.Errorf("asked %d times; the result: %q", asked, text)
	}
	got := received(t, rec)
	if n := strings.Count(got, `"method":"tools/call"`); n != 2 || !strings.Contains(got, `"requestState":"ask-state-1"`) ||
		!strings.Contains(got, `"inputResponses":{"confirm":{"action":"accept","content":{"name":"from the caller"}}}`) {
		t.Errorf("the downstream got %d calls:\n%s", n, got)
	}

	// A server that asks without end: the gateway stops asking.
	if _, err := cs.CallTool(ctx, &sdkmcp.CallToolParams{Name: "fx.ask-forever", Arguments: map[string]any{}}); err == nil ||
		!strings.Contains(err.Error(), "more than 10 times") {
		t.Errorf("a server that asks without end: %v", err)
	}
	if asked != 11 {
		t.Errorf("the caller was asked %d times by a server that asks without end, want 1 + 10", asked)
	}

	// A session that did not declare elicitation: the downstream is told
	// so, and does not ask; one that asks all the same is refused by the
	// gateway, and the caller is never asked, though its call's event
	// stream could carry the request.
	sid := relaySession(t, g, `{}`)
	post := func(id int, tool string) httpReply {
		return g.mustPost(map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25", "Accept": "text/event-stream"},
			fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, tool))
	}
	if r := post(3, "fx.ask"); !strings.Contains(string(r.body), "the client cannot elicit") {
		t.Errorf("a caller without the capability, of a server that heeds it: HTTP %d %s", r.status, r.body)
	}
	r := post(5, "fx.ask-forever")
	if code, msg := errorOf(t, r.msg(t)); r.status != 502 || code != -32003 || !strings.Contains(msg, "did not declare") {
		t.Errorf("a caller without the capability, of a server that asks anyway: HTTP %d %s", r.status, r.body)
	}
	// A 2026-07-28 caller cannot be asked either (it would take the
	// input_required result itself, which the gateway does not relay yet).
	r = callAs(g, "", "fx.ask-forever", map[string]any{}, 4)
	if code, _ := errorOf(t, r.msg(t)); code != -32003 {
		t.Errorf("a 2026-07-28 caller: HTTP %d %s", r.status, r.body)
	}
	if strings.Contains(string(r.body), "requestState") {
		t.Errorf("the downstream's requestState reached a caller: %s", r.body)
	}
	waitUntil(t, "the audit", func() bool {
		raw, _ := os.ReadFile(audit)
		b := string(raw)
		return strings.Contains(b, `"method":"elicitation/create","tool":"fx.ask","outcome":"allow"`) &&
			strings.Contains(b, `"method":"elicitation/create","tool":"fx.ask-forever","outcome":"deny","reason":"capability_not_declared"`)
	})
}

// TestGatewayInputRequiredCallerSlow: a caller that takes the call's
// deadline to answer a round of input is named for it — not the server,
// which answered at once — and the audit's downstream_ms is the server's
// own time, not the caller's.
func TestGatewayInputRequiredCallerSlow(t *testing.T) {
	mark := newMark()
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	g := startGateway(t, mark, fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "ask"}, "timeout: 2s"),
		fmt.Sprintf("audit: {file: %q}\n", audit))
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	stream := callStream(ctx, t, g, relaySession(t, g, `{"elicitation":{}}`), "fx.ask")
	if m := next(t, stream, "the elicitation"); m["method"] != "elicitation/create" {
		t.Fatalf("the caller was sent %v", m)
	}
	// The caller never answers: it is told the request is cancelled, and
	// then gets the call's answer.
	m := next(t, stream, "the call's answer")
	if m["method"] == "notifications/cancelled" {
		m = next(t, stream, "the call's answer")
	}
	if code, msg := errorOf(t, m); code != -32003 || !strings.Contains(msg, "the caller did not answer") {
		t.Errorf("a caller that took the deadline: %v", m)
	}
	if strings.Contains(g.p.stderr.String(), "downstream call timed out") {
		t.Error("the server is blamed for the caller's time")
	}
	waitUntil(t, "the call's audit", func() bool {
		raw, _ := os.ReadFile(audit)
		for line := range strings.SplitSeq(string(raw), "\n") {
			if !strings.Contains(line, `"method":"tools/call"`) {
				continue
			}
			var ev struct {
				DownstreamMS *float64 `json:"downstream_ms"`
			}
			if json.Unmarshal([]byte(line), &ev) == nil && ev.DownstreamMS != nil {
				if *ev.DownstreamMS >= 1000 {
					t.Errorf("downstream_ms %v counts the caller's time", *ev.DownstreamMS)
				}
				return true
			}
		}
		return false
	})
}
