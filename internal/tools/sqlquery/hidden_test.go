package sqlquery

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/jackc/pgx/v5"
)

// These tests pin defects a review found in the checks behind the policy.

// TestCatalogCheckJudgesByOrigin: a VOLATILE function an extension (or a
// superuser) put in pg_catalog is the database's own, not PostgreSQL's:
// the catalog check refuses it however it is named, unless allowed.
func TestCatalogCheckJudgesByOrigin(t *testing.T) {
	h := newDBHarness(t)
	if _, err := h.su.Exec(t.Context(), `CREATE FUNCTION pg_catalog.fx_ext() RETURNS int LANGUAGE sql VOLATILE AS 'SELECT 1'`); err != nil {
		t.Fatal(err)
	}
	for _, allow := range [][]string{nil, {"pg_catalog.fx_ext"}} {
		ex, err := NewExecutor(h.db.DSN(), ExecOptions{MaxConns: 1, AllowFunctions: allow})
		if err != nil {
			t.Fatal(err)
		}
		tl, err := NewTool(newTestPolicy(t), ex, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, sql := range []string{"SELECT pg_catalog.fx_ext()", "SELECT fx_ext()"} {
			_, err := tl.Call(t.Context(), toolArgs(t, sql))
			switch got := executorRefusal(err); {
			case allow == nil && got != "catalog":
				t.Errorf("%q: %s, want a refusal by the catalog check", sql, got)
			case allow != nil && err != nil:
				t.Errorf("%q with the function allowed: %v", sql, err)
			}
		}
		ex.Close()
	}
}

// TestAttributeNotationJudgedByPolicy: (x).f calls f(x), so a name the
// policy refuses is refused as the last name of a column reference or a
// field selection whenever a function of that name could be called
// that way, PostgreSQL's own included, and MCP_SQL_ALLOW_FUNCTIONS does
// not lift it; a column no such function shares a name with is read.
func TestAttributeNotationJudgedByPolicy(t *testing.T) {
	h := newDBHarness(t)
	h.db.Exec(t, `SET ROLE `+pgx.Identifier{h.db.Cluster.User()}.Sanitize()+`;
CREATE TABLE fx_cols (lo_mark int, http int, pg_sleep_ms int, nextval int);
INSERT INTO fx_cols VALUES (1, 2, 3, 4);
RESET ROLE;`)
	tests := []struct {
		policy []Option
		allow  []string // MCP_SQL_ALLOW_FUNCTIONS
		sql    string
		want   string // executorRefusal, or "no refusal"
	}{
		{sql: "SELECT c.lo_mark, c.http, c.pg_sleep_ms, (c).http FROM fx_cols c", want: "no refusal"},
		{sql: "SELECT (0.01::float8).pg_sleep", want: "catalog"},
		{sql: "SELECT (0.01::float8).pg_sleep", allow: []string{"pg_catalog.pg_sleep"}, want: "catalog"},
		{sql: "SELECT ('SELECT ''a''::tsvector'::text).ts_stat", want: "catalog"},
		// A column named like a denied one-argument function is refused:
		// the tree cannot tell it from the call (documented).
		{sql: "SELECT c.nextval FROM fx_cols c", want: "catalog"},
		{policy: []Option{WithAllowedFunctions("lower")}, sql: "SELECT (c.t).lower FROM (SELECT 'A'::text) c(t)", want: "no refusal"},
		{policy: []Option{WithAllowedFunctions("lower")}, sql: "SELECT (c.t).upper FROM (SELECT 'A'::text) c(t)", want: "catalog"},
	}
	for _, tt := range tests {
		ex, err := NewExecutor(h.db.DSN(), ExecOptions{MaxConns: 1, AllowFunctions: tt.allow})
		if err != nil {
			t.Fatal(err)
		}
		tl, err := NewTool(newTestPolicy(t, tt.policy...), ex, 10)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tl.Call(t.Context(), toolArgs(t, tt.sql))
		if got := executorRefusal(err); got != tt.want {
			t.Errorf("%q (allowed %v): %s, want %s", tt.sql, tt.allow, got, tt.want)
		}
		ex.Close()
	}
}

// TestSQLJSONSyntaxVetted: SQL/JSON syntax is an ordinary call to a
// server older than it; a VOLATILE function of that name on the
// search_path is refused, whichever server runs the query.
func TestSQLJSONSyntaxVetted(t *testing.T) {
	h := newDBHarness(t)
	h.db.Exec(t, `SET ROLE `+pgx.Identifier{h.db.Cluster.User()}.Sanitize()+`;
CREATE FUNCTION json_scalar(int) RETURNS json LANGUAGE plpgsql VOLATILE AS $$ BEGIN PERFORM pg_advisory_lock(7100); RETURN '1'; END $$;
CREATE FUNCTION json_array(int, int) RETURNS json LANGUAGE plpgsql VOLATILE AS $$ BEGIN PERFORM pg_advisory_lock(7101); RETURN '[]'; END $$;
CREATE FUNCTION json(text) RETURNS json LANGUAGE plpgsql VOLATILE AS $$ BEGIN PERFORM pg_advisory_lock(7102); RETURN '{}'; END $$;
RESET ROLE;`)
	tl, err := NewTool(newTestPolicy(t), h.executor(t, 5*time.Second), 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{"SELECT JSON_SCALAR(1)", "SELECT JSON_ARRAY(1, 2)", "SELECT JSON('{}'::text)"} {
		if _, err := tl.Call(t.Context(), toolArgs(t, sql)); executorRefusal(err) != "catalog" {
			t.Errorf("%q: %v, want a refusal by the catalog check", sql, err)
		}
	}
}

// TestExecutorConfigReloadIsNotAnEffect: a reload of the server's
// configuration changes settings under a pooled session; the next call
// is not taken for having changed them.
func TestExecutorConfigReloadIsNotAnEffect(t *testing.T) {
	h := newDBHarness(t)
	ex := h.executor(t, 5*time.Second)
	if _, err := runDirect(t, ex, "SELECT 1"); err != nil { // the connection's baseline
		t.Fatal(err)
	}
	if _, err := h.su.Exec(t.Context(), "ALTER SYSTEM SET work_mem = '5MB'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.su.Exec(context.Background(), "ALTER SYSTEM RESET work_mem")
		h.su.Exec(context.Background(), "SELECT pg_reload_conf()")
	})
	if _, err := h.su.Exec(t.Context(), "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, session := pooledSession(t, ex); strings.Contains(session, "\nwork_mem=5120 ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pooled session never saw the reload")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := runDirect(t, ex, "SELECT 1"); err != nil {
		t.Fatalf("SELECT 1 after a configuration reload: %v", err)
	}
}

// TestExecutorProbeRowNotSent: the row that tells whether rows were cut
// is moved past, not fetched, so a large row beyond max_rows cannot fail
// the call.
func TestExecutorProbeRowNotSent(t *testing.T) {
	h := newDBHarness(t)
	ex, err := NewExecutor(h.db.DSN(), ExecOptions{MaxConns: 1, MaxResultBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	rs, err := ex.Run(t.Context(), &Prepared{SQL: "SELECT n, x FROM (VALUES (1, 'a'), (2, repeat('x', 2000000))) v(n, x) ORDER BY n", Limit: 1})
	if err != nil || rs.RowCount != 1 || !rs.Truncated {
		t.Fatalf("Run = %+v, %v; want one row, truncated", rs, err)
	}
}

// TestExecutorReseedsRandom: a seed a query sets (by code the checks do
// not see) does not decide what random() gives the next call.
func TestExecutorReseedsRandom(t *testing.T) {
	h := newDBHarness(t)
	ex := h.executor(t, 5*time.Second)
	conn, err := pgx.Connect(t.Context(), h.db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var predicted float64
	if _, err := conn.Exec(t.Context(), "SELECT setseed(0.25)"); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(t.Context(), "SELECT random()").Scan(&predicted); err != nil {
		t.Fatal(err)
	}
	if _, err := runDirect(t, ex, "SELECT setseed(0.25)"); err != nil {
		t.Fatal(err)
	}
	rs, err := runDirect(t, ex, "SELECT random()")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := rs.Rows[0][0].(jsontext.Value)
	got, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		t.Fatalf("random() = %v (%T)", rs.Rows[0][0], rs.Rows[0][0])
	}
	if got == predicted {
		t.Errorf("random() after setseed(0.25) on the pooled session = %v, the seeded value", got)
	}
}
