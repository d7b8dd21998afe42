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
	for _, want := range []string{"Read-only", "may not SELECT are not listed", "next_cursor"} {
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
		`{"tables":[{"schema":"s","name":"t","kind":"index","columns":[]}]}`:             false,
		`{"tables":[{"schema":"s","name":"t","kind":"table"}]}`:                          false,
		`{"tables":[{"schema":"s","name":"t","kind":"table","columns":[{"name":"a"}]}]}`: false,
		`{"tables":[],"extra":1}`: false,
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
	args := schemaArgs(&schema, &schemaCursor{Schema: []byte("a'b"), Table: []byte{0xff}}, 7)
	want := []string{schema, `\x612762`, `\xff`, "8"}
	if len(args) != len(want) {
		t.Fatalf("args = %q", args)
	}
	for i := range want {
		if string(args[i]) != want[i] {
			t.Errorf("arg %d = %q, want %q", i+1, args[i], want[i])
		}
	}
	if args := schemaArgs(nil, nil, 50); args[0] != nil || args[1] != nil || args[2] != nil || string(args[3]) != "51" {
		t.Errorf("first page args = %q, want NULL, NULL, NULL, 51", args)
	}
	if strings.Contains(schemaQuery, "%!") || strings.Count(schemaQuery, "$") != 7 {
		t.Errorf("schemaQuery is not the fixed text with four parameters:\n%s", schemaQuery)
	}
}
