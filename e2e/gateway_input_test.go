package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
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
	askOnce(ctx, t, cs, rec, map[string]any{}, &asked)

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
	// A 2026-07-28 caller that declared nothing is not handed the round
	// either (TestGatewayInputHandedOver hands it to one that did).
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

// TestGatewayInputHandedOver: a 2026-07-28 caller, which no request can
// reach, is handed a 2026-07-28 downstream's round of input as the call's
// input_required result, and answers it by calling again. The official Go
// SDK client does so on its own. The requestState it is handed is the
// gateway's seal, not the server's: the server's state cannot be read in
// it, and it opens only for the same caller, tool and arguments, unaltered,
// with an answer to each request asked and nothing else; a session-era
// caller cannot send one at all. Rounds handed over count against the
// bound of a call, and each request handed over is audited.
func TestGatewayInputHandedOver(t *testing.T) {
	ctx := ctxT(t)

	t.Run("the official Go SDK client", func(t *testing.T) {
		mark := newMark()
		rec := filepath.Join(t.TempDir(), "rec.log")
		g := startGateway(t, mark, fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "ask", "FIXTURE_LOG": rec}), "")
		asked := 0
		client := sdkmcp.NewClient(&sdkmcp.Implementation{Name: "bastion-e2e-gosdk", Version: "1.0.0"}, &sdkmcp.ClientOptions{
			ElicitationHandler: func(_ context.Context, req *sdkmcp.ElicitRequest) (*sdkmcp.ElicitResult, error) {
				asked++
				if req.Params.Message != "fixture asks" {
					t.Errorf("the caller was asked %q", req.Params.Message)
				}
				return &sdkmcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "from the caller"}}, nil
			}})
		cs, err := client.Connect(ctx, &sdkmcp.StreamableClientTransport{Endpoint: g.url, MaxRetries: -1},
			&sdkmcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		askOnce(ctx, t, cs, rec, map[string]any{"order": "A-1"}, &asked)
	})

	mark := newMark()
	dir := t.TempDir()
	rec, auditFile := filepath.Join(dir, "rec.log"), filepath.Join(dir, "audit.jsonl")
	g, _ := authGateway(t, fmt.Sprintf("audit: {file: %q}\n", auditFile),
		fixture("fy", mark, map[string]string{"FIXTURE_TOOLS": "ask,ask-forever", "FIXTURE_LOG": rec}))
	calls := func() int { return strings.Count(received(t, rec), `"method":"tools/call"`) }
	id := 0
	call := func(tok, tool string, args map[string]any, extra map[string]any) msg {
		t.Helper()
		id++
		params := map[string]any{"name": tool, "arguments": args, "_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{}},
		}}
		maps.Copy(params, extra)
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
		h := modernHeaders("tools/call", tool)
		h["Authorization"] = "Bearer " + tok
		return g.mustPost(h, string(body)).msg(t)
	}
	round := func(m msg) (requests map[string]any, state string) {
		t.Helper()
		r, _ := m["result"].(map[string]any)
		if r["resultType"] != "input_required" {
			t.Fatalf("not an input_required result: %v", m)
		}
		requests, _ = r["inputRequests"].(map[string]any)
		state, _ = r["requestState"].(string)
		return requests, state
	}
	badState := func(what string, m msg) {
		t.Helper()
		if code, msg := errorOf(t, m); code != -32602 || !strings.Contains(msg, "requestState") && !strings.Contains(msg, "inputResponses") {
			t.Errorf("%s: %v", what, m)
		}
	}

	args := map[string]any{"order": "A-1", "amount": 5}
	requests, state := round(call(adminToken, "fy.ask", args, nil))
	confirm, _ := requests["confirm"].(map[string]any)
	if len(requests) != 1 || confirm["method"] != "elicitation/create" {
		t.Errorf("the requests handed over: %v", requests)
	}
	if !strings.HasPrefix(state, "bastion-input-1.") || strings.Contains(state, "ask-state-1") ||
		strings.Contains(state, base64.RawURLEncoding.EncodeToString([]byte("ask-state-1"))) ||
		strings.Contains(state, base64.StdEncoding.EncodeToString([]byte("ask-state-1"))) {
		t.Errorf("the state handed over: %q", state)
	}
	answer := map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"name": "alice"}}}
	with := func(responses any, state string) map[string]any {
		return map[string]any{"inputResponses": responses, "requestState": state}
	}

	// Replays that must not open: each is refused before the server is
	// called again.
	before := calls()
	tampered := []byte(state)
	tampered[len(tampered)/2] ^= 0x01
	badState("another caller", call(viewerToken, "fy.ask", args, with(answer, state)))
	badState("another tool", call(adminToken, "fy.ask-forever", args, with(answer, state)))
	badState("other arguments", call(adminToken, "fy.ask", map[string]any{"order": "A-1", "amount": 5000}, with(answer, state)))
	badState("an altered state", call(adminToken, "fy.ask", args, with(answer, string(tampered))))
	badState("the server's own state", call(adminToken, "fy.ask", args, with(answer, "ask-state-1")))
	badState("an answer not asked for", call(adminToken, "fy.ask", args, with(map[string]any{"confirm": answer["confirm"], "more": map[string]any{}}, state)))
	badState("no answer", call(adminToken, "fy.ask", args, with(map[string]any{}, state)))
	badState("an answer not a result", call(adminToken, "fy.ask", args, with(map[string]any{"confirm": "accept"}, state)))
	badState("answers without a state", call(adminToken, "fy.ask", args, map[string]any{"inputResponses": answer}))
	badState("an answer the sanitizer refuses", call(adminToken, "fy.ask", args,
		with(map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"name": "\u202etxt.exe"}}}, state)))
	if n := calls(); n != before {
		t.Errorf("%d refused retries reached the server", n-before)
	}

	// A session-era caller may not send either member.
	init := g.mustPost(map[string]string{"Authorization": "Bearer " + adminToken}, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":`+
		`{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"e2e","version":"1"}}}`)
	sid := init.header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: HTTP %d %s", init.status, init.body)
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 99, "method": "tools/call",
		"params": map[string]any{"name": "fy.ask", "arguments": args, "inputResponses": answer, "requestState": state}})
	r := g.mustPost(map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25", "Authorization": "Bearer " + adminToken}, string(body))
	if code, msg := errorOf(t, r.msg(t)); code != -32602 || !strings.Contains(msg, "2026-07-28") {
		t.Errorf("a session-era caller sending a requestState: HTTP %d %s", r.status, r.body)
	}

	// The answer, re-encoded in another member order: the call completes,
	// and the server gets its own state back with the answer.
	m := call(adminToken, "fy.ask", map[string]any{"amount": 5, "order": "A-1"}, with(answer, state))
	res, _ := m["result"].(map[string]any)
	if !strings.Contains(fmt.Sprint(res["content"]), `answered {"action":"accept","content":{"name":"alice"}}`) || res["resultType"] != "complete" {
		t.Errorf("the answered call: %v", m)
	}
	if got := received(t, rec); !strings.Contains(got, `"requestState":"ask-state-1"`) ||
		!strings.Contains(got, `"inputResponses":{"confirm":{"action":"accept","content":{"name":"alice"}}}`) {
		t.Errorf("the server's retry:\n%s", got)
	}

	// A server that asks without end: rounds handed over count, and the
	// eleventh ends the call.
	requests, state = round(call(adminToken, "fy.ask-forever", map[string]any{}, nil))
	for n := 2; n <= 10; n++ {
		if _, ok := requests["again"]; !ok {
			t.Fatalf("round %d asked %v", n, requests)
		}
		requests, state = round(call(adminToken, "fy.ask-forever", map[string]any{}, with(map[string]any{"again": map[string]any{"action": "decline"}}, state)))
	}
	m = call(adminToken, "fy.ask-forever", map[string]any{}, with(map[string]any{"again": map[string]any{"action": "decline"}}, state))
	if code, msg := errorOf(t, m); code != -32003 || !strings.Contains(msg, "more than 10 times") {
		t.Errorf("the eleventh round: %v", m)
	}

	waitUntil(t, "the audit", func() bool {
		raw, _ := os.ReadFile(auditFile)
		b := string(raw)
		return strings.Contains(b, `"method":"elicitation/create","tool":"fy.ask","outcome":"allow","reason":"handed_to_caller"`) &&
			strings.Contains(b, `"method":"tools/call","tool":"fy.ask","rule":"everyone-else","outcome":"allow","reason":"input_required"`) &&
			strings.Contains(b, `"subject":"bob@example.com","issuer":"static","roles":["viewer"],"method":"tools/call","tool":"fy.ask","rule":"everyone-else","outcome":"invalid","reason":"input_answers","code":-32602`)
	})
}

// TestGatewayStdioInputHandedOver: over --stdio too, a 2026-07-28 client
// is handed its call's round of input and answers it by calling again
// (the official Go SDK client, on its own), and the server gets its own
// state back; a session-era client on stdio is asked by the gateway on
// the session instead, which fulfils the round itself.
func TestGatewayStdioInputHandedOver(t *testing.T) {
	mark := newMark()
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec.log")
	cfg := "auth:\n  mode: none\npolicy:\n  rules:\n    - {id: all, tools: [\"*\"], roles: [\"*\"]}\nservers:\n" +
		fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "ask", "FIXTURE_LOG": rec})
	cfg += stateKeys(t, cfg)
	path := filepath.Join(dir, "gateway.yaml")
	writeFile(t, path, cfg)
	ctx := ctxT(t)
	for _, tc := range []struct {
		version string
		want    string
	}{
		{"", `answered {"action":"accept","content":{"name":"over stdio"}}`},
		{"2025-11-25", `answered {"action":"accept","content":{"name":"over stdio"}}`},
	} {
		t.Run("era "+tc.version, func(t *testing.T) {
			asked := 0
			cs := goSDKClientSession(t, tc.version, &sdkmcp.ClientOptions{
				ElicitationHandler: func(context.Context, *sdkmcp.ElicitRequest) (*sdkmcp.ElicitResult, error) {
					asked++
					return &sdkmcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "over stdio"}}, nil
				}}, baseEnv(), "gateway", "--stdio", "--config", path)
			var (
				res *sdkmcp.CallToolResult
				err error
			)
			// Discovery may still be running: until then fx.ask is unknown.
			waitUntil(t, "fx.ask", func() bool {
				res, err = cs.CallTool(ctx, &sdkmcp.CallToolParams{Name: "fx.ask", Arguments: map[string]any{"n": 1}})
				return err == nil || !strings.Contains(err.Error(), "Unknown tool")
			})
			got := fmt.Sprint(err)
			if err == nil {
				got = contentText(res)
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("fx.ask: %s, want %s", got, tc.want)
			}
			if asked != 1 || !strings.Contains(received(t, rec), `"requestState":"ask-state-1"`) {
				t.Errorf("asked %d times; the server got:\n%s", asked, received(t, rec))
			}
		})
	}
}

// askOnce calls fx.ask through cs, whose elicitation handler counts in
// asked and answers "from the caller": the caller is asked once, and the
// downstream gets two calls, the second with its own state and the answer.
func askOnce(ctx context.Context, t *testing.T, cs *sdkmcp.ClientSession, rec string, args map[string]any, asked *int) {
	t.Helper()
	res, err := cs.CallTool(ctx, &sdkmcp.CallToolParams{Name: "fx.ask", Arguments: args})
	if err != nil {
		t.Fatalf("fx.ask: %v", err)
	}
	if text := contentText(res); *asked != 1 || !strings.Contains(text, `answered {"action":"accept","content":{"name":"from the caller"}}`) {
		t.Errorf("asked %d times; the result: %q", *asked, text)
	}
	got := received(t, rec)
	if n := strings.Count(got, `"method":"tools/call"`); n != 2 || !strings.Contains(got, `"requestState":"ask-state-1"`) ||
		!strings.Contains(got, `"inputResponses":{"confirm":{"action":"accept","content":{"name":"from the caller"}}}`) {
		t.Errorf("the downstream got %d calls:\n%s", n, got)
	}
}
