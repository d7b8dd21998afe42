package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func errCode(t testing.TB, m msg) int {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("expected an error response, got %v", m)
	}
	return int(e["code"].(float64))
}

func result(t testing.TB, m msg) map[string]any {
	t.Helper()
	r, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("expected a result, got %v", m)
	}
	return r
}

func TestLegacyHandshakeEveryVersion(t *testing.T) {
	t.Parallel()
	cases := []struct{ asked, want string }{
		{"2025-11-25", "2025-11-25"},
		{"2025-06-18", "2025-06-18"},
		{"2025-03-26", "2025-03-26"},
		{"2024-11-05", "2024-11-05"},
		{"2026-07-28", "2025-11-25"}, // modern version through initialize: offer the latest legacy
		{"1999-01-01", "2025-11-25"},
		{"2025-11-25x", "2025-11-25"},
	}
	for _, c := range cases {
		t.Run(c.asked, func(t *testing.T) {
			t.Parallel()
			p := serve(t)
			r := result(t, p.initialize(c.asked))
			if got := r["protocolVersion"]; got != c.want {
				t.Fatalf("protocolVersion = %v, want %s", got, c.want)
			}
			if _, ok := r["capabilities"].(map[string]any)["tools"]; !ok {
				t.Fatalf("no tools capability: %v", r)
			}
			si := r["serverInfo"].(map[string]any)
			if si["name"] != "mcp-bastion" {
				t.Fatalf("serverInfo = %v", si)
			}
			_, hasTitle := si["title"]
			if c.want == "2024-11-05" && hasTitle {
				t.Fatalf("2024-11-05 serverInfo carries title: %v", si)
			}
			p.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			tools := result(t, p.recv())["tools"].([]any)
			if len(tools) != 1 {
				t.Fatalf("tools = %v", tools)
			}
			tl := tools[0].(map[string]any)
			_, hasOut := tl["outputSchema"]
			_, hasAnn := tl["annotations"]
			switch c.want {
			case "2024-11-05":
				if hasOut || hasAnn {
					t.Fatalf("2024-11-05 tool carries later fields: %v", tl)
				}
			case "2025-03-26":
				if hasOut || !hasAnn {
					t.Fatalf("2025-03-26 tool shape wrong: %v", tl)
				}
			default:
				if !hasOut || !hasAnn {
					t.Fatalf("%s tool shape wrong: %v", c.want, tl)
				}
			}
			p.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
			if r := result(t, p.recv()); len(r) != 0 {
				t.Fatalf("ping result = %v", r)
			}
			p.closeStdin()
			p.expectEOF()
			if code := p.wait(); code != 0 {
				t.Fatalf("exit status %d", code)
			}
		})
	}
}

func TestModernStateless(t *testing.T) {
	t.Parallel()
	p := serve(t)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	p.send(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta + `}}`)
	r := result(t, p.recv())
	if r["resultType"] != "complete" || r["cacheScope"] == nil || r["ttlMs"] == nil {
		t.Fatalf("discover result = %v", r)
	}
	if v := r["supportedVersions"].([]any); len(v) != 1 || v[0] != "2026-07-28" {
		t.Fatalf("supportedVersions = %v", v)
	}
	if _, ok := r["_meta"].(map[string]any)["io.modelcontextprotocol/serverInfo"]; !ok {
		t.Fatalf("no serverInfo in _meta: %v", r)
	}

	p.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + meta + `}}`)
	r = result(t, p.recv())
	if r["resultType"] != "complete" || r["cacheScope"] != "public" || r["ttlMs"] == nil {
		t.Fatalf("tools/list result = %v", r)
	}

	p.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"system_metrics","arguments":{},` + meta + `}}`)
	r = result(t, p.recv())
	if r["resultType"] != "complete" || r["isError"] != false || r["structuredContent"] == nil {
		t.Fatalf("tools/call result = %v", r)
	}

	// A stateless request without a version, a version the server does
	// not serve, and the handshake methods of the other era.
	p.send(`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{}}`)
	if c := errCode(t, p.recv()); c != -32600 {
		t.Fatalf("missing version: code %d", c)
	}
	p.send(`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01"}}}`)
	m := p.recv()
	if c := errCode(t, m); c != -32022 {
		t.Fatalf("unsupported version: code %d", c)
	}
	data := m["error"].(map[string]any)["data"].(map[string]any)
	if data["requested"] != "2099-01-01" || len(data["supported"].([]any)) == 0 {
		t.Fatalf("-32022 data = %v", data)
	}
	p.send(`{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	if c := errCode(t, p.recv()); c != -32600 {
		t.Fatalf("initialize in a stateless stream: code %d", c)
	}
	p.send(`{"jsonrpc":"2.0","id":7,"method":"ping","params":{` + meta + `}}`)
	if c := errCode(t, p.recv()); c != -32601 {
		t.Fatalf("ping in 2026-07-28: code %d", c)
	}
	p.closeStdin()
	if code := p.wait(); code != 0 {
		t.Fatalf("exit status %d", code)
	}
}

func TestModernWithoutDiscover(t *testing.T) {
	t.Parallel()
	p := serve(t)
	// A first request that names the modern version is served at once.
	p.send(`{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	m := p.recv()
	if m["id"] != "a" || result(t, m)["resultType"] != "complete" {
		t.Fatalf("got %v", m)
	}
	// An unsupported version as the first request does not start a session.
	q := serve(t)
	q.send(`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2030-01-01"}}}`)
	if c := errCode(t, q.recv()); c != -32022 {
		t.Fatalf("code %d", c)
	}
	q.initialize("2025-11-25") // still undecided: the legacy handshake works
}

func TestPreInitialize(t *testing.T) {
	t.Parallel()
	p := serve(t)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	m := p.recv()
	if errCode(t, m) != -32600 || m["id"] != float64(1) {
		t.Fatalf("tools/list before initialize: %v", m)
	}
	mustContain(t, m["error"].(map[string]any)["message"].(string), "initialize")
	p.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"system_metrics"}}`)
	if errCode(t, p.recv()) != -32600 {
		t.Fatal("tools/call before initialize was not refused")
	}
	p.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	result(t, p.recv())
	p.initialize("2025-11-25")
	p.send(`{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	if errCode(t, p.recv()) != -32600 {
		t.Fatal("second initialize was not refused")
	}
	p.send(`{"jsonrpc":"2.0","id":5,"method":"server/discover"}`)
	if errCode(t, p.recv()) != -32601 {
		t.Fatal("server/discover in a legacy session")
	}
}

func TestInitializeParams(t *testing.T) {
	t.Parallel()
	bad := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize"}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}`,
	}
	p := serve(t)
	for _, b := range bad {
		p.send(b)
		if c := errCode(t, p.recv()); c != -32602 {
			t.Fatalf("%s: code %d", b, c)
		}
	}
	p.initialize("2025-06-18") // the failed attempts did not initialize
}

func TestUnknownMethodsNotificationsResponses(t *testing.T) {
	t.Parallel()
	p := serve(t)
	p.initialize("2025-11-25")
	p.send(`{"jsonrpc":"2.0","method":"notifications/whatever","params":{}}`)
	p.send(`{"jsonrpc":"2.0","id":99,"result":{}}`)
	p.send(`{"jsonrpc":"2.0","id":98,"error":{"code":1,"message":"x"}}`)
	// Invalid notifications and responses are not answered either: ids
	// are per direction, so an error for a response's id could be taken
	// for the answer to the client's own request.
	p.send(`{"jsonrpc":"2.0","id":97,"result":{},"bogus":1}`)
	p.send(`{"jsonrpc":"1.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	p.send(`{"jsonrpc":"2.0","method":"notifications/x","params":[1]}`)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"resources/list"}`)
	m := p.recv() // the only answer is to the request
	if m["id"] != float64(1) || errCode(t, m) != -32601 {
		t.Fatalf("got %v", m)
	}
	p.closeStdin()
	p.expectEOF()
}

func TestBatches(t *testing.T) {
	t.Parallel()
	t.Run("refused outside 2025-03-26", func(t *testing.T) {
		t.Parallel()
		for _, v := range []string{"2025-11-25", "2025-06-18", "2024-11-05"} {
			p := serve(t)
			p.initialize(v)
			p.send(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`)
			m := p.recv()
			if errCode(t, m) != -32600 || m["id"] != nil {
				t.Fatalf("%s: %v", v, m)
			}
		}
		p := serve(t)
		p.send(`[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}]`)
		if errCode(t, p.recv()) != -32600 {
			t.Fatal("batch before initialize")
		}
	})
	t.Run("accepted in 2025-03-26", func(t *testing.T) {
		t.Parallel()
		p := serve(t)
		p.initialize("2025-03-26")
		// Requests, notifications, a response, an invalid member, a
		// member refused in a batch and a tools/call (its own task):
		// one array answers exactly the five that want an answer.
		raw := p.exchange(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},` +
			`{"jsonrpc":"2.0","id":2,"method":"tools/list"},{"jsonrpc":"2.0","id":3,"method":"initialize","params":{}},7,` +
			`{"jsonrpc":"2.0","id":"r","result":{}},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}},` +
			`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"system_metrics","arguments":{}}}]`)
		var arr []msg
		if err := json.Unmarshal(raw, &arr); err != nil {
			t.Fatalf("a batch is answered by one JSON array: %v: %s", err, raw)
		}
		t.Run("official schema", func(t *testing.T) {
			// The error to the member with no id has no schema-valid
			// form before 2025-11-25 (the schema requires an id and
			// admits no null; the README's wire rules): the rest must
			// validate as a batch response.
			var withID []json.RawMessage
			var members []json.RawMessage
			if err := json.Unmarshal(raw, &members); err != nil {
				t.Fatal(err)
			}
			for i, m := range members {
				if _, ok := arr[i]["id"]; ok {
					withID = append(withID, m)
				}
			}
			b, _ := json.Marshal(withID)
			validateAgainst(t, "2025-03-26", "JSONRPCBatchResponse", b)
		})
		got := map[string]msg{}
		for _, m := range arr {
			got[idKey(m["id"])] = m
		}
		if len(arr) != 5 || len(got) != 5 {
			t.Fatalf("batch answered with %d responses (%v), want one for each of the 5 members that ask for one", len(arr), raw)
		}
		result(t, got["1"])
		result(t, got["2"])
		if errCode(t, got["3"]) != -32600 {
			t.Fatalf("initialize in a batch: %v", got["3"])
		}
		if errCode(t, got["null"]) != -32600 {
			t.Fatalf("non-object member: %v", got)
		}
		if result(t, got["4"])["isError"] != false {
			t.Fatalf("call in a batch: %v", got["4"])
		}
		// Notifications only: no output at all, so the next line is
		// the answer to the ping after them.
		p.send(`[{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`)
		p.send(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)
		if m := p.recv(); m["id"] != float64(5) {
			t.Fatalf("after a batch of notifications: %v, want the answer to ping 5", m)
		}
		p.send(`[]`)
		if m := p.recv(); errCode(t, m) != -32600 {
			t.Fatalf("empty batch: %v, want one -32600 object", m)
		}
		var b strings.Builder
		b.WriteString("[")
		for i := range 65 {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`, 100+i)
		}
		b.WriteString("]")
		p.send(b.String())
		m := p.recv()
		if errCode(t, m) != -32600 {
			t.Fatalf("oversized batch: %v", m)
		}
		mustContain(t, m["error"].(map[string]any)["message"].(string), "64")
	})
}

// TestMalformedInput sends every class of malformed frame; each gets the
// right error, with an id only when the id itself was valid, and the
// session goes on.
func TestMalformedInput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		frame string
		code  int
		id    any // expected id, nil for none
	}{
		{"not json", `hello`, -32700, nil},
		{"truncated", `{"jsonrpc":"2.0","id":1,"method":"ping"`, -32700, nil},
		{"duplicate member", `{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/list"}`, -32700, nil},
		{"duplicate nested member", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":1,"x":2}}}`, -32700, nil},
		{"duplicate via escape", `{"jsonrpc":"2.0","id":1,"method":"ping","\u006dethod":"ping"}`, -32700, nil},
		{"invalid utf-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"_meta\":{\"a\":\"\xff\"}}}", -32700, nil},
		{"lone high surrogate", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"a":"\ud800"}}}`, -32700, nil},
		{"lone low surrogate", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"a":"\udc00x"}}}`, -32700, nil},
		{"NaN", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"a":NaN}}}`, -32700, nil},
		{"Infinity", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"a":-Infinity}}}`, -32700, nil},
		{"trailing data", `{"jsonrpc":"2.0","id":1,"method":"ping"} {}`, -32700, nil},
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"method":"ping"}x`, -32700, nil},
		{"deep nesting", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":` + strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat(`}`, 70) + `}}`, -32700, nil},
		{"single quotes", `{'jsonrpc':'2.0'}`, -32700, nil},
		{"not an object", `42`, -32600, nil},
		{"string message", `"ping"`, -32600, nil},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, -32600, float64(1)},
		{"jsonrpc number", `{"jsonrpc":2.0,"id":1,"method":"ping"}`, -32600, float64(1)},
		{"missing jsonrpc", `{"id":1,"method":"ping"}`, -32600, float64(1)},
		{"id null", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, -32600, nil},
		{"id true", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, -32600, nil},
		{"id fractional", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, -32600, nil},
		{"id 1.0", `{"jsonrpc":"2.0","id":1.0,"method":"ping"}`, -32600, nil},
		{"id exponent", `{"jsonrpc":"2.0","id":1e3,"method":"ping"}`, -32600, nil},
		{"id object", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, nil},
		{"id array", `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, -32600, nil},
		{"id too large", `{"jsonrpc":"2.0","id":99999999999999999999,"method":"ping"}`, -32600, nil},
		{"method number", `{"jsonrpc":"2.0","id":1,"method":7}`, -32600, float64(1)},
		{"method missing", `{"jsonrpc":"2.0","id":1}`, -32600, float64(1)},
		{"wrong case member", `{"jsonrpc":"2.0","id":1,"Method":"ping"}`, -32600, float64(1)},
		{"params array", `{"jsonrpc":"2.0","id":1,"method":"ping","params":[]}`, -32600, float64(1)},
		{"params null", `{"jsonrpc":"2.0","id":1,"method":"ping","params":null}`, -32600, float64(1)},
		{"unknown member", `{"jsonrpc":"2.0","id":1,"method":"ping","extra":1}`, -32600, float64(1)},
		{"request with result", `{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}`, -32600, float64(1)},
		{"string id kept", `{"jsonrpc":"2.0","id":"x","method":"ping","params":[]}`, -32600, "x"},
	}
	p := serve(t)
	p.initialize("2025-11-25")
	for _, c := range cases {
		p.send(c.frame)
		m := p.recv()
		if got := errCode(t, m); got != c.code {
			t.Errorf("%s: code %d, want %d (%v)", c.name, got, c.code, m)
		}
		if m["id"] != c.id {
			t.Errorf("%s: id %v, want %v", c.name, m["id"], c.id)
		}
		_, hasID := m["id"]
		if c.id == nil && hasID {
			t.Errorf("%s: error carries an id member: %v", c.name, m)
		}
	}
	// Framing leniencies: CRLF, blank lines, whitespace-only lines.
	p.send("")
	p.send("   \t")
	p.send("\r")
	p.send(`{"jsonrpc":"2.0","id":77,"method":"ping"}` + "\r")
	if m := p.recv(); m["id"] != float64(77) {
		t.Fatalf("after leniencies: %v", m)
	}
}

func TestASCIIOnlyOutput(t *testing.T) {
	t.Parallel()
	p := serve(t)
	p.initialize("2025-11-25")
	// Non-ASCII in a string id and in an unknown tool name come back
	// escaped, never raw; recv checks every line is ASCII.
	p.send(`{"jsonrpc":"2.0","id":"\u00e9\u202e\ud83d\ude00","method":"tools/call","params":{"name":"t\u00f6\u2028ol"}}`)
	m := p.recv()
	if m["id"] != "é\u202e😀" {
		t.Fatalf("id not preserved: %q", m["id"])
	}
	if errCode(t, m) != -32602 {
		t.Fatalf("got %v", m)
	}
}

func TestToolsCallEnvelope(t *testing.T) {
	t.Parallel()
	p := serve(t)
	p.initialize("2025-11-25")
	cases := []struct {
		params string
		code   int
	}{
		{`{"arguments":{}}`, -32602},
		{`{"name":1}`, -32602},
		{`{"name":"system_metrics","arguments":[]}`, -32602},
		{`{"name":"system_metrics","arguments":"x"}`, -32602},
		{`{"name":"system_metrics","Arguments":{}}`, -32602},
		{`{"name":"system_metrics","task":{"ttl":1000}}`, -32601},
		{`{"name":"no_such_tool"}`, -32602},
	}
	for i, c := range cases {
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, i, c.params))
		m := p.recv()
		if got := errCode(t, m); got != c.code {
			t.Errorf("%s: code %d, want %d", c.params, got, c.code)
		}
	}
	p.send(`{"jsonrpc":"2.0","id":50,"method":"tools/call"}`)
	if errCode(t, p.recv()) != -32602 {
		t.Fatal("tools/call without params")
	}
	p.send(`{"jsonrpc":"2.0","id":51,"method":"tools/call","params":{"name":"no_such_tool"}}`)
	e := p.recv()["error"].(map[string]any)
	data := e["data"].(map[string]any)
	if data["code"] != "MCP_VALIDATION_ERROR" || data["status"] != float64(422) || data["type"] != "urn:mcp-bastion:problem:validation-error" {
		t.Fatalf("unknown tool problem = %v", data)
	}
	b, _ := json.Marshal(data["invalid_params"])
	if string(b) != `["name"]` {
		t.Fatalf("invalid_params = %s", b)
	}
}
