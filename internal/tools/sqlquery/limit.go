package sqlquery

import (
	"math/big"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// clampLimit rewrites the outer LIMIT of sel in place, by the rule
// documented on [Prepared], and returns the Prepared without its SQL.
// sel is the root of the statement, so for a set operation its LIMIT
// applies to the whole UNION/INTERSECT/EXCEPT. OFFSET is left alone.
func clampLimit(sel *pg.SelectStmt, maxRows int64) (*Prepared, *problem.Problem) {
	prep := &Prepared{Limit: maxRows, Probe: true}
	if sel.GetLimitOption() != pg.LimitOption_LIMIT_OPTION_WITH_TIES {
		// WITH TIES may return any number of rows past n, so it is
		// treated like no limit at all.
		if v, ok := constInt(sel.GetLimitCount()); ok {
			if v < 0 {
				return nil, problem.New(problem.Validation, "LIMIT must not be negative", "query")
			}
			if v <= maxRows {
				prep.Limit, prep.Probe = v, false
			}
		}
	}
	sel.LimitCount = pg.MakeAConstIntNode(prep.fetchLimit(), -1)
	sel.LimitOption = pg.LimitOption_LIMIT_OPTION_COUNT
	return prep, nil
}

// constInt returns the value PostgreSQL would give a LIMIT written as the
// numeric literal n: integers as they are, decimals rounded half away
// from zero (numeric to bigint). Values beyond int64 saturate, which is
// all a clamp needs. It reports false for anything else — no limit, ALL,
// NULL, strings, expressions — and for literal spellings it does not
// read (large hexadecimal, octal or binary literals, digits with '_'),
// which are then treated as no limit and clamped, the safe direction.
func constInt(n *pg.Node) (int64, bool) {
	c := n.GetAConst()
	if c == nil || c.GetIsnull() {
		return 0, false
	}
	switch v := c.GetVal().(type) {
	case *pg.A_Const_Ival:
		return int64(v.Ival.GetIval()), true
	case *pg.A_Const_Fval:
		return decimalToInt(v.Fval.GetFval())
	}
	return 0, false
}

// decimalToInt rounds a decimal literal (digits, optional point, optional
// exponent, optional sign) half away from zero, saturating at the int64
// range.
func decimalToInt(s string) (int64, bool) {
	if s == "" || strings.Trim(s, "0123456789.eE+-") != "" || strings.HasPrefix(strings.TrimLeft(s, "+-"), "0x") {
		return 0, false
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return 0, false
	}
	// round(|r|) = floor((2|num| + den) / (2 den))
	num := new(big.Int).Abs(r.Num())
	den := r.Denom()
	q := new(big.Int).Div(new(big.Int).Add(new(big.Int).Lsh(num, 1), den), new(big.Int).Lsh(den, 1))
	if r.Sign() < 0 {
		q.Neg(q)
	}
	switch {
	case q.IsInt64():
		return q.Int64(), true
	case q.Sign() < 0:
		return -1 << 63, true
	default:
		return 1<<63 - 1, true
	}
}
