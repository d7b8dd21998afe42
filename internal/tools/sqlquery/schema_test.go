package sqlquery

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcp-bastion/bastion/internal/problem"
	"github.com/mcp-bastion/bastion/internal/tool"
)

// offlineSchemaTool is sql_schema over an executor whose database is never
// reached: every test here must be decided before the catalog query.
func offlineSchemaTool(t *testing.T) *SchemaTool {
	t.Helper()
	ex, err := NewExecutor("host=/nonexistent-bastion-test dbname=none connect_timeout=1", ExecOptions{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return NewSchemaTool(ex)
}

// wantArgumentError checks that err is an invalid-arguments refusal naming
// exactly param, whose detail does not repeat secret.
func wantArgumentError(t *testing.T, err error, param, secret string) {
	t.Helper()
	var ae *tool.ArgumentError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want *tool.ArgumentError", err)
	}
	if ae.Problem.Code != problem.Validation || len(ae.Problem.InvalidParams) != 1 || ae.Problem.InvalidParams[0] != param {
		t.Fatalf("problem = %+v, want MCP_VALIDATION_ERROR with invalid_params [%s]", ae.Problem, param)
	}
	if secret != "" && strings.Contains(ae.Problem.Detail, secret) {
		t.Fatalf("detail repeats the argument: %s", ae.Problem.Detail)
	}
}

func TestSchemaDescriptor(t *testing.T) {
	d := offlineSchemaTool(t).Descriptor()
	if d.Name != "sql_schema" || d.Title == "" || d.Annotations != tool.ReadOnly {
		t.Errorf("descriptor = %+v", d)
	}
	for _, want := range []string{"Read-only", "may not SELECT are not listed", "next_cursor",
		"may SELECT the view itself", "security_invoker", "comments_omitted", "columns_truncated", "skipped_tables"} {
		if !strings.Contains(d.Description, want) {
			t.Errorf("description lacks %q: %s", want, d.Description)
		}
	}
	if !strings.Contains(string(d.InputSchema), `"additionalProperties":false`) {
		t.Errorf("input schema is not closed: %s", d.InputSchema)
	}
	if _, err := tool.CompileSchema("out", d.OutputSchema); err != nil {
		t.Fatal(err)
	}
	// The output schema admits what the tool produces, and nothing more.
	for doc, ok := range map[string]bool{
		`{"tables":[]}`: true,
		`{"tables":[{"schema":"s","name":"t","kind":"view","comment":"c","columns":[{"name":"a","type":"integer","nullable":true,"comment":"x"}],"columns_truncated":true}],"next_cursor":"abc"}`: true,
		`{"tables":[{"schema":"s","name":"t","kind":"table","columns":[],"columns_truncated":true,"comments_omitted":true}],"skipped_tables":2,"next_cursor":"abc"}`:                              true,
		`{"tables":[],"skipped_tables":0}`:                                               false,
		`{"tables":[{"schema":"s","name":"t","kind":"index","columns":[]}]}`:             false,
		`{"tables":[{"schema":"s","name":"t","kind":"table"}]}`:                          false,
		`{"tables":[{"schema":"s","name":"t","kind":"table","columns":[{"name":"a"}]}]}`: false,
		`{"tables":[],"extra":1}`:                                                        false,
	} {
		if err := tool.ValidateOutput(offlineSchemaTool(t), jsontext.Value(doc)); (err == nil) != ok {
			t.Errorf("%s: valid = %v, want %v (%v)", doc, err == nil, ok, err)
		}
	}
}

// TestSchemaArguments: arguments are refused before any database work,
// as invalid arguments naming the one at fault.
func TestSchemaArguments(t *testing.T) {
	tl := offlineSchemaTool(t)
	long := strings.Repeat("é", 40) // 40 characters, 80 bytes: within maxLength, beyond a name
	for _, c := range []struct{ args, param string }{
		{`{"schema":""}`, "schema"},
		{`{"schema":"` + strings.Repeat("s", 64) + `"}`, "schema"},
		{`{"schema":"` + long + `"}`, "schema"},
		{`{"schema":1}`, "schema"},
		{`{"max_tables":0}`, "max_tables"},
		{`{"max_tables":201}`, "max_tables"},
		{`{"max_tables":1.5}`, "max_tables"},
		{`{"max_tables":"5"}`, "max_tables"},
		{`{"cursor":""}`, "cursor"},
		{`{"cursor":"a+b"}`, "cursor"},
		{`{"cursor":"` + strings.Repeat("A", 513) + `"}`, "cursor"},
		{`{"query":"SELECT 1"}`, "query"},
	} {
		_, err := tl.Call(t.Context(), jsontext.Value(c.args))
		wantArgumentError(t, err, c.param, "")
	}
}

// TestSchemaCursorRoundTrip: a cursor decodes to the position it was made
// from, for the listing it was made for only.
func TestSchemaCursorRoundTrip(t *testing.T) {
	for _, c := range []schemaCursor{
		{V: cursorVersion, Schema: []byte("public"), Table: []byte("orders")},
		{V: cursorVersion, Filter: "shop", Schema: []byte("shop"), Table: []byte(`We"ird, {name}`)},
		{V: cursorVersion, Schema: []byte("s\xff"), Table: []byte(strings.Repeat("t", 63))},
	} {
		s := c.encode()
		got, err := decodeCursor(s, c.Filter)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if string(got.Schema) != string(c.Schema) || string(got.Table) != string(c.Table) || got.Filter != c.Filter {
			t.Errorf("decoded %+v, want %+v", got, c)
		}
		_, err = decodeCursor(s, c.Filter+"x")
		wantArgumentError(t, err, "cursor", "")
	}
}

// TestSchemaCursorRefused: anything but a cursor the tool wrote is
// refused, with a problem that names the cursor and not its content.
func TestSchemaCursorRefused(t *testing.T) {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	valid := (&schemaCursor{V: cursorVersion, Schema: []byte("public"), Table: []byte("t")}).encode()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for name, cursor := range map[string]string{
		"not base64":          "not*base64",
		"padded":              valid + "=",
		"not JSON":            enc("hello"),
		"JSON array":          enc(`[1,2]`),
		"empty object":        enc(`{}`),
		"other version":       enc(`{"v":2,"schema":"` + b64("public") + `","table":"` + b64("t") + `"}`),
		"unknown member":      enc(`{"v":1,"schema":"` + b64("public") + `","table":"` + b64("t") + `","x":1}`),
		"duplicate member":    enc(`{"v":1,"schema":"` + b64("public") + `","schema":"` + b64("x") + `","table":"` + b64("t") + `"}`),
		"not canonical":       enc(`{ "v":1,"schema":"` + b64("public") + `","table":"` + b64("t") + `"}`),
		"empty table":         (&schemaCursor{V: cursorVersion, Schema: []byte("public"), Table: []byte{}}).encode(),
		"table name too long": (&schemaCursor{V: cursorVersion, Schema: []byte("public"), Table: []byte(strings.Repeat("t", 64))}).encode(),
		"NUL in a name":       (&schemaCursor{V: cursorVersion, Schema: []byte("pub\x00lic"), Table: []byte("t")}).encode(),
		"truncated":           valid[:len(valid)-3],
		"another filter":      (&schemaCursor{V: cursorVersion, Filter: "shop", Schema: []byte("shop"), Table: []byte("t")}).encode(),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeCursor(cursor, "")
			wantArgumentError(t, err, "cursor", cursor)
		})
	}
	if _, err := decodeCursor(valid, ""); err != nil {
		t.Fatalf("the valid cursor: %v", err)
	}
}

// TestSchemaArgsBound: the caller's values reach the catalog query as
// parameters only; the SQL is the same text whatever the arguments.
func TestSchemaArgsBound(t *testing.T) {
	schema := "x'); DROP TABLE t; --"
	args := schemaArgs(&schema, &schemaCursor{Schema: []byte("a'b"), Table: []byte{0xff}}, 7, 4096)
	want := []string{schema, `\x612762`, `\xff`, "8", "4096"}
	if len(args) != len(want) {
		t.Fatalf("args = %q", args)
	}
	for i := range want {
		if string(args[i]) != want[i] {
			t.Errorf("arg %d = %q, want %q", i+1, args[i], want[i])
		}
	}
	if args := schemaArgs(nil, nil, 50, DefaultMaxResultBytes); args[0] != nil || args[1] != nil || args[2] != nil ||
		string(args[3]) != "51" || string(args[4]) != "1048576" {
		t.Errorf("first page args = %q, want NULL, NULL, NULL, 51, 1048576", args)
	}
	if strings.Contains(schemaQuery, "{{") || !strings.Contains(schemaQuery, "$5") || strings.Contains(schemaQuery, "$6") {
		t.Errorf("schemaQuery is not the fixed text with five parameters:\n%s", schemaQuery)
	}
}

// TestSchemaRowShapes: a row of the catalog query becomes a listed table,
// cut as its arrays say, or a skipped one when its names are NULL; every
// row gives the position after it, and a row that cannot come from the
// query is refused.
func TestSchemaRowShapes(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	row := func(schema, name any, n string, names, types, nullable, comments any, omitted bool) []any {
		return []any{schema, name, "r", nil, b64("s"), b64("t"), jsontext.Value(n), names, types, nullable, comments, omitted}
	}
	cols := []any{"a", "b"}
	typs := []any{"integer", "text"}
	nulls := []any{true, false}
	for _, c := range []struct {
		name string
		row  []any
		want *SchemaTable
	}{
		{"whole", row("s", "t", "2", cols, typs, nulls, []any{"x", nil}, false), &SchemaTable{
			Schema: "s", Name: "t", Kind: "table", Columns: []SchemaColumn{
				{Name: "a", Type: "integer", Nullable: true, Comment: "x"}, {Name: "b", Type: "text"}}}},
		{"comments left out", row("s", "t", "2", cols, typs, nulls, nil, true), &SchemaTable{
			Schema: "s", Name: "t", Kind: "table", CommentsOmitted: true, Columns: []SchemaColumn{
				{Name: "a", Type: "integer", Nullable: true}, {Name: "b", Type: "text"}}}},
		{"columns cut", row("s", "t", "5", cols, typs, nulls, nil, true), &SchemaTable{
			Schema: "s", Name: "t", Kind: "table", CommentsOmitted: true, ColumnsTruncated: true, Columns: []SchemaColumn{
				{Name: "a", Type: "integer", Nullable: true}, {Name: "b", Type: "text"}}}},
		{"no column fits", row("s", "t", "3", nil, nil, nil, nil, false), &SchemaTable{
			Schema: "s", Name: "t", Kind: "table", ColumnsTruncated: true, Columns: []SchemaColumn{}}},
		{"no columns", row("s", "t", "0", nil, nil, nil, nil, false), &SchemaTable{
			Schema: "s", Name: "t", Kind: "table", Columns: []SchemaColumn{}}},
		{"more than MaxColumns", row("s", "t", "501", cols, typs, nulls, nil, false), &SchemaTable{
			Schema: "s", Name: "t", Kind: "table", ColumnsTruncated: true, Columns: []SchemaColumn{
				{Name: "a", Type: "integer", Nullable: true}, {Name: "b", Type: "text"}}}},
		{"skipped", row(nil, nil, "2", nil, nil, nil, nil, true), nil},
	} {
		tb, pos, err := tableOf(c.row)
		if err != nil || pos == nil || string(pos.Schema) != "s" || string(pos.Table) != "t" {
			t.Fatalf("%s: position %+v, %v", c.name, pos, err)
		}
		if d := diffTables(tablesOf(c.want), tablesOf(tb)); d != "" {
			t.Errorf("%s:\n%s", c.name, d)
		}
	}
	for name, r := range map[string][]any{
		"more listed than read":  row("s", "t", "1", cols, typs, nulls, nil, false),
		"more than MaxColumns":   row("s", "t", "502", cols, typs, nulls, nil, false),
		"arrays of two lengths":  row("s", "t", "2", cols, typs[:1], nulls, nil, false),
		"comments of another":    row("s", "t", "2", cols, typs, nulls, []any{"x"}, false),
		"one name NULL":          row("s", nil, "2", cols, typs, nulls, nil, false),
		"no omitted flag":        row("s", "t", "2", cols, typs, nulls, nil, false)[:11],
		"a flag that is no bool": append(row("s", "t", "2", cols, typs, nulls, nil, false)[:11], "true"),
	} {
		if _, _, err := tableOf(r); !errors.Is(err, errRowShape) {
			t.Errorf("%s: %v, want errRowShape", name, err)
		}
	}
}

// tablesOf is the listing of tb alone, or of none when tb is nil.
func tablesOf(tb *SchemaTable) []SchemaTable {
	if tb == nil {
		return nil
	}
	return []SchemaTable{*tb}
}
