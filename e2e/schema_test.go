package e2e

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-bastion/bastion/internal/mcp/schematest"
)

func validateAgainst(t *testing.T, v, def string, raw []byte) {
	t.Helper()
	schematest.Validate(t, v, def, raw)
}

// exchange sends one line and returns the raw response line.
func (p *proc) exchange(line string) []byte {
	p.t.Helper()
	p.send(line)
	b := p.recvLine()
	checkLine(p.t, b)
	return bytes.TrimSuffix(b, []byte("\n"))
}

// resultOf extracts the result member of a raw response.
func resultOf(t *testing.T, raw []byte) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	r, ok := m["result"]
	if !ok {
		t.Fatalf("no result in %s", raw)
	}
	return r
}

// TestMessagesValidateAgainstOfficialSchemas sends, for every protocol
// version, a request for every kind of message the server emits, and
// validates each reply against the official schema of that version: the
// envelope and the result type.
func TestMessagesValidateAgainstOfficialSchemas(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			resp, errResp := "JSONRPCResponse", "JSONRPCError"
			if v == "2025-11-25" {
				resp, errResp = "JSONRPCResultResponse", "JSONRPCErrorResponse"
			}
			p := serve(t, "MCP_MAX_FRAME_BYTES=1024")
			init := p.exchange(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + v + `","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)
			validateAgainst(t, v, resp, init)
			validateAgainst(t, v, "InitializeResult", resultOf(t, init))
			p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

			results := []struct{ line, def string }{
				{`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, "ListToolsResult"},
				{`{"jsonrpc":"2.0","id":"s","method":"ping"}`, "EmptyResult"},
				{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"system_metrics","arguments":{}}}`, "CallToolResult"},
				{`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"system_metrics","arguments":{"x":1}}}`, "CallToolResult"},
			}
			if v == "2024-11-05" {
				results[1].def = "Result"
			}
			for _, r := range results {
				raw := p.exchange(r.line)
				validateAgainst(t, v, resp, raw)
				validateAgainst(t, v, r.def, resultOf(t, raw))
			}
			errorsWithID := []string{
				`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"nope"}}`,
				`{"jsonrpc":"2.0","id":6,"method":"nope"}`,
				`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"` + v + `","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`,
				`{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"cursor":"x"}}`,
				`{"jsonrpc":"2.0","id":9,"method":"ping","params":[]}`,
			}
			for _, line := range errorsWithID {
				validateAgainst(t, v, errResp, p.exchange(line))
			}
			// Errors whose id could not be read have no id member; only
			// 2025-11-25 and later admit that form (the older schemas have
			// no valid form at all), so they are checked against 2025-11-25.
			for _, line := range []string{`nope`, `{"jsonrpc":"2.0","id":null,"method":"ping"}`, strings.Repeat("x", 2000)} {
				validateAgainst(t, "2025-11-25", "JSONRPCErrorResponse", p.exchange(line))
			}
		})
	}
	t.Run("2026-07-28", func(t *testing.T) {
		t.Parallel()
		const v = "2026-07-28"
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
		p := serve(t)
		results := []struct{ line, def string }{
			{`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta + `}}`, "DiscoverResult"},
			{`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + meta + `}}`, "ListToolsResult"},
			{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"system_metrics","arguments":{},` + meta + `}}`, "CallToolResult"},
			{`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"system_metrics","arguments":{"x":1},` + meta + `}}`, "CallToolResult"},
		}
		for _, r := range results {
			raw := p.exchange(r.line)
			validateAgainst(t, v, "JSONRPCResultResponse", raw)
			validateAgainst(t, v, r.def, resultOf(t, raw))
		}
		validateAgainst(t, v, "UnsupportedProtocolVersionError",
			p.exchange(`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`))
		for _, line := range []string{
			`{"jsonrpc":"2.0","id":6,"method":"ping","params":{` + meta + `}}`,
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"nope",` + meta + `}}`,
			`{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{}}`,
			`nope`,
		} {
			validateAgainst(t, v, "JSONRPCErrorResponse", p.exchange(line))
		}
	})
}

// TestInternalErrorsValidate: the -32603 of a tool panic (with its problem
// in error.data) and the in-band deadline problem validate against every
// version's schema too.
func TestInternalErrorsValidate(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			errResp, resp := "JSONRPCError", "JSONRPCResponse"
			if v == "2025-11-25" {
				errResp, resp = "JSONRPCErrorResponse", "JSONRPCResultResponse"
			}
			p := testserver(t, "MCP_CALL_TIMEOUT_MS=50")
			p.exchange(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + v + `","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)
			validateAgainst(t, v, errResp, p.exchange(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"panic","arguments":{}}}`))
			raw := p.exchange(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":600000}}}`)
			validateAgainst(t, v, resp, raw)
			validateAgainst(t, v, "CallToolResult", resultOf(t, raw))
		})
	}
}
