package sqlquery

import (
	"context"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/jackc/pgx/v5"

	"github.com/mcp-bastion/bastion/internal/pgcluster/pgtest"
)

func newTestTool(t *testing.T, dsn string, maxRows int64) *Tool {
	t.Helper()
	pol, err := NewPolicy()
	if err != nil {
		t.Fatal(err)
	}
	ex, err := NewExecutor(dsn, ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := NewTool(pol, ex, maxRows)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tl.Close() })
	return tl
}

func TestValueMapping(t *testing.T) {
	db := pgtest.NewSampleDB(t)
	tl := newTestTool(t, db.DSN(), 100)
	cases := []struct{ sql, want string }{
		{`SELECT 1::int2, 2::int4, 9007199254740991::int8, 9007199254740992::int8, (-9223372036854775808)::int8`,
			`[[1,2,9007199254740991,"9007199254740992","-9223372036854775808"]]`},
		{`SELECT 0.1::float4, 0.1::float8, 'NaN'::float8, 'Infinity'::float4, '-Infinity'::float8, 1e300::float8`,
			`[[0.1,0.1,"NaN","Infinity","-Infinity",1e+300]]`},
		{`SELECT 12345678901234567890.123456789::numeric, 'NaN'::numeric, 0.10::numeric(5,2)`,
			`[["12345678901234567890.123456789","NaN","0.10"]]`},
		{`SELECT '{"b":1,"a":[1,2.50,12345678901234567890]}'::jsonb, '{"a":1,"a":2}'::json, '[1, 2]'::json`,
			`[[{"a":[1,2.50,12345678901234567890],"b":1},"{\"a\":1,\"a\":2}",[1,2]]]`},
		// JSON a reader could not take as it is stays text: a number
		// beyond a double, nesting deeper than 32 levels.
		{`SELECT '1e999'::json, '[1e308, -1e-400]'::json, ('{"a":' || repeat('[', 31) || repeat(']', 31) || '}')::json, (repeat('[', 33) || repeat(']', 33))::jsonb`,
			`[["1e999",[1e308,-1e-400],{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]},"` + strings.Repeat("[", 33) + strings.Repeat("]", 33) + `"]]`},
		{`SELECT '2024-05-01 12:00:00.123456+02'::timestamptz, '2024-05-01 12:00:00'::timestamp, '2024-05-01'::date, 'infinity'::timestamptz`,
			`[["2024-05-01T10:00:00.123456Z","2024-05-01T12:00:00","2024-05-01","infinity"]]`},
		{`SELECT '1 day 2 hours 3 seconds'::interval, '12:30'::time`, `[["P1DT2H3S","12:30:00"]]`},
		{`SELECT '\x00ff10'::bytea, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, '10.0.0.1/8'::inet, '::1'::inet`,
			`[["AP8Q","a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","10.0.0.1/8","::1"]]`},
		{`SELECT ARRAY[1,2,3], ARRAY['a','b'], ARRAY[[1,2],[3,4]], ARRAY[1.5::numeric], ARRAY['2024-01-02'::date], ARRAY[9007199254740993::int8]`,
			`[[[1,2,3],["a","b"],[[1,2],[3,4]],["1.5"],["2024-01-02"],["9007199254740993"]]]`},
		{`SELECT NULL::int, NULL::text, true, 'é"\'::text`, `[[null,null,true,"é\"\\"]]`},
		// Arrays map each element exactly as a column of its type.
		{`SELECT ARRAY['1 day 2 hours'::interval], ARRAY['12:30'::time], ARRAY['0044-03-15 BC'::date], '0044-03-15 BC'::date`,
			`[[["P1DT2H"],["12:30:00"],["0044-03-15 BC"],"0044-03-15 BC"]]`},
		{`SELECT ARRAY['12345678901234567890'::jsonb, '1.50'::jsonb], ARRAY['{"a":1,"a":2}'::json], ARRAY['<a/>'::xml]`,
			`[[[12345678901234567890,1.50],["{\"a\":1,\"a\":2}"],["<a/>"]]]`},
		{`SELECT ARRAY['10.0.0.1'::inet, '10.0.0.0/8'::inet], '10.0.0.1'::inet, ARRAY['12:30+02'::timetz], ARRAY[1.5::money]`,
			`[[["10.0.0.1","10.0.0.0/8"],"10.0.0.1",["12:30:00+02"],["$1.50"]]]`},
		{`SELECT ARRAY[NULL, 'a b', '{x}', 'NULL', '"q"']::text[], '[0:1]={7,8}'::int[], ARRAY[ARRAY[NULL::int8, 9007199254740993]]`,
			`[[[null,"a b","{x}","NULL","\"q\""],[7,8],[[null,"9007199254740993"]]]]`},
		// box separates array elements with ';', which pgx's array
		// parser does not read: the array stays PostgreSQL's text.
		{`SELECT ARRAY[box '((1,1),(0,0))', box '((3,3),(2,2))']`, `[["{(1,1),(0,0);(3,3),(2,2)}"]]`},
		// Types pgx has no Go mapping for arrive as PostgreSQL's text.
		{`SELECT int4range(1,5), '{[1,2]}'::int4multirange, ARRAY[int4range(1,3)], '123'::xid8, relkind FROM pg_class WHERE relname = 'pg_class'`,
			`[["[1,5)","{[1,3)}",["[1,3)"],"123","r"]]`},
		{`SELECT ROW(1, 'a b'), ARRAY[ROW(1, 'x')], 'infinity'::timestamp, '10000-01-01 00:00:00+00'::timestamptz, 0.1::float4, '-0'::float8`,
			`[["(1,\"a b\")",["(1,x)"],"infinity","10000-01-01T00:00:00Z",0.1,-0]]`},
	}
	for _, c := range cases {
		res, err := tl.Call(context.Background(), mustArgs(t, c.sql))
		if err != nil {
			t.Errorf("%s: %v", c.sql, err)
			continue
		}
		var raw map[string]jsontext.Value
		if err := json.Unmarshal(res.Structured, &raw); err != nil {
			t.Fatal(err)
		}
		if got := string(raw["rows"]); got != c.want {
			t.Errorf("%s\n got %s\nwant %s", c.sql, got, c.want)
		}
	}
}

// TestValueMappingDatabaseTypes: arrays of the database's own enums,
// domains and composites map element by element, after a catalog lookup.
func TestValueMappingDatabaseTypes(t *testing.T) {
	db := pgtest.NewSampleDB(t)
	su, err := pgx.Connect(t.Context(), db.SuperuserDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer su.Close(context.Background())
	if _, err := su.Exec(t.Context(), `CREATE TYPE mood AS ENUM ('ok', 'not ok');
		CREATE DOMAIN posint AS int8 CHECK (VALUE > 0);
		CREATE TYPE pair AS (a int, b text);
		CREATE DOMAIN posint2 AS posint;
		CREATE DOMAIN flag AS bool; CREATE DOMAIN flag2 AS flag;
		CREATE DOMAIN intarr AS int4[];
		CREATE DOMAIN moods AS mood[]`); err != nil {
		t.Fatal(err)
	}
	tl := newTestTool(t, db.DSN(), 100)
	for sql, want := range map[string]string{
		`SELECT 'ok'::mood, ARRAY['ok', 'not ok']::mood[], 5::posint, ARRAY[5, 9007199254740993]::posint[], ARRAY[ROW(1, 'x y')::pair]`: `[["ok",["ok","not ok"],5,[5,"9007199254740993"],["(1,\"x y\")"]]]`,
		// Domains over domains, and a domain over an array as an element.
		`SELECT 5::posint2, ARRAY[5]::posint2[], true::flag2, ARRAY[true]::flag2[], '{1,2}'::intarr, ARRAY['{1,2}'::intarr]`: `[[5,[5],true,[true],[1,2],[[1,2]]]]`,
		// In the catalog's array category but printed without braces.
		`SELECT '1 2'::int2vector, '1 2'::oidvector`: `[["1 2","1 2"]]`,
		// An element that is an array of a database type no column has.
		`SELECT ARRAY['{ok}'::moods]`: `[[[["ok"]]]]`,
	} {
		res, err := tl.Call(context.Background(), mustArgs(t, sql))
		if err != nil {
			t.Errorf("%s: %v", sql, err)
			continue
		}
		var raw map[string]jsontext.Value
		if err := json.Unmarshal(res.Structured, &raw); err != nil {
			t.Fatal(err)
		}
		if got := string(raw["rows"]); got != want {
			t.Errorf("%s\n got %s\nwant %s", sql, got, want)
		}
	}

	// A result cut by the byte bound loses its connection before the
	// catalog lookup; the arrays map the same all the same.
	pol, err := NewPolicy()
	if err != nil {
		t.Fatal(err)
	}
	ex, err := NewExecutor(db.DSN(), ExecOptions{MaxConns: 1, MaxResultBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	prep, err := pol.Prepare(`SELECT ARRAY['ok']::mood[] FROM generate_series(1, 1000)`, 1000)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := ex.Run(t.Context(), prep)
	if err != nil {
		t.Fatal(err)
	}
	if !rs.Truncated || rs.RowCount == 0 {
		t.Fatalf("%d rows, truncated %v; want a cut result", rs.RowCount, rs.Truncated)
	}
	if got, ok := rs.Rows[0][0].([]any); !ok || len(got) != 1 || got[0] != "ok" {
		t.Errorf("first row of a cut result = %#v, want [\"ok\"]", rs.Rows[0][0])
	}
}

// TestValueMappingInvalidUTF8: a SQL_ASCII database stores bytes that are
// not UTF-8; they come back with U+FFFD in their place, not as a failed
// call.
func TestValueMappingInvalidUTF8(t *testing.T) {
	db := pgtest.NewDB(t)
	su, err := pgx.Connect(t.Context(), db.SuperuserDSN())
	if err != nil {
		t.Fatal(err)
	}
	name := db.Name + "_ascii"
	if _, err := su.Exec(t.Context(), "CREATE DATABASE "+name+" ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := su.Exec(context.Background(), "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Error(err)
		}
		su.Close(context.Background())
	})
	tl := newTestTool(t, db.Cluster.DSN(name), 10)
	res, err := tl.Call(context.Background(), mustArgs(t, `SELECT 'caf' || chr(233), ARRAY['x' || chr(255)]`))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]jsontext.Value
	if err := json.Unmarshal(res.Structured, &raw); err != nil {
		t.Fatal(err)
	}
	if got, want := string(raw["rows"]), "[[\"caf\uFFFD\",[\"x\uFFFD\"]]]"; got != want {
		t.Errorf("rows = %s, want %s", got, want)
	}
}

func mustArgs(t *testing.T, sql string) jsontext.Value {
	t.Helper()
	b, err := json.Marshal(map[string]any{"query": sql})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
