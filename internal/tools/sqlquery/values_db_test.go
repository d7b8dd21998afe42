package sqlquery

import (
	"context"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

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
		{`SELECT '2024-05-01 12:00:00.123456+02'::timestamptz, '2024-05-01 12:00:00'::timestamp, '2024-05-01'::date, 'infinity'::timestamptz`,
			`[["2024-05-01T10:00:00.123456Z","2024-05-01T12:00:00","2024-05-01","infinity"]]`},
		{`SELECT '1 day 2 hours 3 seconds'::interval, '12:30'::time`, `[["P1DT2H3S","12:30:00"]]`},
		{`SELECT '\x00ff10'::bytea, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, '10.0.0.1/8'::inet, '::1'::inet`,
			`[["AP8Q","a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","10.0.0.1/8","::1"]]`},
		{`SELECT ARRAY[1,2,3], ARRAY['a','b'], ARRAY[[1,2],[3,4]], ARRAY[1.5::numeric], ARRAY['2024-01-02'::date], ARRAY[9007199254740993::int8]`,
			`[[[1,2,3],["a","b"],[[1,2],[3,4]],["1.5"],["2024-01-02"],["9007199254740993"]]]`},
		{`SELECT NULL::int, NULL::text, true, 'é"\'::text`, `[[null,null,true,"é\"\\"]]`},
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

func mustArgs(t *testing.T, sql string) jsontext.Value {
	t.Helper()
	b, err := json.Marshal(map[string]any{"query": sql})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
