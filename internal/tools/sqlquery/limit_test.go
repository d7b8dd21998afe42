package sqlquery

import (
	"slices"
	"testing"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// TestPrepareKeepsLimit: the policy never rewrites a query's LIMIT,
// OFFSET or FETCH … WITH TIES; the regenerated SQL says what the query
// said, and Limit is max_rows, the number of rows the executor hands back
// at most (it fetches one more to learn whether rows were cut).
func TestPrepareKeepsLimit(t *testing.T) {
	p := newTestPolicy(t)
	tests := []struct {
		name    string
		query   string
		maxRows int64
		wantSQL string
	}{
		{"missing", "SELECT 1", 1000, "SELECT 1"},
		{"literal below", "SELECT 1 LIMIT 5", 1000, "SELECT 1 LIMIT 5"},
		{"literal above", "SELECT 1 LIMIT 5000", 1000, "SELECT 1 LIMIT 5000"},
		{"beyond int64", "SELECT 1 LIMIT 99999999999999999999999", 1000, "SELECT 1 LIMIT 99999999999999999999999"},
		{"ALL", "SELECT 1 LIMIT ALL", 1000, "SELECT 1 LIMIT ALL"},
		{"NULL", "SELECT 1 LIMIT NULL", 1000, "SELECT 1 LIMIT ALL"},
		{"negative is the database's to refuse", "SELECT 1 LIMIT -1", 1000, "SELECT 1 LIMIT -1"},
		{"subquery", "SELECT 1 LIMIT (SELECT 5)", 1000, "SELECT 1 LIMIT (SELECT 5)"},
		{"offset", "SELECT 1 OFFSET 3", 1000, "SELECT 1 OFFSET 3"},
		{"offset and limit", "SELECT 1 LIMIT 5 OFFSET 3", 1000, "SELECT 1 LIMIT 5 OFFSET 3"},
		{"fetch first", "SELECT 1 FETCH FIRST 3 ROWS ONLY", 1000, "SELECT 1 LIMIT 3"},
		{"with ties", "SELECT 1 ORDER BY 1 FETCH FIRST 5 ROWS WITH TIES", 1000, "SELECT 1 ORDER BY 1 FETCH FIRST 5 ROWS WITH TIES"},
		{"with ties and offset", "SELECT a FROM t ORDER BY a OFFSET 1 ROW FETCH FIRST 1 ROW WITH TIES", 1000,
			"SELECT a FROM t ORDER BY a FETCH FIRST 1 ROWS WITH TIES OFFSET 1"},
		{"union", "SELECT 1 UNION SELECT 2 LIMIT 7", 1000, "SELECT 1 UNION SELECT 2 LIMIT 7"},
		{"TABLE", "TABLE customers", 1000, "SELECT * FROM customers"},
		{"max_rows ceiling", "SELECT 1", MaxRowsCeiling, "SELECT 1"},
		{"comment dropped", "SELECT 1 -- LIMIT 5\n", 1000, "SELECT 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.Prepare(tt.query, tt.maxRows)
			if err != nil {
				t.Fatalf("Prepare(%q, %d) = %v", tt.query, tt.maxRows, err)
			}
			if got.SQL != tt.wantSQL || got.Limit != tt.maxRows {
				t.Errorf("Prepare(%q, %d) = %q, limit %d; want %q, limit %d", tt.query, tt.maxRows, got.SQL, got.Limit, tt.wantSQL, tt.maxRows)
			}
			checkPrepared(t, p, got, tt.maxRows)
		})
	}
}

func TestPrepareLimitRefused(t *testing.T) {
	p := newTestPolicy(t)
	tests := []struct {
		query  string
		code   problem.Code
		detail string
	}{
		{"SELECT 1 LIMIT $1", problem.QueryViolation, "bind parameter $1 is not allowed; write the value as a literal"},
		{"SELECT 1 FETCH FIRST $1 ROWS ONLY", problem.QueryViolation, "bind parameter $1 is not allowed; write the value as a literal"},
		{"SELECT 1 OFFSET $1", problem.QueryViolation, "bind parameter $1 is not allowed; write the value as a literal"},
		{"SELECT 1 LIMIT (SELECT nextval('s'))", problem.QueryViolation, "function nextval is not allowed"},
	}
	for _, tt := range tests {
		_, err := p.Prepare(tt.query, 1000)
		if err == nil {
			t.Errorf("Prepare(%q) accepted, want %s", tt.query, tt.code)
			continue
		}
		prob := asProblem(t, err)
		if prob.Code != tt.code || prob.Detail != tt.detail {
			t.Errorf("Prepare(%q) = %s %q, want %s %q", tt.query, prob.Code, prob.Detail, tt.code, tt.detail)
		}
	}
}

func TestPrepareMaxRowsRange(t *testing.T) {
	p := newTestPolicy(t)
	for _, n := range []int64{0, -1, MaxRowsCeiling + 1, 1 << 62} {
		_, err := p.Prepare("SELECT 1", n)
		if err == nil {
			t.Errorf("Prepare(max_rows %d) accepted", n)
			continue
		}
		prob := asProblem(t, err)
		if prob.Code != problem.Validation || len(prob.InvalidParams) != 1 || prob.InvalidParams[0] != "max_rows" {
			t.Errorf("Prepare(max_rows %d) = %s %v, want %s [max_rows]", n, prob.Code, prob.InvalidParams, problem.Validation)
		}
	}
}

func TestTruncated(t *testing.T) {
	tests := []struct {
		prep Prepared
		seen int64
		want bool
	}{
		{Prepared{Limit: 10}, 11, true},
		{Prepared{Limit: 10}, 10, false},
		{Prepared{Limit: 10}, 3, false},
		{Prepared{Limit: 0}, 0, false},
		{Prepared{Limit: 0}, 1, true},
	}
	for _, tt := range tests {
		if got := tt.prep.Truncated(tt.seen); got != tt.want {
			t.Errorf("%+v.Truncated(%d) = %v, want %v", tt.prep, tt.seen, got, tt.want)
		}
	}
}

// TestPrepareFunctions: every function a query may call by a name the
// catalog could resolve is listed for the catalog check, once, in the order
// the walk meets it (a SELECT's target list comes before its WITH clause
// in the tree), pg_catalog-qualified names too; and so is the name an
// SQL/JSON construct would have as a call on a server older than its
// syntax.
func TestPrepareFunctions(t *testing.T) {
	p := newTestPolicy(t)
	tests := []struct {
		query string
		want  []FuncRef
	}{
		{"SELECT 1", nil},
		{"SELECT count(*) FROM t", []FuncRef{{Name: "count"}}},
		{"SELECT pg_catalog.lower('A'), information_schema._pg_truetypid(NULL, NULL)",
			[]FuncRef{{Schema: "pg_catalog", Name: "lower"}, {Schema: "information_schema", Name: "_pg_truetypid"}}},
		{"SELECT JSON_SCALAR(1), JSON_ARRAY(1, 2), JSON_OBJECT(), JSON_VALUE('{}'::jsonb, '$.a'), JSON('{}'::text)",
			[]FuncRef{{Name: "json_scalar"}, {Name: "json_array"}, {Name: "json_object"}, {Name: "json_value"}, {Name: "json"}}},
		{"SELECT Lower('A'), LOWER('b')", []FuncRef{{Name: "lower"}}},
		{`SELECT "Lower"('A')`, []FuncRef{{Name: "Lower"}}},
		{"SELECT app.f(1), db.app.g()", []FuncRef{{Schema: "app", Name: "f"}, {Schema: "app", Name: "g"}}},
		{"SELECT pg_temp.f()", []FuncRef{{Schema: "pg_temp", Name: "f"}}},
		{"SELECT c.total FROM customers c", []FuncRef{{Name: "total", Attribute: true}}},
		{"SELECT total FROM customers", nil},
		{"SELECT c.* FROM customers c", nil},
		{"SELECT (c).total, (c).a[1] FROM customers c", []FuncRef{{Name: "total", Attribute: true}, {Name: "a", Attribute: true}}},
		{"SELECT (0.5::float8).pg_sleep, a.b.pg_terminate_backend, (x).\"PG_SLEEP\" FROM t a",
			[]FuncRef{{Name: "pg_sleep", Attribute: true, Refused: "is not allowed"}, {Name: "pg_terminate_backend", Attribute: true, Refused: "is not allowed"},
				{Name: "PG_SLEEP", Attribute: true}}},
		{"SELECT * FROM generate_series(1, 3) g WHERE g > abs(-1)", []FuncRef{{Name: "generate_series"}, {Name: "abs"}}},
		{"SELECT * FROM t TABLESAMPLE bernoulli (10)", []FuncRef{{Name: "bernoulli"}}},
		{"WITH x AS (SELECT f(a) FROM t) SELECT g() FROM x", []FuncRef{{Name: "g"}, {Name: "f"}}},
	}
	for _, tt := range tests {
		prep, err := p.Prepare(tt.query, 10)
		if err != nil {
			t.Errorf("Prepare(%q): %v", tt.query, err)
			continue
		}
		if !slices.Equal(prep.Functions, tt.want) {
			t.Errorf("Prepare(%q).Functions = %+v, want %+v", tt.query, prep.Functions, tt.want)
		}
	}

	// In allowlist mode an attribute name off the list is refused too,
	// when a function of that name could be called.
	lp, err := NewPolicy(WithAllowedFunctions("lower"))
	if err != nil {
		t.Fatal(err)
	}
	prep, err := lp.Prepare("SELECT c.lower, c.upper FROM customers c", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []FuncRef{{Name: "lower", Attribute: true}, {Name: "upper", Attribute: true, Refused: "is not on the allowlist"}}
	if !slices.Equal(prep.Functions, want) {
		t.Errorf("allowlist: Functions = %+v, want %+v", prep.Functions, want)
	}
}
