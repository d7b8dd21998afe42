package sqlquery

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// The differential property: a query the policy allows never fails inside
// the executor's read-only transaction with a read-only violation (25006,
// or 25001 for SET TRANSACTION READ WRITE after the first query). Such a
// failure means the query tried to write and the policy missed it; the
// transaction, the second line, caught it. The property is checked over
// the corpus and over queries composed at random from a grammar of
// fragments, writes and side-effecting functions included.
//
// It holds for PostgreSQL's own functions: a function of the database that
// writes is invisible to a parse tree (see
// TestToolUserFunctionWriteStoppedByTransaction), so the generator never
// calls one.

// differentialCount is how many queries the generator composes. The seed
// is fixed, so every run checks the same queries.
const differentialCount = 2000

// readOnlyFailure runs prep and reports the read-only violation it hit, or
// "".
func readOnlyFailure(t *testing.T, ex *Executor, prep *Prepared) (string, error) {
	t.Helper()
	_, err := ex.Run(t.Context(), prep)
	if readOnlyViolation(err) {
		return err.Error(), err
	}
	return "", err
}

// errorClass names the outcome of an allowed query for the summary.
func errorClass(err error) string {
	if err == nil {
		return "ok"
	}
	var prob *problem.Problem
	if errors.As(err, &prob) {
		if s, ok := prob.Metadata["sqlstate"].(string); ok {
			return "SQLSTATE " + s
		}
		return string(prob.Code)
	}
	return "internal"
}

func summarize(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, counts[k])
	}
	return strings.Join(parts, ", ")
}

func TestDifferentialCorpus(t *testing.T) {
	h := newDBHarness(t)
	ex := h.executor(t, 2*time.Second)
	pol := newTestPolicy(t)
	base := h.snapshot(t)
	outcomes := map[string]int{}
	for _, e := range loadCorpus(t) {
		prep, err := pol.Prepare(e.SQL, corpusMaxRows)
		if err != nil {
			continue
		}
		msg, err := readOnlyFailure(t, ex, prep)
		if msg != "" {
			t.Errorf("the policy allowed %q (as %q), which tried to write: %s", e.SQL, prep.SQL, msg)
		}
		outcomes[errorClass(err)]++
	}
	if d := diffSnapshots(base, h.snapshot(t)); d != "" {
		t.Fatalf("allowed corpus entries changed the database:\n%s", d)
	}
	t.Logf("allowed corpus entries: %s", summarize(outcomes))
}

func TestDifferentialGenerated(t *testing.T) {
	h := newDBHarness(t)
	ex := h.executor(t, 2*time.Second)
	pol := newTestPolicy(t)
	base := h.snapshot(t)
	_, baseSession := pooledSession(t, ex)
	g := &sqlGen{r: rand.New(rand.NewPCG(20260728, 1))}
	seen := map[string]bool{}
	allowedOutcomes := map[string]int{}
	var allowed, denied int
	for range differentialCount {
		q := g.statement()
		if seen[q] {
			continue
		}
		seen[q] = true
		prep, err := pol.Prepare(q, 100)
		if err != nil {
			var prob *problem.Problem
			if !errors.As(err, &prob) || (prob.Code != problem.QueryViolation && prob.Code != problem.Validation) {
				t.Errorf("Prepare(%q): %v, want a policy or validation problem", q, err)
			}
			denied++
			continue
		}
		allowed++
		msg, err := readOnlyFailure(t, ex, prep)
		if msg != "" {
			t.Errorf("the policy allowed %q (as %q), which tried to write: %s", q, prep.SQL, msg)
		}
		allowedOutcomes[errorClass(err)]++
	}
	if d := diffSnapshots(base, h.snapshot(t)); d != "" {
		t.Fatalf("generated queries changed the database:\n%s", d)
	}
	if _, session := pooledSession(t, ex); diffLines(baseSession, session) != "" {
		t.Fatalf("generated queries changed the pooled session:\n%s", diffLines(baseSession, session))
	}
	// The generator must exercise both sides, or the property is vacuous.
	if allowed < len(seen)/10 || denied < len(seen)/10 {
		t.Errorf("generator is lopsided: %d allowed, %d denied of %d", allowed, denied, len(seen))
	}
	t.Logf("%d distinct generated queries: %d allowed, %d denied", len(seen), allowed, denied)
	t.Logf("allowed queries on the server: %s", summarize(allowedOutcomes))
}

// sqlGen composes SQL from fragments. It aims at the places a write or a
// side effect can hide (CTEs, subqueries, LATERAL, functions in FROM, set
// operations, VALUES, ORDER BY, locking clauses, quoting tricks), so that
// a hole in the policy's walk or denylist shows up as an allowed query the
// database refuses as a write.
type sqlGen struct {
	r     *rand.Rand
	depth int
}

func (g *sqlGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g *sqlGen) chance(p float64) bool { return g.r.Float64() < p }

// tables of the fixture (testdata/policy_fixture.sql plus harnessFixture)
// with a few of their columns.
var genTables = []struct{ name, cols string }{
	{"customers", "id,name,email,country,account_manager_id"},
	{"orders", "id,customer_id,amount,status"},
	{"products", "id,name,category,price,supplier_id"},
	{"order_items", "order_id,product_id,qty,price"},
	{"employees", "id,name,manager_id,dept_id,salary"},
	{"t", "a"},
	{"counters", "id,n"},
}

// genFunctions are calls with fitting arguments: harmless ones, and ones
// with effects (the policy must deny these; nextval and setval, if they
// got through, fail with 25006 in the read-only transaction).
var genFunctions = []string{
	"lower('A')", "upper(%s::text)", "length(%s::text)", "coalesce(%s, %s)", "greatest(1, 2)",
	"now()", "random()", "abs(-1)", "md5('x')", "to_char(now(), 'YYYY')", "current_setting('TimeZone')",
	"pg_backend_pid()", "version()", "gen_random_uuid()", "pg_typeof(%s)", "array_length(ARRAY[1, 2], 1)",
	"jsonb_build_object('k', %s)", "row_to_json(ROW(1, 2))", "pg_sequence_last_value('order_seq')",
	"txid_current_if_assigned()", "pg_export_snapshot()", "currval('order_seq')", "lo_get(1234)",
	// Denied: effects that survive a rollback or need one.
	"nextval('order_seq')", "setval('order_seq', 5)", "nextval('counters_id_seq')", "pg_catalog.nextval('order_seq')",
	"\"nextval\"('order_seq')", "U&\"next\\0076al\"('order_seq')", "NEXTVAL('order_seq')",
	"set_config('search_path', 'evil', false)", "set_config('default_transaction_read_only', 'off', false)",
	"pg_advisory_lock(1)", "pg_try_advisory_lock(2)", "pg_advisory_xact_lock(3)", "pg_sleep(0)",
	"lo_create(0)", "lo_unlink(1234)", "lo_import('/etc/passwd')", "pg_read_file('/etc/passwd')",
	"pg_notify('c', 'x')", "txid_current()", "pg_current_xact_id()", "pg_terminate_backend(0)",
	"query_to_xml('DELETE FROM t RETURNING a', true, false, '')", "pg_stat_reset()",
	"dblink_exec('dbname=x', 'DELETE FROM t')", "setseed(0.5)",
}

// genWrites are data-modifying statements that may appear in a WITH.
var genWrites = []string{
	"DELETE FROM t RETURNING a",
	"DELETE FROM orders WHERE id = 1 RETURNING id",
	"INSERT INTO t VALUES (1) RETURNING a",
	"INSERT INTO counters (n) VALUES (1) RETURNING id",
	"UPDATE t SET a = a + 1 RETURNING a",
	"UPDATE orders SET amount = 0 RETURNING id",
	"INSERT INTO t SELECT a FROM t RETURNING a",
}

func (g *sqlGen) expr() string {
	g.depth++
	defer func() { g.depth-- }()
	if g.depth > 3 {
		return g.literal()
	}
	switch g.r.IntN(9) {
	case 0, 1:
		return g.literal()
	case 2, 3:
		f := g.pick(genFunctions...)
		for strings.Contains(f, "%s") {
			f = strings.Replace(f, "%s", g.expr(), 1)
		}
		return f
	case 4:
		return "(" + g.selectStmt(false) + ")"
	case 5:
		return "EXISTS (" + g.selectStmt(false) + ")"
	case 6:
		return "CASE WHEN " + g.expr() + " IS NULL THEN " + g.expr() + " ELSE " + g.expr() + " END"
	case 7:
		return "(" + g.expr() + ")::text"
	default:
		return g.expr() + " " + g.pick("=", "<>", "||", "IS DISTINCT FROM") + " " + g.expr()
	}
}

func (g *sqlGen) literal() string {
	return g.pick("1", "'x'", "NULL", "true", "2.5", "E'\\''", "$$ DELETE FROM t $$", "'a; DROP TABLE t; --'", "U&'\\0041'")
}

// from returns a FROM item and the column names it offers.
func (g *sqlGen) from() (string, []string) {
	tb := genTables[g.r.IntN(len(genTables))]
	cols := strings.Split(tb.cols, ",")
	switch g.r.IntN(8) {
	case 0:
		return "(" + g.selectStmt(false) + ") s", []string{"*"}
	case 1:
		return "generate_series(1, 3) AS g(n)", []string{"n"}
	case 2:
		return tb.name + " x CROSS JOIN LATERAL (" + g.selectStmt(false) + ") l", cols
	case 3:
		return "ROWS FROM (generate_series(1, 2), " + g.pick(genFunctions...) + ") AS r(a, b)", []string{"a"}
	case 4:
		o := genTables[g.r.IntN(len(genTables))]
		return tb.name + " JOIN " + o.name + " j ON " + g.expr() + " IS NOT NULL", []string{"*"}
	case 5:
		return "(VALUES (" + g.expr() + "), (" + g.expr() + ")) AS v(c)", []string{"c"}
	default:
		return tb.name, cols
	}
}

func (g *sqlGen) target(cols []string) string {
	if g.chance(0.5) {
		return cols[g.r.IntN(len(cols))]
	}
	return g.expr()
}

// selectStmt composes a SELECT; top says whether it may carry clauses
// only a root statement takes.
func (g *sqlGen) selectStmt(top bool) string {
	g.depth++
	defer func() { g.depth-- }()
	if g.depth > 4 {
		return "SELECT " + g.literal()
	}
	var b strings.Builder
	if g.chance(0.3) {
		b.WriteString(g.with())
	}
	switch g.r.IntN(10) {
	case 0:
		b.WriteString("VALUES (" + g.expr() + ")")
		return b.String()
	case 1:
		b.WriteString("TABLE " + genTables[g.r.IntN(len(genTables))].name)
		return b.String()
	case 2:
		b.WriteString("SELECT " + g.expr() + " " + g.pick("UNION ALL", "UNION", "INTERSECT", "EXCEPT") + " (" + g.selectStmt(false) + ")")
		return b.String()
	}
	from, cols := g.from()
	b.WriteString("SELECT " + g.target(cols))
	if g.chance(0.3) {
		b.WriteString(", " + g.target(cols))
	}
	if top && g.chance(0.05) {
		b.WriteString(" INTO " + g.pick("new_table", "TEMP tmp"))
	}
	b.WriteString(" FROM " + from)
	if g.chance(0.4) {
		b.WriteString(" WHERE " + g.expr() + " IS NOT NULL")
	}
	ordered := g.chance(0.2)
	if ordered {
		b.WriteString(" ORDER BY " + g.pick("1", g.expr()))
	}
	switch {
	case ordered && g.chance(0.3):
		b.WriteString(" " + g.pick("FETCH FIRST 1 ROW WITH TIES", "OFFSET 1 FETCH FIRST 2 ROWS WITH TIES", "FETCH FIRST (SELECT 2) ROWS WITH TIES"))
	case g.chance(0.3):
		b.WriteString(" LIMIT " + g.pick("1", "5", "100000", "ALL", "(SELECT 2)", "2 OFFSET 1", "NULL"))
	case g.chance(0.1):
		b.WriteString(" OFFSET " + g.pick("1", "3", "(SELECT 1)"))
	}
	if g.chance(0.1) {
		b.WriteString(" " + g.pick("FOR UPDATE", "FOR SHARE", "FOR NO KEY UPDATE", "FOR KEY SHARE", "FOR UPDATE SKIP LOCKED", "FOR SHARE NOWAIT"))
	}
	return b.String()
}

func (g *sqlGen) with() string {
	n := 1 + g.r.IntN(2)
	parts := make([]string, n)
	for i := range parts {
		body := g.selectStmt(false)
		if g.chance(0.25) {
			body = g.pick(genWrites...)
		}
		parts[i] = fmt.Sprintf("w%d AS %s(%s)", g.depth*10+i, g.pick("", "MATERIALIZED ", "NOT MATERIALIZED "), body)
	}
	return "WITH " + strings.Join(parts, ", ") + " "
}

// statement composes a whole query: mostly SELECTs, sometimes a statement
// of another kind, two statements, or comment and quoting tricks.
func (g *sqlGen) statement() string {
	switch g.r.IntN(20) {
	case 0:
		return g.pick(genWrites...)
	case 1:
		return "EXPLAIN ANALYZE " + g.pick(genWrites...)
	case 2:
		return g.selectStmt(true) + "; " + g.pick("DELETE FROM t", "COMMIT", "SET TRANSACTION READ WRITE", "SELECT 1")
	case 3:
		return g.pick("COMMIT; ", "SET TRANSACTION READ WRITE; ", "ROLLBACK; ") + g.pick(genWrites...)
	case 4:
		return g.selectStmt(true) + " -- ; DELETE FROM t"
	case 5:
		return "SELECT E'\\'', " + g.expr() + " -- '"
	case 6:
		return "COPY (" + g.selectStmt(false) + ") TO STDOUT"
	}
	return g.selectStmt(true)
}
