package sqlquery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/jackc/pgx/v5"

	"github.com/mcp-bastion/bastion/internal/pgcluster/pgtest"
	"github.com/mcp-bastion/bastion/internal/problem"
	"github.com/mcp-bastion/bastion/internal/tool"
)

// schemaFixture is what sql_schema is tested against: objects the reader
// role may SELECT (with and without comments, a column-level grant, a
// view, a materialized view, a partitioned and a foreign table, a table
// without columns, names that need quoting in an array's text), and
// objects it may not see: a table without a grant, a partition of a
// granted table, a column it was not granted, a schema it has no USAGE
// on (though it may SELECT the table in it), a sequence and a composite
// type it could read, a dropped column, and the system catalogs, which
// every role may read.
const schemaFixture = `
CREATE SCHEMA shop;
CREATE TABLE shop.customers (id int PRIMARY KEY, name text NOT NULL, legacy int, email varchar(80));
ALTER TABLE shop.customers DROP COLUMN legacy;
COMMENT ON TABLE shop.customers IS 'People who buy';
COMMENT ON COLUMN shop.customers.email IS 'Where receipts go';
CREATE TABLE shop.orders (id int, customer_id int, total numeric(12,2), secret_note text);
CREATE TABLE shop.audit (x int);
CREATE VIEW shop.order_view AS SELECT id, total FROM shop.orders;
COMMENT ON VIEW shop.order_view IS 'Orders without notes';
CREATE MATERIALIZED VIEW shop.order_totals AS SELECT customer_id, sum(total) AS spent FROM shop.orders GROUP BY 1;
CREATE TABLE shop.events (at timestamptz NOT NULL, kind text) PARTITION BY RANGE (at);
CREATE TABLE shop.events_2026 PARTITION OF shop.events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
CREATE FOREIGN DATA WRAPPER schema_test_fdw;
CREATE SERVER schema_test_server FOREIGN DATA WRAPPER schema_test_fdw;
CREATE FOREIGN TABLE shop.remote (a int) SERVER schema_test_server;
CREATE TABLE shop."We""ird, {name}" ("a,b" int, "{c}" text, "NULL" text, "x""y" text);
COMMENT ON COLUMN shop."We""ird, {name}"."x""y" IS E'line 1\nline 2 "quoted" {brace} \\ NULL';
CREATE SEQUENCE shop.seq;
CREATE TYPE shop.pair AS (a int, b int);
CREATE INDEX customers_name ON shop.customers (name);
CREATE SCHEMA vault;
CREATE TABLE vault.keys (k text);
CREATE TABLE public.notes (n text);
CREATE TABLE public.readme (line text);
CREATE TABLE public.empty ();

GRANT USAGE ON SCHEMA shop TO reader;
GRANT SELECT ON shop.customers, shop.order_view, shop.order_totals, shop.events, shop.remote, shop."We""ird, {name}" TO reader;
GRANT SELECT (id, customer_id, total) ON shop.orders TO reader;
GRANT SELECT ON SEQUENCE shop.seq TO reader;
GRANT SELECT ON vault.keys TO reader;
GRANT SELECT ON public.readme, public.empty TO reader;
`

// schemaListing is everything the reader may see in schemaFixture, in
// the order sql_schema lists it: by the bytes of the names.
var schemaListing = []SchemaTable{
	{Schema: "public", Name: "empty", Kind: "table", Columns: []SchemaColumn{}},
	{Schema: "public", Name: "readme", Kind: "table", Columns: []SchemaColumn{{Name: "line", Type: "text", Nullable: true}}},
	{Schema: "shop", Name: `We"ird, {name}`, Kind: "table", Columns: []SchemaColumn{
		{Name: "a,b", Type: "integer", Nullable: true},
		{Name: "{c}", Type: "text", Nullable: true},
		{Name: "NULL", Type: "text", Nullable: true},
		{Name: `x"y`, Type: "text", Nullable: true, Comment: "line 1\nline 2 \"quoted\" {brace} \\ NULL"},
	}},
	{Schema: "shop", Name: "customers", Kind: "table", Comment: "People who buy", Columns: []SchemaColumn{
		{Name: "id", Type: "integer", Nullable: false},
		{Name: "name", Type: "text", Nullable: false},
		{Name: "email", Type: "character varying(80)", Nullable: true, Comment: "Where receipts go"},
	}},
	{Schema: "shop", Name: "events", Kind: "partitioned_table", Columns: []SchemaColumn{
		{Name: "at", Type: "timestamp with time zone", Nullable: false},
		{Name: "kind", Type: "text", Nullable: true},
	}},
	{Schema: "shop", Name: "order_totals", Kind: "materialized_view", Columns: []SchemaColumn{
		{Name: "customer_id", Type: "integer", Nullable: true},
		{Name: "spent", Type: "numeric", Nullable: true},
	}},
	{Schema: "shop", Name: "order_view", Kind: "view", Comment: "Orders without notes", Columns: []SchemaColumn{
		{Name: "id", Type: "integer", Nullable: true},
		{Name: "total", Type: "numeric(12,2)", Nullable: true},
	}},
	{Schema: "shop", Name: "orders", Kind: "table", Columns: []SchemaColumn{
		{Name: "id", Type: "integer", Nullable: true},
		{Name: "customer_id", Type: "integer", Nullable: true},
		{Name: "total", Type: "numeric(12,2)", Nullable: true},
	}},
	{Schema: "shop", Name: "remote", Kind: "foreign_table", Columns: []SchemaColumn{{Name: "a", Type: "integer", Nullable: true}}},
}

// schemaDB is a fresh database holding fixture, in which the role named
// "reader" in it is a role of its own: a login role with no privilege
// beyond what fixture grants it (and what PUBLIC holds). It returns the
// DSN that connects as that role.
func schemaDB(t *testing.T, fixture string) (*pgtest.DB, string) {
	t.Helper()
	db := pgtest.NewDB(t)
	// Roles are cluster-wide and databases are not, so a role named
	// after the test's database is the test's own.
	role := db.Name
	ident := pgx.Identifier{role}.Sanitize()
	fixture = strings.ReplaceAll(fixture, "TO reader", "TO "+ident)
	db.Exec(t, "CREATE ROLE "+ident+" LOGIN; GRANT CONNECT ON DATABASE "+pgx.Identifier{db.Name}.Sanitize()+" TO "+ident)
	// Clean-ups run last in, first out: this one after the pools the
	// test opens are closed.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := db.Cluster.Exec(ctx, db.Name, "DROP OWNED BY "+ident); err != nil {
			t.Error(err)
		}
		if err := db.Cluster.Exec(ctx, "", "DROP ROLE "+ident); err != nil {
			t.Error(err)
		}
	})
	db.Exec(t, fixture)
	dsn := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable",
		dsnQuote(db.Cluster.Dir()), db.Cluster.Port(), dsnQuote(role), dsnQuote(db.Name))
	return db, dsn
}

// schemaCall calls tl with args and decodes its result, checking it
// against the tool's output schema.
func schemaCall(t *testing.T, tl *SchemaTool, args string) (*SchemaResult, error) {
	t.Helper()
	res, err := tl.Call(t.Context(), jsontext.Value(args))
	if err != nil {
		return nil, err
	}
	if err := tool.ValidateOutput(tl, res.Structured); err != nil {
		t.Fatalf("result fails the output schema: %v\n%s", err, res.Structured)
	}
	var out SchemaResult
	if err := json.Unmarshal(res.Structured, &out, json.RejectUnknownMembers(true)); err != nil {
		t.Fatal(err)
	}
	return &out, nil
}

// walkSchema lists every page, starting from args (a JSON object's
// members without braces, or ""), and returns the tables and the number
// of pages. It fails on a page longer than maxTables (when not 0).
func walkSchema(t *testing.T, tl *SchemaTool, args string, maxTables int) ([]SchemaTable, int) {
	t.Helper()
	var all []SchemaTable
	cursor := ""
	for pages := 1; ; pages++ {
		members := []string{}
		if args != "" {
			members = append(members, args)
		}
		if cursor != "" {
			members = append(members, `"cursor":"`+cursor+`"`)
		}
		out, err := schemaCall(t, tl, "{"+strings.Join(members, ",")+"}")
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		if maxTables > 0 && len(out.Tables) > maxTables {
			t.Fatalf("page %d lists %d tables, more than %d", pages, len(out.Tables), maxTables)
		}
		all = append(all, out.Tables...)
		if out.NextCursor == "" {
			return all, pages
		}
		if len(out.Tables) == 0 {
			t.Fatalf("page %d is empty but has a next cursor", pages)
		}
		if pages > 1000 {
			t.Fatal("the listing does not end")
		}
		cursor = out.NextCursor
	}
}

// diffTables describes how got differs from want, or returns "".
func diffTables(want, got []SchemaTable) string {
	line := func(tb SchemaTable) string {
		b, _ := json.Marshal(tb, json.Deterministic(true))
		return string(b)
	}
	var w, g []string
	for _, tb := range want {
		w = append(w, line(tb))
	}
	for _, tb := range got {
		g = append(g, line(tb))
	}
	if strings.Join(w, "\n") == strings.Join(g, "\n") {
		return ""
	}
	return "(-want +got)\n" + diffLines(strings.Join(w, "\n"), strings.Join(g, "\n")) +
		"got, in order:\n  " + strings.Join(g, "\n  ")
}

// TestSchemaListsWhatTheRoleMaySelect: the reader sees exactly the
// relations and columns it may SELECT, with their kinds, types,
// nullability and comments, and nothing else: not what it has no grant
// on, not a schema without USAGE, not a column outside its column grant,
// not sequences, types, indexes, dropped columns or the system catalogs.
func TestSchemaListsWhatTheRoleMaySelect(t *testing.T) {
	_, dsn := schemaDB(t, schemaFixture)
	tl := NewSchemaTool(newPoolOfOne(t, dsn, 5*time.Second))
	out, err := schemaCall(t, tl, `{}`)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffTables(schemaListing, out.Tables); d != "" {
		t.Errorf("listing differs:\n%s", d)
	}
	if out.NextCursor != "" {
		t.Errorf("a complete listing has next_cursor %q", out.NextCursor)
	}
	// The same role may read the system catalogs: leaving them out is
	// the tool's doing.
	tl2, err := NewTool(newTestPolicy(t), newPoolOfOne(t, dsn, 5*time.Second), 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{"SELECT count(*) FROM pg_catalog.pg_class", "SELECT count(*) FROM information_schema.tables"} {
		if _, err := tl2.Call(t.Context(), toolArgs(t, sql)); err != nil {
			t.Errorf("%q as the reader: %v", sql, err)
		}
	}
}

// TestSchemaFilter: schema lists exactly that schema; a schema the role
// may not use, a system schema and one that does not exist list nothing.
func TestSchemaFilter(t *testing.T) {
	_, dsn := schemaDB(t, schemaFixture)
	tl := NewSchemaTool(newPoolOfOne(t, dsn, 5*time.Second))
	for _, c := range []struct {
		schema string
		want   []SchemaTable
	}{
		{"shop", schemaListing[2:]},
		{"public", schemaListing[:2]},
		{"vault", nil},
		{"pg_catalog", nil},
		{"information_schema", nil},
		{"Shop", nil},
		{"nope", nil},
	} {
		got, _ := walkSchema(t, tl, `"schema":"`+c.schema+`"`, 0)
		if d := diffTables(c.want, got); d != "" {
			t.Errorf("schema %q:\n%s", c.schema, d)
		}
	}
}

// TestSchemaPagination: pages of every size walk the whole listing once,
// in order, without a table lost or repeated, also with a schema filter;
// a cursor of one listing is refused for another.
func TestSchemaPagination(t *testing.T) {
	_, dsn := schemaDB(t, schemaFixture)
	tl := NewSchemaTool(newPoolOfOne(t, dsn, 5*time.Second))
	for _, n := range []int{1, 2, 3, 4, len(schemaListing) - 1, len(schemaListing), len(schemaListing) + 1} {
		got, pages := walkSchema(t, tl, fmt.Sprintf(`"max_tables":%d`, n), n)
		if d := diffTables(schemaListing, got); d != "" {
			t.Errorf("max_tables %d:\n%s", n, d)
		}
		if want := (len(schemaListing) + n - 1) / n; pages != want {
			t.Errorf("max_tables %d: %d pages, want %d", n, pages, want)
		}
		got, _ = walkSchema(t, tl, fmt.Sprintf(`"max_tables":%d,"schema":"shop"`, n), n)
		if d := diffTables(schemaListing[2:], got); d != "" {
			t.Errorf("max_tables %d in shop:\n%s", n, d)
		}
	}
	first, err := schemaCall(t, tl, `{"max_tables":1}`)
	if err != nil || first.NextCursor == "" {
		t.Fatalf("first page = %+v, %v", first, err)
	}
	_, err = schemaCall(t, tl, `{"max_tables":1,"schema":"shop","cursor":"`+first.NextCursor+`"}`)
	wantArgumentError(t, err, "cursor", first.NextCursor)
	_, err = schemaCall(t, tl, `{"cursor":"`+first.NextCursor[:len(first.NextCursor)-2]+`"}`)
	wantArgumentError(t, err, "cursor", "")
	// A forged cursor that decodes is only a position: it cannot list
	// anything the role may not see.
	forged := (&schemaCursor{V: cursorVersion, Schema: []byte("a"), Table: []byte("a")}).encode()
	got, _ := walkSchema(t, tl, `"cursor":"`+forged+`"`, 0)
	if d := diffTables(schemaListing, got); d != "" {
		t.Errorf("from a forged cursor before every name:\n%s", d)
	}
}

// TestSchemaBounds: a table with more columns than MaxColumns lists the
// first of them and says so; the widest description one table can have
// (the most columns, the longest names and comments, all of a character
// that JSON and array text both escape) fits in the default result
// bound; a smaller bound cuts pages, whose cursors still walk every
// table; and a table that alone exceeds the bound is refused naming the
// setting.
func TestSchemaBounds(t *testing.T) {
	quotes := func(n int) string { return strings.Repeat(`"`, n) }
	// colName is the i-th column's name as SQL writes it: 63 bytes, 60
	// of them double quotes.
	colName := func(i int) string { return fmt.Sprintf(`"%s%03d"`, strings.Repeat(`""`, 60), i) }
	var b strings.Builder
	b.WriteString("CREATE SCHEMA wide; GRANT USAGE ON SCHEMA wide TO reader;\nCREATE TABLE wide.t (")
	for i := range MaxColumns + 1 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(colName(i) + " text")
	}
	b.WriteString(");\nGRANT SELECT ON wide.t TO reader;\n")
	fmt.Fprintf(&b, "COMMENT ON TABLE wide.t IS '%s';\n", quotes(2*maxTableComment))
	for i := range MaxColumns + 1 {
		fmt.Fprintf(&b, "COMMENT ON COLUMN wide.t.%s IS '%s';\n", colName(i), quotes(2*maxColumnComment))
	}
	b.WriteString("CREATE SCHEMA narrow; GRANT USAGE ON SCHEMA narrow TO reader;\n")
	for i := range 30 {
		fmt.Fprintf(&b, "CREATE TABLE narrow.n%02d (a int, b text); COMMENT ON TABLE narrow.n%02d IS '%s'; GRANT SELECT ON narrow.n%02d TO reader;\n",
			i, i, strings.Repeat("x", 100), i)
	}
	_, dsn := schemaDB(t, b.String())

	t.Run("widest table", func(t *testing.T) {
		tl := NewSchemaTool(newPoolOfOne(t, dsn, 5*time.Second))
		out, err := schemaCall(t, tl, `{"schema":"wide"}`)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Tables) != 1 || out.NextCursor != "" {
			t.Fatalf("%d tables, next_cursor %q; want the one table", len(out.Tables), out.NextCursor)
		}
		tb := out.Tables[0]
		if len(tb.Columns) != MaxColumns || !tb.ColumnsTruncated {
			t.Errorf("%d columns, columns_truncated %v; want %d, true", len(tb.Columns), tb.ColumnsTruncated, MaxColumns)
		}
		if tb.Comment != quotes(maxTableComment) {
			t.Errorf("table comment is %d characters, want %d", len(tb.Comment), maxTableComment)
		}
		for i, c := range tb.Columns {
			if want := quotes(60) + fmt.Sprintf("%03d", i); c.Name != want || c.Comment != quotes(maxColumnComment) {
				t.Fatalf("column %d = %q (comment of %d characters)", i, c.Name, len(c.Comment))
			}
		}
	})

	t.Run("small result bound", func(t *testing.T) {
		ex, err := NewExecutor(dsn, ExecOptions{MaxConns: 1, MaxResultBytes: 2048})
		if err != nil {
			t.Fatal(err)
		}
		defer ex.Close()
		tl := NewSchemaTool(ex)
		out, err := schemaCall(t, tl, `{"schema":"narrow","max_tables":30}`)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(out.Tables); n == 0 || n >= 30 || out.NextCursor == "" {
			t.Fatalf("a page under a 2 KiB bound lists %d tables, next_cursor %q; want fewer than 30 and a cursor", n, out.NextCursor)
		}
		got, pages := walkSchema(t, tl, `"schema":"narrow","max_tables":200`, 0)
		if len(got) != 30 || got[0].Name != "n00" || got[29].Name != "n29" || pages < 2 {
			t.Errorf("listed %d tables in %d pages, want n00 … n29 in several", len(got), pages)
		}
		_, err = schemaCall(t, tl, `{"schema":"wide"}`)
		var pr *problem.Problem
		if !errors.As(err, &pr) || pr.Code != problem.PayloadTooLarge || len(pr.InvalidParams) != 0 ||
			!strings.Contains(pr.Detail, "MCP_SQL_MAX_RESULT_BYTES") {
			t.Fatalf("the wide table under a 2 KiB bound: %v, want MCP_PAYLOAD_TOO_LARGE naming the setting", err)
		}
	})
}

// TestSchemaLeavesSessionAlone: listing runs in the executor's read-only
// transaction and leaves the pooled session as it found it, so the same
// connection serves the calls after it.
func TestSchemaLeavesSessionAlone(t *testing.T) {
	_, dsn := schemaDB(t, schemaFixture)
	ex := newPoolOfOne(t, dsn, 5*time.Second)
	tl := NewSchemaTool(ex)
	if _, err := schemaCall(t, tl, `{}`); err != nil {
		t.Fatal(err)
	}
	pid, before := pooledSession(t, ex)
	for _, args := range []string{`{"max_tables":1}`, `{"schema":"shop"}`, `{}`} {
		if _, err := schemaCall(t, tl, args); err != nil {
			t.Fatal(err)
		}
	}
	pid2, after := pooledSession(t, ex)
	if pid2 != pid {
		t.Errorf("the pooled connection was replaced (backend %d, then %d)", pid, pid2)
	}
	if d := diffLines(before, after); d != "" {
		t.Errorf("session changed:\n%s", d)
	}
}
