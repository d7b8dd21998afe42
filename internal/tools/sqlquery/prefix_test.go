package sqlquery

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// The clamp property: the rows read_only_sql returns are a prefix of what
// PostgreSQL returns for the caller's query itself, in the same kind of
// transaction, and truncated is true exactly when rows were cut. It is
// checked over every allowed corpus entry and over generated queries
// (the generator of differential_test.go, LIMIT, OFFSET and WITH TIES
// included), with max_rows small enough that most results are cut.

// prefixMaxRows is the max_rows of the property: small, so that the
// bound cuts most results.
const prefixMaxRows = 3

// prefixGenerated is how many generated queries must be compared.
const prefixGenerated = 2000

// originalBound is the generous outer bound on the rows read of the
// original query: more than any fixture table holds, and what stops an
// endless query.
const originalBound = 5000

// nondeterministic names what gives another value on every evaluation or
// in every transaction; a query using it cannot be compared row by row.
var nondeterministic = regexp.MustCompile(`(?i)random|now\(\)|gen_random_uuid|clock_timestamp|current_time|current_date|localtime|pg_backend_pid|txid_current|pg_export_snapshot|current_setting|pg_sequence_last_value` +
	// A TABLESAMPLE without REPEATABLE draws its own sample on every run
	// (SYSTEM picks whole blocks: all of a small table, or none of it).
	`|tablesample\s+\w+\s*\([^)]*\)\s*($|[^r\s])`)

// originalRows runs sql as the caller wrote it, in a read-only
// transaction with the executor's settings, on its own connection, and
// returns at most originalBound rows, and whether there were more.
func originalRows(t *testing.T, conn *pgx.Conn, ex *Executor, sql string) ([][][]byte, bool, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := conn.PgConn().Exec(ctx, ex.begin()).ReadAll(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := conn.PgConn().Exec(context.WithoutCancel(ctx), "ROLLBACK").ReadAll(); err != nil {
			t.Fatal(err)
		}
	}()
	rr := conn.PgConn().ExecParams(ctx, sql, nil, nil, nil, nil)
	var rows [][][]byte
	more := false
	for rr.NextRow() {
		if more {
			continue // what the server sent before the cancel
		}
		if len(rows) == originalBound {
			more = true
			if err := conn.PgConn().CancelRequest(ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		rows = append(rows, copyRow(rr.Values()))
	}
	_, err := rr.Close()
	if more {
		err = nil
	}
	return rows, more, err
}

// boundedRows runs prep as the executor does and returns its rows as
// PostgreSQL sent them, and whether the result says truncated.
func boundedRows(t *testing.T, ex *Executor, prep *Prepared) ([][][]byte, bool, error) {
	t.Helper()
	conn, err := ex.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	healthy := false
	q := &query{e: ex, conn: conn.Conn(), pc: conn.Conn().PgConn(), prep: prep}
	raws, err := q.runAndEnd(t.Context(), &healthy)
	if !healthy {
		conn.Conn().Close(context.Background())
	}
	conn.Release()
	return raws, q.cut || prep.Truncated(q.seen), err
}

// checkPrefix compares the bounded run of query with the original and
// reports whether it was compared (both ran).
func checkPrefix(t *testing.T, conn *pgx.Conn, ex *Executor, pol *Policy, query string) bool {
	t.Helper()
	prep, err := pol.Prepare(query, prefixMaxRows)
	if err != nil || nondeterministic.MatchString(query) {
		return false
	}
	got, truncated, err := boundedRows(t, ex, prep)
	if err != nil {
		var prob *problem.Problem
		if !errors.As(err, &prob) {
			t.Errorf("%q: %v", query, err)
		}
		return false // an error of the query: nothing to compare
	}
	want, more, err := originalRows(t, conn, ex, query)
	if err != nil {
		// The parser is newer than the server: the text as written
		// uses syntax this server does not read (0x1F), which the
		// regenerated SQL spells the old way. Nothing to compare.
		t.Logf("%q ran regenerated but not as written: %v", query, err)
		return false
	}
	if len(got) > prefixMaxRows {
		t.Errorf("%q: %d rows, more than max_rows %d", query, len(got), prefixMaxRows)
		return true
	}
	for i := range got {
		if i >= len(want) || !sameRow(got[i], want[i]) {
			t.Errorf("%q: row %d is not the query's row %d: the result is not a prefix of the query's (got %q, query has %d rows)",
				query, i+1, i+1, got, len(want))
			return true
		}
	}
	if cut := more || len(want) > len(got); truncated != cut {
		t.Errorf("%q: truncated = %v, but %d of the query's %d rows were returned", query, truncated, len(got), len(want))
	}
	return true
}

func sameRow(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if (a[i] == nil) != (b[i] == nil) || !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestClampIsPrefixCorpus checks the property over the corpus.
func TestClampIsPrefixCorpus(t *testing.T) {
	h := newDBHarness(t)
	ex := h.executor(t, 2*time.Second)
	conn, err := pgx.Connect(t.Context(), h.db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	pol := newTestPolicy(t)
	compared := 0
	for _, e := range loadCorpus(t) {
		if e.Verdict == "allow" && checkPrefix(t, conn, ex, pol, e.SQL) {
			compared++
		}
	}
	if compared < 80 {
		t.Errorf("only %d corpus entries compared", compared)
	}
	t.Logf("%d corpus entries compared", compared)
}

// TestClampIsPrefixGenerated checks the property over generated queries.
func TestClampIsPrefixGenerated(t *testing.T) {
	h := newDBHarness(t)
	ex := h.executor(t, 2*time.Second)
	conn, err := pgx.Connect(t.Context(), h.db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	pol := newTestPolicy(t)
	g := &sqlGen{r: rand.New(rand.NewPCG(20261201, 9))}
	seen := map[string]bool{}
	compared, attempts := 0, 0
	for compared < prefixGenerated {
		attempts++
		if attempts > 40*prefixGenerated {
			t.Fatalf("only %d of %d generated queries could be compared", compared, prefixGenerated)
		}
		q := g.statement()
		if seen[q] {
			continue
		}
		seen[q] = true
		if checkPrefix(t, conn, ex, pol, q) {
			compared++
		}
		if t.Failed() {
			return
		}
	}
	t.Logf("%d generated queries compared (%d generated)", compared, attempts)
}

// TestToolBoundKeepsLimitSemantics: the bound never adds a row the query
// did not select. FETCH … WITH TIES returns the row and its ties, a
// LIMIT computed by a subquery is obeyed, OFFSET skips what it skips.
func TestToolBoundKeepsLimitSemantics(t *testing.T) {
	h := newDBHarness(t)
	ex := h.executor(t, 5*time.Second)
	pol := newTestPolicy(t)
	const ties = "SELECT x FROM (VALUES (1), (1), (1), (2), (3)) v(x) ORDER BY x FETCH FIRST 1 ROW WITH TIES"
	for _, c := range []struct {
		sql       string
		maxRows   int64
		rows      int
		truncated bool
	}{
		{ties, 10, 3, false},
		{ties, 3, 3, false},
		{ties, 2, 2, true},
		{"SELECT x FROM generate_series(1, 10) x LIMIT (SELECT 2)", 10, 2, false},
		{"SELECT x FROM generate_series(1, 10) x OFFSET 8", 10, 2, false},
		{"SELECT x FROM generate_series(1, 10) x LIMIT 5 OFFSET 3", 4, 4, true},
		{"SELECT x FROM generate_series(1, 10) x LIMIT 5000", 4, 4, true},
		{"SELECT x FROM generate_series(1, 4) x", 4, 4, false},
	} {
		prep, err := pol.Prepare(c.sql, c.maxRows)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := ex.Run(t.Context(), prep)
		if err != nil {
			t.Fatalf("%q: %v", c.sql, err)
		}
		if rs.RowCount != c.rows || rs.Truncated != c.truncated {
			t.Errorf("%q, max_rows %d: %d rows, truncated %v; want %d, %v", c.sql, c.maxRows, rs.RowCount, rs.Truncated, c.rows, c.truncated)
		}
	}
}
