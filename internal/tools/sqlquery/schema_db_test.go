package sqlquery

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
// of pages. It fails on a page longer than maxTables (when not 0), and
// where walkPages does.
func walkSchema(t *testing.T, tl *SchemaTool, args string, maxTables int) ([]SchemaTable, int) {
	t.Helper()
	var all []SchemaTable
	pages := walkPages(t, tl, args)
	for i, out := range pages {
		if maxTables > 0 && len(out.Tables)+out.SkippedTables > maxTables {
			t.Fatalf("page %d lists %d tables and skips %d, more than %d", i+1, len(out.Tables), out.SkippedTables, maxTables)
		}
		all = append(all, out.Tables...)
	}
	return all, len(pages)
}

// walkPages lists every page, starting from args, and returns them. It
// fails on an error, and unless every page progresses: a page with a
// next cursor lists or skips at least one table, and no cursor comes
// twice.
func walkPages(t *testing.T, tl *SchemaTool, args string) []*SchemaResult {
	t.Helper()
	var pages []*SchemaResult
	seen := map[string]bool{}
	cursor := ""
	for {
		members := []string{}
		if args != "" {
			members = append(members, args)
		}
		if cursor != "" {
			members = append(members, `"cursor":"`+cursor+`"`)
		}
		out, err := schemaCall(t, tl, "{"+strings.Join(members, ",")+"}")
		if err != nil {
			t.Fatalf("page %d: %v", len(pages)+1, err)
		}
		pages = append(pages, out)
		if out.NextCursor == "" {
			return pages
		}
		if len(out.Tables)+out.SkippedTables == 0 {
			t.Fatalf("page %d is empty but has a next cursor", len(pages))
		}
		if seen[out.NextCursor] {
			t.Fatalf("page %d repeats the next cursor of an earlier page", len(pages))
		}
		seen[out.NextCursor] = true
		if len(pages) > 1000 {
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
// first of them and says so; a table of the most columns with the
// longest names and comments, all of a character that JSON and array
// text both escape, fits in the default result bound whole; a smaller
// bound cuts pages, whose cursors still walk every table; and a table
// that alone exceeds the bound is listed without its comments and with
// its first columns only, saying so (TestSchemaOversizedTables has the
// control characters, which cost more).
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
		out, err = schemaCall(t, tl, `{"schema":"wide"}`)
		if err != nil {
			t.Fatalf("the wide table under a 2 KiB bound: %v", err)
		}
		if len(out.Tables) != 1 || out.NextCursor != "" {
			t.Fatalf("the wide table under a 2 KiB bound: %d tables, next_cursor %q; want the one table", len(out.Tables), out.NextCursor)
		}
		tb := out.Tables[0]
		if n := len(tb.Columns); n == 0 || n >= MaxColumns || !tb.ColumnsTruncated || !tb.CommentsOmitted || tb.Comment != "" {
			t.Errorf("the wide table under a 2 KiB bound: %d columns, columns_truncated %v, comments_omitted %v, comment of %d bytes; "+
				"want a few columns, both flags, no comment", n, tb.ColumnsTruncated, tb.CommentsOmitted, len(tb.Comment))
		}
		for i, c := range tb.Columns {
			if want := quotes(60) + fmt.Sprintf("%03d", i); c.Name != want || c.Comment != "" {
				t.Fatalf("column %d = %q (comment of %d characters)", i, c.Name, len(c.Comment))
			}
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

// oversizedFixture is the reviewer's case and what surrounds it: a schema
// and a domain named with 63 control characters each (six bytes each in
// JSON), a table in that schema named so too, whose names alone exceed a
// 1 KiB bound; s_wide.a_wider, with a comment of 1,000 control characters
// and 500 columns of that domain, each named with 60 control characters
// and commented with 200, over 1 MiB as the result bound counts it;
// s_wide.b_after; s_wide.c_plain, 500 columns commented with 200
// ordinary characters; and z_tail.t after them all.
const oversizedFixture = `
CREATE SCHEMA s_wide; GRANT USAGE ON SCHEMA s_wide TO reader;
CREATE SCHEMA z_tail; GRANT USAGE ON SCHEMA z_tail TO reader;
DO $$
DECLARE
  s text := repeat(chr(1), 63);
  d text := repeat(chr(2), 63);
  cols text;
BEGIN
  EXECUTE format('CREATE SCHEMA %I', s);
  EXECUTE format('CREATE DOMAIN %I.%I AS text', s, d);
  EXECUTE format('CREATE TABLE %I.%I (x int)', s, s);
  EXECUTE format('GRANT USAGE ON SCHEMA %I TO reader', s);
  EXECUTE format('GRANT SELECT ON %I.%I TO reader', s, s);
  SELECT string_agg(format('%I %I.%I', repeat(chr(3), 60) || lpad(i::text, 3, '0'), s, d), ', ' ORDER BY i)
    INTO cols FROM generate_series(0, 499) i;
  EXECUTE 'CREATE TABLE s_wide.a_wider (' || cols || ')';
  EXECUTE format('COMMENT ON TABLE s_wide.a_wider IS %L', repeat(chr(1), 1000));
  FOR i IN 0..499 LOOP
    EXECUTE format('COMMENT ON COLUMN s_wide.a_wider.%I IS %L', repeat(chr(3), 60) || lpad(i::text, 3, '0'), repeat(chr(1), 200));
  END LOOP;
  SELECT string_agg(format('c%s text', lpad(i::text, 3, '0')), ', ' ORDER BY i) INTO cols FROM generate_series(0, 499) i;
  EXECUTE 'CREATE TABLE s_wide.c_plain (' || cols || ')';
  FOR i IN 0..499 LOOP
    EXECUTE format('COMMENT ON COLUMN s_wide.c_plain.c%s IS %L', lpad(i::text, 3, '0'), repeat('a comment ', 20));
  END LOOP;
END $$;
CREATE TABLE s_wide.b_after (x int);
COMMENT ON TABLE s_wide.b_after IS 'after the wide one';
CREATE TABLE z_tail.t (a int);
GRANT SELECT ON s_wide.a_wider, s_wide.b_after, s_wide.c_plain, z_tail.t TO reader;
`

// boundedSchemaTool is sql_schema over an executor of one connection with
// the result bound maxResultBytes (0: the default), as
// MCP_SQL_MAX_RESULT_BYTES sets it.
func boundedSchemaTool(t *testing.T, dsn string, maxResultBytes int) (*SchemaTool, *Executor) {
	t.Helper()
	ex, err := NewExecutor(dsn, ExecOptions{StatementTimeout: 10 * time.Second, MaxConns: 1, MaxResultBytes: maxResultBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return NewSchemaTool(ex), ex
}

// checkCut checks that got is ref, the table's whole description, as the
// result bound may cut it: the same relation, its first columns exactly,
// comments either as they are or all left out in their order (the
// columns' first, then the table's) and said so, columns cut only once
// every comment is gone, and flags that say exactly what was cut.
func checkCut(t *testing.T, ref, got SchemaTable) {
	t.Helper()
	at := fmt.Sprintf("%q.%q", ref.Schema, ref.Name)
	if got.Schema != ref.Schema || got.Name != ref.Name || got.Kind != ref.Kind {
		t.Fatalf("%s: listed as %q.%q (%s)", at, got.Schema, got.Name, got.Kind)
	}
	if len(got.Columns) > len(ref.Columns) {
		t.Fatalf("%s: %d columns, more than its %d", at, len(got.Columns), len(ref.Columns))
	}
	cut := len(got.Columns) < len(ref.Columns)
	if got.ColumnsTruncated != (cut || ref.ColumnsTruncated) {
		t.Errorf("%s: %d of %d columns, columns_truncated %v", at, len(got.Columns), len(ref.Columns), got.ColumnsTruncated)
	}
	lost, colComments := false, false
	for i, c := range got.Columns {
		r := ref.Columns[i]
		if c.Name != r.Name || c.Type != r.Type || c.Nullable != r.Nullable {
			t.Fatalf("%s: column %d = %+v, want %+v", at, i, c, r)
		}
		switch c.Comment {
		case r.Comment:
			colComments = colComments || c.Comment != ""
		case "":
			lost = true
		default:
			t.Fatalf("%s: column %d has comment %q, want %q", at, i, c.Comment, r.Comment)
		}
	}
	if lost && colComments {
		t.Errorf("%s: some column comments are left out, not all", at)
	}
	switch got.Comment {
	case ref.Comment:
		if got.Comment != "" && cut {
			t.Errorf("%s: columns are cut while the table's comment is kept", at)
		}
	case "":
		if colComments {
			t.Errorf("%s: the table's comment is left out before the columns' comments", at)
		}
		lost = true
	default:
		t.Fatalf("%s: comment %q, want %q", at, got.Comment, ref.Comment)
	}
	if cut && colComments {
		t.Errorf("%s: columns are cut while column comments are kept", at)
	}
	if got.CommentsOmitted != lost {
		t.Errorf("%s: comments_omitted %v, but comments left out: %v", at, got.CommentsOmitted, lost)
	}
}

// name of a table in test messages, control characters escaped.
func tableName(tb SchemaTable) string { return fmt.Sprintf("%q.%q", tb.Schema, tb.Name) }

// TestSchemaOversizedTables is the reviewer's case: under any result
// bound, from the setting's minimum to the default, paging reaches every
// table exactly once, in order, and never repeats a cursor or fails; a
// table too large for the bound on its own comes cut as checkCut allows,
// and one whose names alone do not fit is counted as skipped.
func TestSchemaOversizedTables(t *testing.T) {
	_, dsn := schemaDB(t, oversizedFixture)
	// At 64 MiB every table is whole: the reference.
	big, _ := boundedSchemaTool(t, dsn, 64<<20)
	ref, _ := walkSchema(t, big, "", 0)
	var names []string
	for _, tb := range ref {
		names = append(names, tableName(tb))
		if tb.ColumnsTruncated || tb.CommentsOmitted {
			t.Fatalf("%s is cut under 64 MiB", tableName(tb))
		}
	}
	ctrl := strings.Repeat("\x01", 63)
	want := []string{tableName(SchemaTable{Schema: ctrl, Name: ctrl}), `"s_wide"."a_wider"`, `"s_wide"."b_after"`, `"s_wide"."c_plain"`, `"z_tail"."t"`}
	if strings.Join(names, " ") != strings.Join(want, " ") || len(ref[1].Columns) != 500 || len(ref[3].Columns) != 500 {
		t.Fatalf("the whole listing is %v, want %v with 500 columns each in a_wider and c_plain", names, want)
	}

	t.Run("default bound, one schema", func(t *testing.T) {
		tl, _ := boundedSchemaTool(t, dsn, 0)
		out, err := schemaCall(t, tl, `{"schema":"s_wide"}`)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Tables) != 3 || out.NextCursor != "" || out.SkippedTables != 0 {
			t.Fatalf("%d tables, %d skipped, next_cursor %q; want the three of s_wide", len(out.Tables), out.SkippedTables, out.NextCursor)
		}
		for i, tb := range out.Tables {
			checkCut(t, ref[1+i], tb)
		}
		// The column comments alone are too many: without them every
		// column fits, and the table's comment too.
		if a := out.Tables[0]; len(a.Columns) != 500 || a.ColumnsTruncated || !a.CommentsOmitted || a.Comment == "" {
			t.Errorf("a_wider: %d columns, columns_truncated %v, comments_omitted %v; want every column, without their comments",
				len(a.Columns), a.ColumnsTruncated, a.CommentsOmitted)
		}
	})

	for _, c := range []struct {
		bound   int
		skipped int
	}{
		{1024, 1}, // the setting's minimum: the first table's names do not fit
		{4096, 0},
		{64 << 10, 0},
		{256 << 10, 0},
		{0, 0},
	} {
		t.Run(fmt.Sprintf("bound %d", c.bound), func(t *testing.T) {
			tl, _ := boundedSchemaTool(t, dsn, c.bound)
			for _, maxTables := range []int{1, 2, 50} {
				pages := walkPages(t, tl, fmt.Sprintf(`"max_tables":%d`, maxTables))
				var got []SchemaTable
				skipped := 0
				for _, p := range pages {
					got = append(got, p.Tables...)
					skipped += p.SkippedTables
				}
				if skipped != c.skipped || len(got)+skipped != len(ref) {
					t.Fatalf("max_tables %d: %d tables listed and %d skipped in %d pages, want %d and %d",
						maxTables, len(got), skipped, len(pages), len(ref)-c.skipped, c.skipped)
				}
				for i, tb := range got {
					checkCut(t, ref[c.skipped+i], tb)
				}
			}
		})
	}

	// Under 1 KiB a_wider's first column does not fit: the table is
	// listed with none, and c_plain with its first columns only.
	tl, _ := boundedSchemaTool(t, dsn, 1024)
	got, _ := walkSchema(t, tl, `"schema":"s_wide"`, 0)
	if len(got) != 3 || len(got[0].Columns) != 0 || !got[0].ColumnsTruncated || got[0].Comment != "" ||
		len(got[2].Columns) == 0 || len(got[2].Columns) == 500 || !got[2].ColumnsTruncated {
		t.Errorf("s_wide under 1 KiB: %d tables (a_wider %d columns, c_plain %d)", len(got), len(got[0].Columns), len(got[len(got)-1].Columns))
	}
}

// sweepFixture is one table whose every name, type and comment holds
// what JSON or an array's text escapes or quotes: double quotes,
// backslashes, braces, commas, spaces, control characters, the word
// NULL, and characters of two, three and four bytes.
const sweepFixture = `
CREATE SCHEMA "sw""ep\ {,}";
CREATE DOMAIN "sw""ep\ {,}"."d""q\" AS text;
CREATE TABLE "sw""ep\ {,}"."t NULL ""x""" (
  "a""b" "sw""ep\ {,}"."d""q\",
  "a\b" text NOT NULL,
  "{c}" varchar(10),
  " lead" numeric(5,2),
  "NULL" int[],
  "é€😀" text,
  U&"\0001x\0009y" text,
  plain int
);
COMMENT ON TABLE "sw""ep\ {,}"."t NULL ""x""" IS E'tab\tle "c" \\ {}';
COMMENT ON COLUMN "sw""ep\ {,}"."t NULL ""x"""."a""b" IS E'line\n"q" \\ {b} NULL \x01';
COMMENT ON COLUMN "sw""ep\ {,}"."t NULL ""x"""."é€😀" IS 'é€😀 ünïcödé';
COMMENT ON COLUMN "sw""ep\ {,}"."t NULL ""x"""."NULL" IS 'NULL';
COMMENT ON COLUMN "sw""ep\ {,}"."t NULL ""x""".plain IS E'\x02\x03';
GRANT USAGE ON SCHEMA "sw""ep\ {,}" TO reader;
GRANT SELECT ON "sw""ep\ {,}"."t NULL ""x""" TO reader;
`

// TestSchemaBoundSweep lists one table of every kind of escaped text
// under each result bound from above its size down, byte by byte,
// to below the smallest row the query makes: the query's bound of what a
// row costs is never below what the executor counts (or the row would
// be refused), so every bound lists the table, cut as checkCut allows and
// never more as the bound shrinks, or skips it; only a bound under the
// documented floor of 316 bytes, and under this row's position, fails,
// naming the setting.
func TestSchemaBoundSweep(t *testing.T) {
	_, dsn := schemaDB(t, sweepFixture)
	tl, ex := boundedSchemaTool(t, dsn, 0)
	args := `{"schema":"sw\"ep\\ {,}"}`
	whole, err := schemaCall(t, tl, args)
	if err != nil || len(whole.Tables) != 1 || whole.Tables[0].CommentsOmitted || whole.Tables[0].ColumnsTruncated {
		t.Fatalf("the whole table: %+v, %v", whole, err)
	}
	ref := whole.Tables[0]
	if len(ref.Columns) != 8 || ref.Comment == "" {
		t.Fatalf("the whole table: %+v", ref)
	}
	// The calls run one after another on the executor's one connection,
	// so its bound can change between them; the connection's message
	// limit is the default's, above every bound here.
	prev, fullAt, skippedAt, failedAt := ref, 0, 0, 0
	prevListed := true
	const top = 600 // above this table's whole description
	for bound := top; bound >= 64; bound-- {
		ex.opts.MaxResultBytes = bound
		out, err := schemaCall(t, tl, args)
		if err != nil {
			var pr *problem.Problem
			if !errors.As(err, &pr) || pr.Code != problem.PayloadTooLarge || !strings.Contains(pr.Detail, "MCP_SQL_MAX_RESULT_BYTES") || bound >= 316 {
				t.Fatalf("bound %d: %v", bound, err)
			}
			failedAt = max(failedAt, bound)
			continue
		}
		if failedAt > 0 {
			t.Fatalf("bound %d lists what bound %d refused", bound, failedAt)
		}
		if out.NextCursor != "" || len(out.Tables)+out.SkippedTables != 1 {
			t.Fatalf("bound %d: %+v, want the one table, listed or skipped", bound, out)
		}
		if out.SkippedTables == 1 {
			skippedAt = max(skippedAt, bound)
			prevListed = false
			continue
		}
		if !prevListed {
			t.Fatalf("bound %d lists the table that bound %d skipped", bound, skippedAt)
		}
		tb := out.Tables[0]
		checkCut(t, ref, tb)
		if len(tb.Columns) > len(prev.Columns) || (tb.Comment != "" && prev.Comment == "") ||
			(!tb.CommentsOmitted && prev.CommentsOmitted) {
			t.Fatalf("bound %d lists more than bound %d: %+v after %+v", bound, bound+1, tb, prev)
		}
		if !tb.CommentsOmitted && !tb.ColumnsTruncated {
			fullAt = bound
		}
		prev = tb
	}
	if fullAt == 0 || fullAt == top || skippedAt == 0 || failedAt == 0 {
		t.Errorf("the sweep did not pass every stage: whole down to %d, skipped from %d, refused from %d", fullAt, skippedAt, failedAt)
	}
	t.Logf("whole down to %d bytes, skipped from %d, refused from %d", fullAt, skippedAt, failedAt)
}

// TestSchemaCostBound: sqlCost, what the catalog query reckons a text
// costs, is never less than what the executor counts (jsonCost), as a
// value and as an element of an array's text, for text of every kind of
// character JSON or the array escapes, and encodingFactor is 1 when the
// client's encoding is the database's and 4 when it is not.
func TestSchemaCostBound(t *testing.T) {
	_, dsn := schemaDB(t, "")
	ex := newPoolOfOne(t, dsn, 5*time.Second)
	q := fmt.Sprintf(`SELECT v.x, pg_catalog.array_cat(ARRAY[v.x, NULL], ARRAY[v.x])::pg_catalog.text, v.f, %s, %s, %s
FROM (SELECT $1::pg_catalog.text AS x, %s AS f) v`,
		sqlCost("v.x", "v.f", false), sqlCost("v.x", "v.f", true), sqlCost("NULL::pg_catalog.text", "v.f", true), encodingFactor)
	num := func(v any) int {
		n, err := strconv.Atoi(string(v.(jsontext.Value)))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, s := range []string{
		"", "a", "plain words", `"`, `\`, `a"b\c`, "{x}", "x,y", " lead", "trail ", "NULL", "null",
		"\x01", strings.Repeat("\x01", 63), "\t\n\r\v\f", "\x1f\x7f", "é€😀", "\u2028\u2029", `\"{}`,
		strings.Repeat(`"`, 200), strings.Repeat(`\`, 200), strings.Repeat("😀", 200),
	} {
		rs, err := ex.runArgs(t.Context(), &Prepared{SQL: q, Limit: 1}, [][]byte{[]byte(s)})
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		row := rs.Rows[0]
		x, arr := row[0].(string), row[1].(string)
		f, scalar, elem, null := num(row[2]), num(row[3]), num(row[4]), num(row[5])
		if x != s || f != 1 {
			t.Fatalf("%q: read back %q, encoding factor %d", s, x, f)
		}
		if got := jsonCost([]byte(s)); scalar < got {
			t.Errorf("%q: sqlCost %d as a value, jsonCost %d", s, scalar, got)
		}
		// An array's braces, quotes and separator cost 5 (schemaQuery's
		// rowFixedCost), its elements what sqlCost says.
		if got := jsonCost([]byte(arr)); 5+2*elem+null < got {
			t.Errorf("%q: sqlCost %d + %d + %d as elements of %q, jsonCost %d", s, elem, null, elem, arr, got)
		}
	}
	if got := jsonCost(nil); got != 5 {
		t.Errorf("jsonCost(NULL) = %d, sqlCost's 5", got)
	}

	t.Run("another client encoding", func(t *testing.T) {
		ex := newPoolOfOne(t, dsn+" client_encoding=LATIN1", 5*time.Second)
		rs, err := ex.Run(t.Context(), &Prepared{SQL: "SELECT " + encodingFactor, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if f := num(rs.Rows[0][0]); f != 4 {
			t.Errorf("encoding factor with a LATIN1 client on a UTF8 database = %d, want 4", f)
		}
	})
}

// TestSchemaSecurityInvokerView: a view is listed when the role may
// SELECT the view itself, as the description says; a security_invoker
// view reads its tables with the role's own privileges, so reading one
// over a table the role has no grant on is refused even though it is
// listed, while an ordinary view over the same table reads it.
func TestSchemaSecurityInvokerView(t *testing.T) {
	_, dsn := schemaDB(t, `
CREATE SCHEMA inv; GRANT USAGE ON SCHEMA inv TO reader;
CREATE TABLE inv.base (x int);
CREATE VIEW inv.definer AS SELECT x FROM inv.base;
CREATE VIEW inv.invoker WITH (security_invoker = true) AS SELECT x FROM inv.base;
GRANT SELECT ON inv.definer, inv.invoker TO reader;
`)
	tl := NewSchemaTool(newPoolOfOne(t, dsn, 5*time.Second))
	got, _ := walkSchema(t, tl, `"schema":"inv"`, 0)
	if len(got) != 2 || got[0].Name != "definer" || got[1].Name != "invoker" || len(got[1].Columns) != 1 {
		t.Fatalf("listing = %+v, want both views with their column", got)
	}
	if d := tl.Descriptor().Description; !strings.Contains(d, "may SELECT the view itself") || !strings.Contains(d, "security_invoker") {
		t.Errorf("the description does not say which views are listed: %s", d)
	}
	sql, err := NewTool(newTestPolicy(t), newPoolOfOne(t, dsn, 5*time.Second), 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sql.Call(t.Context(), toolArgs(t, "SELECT x FROM inv.definer")); err != nil {
		t.Errorf("reading the ordinary view: %v", err)
	}
	_, err = sql.Call(t.Context(), toolArgs(t, "SELECT x FROM inv.invoker"))
	var pr *problem.Problem
	if !errors.As(err, &pr) || pr.Code != problem.AccessDenied {
		t.Errorf("reading the security_invoker view: %v, want MCP_ACCESS_DENIED", err)
	}
}
