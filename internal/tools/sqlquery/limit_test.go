package sqlquery

import (
	"testing"

	"github.com/mcp-bastion/bastion/internal/problem"
)

func TestPrepareLimit(t *testing.T) {
	p := newTestPolicy(t)
	tests := []struct {
		name    string
		query   string
		maxRows int64
		wantSQL string
		limit   int64
		probe   bool
	}{
		{"missing", "SELECT 1", 1000, "SELECT 1 LIMIT 1001", 1000, true},
		{"literal below", "SELECT 1 LIMIT 5", 1000, "SELECT 1 LIMIT 5", 5, false},
		{"literal equal", "SELECT 1 LIMIT 1000", 1000, "SELECT 1 LIMIT 1000", 1000, false},
		{"literal above", "SELECT 1 LIMIT 1001", 1000, "SELECT 1 LIMIT 1001", 1000, true},
		{"literal far above", "SELECT 1 LIMIT 5000", 1000, "SELECT 1 LIMIT 1001", 1000, true},
		{"beyond int32", "SELECT 1 LIMIT 3000000000", 1000, "SELECT 1 LIMIT 1001", 1000, true},
		{"beyond int64", "SELECT 1 LIMIT 99999999999999999999999", 1000, "SELECT 1 LIMIT 1001", 1000, true},
		{"zero", "SELECT 1 LIMIT 0", 1000, "SELECT 1 LIMIT 0", 0, false},
		{"ALL", "SELECT 1 LIMIT ALL", 1000, "SELECT 1 LIMIT 1001", 1000, true},
		{"NULL", "SELECT 1 LIMIT NULL", 1000, "SELECT 1 LIMIT 1001", 1000, true},
		{"decimal rounds up", "SELECT 1 LIMIT 2.5", 1000, "SELECT 1 LIMIT 3", 3, false},
		{"decimal rounds down", "SELECT 1 LIMIT 2.49", 1000, "SELECT 1 LIMIT 2", 2, false},
		{"exponent", "SELECT 1 LIMIT 1e2", 1000, "SELECT 1 LIMIT 100", 100, false},
		{"small negative decimal rounds to zero", "SELECT 1 LIMIT -0.4", 1000, "SELECT 1 LIMIT 0", 0, false},
		{"hex", "SELECT 1 LIMIT 0x10", 1000, "SELECT 1 LIMIT 16", 16, false},
		{"underscores", "SELECT 1 LIMIT 1_0", 1000, "SELECT 1 LIMIT 10", 10, false},
		{"large hex is clamped", "SELECT 1 LIMIT 0x1_0000_0000", 1000, "SELECT 1 LIMIT 1001", 1000, true},
		{"string literal is not a number", "SELECT 1 LIMIT '5'", 1000, "SELECT 1 LIMIT 1001", 1000, true},
		{"subquery", "SELECT 1 LIMIT (SELECT 5)", 1000, "SELECT 1 LIMIT 1001", 1000, true},
		{"expression", "SELECT 1 LIMIT 2 + 3", 1000, "SELECT 1 LIMIT 1001", 1000, true},
		{"cast", "SELECT 1 LIMIT 5::bigint", 1000, "SELECT 1 LIMIT 1001", 1000, true},
		{"parenthesised literal", "SELECT 1 LIMIT (5)", 1000, "SELECT 1 LIMIT 5", 5, false},
		{"offset kept", "SELECT 1 OFFSET 3", 1000, "SELECT 1 LIMIT 1001 OFFSET 3", 1000, true},
		{"offset and limit", "SELECT 1 LIMIT 5 OFFSET 3", 1000, "SELECT 1 LIMIT 5 OFFSET 3", 5, false},
		{"offset subquery kept", "SELECT 1 OFFSET (SELECT 1)", 1000, "SELECT 1 LIMIT 1001 OFFSET (SELECT 1)", 1000, true},
		{"fetch first", "SELECT 1 FETCH FIRST 3 ROWS ONLY", 1000, "SELECT 1 LIMIT 3", 3, false},
		{"fetch first above", "SELECT 1 FETCH FIRST 3000 ROWS ONLY", 1000, "SELECT 1 LIMIT 1001", 1000, true},
		{"fetch first row", "SELECT 1 FETCH FIRST ROW ONLY", 1000, "SELECT 1 LIMIT 1", 1, false},
		{"offset fetch next", "SELECT 1 OFFSET 2 ROWS FETCH NEXT 4 ROWS ONLY", 1000, "SELECT 1 LIMIT 4 OFFSET 2", 4, false},
		{"with ties", "SELECT 1 ORDER BY 1 FETCH FIRST 5 ROWS WITH TIES", 1000, "SELECT 1 ORDER BY 1 LIMIT 1001", 1000, true},
		{"with ties above", "SELECT 1 ORDER BY 1 FETCH FIRST 5000 ROWS WITH TIES", 1000, "SELECT 1 ORDER BY 1 LIMIT 1001", 1000, true},
		{"union: limit applies to the whole set operation", "SELECT 1 UNION SELECT 2", 1000, "SELECT 1 UNION SELECT 2 LIMIT 1001", 1000, true},
		{"union with outer limit", "SELECT 1 UNION SELECT 2 LIMIT 7", 1000, "SELECT 1 UNION SELECT 2 LIMIT 7", 7, false},
		{"branch limits kept, outer added", "(SELECT 1 LIMIT 2) UNION ALL (SELECT 2 LIMIT 3000)", 1000,
			"(SELECT 1 LIMIT 2) UNION ALL (SELECT 2 LIMIT 3000) LIMIT 1001", 1000, true},
		{"branch limits kept, outer clamped", "(SELECT 1 LIMIT 2) UNION (SELECT 2 LIMIT 3) ORDER BY 1 LIMIT 7000", 1000,
			"(SELECT 1 LIMIT 2) UNION (SELECT 2 LIMIT 3) ORDER BY 1 LIMIT 1001", 1000, true},
		{"parenthesised query", "(SELECT 1 LIMIT 5)", 1000, "SELECT 1 LIMIT 5", 5, false},
		{"doubly parenthesised query", "((SELECT 1))", 1000, "SELECT 1 LIMIT 1001", 1000, true},
		{"CTE: inner limit kept", "WITH x AS (SELECT 1 LIMIT 99999) SELECT * FROM x", 1000,
			"WITH x AS (SELECT 1 LIMIT 99999) SELECT * FROM x LIMIT 1001", 1000, true},
		{"subquery limit kept", "SELECT * FROM (SELECT 1 LIMIT 99999) s LIMIT 2", 1000,
			"SELECT * FROM (SELECT 1 LIMIT 99999) s LIMIT 2", 2, false},
		{"VALUES", "VALUES (1), (2)", 1000, "VALUES (1), (2) LIMIT 1001", 1000, true},
		{"TABLE", "TABLE customers", 1000, "SELECT * FROM customers LIMIT 1001", 1000, true},
		{"max_rows 1", "SELECT 1 LIMIT 5", 1, "SELECT 1 LIMIT 2", 1, true},
		{"max_rows ceiling", "SELECT 1", MaxRowsCeiling, "SELECT 1 LIMIT 2147483647", MaxRowsCeiling, true},
		{"comment dropped", "SELECT 1 -- LIMIT 5\n", 1000, "SELECT 1 LIMIT 1001", 1000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.Prepare(tt.query, tt.maxRows)
			if err != nil {
				t.Fatalf("Prepare(%q, %d) = %v", tt.query, tt.maxRows, err)
			}
			want := Prepared{SQL: tt.wantSQL, Limit: tt.limit, Probe: tt.probe}
			if *got != want {
				t.Errorf("Prepare(%q, %d)\n got  %+v\n want %+v", tt.query, tt.maxRows, *got, want)
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
		{"SELECT 1 LIMIT -1", problem.Validation, "LIMIT must not be negative"},
		{"SELECT 1 LIMIT -0.5", problem.Validation, "LIMIT must not be negative"},
		{"SELECT 1 LIMIT -3000000000", problem.Validation, "LIMIT must not be negative"},
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
		{Prepared{Limit: 10, Probe: true}, 11, true},
		{Prepared{Limit: 10, Probe: true}, 10, false},
		{Prepared{Limit: 10, Probe: true}, 3, false},
		{Prepared{Limit: 10, Probe: false}, 10, false},
		{Prepared{Limit: 0, Probe: false}, 0, false},
	}
	for _, tt := range tests {
		if got := tt.prep.Truncated(tt.seen); got != tt.want {
			t.Errorf("%+v.Truncated(%d) = %v, want %v", tt.prep, tt.seen, got, tt.want)
		}
	}
}

func TestDecimalToInt(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"2.5", 3, true},
		{"-2.5", -3, true},
		{"2.4999", 2, true},
		{"1e3", 1000, true},
		{"1.5E1", 15, true},
		{".5", 1, true},
		{"3000000000", 3000000000, true},
		{"99999999999999999999", 1<<63 - 1, true},
		{"-99999999999999999999", -1 << 63, true},
		{"0x1_0000_0000", 0, false},
		{"1_000_000_000_000", 0, false},
		{"0b1", 0, false},
		{"", 0, false},
		{"abc", 0, false},
	}
	for _, tt := range tests {
		got, ok := decimalToInt(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("decimalToInt(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
