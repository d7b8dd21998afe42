package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestGatewayFrontRefusals: what the HTTP front refuses before anything
// else, and how.
func TestGatewayFrontRefusals(t *testing.T) {
	mark := newMark()
	g := startGateway(t, mark, fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "echo,ünïcode"}), "limits:\n  body: 64KiB\n  batch: 4\n")
	list := modernBody(1, "tools/list", nil)
	call := func(name string) string {
		return modernBody(1, "tools/call", map[string]any{"name": name, "arguments": map[string]any{}})
	}
	for _, tc := range []struct {
		name    string
		headers map[string]string
		body    string
		status  int
		code    int // JSON-RPC error code; 0: none expected
	}{
		{"foreign Origin", map[string]string{"Origin": "http://evil.example", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}, list, 403, 0},
		{"rebound Host", map[string]string{"Host": "evil.example:80", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}, list, 403, 0},
		{"own Origin", map[string]string{"Origin": g.base, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}, list, 200, 0},
		{"body over the cap", modernHeaders("tools/list", ""), `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"` + strings.Repeat("a", 70<<10) + `"}}`, 413, -32600},
		{"not JSON", modernHeaders("tools/list", ""), `{"jsonrpc":`, 400, -32700},
		{"wrong content type", map[string]string{"Content-Type": "text/plain"}, list, 415, -32600},
		{"Accept neither form", map[string]string{"Accept": "text/html", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}, list, 406, -32600},
		{"version header disagrees", map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Method": "tools/list"}, list, 400, -32020},
		{"method header missing", map[string]string{"MCP-Protocol-Version": "2026-07-28"}, list, 400, -32020},
		{"method header disagrees", modernHeaders("tools/call", ""), list, 400, -32020},
		{"name header missing", modernHeaders("tools/call", ""), call("fx.echo"), 400, -32020},
		{"name header disagrees", modernHeaders("tools/call", "fx.other"), call("fx.echo"), 400, -32020},
		{"name header raw non-ASCII", modernHeaders("tools/call", "fx.ünïcode"), call("fx.ünïcode"), 400, -32020},
		{"name header base64 sentinel", modernHeaders("tools/call", "=?base64?"+base64.StdEncoding.EncodeToString([]byte("fx.ünïcode"))+"?="), call("fx.ünïcode"), 200, -32602},
		{"unsupported _meta version", map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"},
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01"}}}`, 400, -32022},
		{"legacy request without a session", nil, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 400, -32600},
		{"forged session id", map[string]string{"Mcp-Session-Id": "Zm9yZ2Vk"}, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 404, -32600},
		{"batch without a session", nil, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, 400, -32600},
		{"fractional id", modernHeaders("tools/list", ""), `{"jsonrpc":"2.0","id":1.5,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, 400, -32600},
		{"null id", modernHeaders("tools/list", ""), `{"jsonrpc":"2.0","id":null,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, 400, -32600},
	} {
		// What the message says where two refusals share a code.
		says := map[string]string{
			"method header missing":   "the Mcp-Method header is missing",
			"method header disagrees": "the Mcp-Method header does not match",
			"name header missing":     "the Mcp-Name header is missing",
			"name header disagrees":   "the Mcp-Name header does not match",
		}
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			for k, v := range tc.headers {
				h[k] = v
			}
			var r httpReply
			if host, ok := h["Host"]; ok {
				r = g.postHost(host, h, tc.body)
			} else {
				r = g.mustPost(h, tc.body)
			}
			if r.status != tc.status {
				t.Errorf("HTTP %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.code != 0 {
				m := r.msg(t)
				if e, ok := m["error"].(map[string]any); ok {
					if int(e["code"].(float64)) != tc.code {
						t.Errorf("code %v, want %d: %s", e["code"], tc.code, r.body)
					}
				} else if res, ok := m["result"].(map[string]any); !ok || res["isError"] != true || tc.code != -32602 {
					t.Errorf("want error %d, got %s", tc.code, r.body)
				}
			}
			if want, ok := says[tc.name]; ok && !strings.Contains(string(r.body), want) {
				t.Errorf("the refusal does not say %q: %s", want, r.body)
			}
		})
	}
}

// postHost is post with another Host header.
func (g *gw) postHost(host string, headers map[string]string, body string) httpReply {
	g.t.Helper()
	req, err := http.NewRequest(http.MethodPost, g.url, strings.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	req.Host = host
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		if k != "Host" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return httpReply{status: resp.StatusCode, header: resp.Header, body: b}
}

// TestGatewayLegacySessions: a session's id works until DELETE, after
// which it is 404; batches are a 2025-03-26 session's alone; ping works
// in a session.
func TestGatewayLegacySessions(t *testing.T) {
	mark := newMark()
	g := startGateway(t, mark, fixture("fx", mark, nil), "limits:\n  batch: 4\n")

	s := g.legacy("2025-03-26")
	r := s.post(ctxT(t), `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},`+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fx.echo","arguments":{"a":1}}},{"jsonrpc":"2.0","id":3,"method":"initialize"}]`)
	var answers []map[string]any
	if err := json.Unmarshal(r.body, &answers); err != nil || r.status != 200 {
		t.Fatalf("batch: HTTP %d %s", r.status, r.body)
	}
	if len(answers) != 3 || answers[0]["id"] != float64(1) || answers[1]["id"] != float64(2) || answers[2]["id"] != float64(3) {
		t.Fatalf("batch answers not one per request in order: %s", r.body)
	}
	if answers[2]["error"] == nil {
		t.Errorf("initialize inside a batch was not refused: %s", r.body)
	}
	r = s.post(ctxT(t), `[`+strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"ping"},`, 4)+`{"jsonrpc":"2.0","id":1,"method":"ping"}]`)
	if r.status != 400 {
		t.Errorf("a batch over the cap: HTTP %d %s", r.status, r.body)
	}

	s2 := g.legacy("2025-11-25")
	if r := s2.post(ctxT(t), `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`); r.status != 400 {
		t.Errorf("a batch in a 2025-11-25 session: HTTP %d %s", r.status, r.body)
	}
	if m := s2.post(ctxT(t), `{"jsonrpc":"2.0","id":9,"method":"ping"}`).msg(t); m["result"] == nil {
		t.Errorf("ping: %v", m)
	}
	// The header must name a session-era version; the session's own
	// governs the answer (clients send another supported one, and the
	// official suite expects them served). A 2026-07-28 or unknown
	// version on a session is refused.
	r2, _ := g.post(ctxT(t), map[string]string{"Mcp-Session-Id": s2.id, "MCP-Protocol-Version": "2025-06-18"}, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if r2.status != 200 {
		t.Errorf("a session used with another session-era version: HTTP %d %s", r2.status, r2.body)
	}
	for _, v := range []string{"2026-07-28", "2099-01-01", "garbage"} {
		r2, _ = g.post(ctxT(t), map[string]string{"Mcp-Session-Id": s2.id, "MCP-Protocol-Version": v}, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		if r2.status != 400 {
			t.Errorf("a session used with version %q: HTTP %d %s", v, r2.status, r2.body)
		}
	}

	// A session id altered in any byte, or sealed with another key, is
	// no session.
	raw, err := base64.RawURLEncoding.DecodeString(s2.id)
	if err != nil {
		t.Fatalf("session id %q is not base64url: %v", s2.id, err)
	}
	for _, i := range []int{0, len(raw) / 2, len(raw) - 1} {
		bad := append([]byte(nil), raw...)
		bad[i] ^= 1
		r, _ := g.post(ctxT(t), map[string]string{"Mcp-Session-Id": base64.RawURLEncoding.EncodeToString(bad), "MCP-Protocol-Version": s2.version},
			`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		if r.status != 404 {
			t.Errorf("session id with byte %d altered: HTTP %d %s", i, r.status, r.body)
		}
	}

	if st := s2.end(); st != http.StatusNoContent {
		t.Errorf("DELETE: HTTP %d", st)
	}
	if r := s2.post(ctxT(t), `{"jsonrpc":"2.0","id":10,"method":"ping"}`); r.status != 404 {
		t.Errorf("a deleted session: HTTP %d %s", r.status, r.body)
	}
	// The other session lives on.
	if m := s.post(ctxT(t), `{"jsonrpc":"2.0","id":11,"method":"ping"}`).msg(t); m["result"] == nil {
		t.Errorf("the other session after DELETE: %v", m)
	}
}

// events reads an SSE response's messages as they come.
func events(t *testing.T, resp *http.Response) <-chan map[string]any {
	ch := make(chan map[string]any, 16)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(d), &m) == nil {
					ch <- m
				}
			}
		}
	}()
	return ch
}

func next(t *testing.T, ch <-chan map[string]any, what string) map[string]any {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatalf("%s: the stream ended", what)
		}
		return m
	case <-time.After(waitLimit):
		t.Fatalf("%s: nothing within %s", what, waitLimit)
	}
	return nil
}

// TestGatewayListChanged: when a downstream's list changes, a legacy
// client's GET stream and a 2026-07-28 client's subscriptions/listen
// stream both hear notifications/tools/list_changed, and the new tool is
// listed and callable.
func TestGatewayListChanged(t *testing.T) {
	mark := newMark()
	g := startGateway(t, mark, fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "listchanged,echo"}), "")
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()

	s := g.legacy("2025-11-25")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", s.id)
	get, err := http.DefaultClient.Do(req)
	if err != nil || get.StatusCode != 200 {
		t.Fatalf("GET stream: %v %v", err, get)
	}
	defer get.Body.Close()
	legacy := events(t, get)

	body := modernBody("sub-1", "subscriptions/listen", map[string]any{"notifications": map[string]any{"toolsListChanged": true}})
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, g.url, strings.NewReader(body))
	for k, v := range modernHeaders("subscriptions/listen", "") {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	listen, err := http.DefaultClient.Do(req)
	if err != nil || listen.StatusCode != 200 {
		t.Fatalf("subscriptions/listen: %v %v", err, listen)
	}
	defer listen.Body.Close()
	modern := events(t, listen)
	ack := next(t, modern, "acknowledgement")
	if ack["method"] != "notifications/subscriptions/acknowledged" || !strings.Contains(fmt.Sprint(ack["params"]), "toolsListChanged:true") {
		t.Fatalf("first message on the subscription: %v", ack)
	}

	structured(t, g.call("fx.listchanged", map[string]any{}))
	if m := next(t, legacy, "legacy list_changed"); m["method"] != "notifications/tools/list_changed" {
		t.Errorf("GET stream: %v", m)
	}
	m := next(t, modern, "modern list_changed")
	if m["method"] != "notifications/tools/list_changed" || !strings.Contains(fmt.Sprint(m["params"]), "io.modelcontextprotocol/subscriptionId:sub-1") {
		t.Errorf("subscription: %v", m)
	}
	waitUntil(t, "the new tool is listed", func() bool {
		for _, n := range g.tools() {
			if n == "fx.added" {
				return true
			}
		}
		return false
	})
	structured(t, g.call("fx.added", map[string]any{}))
}

// TestGatewayProgress: a call with a progress token, answered as an event
// stream, relays the downstream's progress under the caller's own token,
// then the result.
func TestGatewayProgress(t *testing.T) {
	mark := newMark()
	g := startGateway(t, mark, fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "progress"}), "")
	for _, tok := range []any{"tok-1", 42} {
		body := modernBody(7, "tools/call", map[string]any{"name": "fx.progress", "arguments": map[string]any{}})
		body = strings.Replace(body, `"_meta":{`, fmt.Sprintf(`"_meta":{"progressToken":%s,`, mustJSON(t, tok)), 1)
		r := g.mustPost(modernHeaders("tools/call", "fx.progress"), body)
		if !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("token %v: not an event stream: %s %s", tok, r.header.Get("Content-Type"), r.body)
		}
		msgs := sseMessages(t, r.body)
		if len(msgs) != 4 {
			t.Fatalf("token %v: %d messages, want 3 progress and the result: %s", tok, len(msgs), r.body)
		}
		for i, raw := range msgs[:3] {
			var m struct {
				Method string
				Params struct {
					ProgressToken any
					Progress      float64
				}
			}
			if err := json.Unmarshal(raw, &m); err != nil || m.Method != "notifications/progress" ||
				fmt.Sprint(m.Params.ProgressToken) != fmt.Sprint(tok) || m.Params.Progress != float64(i+1) {
				t.Errorf("token %v: progress %d = %s", tok, i, raw)
			}
		}
		if !strings.Contains(string(msgs[3]), `"id":7`) || !strings.Contains(string(msgs[3]), `"result"`) {
			t.Errorf("token %v: last message %s", tok, msgs[3])
		}
		if strings.Contains(string(r.body), "gw-") {
			t.Errorf("the gateway's own token leaked: %s", r.body)
		}
	}
}

// TestGatewayStdio: `bastion gateway --stdio` serves the same catalog to
// one client on stdin/stdout.
func TestGatewayStdio(t *testing.T) {
	mark := newMark()
	cfg := fmt.Sprintf("auth:\n  mode: none\npolicy:\n  rules:\n    - {id: all, tools: [\"*\"], roles: [\"*\"]}\nservers:\n%s", fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "echo,progress"}))
	cfg += stateKeys(t, cfg)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, "bastion", []string{"gateway", "--stdio", "--config", path}, baseEnv())
	p.initialize("2025-11-25")
	// Discovery may still be running: list until the tool is there.
	deadline := time.Now().Add(waitLimit)
	for id := 100; ; id++ {
		p.sendJSON(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/list"})
		m := p.recvID(id)
		if strings.Contains(mustJSON(t, m), `"fx.echo"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fx.echo never listed: %v", m)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.call(2, "fx.echo", map[string]any{"hello": "stdio"})
	m := p.recvID(2)
	if !strings.Contains(mustJSON(t, m), `"hello":"stdio"`) {
		t.Errorf("fx.echo over stdio: %v", m)
	}
	p.closeStdin()
	if code := p.wait(); code != 0 {
		t.Errorf("exit %d; stderr:\n%s", code, p.stderr.String())
	}
	waitUntil(t, "no child left", func() bool { return len(leftovers(mark)) == 0 })
}

// recvID returns the response to id, skipping the notifications before it
// (list_changed comes when discovery ends).
func (p *proc) recvID(id int) msg {
	p.t.Helper()
	for {
		m := p.recv()
		if _, ok := m["id"]; !ok {
			continue
		}
		if m["id"] != float64(id) {
			p.t.Fatalf("response to %v, want %d: %v", m["id"], id, m)
		}
		return m
	}
}

// TestGatewayChainListChanged: a gateway fronting another gateway over
// HTTP holds a 2026-07-28 subscriptions/listen open on it, so a change
// two hops down (the inner gateway's stdio downstream adds a tool) reaches
// the outer gateway's catalog between calls, with no refresh interval.
func TestGatewayChainListChanged(t *testing.T) {
	// Each gateway's children carry their own mark: the outer one's
	// leftover check runs while the inner one still serves.
	innerMark, mark := newMark(), newMark()
	inner := startGateway(t, innerMark, fixture("fx", innerMark, map[string]string{"FIXTURE_TOOLS": "listchanged,echo"}), "")
	outer := startGateway(t, mark, fmt.Sprintf("  - name: in\n    url: %s\n", inner.url), "")
	awaitChangeTwoHopsDown(t, outer)
}

// TestGatewayStdioChainListChanged: `bastion gateway --stdio` as the stdio
// downstream of another gateway speaks 2026-07-28 to it; the outer
// gateway holds a subscriptions/listen open on the pipe, and the inner
// one tags each change of its catalog with that request's id, so a tool
// added two hops down reaches the outer catalog between calls.
func TestGatewayStdioChainListChanged(t *testing.T) {
	mark := newMark()
	inner := filepath.Join(t.TempDir(), "inner.yaml")
	cfg := fmt.Sprintf("auth:\n  mode: none\npolicy:\n  rules:\n    - {id: all, tools: [\"*\"], roles: [\"*\"]}\nservers:\n%s", fixture("fx", mark, map[string]string{"FIXTURE_TOOLS": "listchanged,echo"}))
	cfg += stateKeys(t, cfg)
	if err := os.WriteFile(inner, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	outer := startGateway(t, mark, fmt.Sprintf("  - name: in\n    command: [%q, gateway, --stdio, --config, %q]\n    env:\n      E2E_MARK: %q\n",
		bin("bastion"), inner, mark), "")
	awaitChangeTwoHopsDown(t, outer)
}

// awaitChangeTwoHopsDown makes the inner gateway's fixture add a tool and
// waits until the outer gateway offers and calls it.
func awaitChangeTwoHopsDown(t *testing.T, outer *gw) {
	t.Helper()
	waitUntil(t, "the outer gateway lists the inner one's tools", func() bool {
		return slices.Contains(outer.tools(), "in.fx.listchanged")
	})
	structured(t, outer.call("in.fx.listchanged", map[string]any{}))
	waitUntil(t, "the new tool reaches the outer catalog", func() bool {
		return slices.Contains(outer.tools(), "in.fx.added")
	})
	structured(t, outer.call("in.fx.added", map[string]any{"x": 1}))
}

// TestGatewaySessionEndedForGood: a session a DELETE ended stays ended
// after the gateway restarts (GATEWAY.md decision 10: the revocation is
// kept beside the ledger), while another session of the same run lives
// on in the next.
func TestGatewaySessionEndedForGood(t *testing.T) {
	mark := newMark()
	body := "auth:\n  mode: none\npolicy:\n  rules:\n    - {id: all, tools: [\"*\"], roles: [\"*\"]}\n" +
		fmt.Sprintf("state_dir: %q\n", t.TempDir()) + "servers:\n" + fixture("fx", mark, nil)
	g := startGatewayWith(t, mark, body)
	ended, kept := g.legacy("2025-11-25"), g.legacy("2025-11-25")
	if st := ended.end(); st != http.StatusNoContent {
		t.Fatalf("DELETE: HTTP %d", st)
	}
	if code := g.stop(); code != 0 {
		t.Fatalf("the gateway exited %d", code)
	}
	next := startGatewayWith(t, mark, body)
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	if r := next.mustPost(map[string]string{"Mcp-Session-Id": ended.id, "MCP-Protocol-Version": ended.version}, ping); r.status != http.StatusNotFound {
		t.Errorf("the ended session after a restart: HTTP %d %s", r.status, r.body)
	}
	if r := next.mustPost(map[string]string{"Mcp-Session-Id": kept.id, "MCP-Protocol-Version": kept.version}, ping); r.status != http.StatusOK {
		t.Errorf("a live session after a restart: HTTP %d %s", r.status, r.body)
	}
}

// TestGatewayProbesAnyHost: /healthz and /readyz answer a GET whatever
// its Host (a kubelet asks by the pod's address), while the MCP endpoint
// refuses a foreign Host, naming the one it serves.
func TestGatewayProbesAnyHost(t *testing.T) {
	mark := newMark()
	g := startGateway(t, mark, fixture("fx", mark, nil), "")
	for _, path := range []string{"/healthz", "/readyz"} {
		req, _ := http.NewRequest(http.MethodGet, g.base+path, nil)
		req.Host = "10.1.2.3:8080"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s by the pod's address: HTTP %d", path, resp.StatusCode)
		}
	}
	r := g.postHost("10.1.2.3:8080", modernHeaders("tools/list", ""), modernBody(1, "tools/list", nil))
	if public := strings.TrimPrefix(g.base, "http://"); r.status != http.StatusForbidden || !strings.Contains(string(r.body), "("+public+")") {
		t.Errorf("the MCP endpoint by another Host: HTTP %d %s", r.status, r.body)
	}
}
