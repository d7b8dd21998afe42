package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-bastion/bastion/internal/pgcluster/pgtest"
)

// realServers is the YAML of the two shipped stdio servers behind the
// gateway, examples/refund and `bastion serve` on the sample files, and
// the DSN of a fresh sample database, which the configuration reads from
// the gateway's E2E_DSN as a ${NAME} reference.
func realServers(t *testing.T, mark string) (servers, dsn string) {
	t.Helper()
	db := pgtest.NewSampleDB(t)
	data, err := filepath.Abs(filepath.Join("..", "testdata", "demo-data"))
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("  - name: refund\n    command: [%q]\n    env:\n      E2E_MARK: %q\n"+
		"  - name: db\n    command: [%q, serve]\n    env:\n      E2E_MARK: %q\n      MCP_SQL_DSN: ${E2E_DSN}\n      MCP_SAFE_DATA_DIR: %q\n",
		bin("refund"), mark, bin("bastion"), mark, data), db.DSN()
}

// startRealGateway starts the gateway in front of refund and bastion serve.
func startRealGateway(t *testing.T) *gw {
	t.Helper()
	mark := newMark()
	servers, dsn := realServers(t, mark)
	return startGateway(t, mark, servers, "", "E2E_DSN="+dsn)
}

var realTools = []string{
	"db.read_only_sql", "db.sandbox_fs_read", "db.sql_schema", "db.system_metrics",
	"refund.admin_list_audit_log", "refund.admin_reset_key", "refund.get_customer_record", "refund.trigger_refund",
}

// TestGatewayGoSDKClient: the official Go SDK client, in both eras (its
// default, 2026-07-28, and a legacy 2025-11-25 session), lists and calls
// the tools of examples/refund and bastion serve through the gateway.
func TestGatewayGoSDKClient(t *testing.T) {
	g := startRealGateway(t)
	for _, tc := range []struct{ name, version, want string }{
		{"sdk-default", "", "2026-07-28"},
		{"legacy-2025-11-25", "2025-11-25", "2025-11-25"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			client := mcp.NewClient(&mcp.Implementation{Name: "bastion-e2e-gosdk", Version: "1.0.0"}, nil)
			var opts *mcp.ClientSessionOptions
			if tc.version != "" {
				opts = &mcp.ClientSessionOptions{ProtocolVersion: tc.version}
			}
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.url}, opts)
			if err != nil {
				t.Fatalf("connect: %v; gateway stderr:\n%s", err, g.p.stderr.String())
			}
			defer cs.Close()
			if v := cs.InitializeResult().ProtocolVersion; v != tc.want {
				t.Errorf("protocol version %q, want %q", v, tc.want)
			}
			var names []string
			for tl, err := range cs.Tools(ctx, nil) {
				if err != nil {
					t.Fatalf("tools/list: %v", err)
				}
				names = append(names, tl.Name)
			}
			if !slices.Equal(names, realTools) {
				t.Errorf("tools = %v, want %v", names, realTools)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund.get_customer_record", Arguments: map[string]any{"customer_id": "CUST-00001"}})
			if err != nil || res.IsError {
				t.Fatalf("refund.get_customer_record: %v %+v", err, res)
			}
			if sc, _ := res.StructuredContent.(map[string]any); sc["found"] != true {
				t.Errorf("structuredContent = %v", res.StructuredContent)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "db.read_only_sql", Arguments: map[string]any{"query": "SELECT count(*) AS n FROM reporting.customers"}})
			if err != nil || res.IsError {
				t.Fatalf("db.read_only_sql: %v %+v", err, res)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "db.read_only_sql", Arguments: map[string]any{"query": "COMMIT; DROP SCHEMA reporting CASCADE"}})
			if err != nil || !res.IsError {
				t.Errorf("COMMIT; DROP through the gateway: %v %+v, want an isError refusal", err, res)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund.trigger_refund", Arguments: map[string]any{"customer_id": "CUST-00001", "amount": "10.0", "reason": "a reason long enough"}})
			if err != nil || !res.IsError {
				t.Errorf("arguments that fail the schema: %v %+v, want isError", err, res)
			}
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund.no_such_tool", Arguments: map[string]any{}}); err == nil {
				t.Error("an unknown tool answered without a JSON-RPC error")
			}
		})
	}
}

// TestGatewayTypeScriptSDKClient: the official TypeScript SDK client over
// Streamable HTTP, in a legacy session it opens with initialize and ends
// with DELETE, lists and calls through the gateway.
func TestGatewayTypeScriptSDKClient(t *testing.T) {
	requireTSClient(t)
	g := startRealGateway(t)
	s := runTSClientURL(t, g.url, []tsCall{
		{Name: "refund.get_customer_record", Arguments: map[string]any{"customer_id": "CUST-00002"}},
		{Name: "db.read_only_sql", Arguments: map[string]any{"query": "SELECT full_name FROM reporting.customers ORDER BY 1 LIMIT 2"}},
		{Name: "db.sandbox_fs_read", Arguments: map[string]any{"relative_path": "../../../../etc/passwd"}, Expect: "toolError"},
		{Name: "db.system_metrics", Arguments: map[string]any{}},
		{Name: "db.sql_schema", Arguments: map[string]any{"schema": "reporting", "max_tables": 2}},
		{Name: "nope.nothing", Expect: "protocolError"},
	})
	checkSampleSchema(t, s.Calls[4].StructuredContent)
	if s.ProtocolVersion != "2025-11-25" {
		t.Errorf("protocol version %q, want 2025-11-25", s.ProtocolVersion)
	}
	if !slices.Equal(s.Tools, realTools) {
		t.Errorf("tools = %v, want %v", s.Tools, realTools)
	}
	if s.SessionID == nil || !*s.SessionID {
		t.Error("the client got no session id")
	}
	if s.ServerInfo["name"] != "mcp-bastion-gateway" {
		t.Errorf("serverInfo = %v", s.ServerInfo)
	}
}
