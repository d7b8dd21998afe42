package sqlquery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/jackc/pgx/v5"

	"github.com/mcp-bastion/bastion/internal/pgcluster"
	"github.com/mcp-bastion/bastion/internal/pgcluster/pgtest"
	"github.com/mcp-bastion/bastion/internal/problem"
)

// roleDoc holds the least-privilege role recipe this test runs.
const roleDoc = "../../../docs/postgres-role.md"

// roleRecipe returns the SQL of the recipe in docs/postgres-role.md: the
// one fenced sql block between the recipe:begin and recipe:end markers.
// Reading it from the document keeps the documentation and the test from
// drifting apart.
func roleRecipe(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(roleDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- recipe:begin")
	if !ok {
		t.Fatalf("%s: no recipe:begin marker", roleDoc)
	}
	block, _, ok := strings.Cut(rest, "<!-- recipe:end -->")
	if !ok {
		t.Fatalf("%s: no recipe:end marker", roleDoc)
	}
	if strings.Count(block, "```sql\n") != 1 || strings.Count(block, "```") != 2 {
		t.Fatalf("%s: the recipe must be exactly one fenced sql block", roleDoc)
	}
	_, sql, _ := strings.Cut(block, "```sql\n")
	sql, _, _ = strings.Cut(sql, "```")
	return sql
}

// substituteOnce replaces old by new in s and fails t unless old occurs
// exactly once, so that a change to the recipe cannot silently leave a
// name unsubstituted.
func substituteOnce(t *testing.T, s, old, new string) string {
	t.Helper()
	return substituteN(t, s, old, new, 1)
}

// substituteN replaces old, which must occur exactly n times in s.
func substituteN(t *testing.T, s, old, new string, n int) string {
	t.Helper()
	if got := strings.Count(s, old); got != n {
		t.Fatalf("%s: %q occurs %d times in the recipe, want %d", roleDoc, old, got, n)
	}
	return strings.ReplaceAll(s, old, new)
}

// rolePoolSize is the pool size the tool runs with: the default of
// MCP_SQL_POOL_MAX_SIZE.
const rolePoolSize = 4

// TestRoleRecipe creates exactly the role of docs/postgres-role.md on the
// throwaway cluster (without a password: the cluster trusts local
// connections, see the document) and runs read_only_sql as that role.
func TestRoleRecipe(t *testing.T) {
	db := pgtest.NewSampleDB(t)
	recipe := roleRecipe(t)
	recipe = substituteOnce(t, recipe, "ON DATABASE app TO", "ON DATABASE "+pgx.Identifier{db.Name}.Sanitize()+" TO")
	// The sample schema is created by the superuser, its app_owner here.
	recipe = substituteN(t, recipe, "FOR ROLE app_owner ", "FOR ROLE "+pgcluster.Superuser+" ", 2)
	if strings.Contains(recipe, `\password`) {
		t.Fatalf("%s: the recipe block holds a psql command; keep \\password outside it", roleDoc)
	}
	// Objects the role must not see: a table outside the granted schema
	// (schema public, which every role may use) and a schema it has no
	// USAGE on.
	db.Exec(t, `CREATE TABLE public.secrets (k text); INSERT INTO public.secrets VALUES ('s3cret');
CREATE SCHEMA internal; CREATE TABLE internal.keys (k text)`)

	db.Exec(t, recipe)
	// Roles are cluster-wide: drop it again, after the pool below is
	// closed (clean-ups run last in, first out).
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := db.Cluster.Exec(ctx, db.Name, "DROP OWNED BY mcp_reader"); err != nil {
			t.Error(err)
		}
		if err := db.Cluster.Exec(ctx, "", "DROP ROLE mcp_reader"); err != nil {
			t.Error(err)
		}
	})
	// Created after the recipe ran: readable through the default
	// privileges line only.
	db.Exec(t, "CREATE TABLE reporting.late_table (x int); INSERT INTO reporting.late_table VALUES (1), (2)")
	// Likewise a function, which PUBLIC could execute but for the
	// recipe's REVOKE lines. STABLE, so that the catalog check lets it
	// through and the database has to refuse it.
	db.Exec(t, "CREATE FUNCTION reporting.late_fn() RETURNS int LANGUAGE sql STABLE AS 'SELECT 1'")

	dsn := fmt.Sprintf("host=%s port=%d user=mcp_reader dbname=%s sslmode=disable",
		dsnQuote(db.Cluster.Dir()), db.Cluster.Port(), dsnQuote(db.Name))
	ex, err := NewExecutor(dsn, ExecOptions{MaxConns: rolePoolSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	tl, err := NewTool(newTestPolicy(t), ex, 100)
	if err != nil {
		t.Fatal(err)
	}
	call := func(sql string) ([][]any, error) {
		t.Helper()
		res, err := tl.Call(t.Context(), toolArgs(t, sql))
		if err != nil {
			return nil, err
		}
		var out struct {
			Rows [][]any `json:"rows"`
		}
		if err := json.Unmarshal(res.Structured, &out); err != nil {
			t.Fatal(err)
		}
		return out.Rows, nil
	}

	t.Run("reads the granted schema", func(t *testing.T) {
		for sql, want := range map[string]string{
			"SELECT current_user, session_user":                                                      `[["mcp_reader","mcp_reader"]]`,
			"SELECT count(*) FROM reporting.customers":                                               `[[8]]`,
			"SELECT count(*) FROM reporting.orders o JOIN reporting.customers c USING (customer_id)": `[[` + strconv.Itoa(sampleOrders(t, db)) + `]]`,
			"SELECT x FROM reporting.late_table ORDER BY x":                                          `[[1],[2]]`,
		} {
			rows, err := call(sql)
			if err != nil {
				t.Errorf("%q: %v", sql, err)
				continue
			}
			if got, _ := json.Marshal(rows); string(got) != want {
				t.Errorf("%q = %s, want %s", sql, got, want)
			}
		}
	})

	t.Run("refuses everything else", func(t *testing.T) {
		for _, sql := range []string{
			"SELECT * FROM public.secrets",
			"SELECT k FROM internal.keys",
			"SELECT * FROM pg_catalog.pg_authid",
			"SELECT count(*) FROM reporting.customers c JOIN public.secrets s ON true",
			"SELECT reporting.late_fn()",
		} {
			_, err := call(sql)
			var prob *problem.Problem
			if !errors.As(err, &prob) || prob.Code != problem.AccessDenied || prob.Metadata["sqlstate"] != "42501" {
				t.Errorf("%q: %v, want MCP_ACCESS_DENIED with SQLSTATE 42501", sql, err)
			}
		}
	})

	t.Run("role settings in effect", func(t *testing.T) {
		// Through the executor, which sets transaction-local limits of
		// its own, the role's values are the session's reset values.
		rows, err := call(`SELECT name, reset_val FROM pg_settings WHERE name IN
('default_transaction_read_only', 'statement_timeout', 'lock_timeout', 'idle_in_transaction_session_timeout') ORDER BY name`)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(rows)
		const want = `[["default_transaction_read_only","on"],["idle_in_transaction_session_timeout","15000"],["lock_timeout","1000"],["statement_timeout","10000"]]`
		if string(got) != want {
			t.Errorf("session reset values = %s, want %s", got, want)
		}
		// Without the executor: the role's defaults alone.
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		for name, want := range map[string]string{
			"default_transaction_read_only":       "on",
			"statement_timeout":                   "10s",
			"lock_timeout":                        "1s",
			"idle_in_transaction_session_timeout": "15s",
		} {
			var got string
			if err := conn.QueryRow(t.Context(), "SHOW "+name).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("connected as mcp_reader, %s = %s, want %s", name, got, want)
			}
		}
		if _, err := conn.Exec(t.Context(), "CREATE TEMP TABLE scratch (a int)"); sqlState(err) != "25006" {
			t.Errorf("autocommit CREATE TEMP TABLE as mcp_reader: %v, want SQLSTATE 25006", err)
		}
	})

	t.Run("role attributes", func(t *testing.T) {
		var super, inherit, createRole, createDB, replication, bypassRLS bool
		var connLimit, memberships int
		su, err := pgx.Connect(t.Context(), db.SuperuserDSN())
		if err != nil {
			t.Fatal(err)
		}
		defer su.Close(context.Background())
		err = su.QueryRow(t.Context(), `SELECT rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls, rolconnlimit,
  (SELECT count(*) FROM pg_auth_members WHERE member = r.oid)
FROM pg_roles r WHERE rolname = 'mcp_reader'`).Scan(&super, &inherit, &createRole, &createDB, &replication, &bypassRLS, &connLimit, &memberships)
		if err != nil {
			t.Fatal(err)
		}
		if super || inherit || createRole || createDB || replication || bypassRLS {
			t.Errorf("mcp_reader attributes: superuser %v, inherit %v, createrole %v, createdb %v, replication %v, bypassrls %v; want all false",
				super, inherit, createRole, createDB, replication, bypassRLS)
		}
		if memberships != 0 {
			t.Errorf("mcp_reader is a member of %d roles, want none", memberships)
		}
		if connLimit < rolePoolSize {
			t.Errorf("CONNECTION LIMIT %d is below the pool size %d", connLimit, rolePoolSize)
		}
	})
}

// sampleOrders counts the sample orders as the superuser.
func sampleOrders(t *testing.T, db *pgtest.DB) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), db.SuperuserDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM reporting.orders").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// dsnQuote quotes a keyword/value connection string value.
func dsnQuote(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}
