package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-bastion/bastion/internal/pgcluster/pgtest"
)

// TestTypeScriptSDKClientTools has the official TypeScript SDK client run a
// query through read_only_sql, list the tables it may read through
// sql_schema and read a file through sandbox_fs_read, validating each
// structuredContent against the tool's outputSchema.
func TestTypeScriptSDKClientTools(t *testing.T) {
	requireTSClient(t)
	db := pgtest.NewSampleDB(t)
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "notes.txt"), []byte("quarterly notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := runTSClient(t, []string{bin("bastion"), "serve"}, map[string]string{
		"MCP_LOG_LEVEL":     "warn",
		"MCP_SQL_DSN":       db.DSN(),
		"MCP_SAFE_DATA_DIR": data,
	}, []tsCall{
		{Name: "read_only_sql", Arguments: map[string]any{
			"query": "SELECT customer_id, full_name, legacy_account_no FROM reporting.customers ORDER BY customer_id", "max_rows": 2}},
		{Name: "read_only_sql", Arguments: map[string]any{"query": "WITH d AS (DELETE FROM reporting.orders RETURNING *) SELECT * FROM d"}, Expect: "toolError"},
		{Name: "sandbox_fs_read", Arguments: map[string]any{"relative_path": "notes.txt"}},
		{Name: "sandbox_fs_read", Arguments: map[string]any{"relative_path": "../notes.txt"}, Expect: "toolError"},
		{Name: "sql_schema", Arguments: map[string]any{"schema": "reporting", "max_tables": 2}},
		{Name: "sql_schema", Arguments: map[string]any{"cursor": "not-a-cursor"}, Expect: "toolError"},
	})
	if got := strings.Join(s.Tools, ","); got != "read_only_sql,sandbox_fs_read,sql_schema,system_metrics" {
		t.Fatalf("tools = %s", got)
	}
	q := s.Calls[0].StructuredContent
	if q["row_count"] != float64(2) || q["truncated"] != true {
		t.Errorf("query result = %v", q)
	}
	f := s.Calls[2].StructuredContent
	if f["content"] != "quarterly notes\n" || f["encoding"] != "utf-8" {
		t.Errorf("file result = %v", f)
	}
	checkSampleSchema(t, s.Calls[4].StructuredContent)
	for i, c := range s.Calls {
		if c.IsError != nil && !*c.IsError && (c.TextMatchesStructured == nil || !*c.TextMatchesStructured) {
			t.Errorf("call %d: text block differs from structuredContent", i)
		}
	}
}

// checkSampleSchema checks a first sql_schema page of two tables of the
// sample schema, as a client decoded it: customers (with its comment and
// full_name, NOT NULL) and order_items, and a cursor for the rest.
func checkSampleSchema(t *testing.T, page map[string]any) {
	t.Helper()
	tables, _ := page["tables"].([]any)
	if len(tables) != 2 || page["next_cursor"] == nil {
		t.Fatalf("sql_schema page = %v, want two tables and a next_cursor", page)
	}
	first, _ := tables[0].(map[string]any)
	second, _ := tables[1].(map[string]any)
	if first["schema"] != "reporting" || first["name"] != "customers" || first["kind"] != "table" ||
		!strings.Contains(fmt.Sprint(first["comment"]), "People who signed up") || second["name"] != "order_items" {
		t.Fatalf("sql_schema tables = %v", tables)
	}
	columns, _ := first["columns"].([]any)
	for _, c := range columns {
		if c, _ := c.(map[string]any); c["name"] == "full_name" {
			if c["type"] != "text" || c["nullable"] != false {
				t.Errorf("customers.full_name = %v", c)
			}
			return
		}
	}
	t.Errorf("customers has no column full_name: %v", columns)
}

// TestTypeScriptSDKClientRefund has the official TypeScript SDK client call
// both refund tools, validating each structuredContent against its
// outputSchema, and see an argument error as a JSON-RPC error.
func TestTypeScriptSDKClientRefund(t *testing.T) {
	requireTSClient(t)
	s := runTSClient(t, []string{bin("refund")}, map[string]string{"MCP_LOG_LEVEL": "warn"}, []tsCall{
		{Name: "get_customer_record", Arguments: map[string]any{"customer_id": "CUST-00001"}},
		{Name: "get_customer_record", Arguments: map[string]any{"customer_id": "CUST-99999"}},
		{Name: "trigger_refund", Arguments: map[string]any{"customer_id": "CUST-00002", "amount": 25.5, "reason": "package lost in transit"}},
		{Name: "trigger_refund", Arguments: map[string]any{"customer_id": "CUST-00002", "amount": "25.5", "reason": "package lost in transit"}, Expect: "protocolError"},
		{Name: "admin_list_audit_log", Arguments: map[string]any{}},
	})
	if s.Calls[0].StructuredContent["found"] != true || s.Calls[1].StructuredContent["found"] != false {
		t.Errorf("lookups = %v, %v", s.Calls[0].StructuredContent, s.Calls[1].StructuredContent)
	}
	if s.Calls[2].StructuredContent["status"] != "refund_initiated" {
		t.Errorf("refund = %v", s.Calls[2].StructuredContent)
	}
	if e := s.Calls[3].Error; e == nil || e.Code == nil || *e.Code != -32602 {
		t.Errorf("string amount: error = %+v, want -32602", e)
	}
}

// TestSQLConnectionDetailsNeverLeak points read_only_sql at a database that
// does not answer, with a distinctive user, password and database name,
// and checks that none of them reaches stdout or stderr: the call fails
// with a generic -32603 and the log says only what kind of failure it was.
func TestSQLConnectionDetailsNeverLeak(t *testing.T) {
	t.Parallel()
	const dsn = "host=127.0.0.1 port=1 user=leaky_user password=leaky_pass dbname=leaky_db connect_timeout=2 sslmode=disable"
	p := serve(t, "MCP_SQL_DSN="+dsn)
	p.initialize("2025-11-25")
	p.call(1, "read_only_sql", map[string]any{"query": "SELECT 1"})
	line := p.recvLine()
	m := p.decode(line)
	if errCode(t, m) != -32603 {
		t.Fatalf("got %v", m)
	}
	p.closeStdin()
	p.wait()
	for _, out := range []string{string(line), p.stderr.String()} {
		for _, secret := range []string{"leaky_user", "leaky_pass", "leaky_db", "127.0.0.1"} {
			if strings.Contains(out, secret) {
				t.Fatalf("%q leaked: %s", secret, out)
			}
		}
	}
}
