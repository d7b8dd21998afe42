package sqlquery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mcp-bastion/bastion/internal/pgcluster/pgtest"
	"github.com/mcp-bastion/bastion/internal/problem"
	"github.com/mcp-bastion/bastion/internal/tool"
)

// This file runs testdata/policy_corpus.json against a real PostgreSQL and
// holds the harness the other database tests of the package share:
// a fixture database whose login role may write, a snapshot of everything
// a write could change, and a fingerprint of the pooled session.

// harnessFixture completes testdata/policy_fixture.sql with the objects the
// corpus's writes name (t, mv, p, orders_brin, large object 1234), so that
// a write that reached the server would find its target rather than fail
// on a missing name, plus a serial sequence and functions that write, and
// every place where a query can call code of the database without the
// parse tree naming it (the fx_ objects).
const harnessFixture = `
CREATE TABLE t (a int);
INSERT INTO t VALUES (1), (2), (3);
CREATE TABLE counters (id serial PRIMARY KEY, n int NOT NULL);
INSERT INTO counters (n) VALUES (10), (20);
CREATE MATERIALIZED VIEW mv AS SELECT count(*) AS n FROM orders;
CREATE INDEX orders_brin ON orders USING brin (created_at);
CREATE PROCEDURE p() LANGUAGE sql AS $$ INSERT INTO t VALUES (99) $$;
CREATE FUNCTION delete_from_t() RETURNS int LANGUAGE sql VOLATILE AS $$ DELETE FROM t WHERE a = 1 RETURNING a $$;
CREATE FUNCTION bump_order_seq() RETURNS bigint LANGUAGE sql VOLATILE AS $$ SELECT nextval('order_seq') $$;
SELECT lo_from_bytea(1234, 'large object contents');
SELECT setval('order_seq', 41);

-- Code the parse tree does not show: functions of the database with side
-- effects (VOLATILE, as CREATE FUNCTION makes them unless told otherwise)…
CREATE FUNCTION fx_lock() RETURNS int LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_lock(7001); RETURN 1; END $$;
CREATE FUNCTION fx_config() RETURNS int LANGUAGE plpgsql AS $$ BEGIN PERFORM set_config('search_path', 'pg_catalog', false); RETURN 1; END $$;
CREATE FUNCTION fx_notify() RETURNS int LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify('bastion_fx', 'fx'); RETURN 1; END $$;
CREATE FUNCTION fx_nextval() RETURNS bigint LANGUAGE sql AS $$ SELECT nextval('order_seq') $$;
CREATE FUNCTION fx_dynamic(q text) RETURNS int LANGUAGE plpgsql AS $$ BEGIN EXECUTE q; RETURN 1; END $$;
CREATE FUNCTION fx_listen() RETURNS int LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'LISTEN bastion_fx'; RETURN 1; END $$;
CREATE FUNCTION fx_prepare() RETURNS int LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'PREPARE fx_stmt AS SELECT 1'; RETURN 1; END $$;
CREATE FUNCTION fx_hold() RETURNS int LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'DECLARE fx_held CURSOR WITH HOLD FOR SELECT 1'; RETURN 1; END $$;
-- … labels that lie (STABLE, with effects) …
CREATE FUNCTION fx_lock_stable() RETURNS int LANGUAGE plpgsql STABLE AS $$ BEGIN PERFORM pg_advisory_lock(7002); RETURN 1; END $$;
CREATE FUNCTION fx_config_stable() RETURNS int LANGUAGE plpgsql STABLE AS $$ BEGIN PERFORM set_config('work_mem', '7MB', false); RETURN 1; END $$;
CREATE FUNCTION fx_notify_stable() RETURNS int LANGUAGE plpgsql STABLE AS $$ BEGIN PERFORM pg_notify('bastion_fx', 'fx'); RETURN 1; END $$;
CREATE FUNCTION fx_cursor_stable() RETURNS int LANGUAGE plpgsql STABLE AS $$ DECLARE c refcursor := 'fx_open'; BEGIN OPEN c FOR SELECT 1; RETURN 1; END $$;
-- … attribute notation: o.fx_total is fx_total(o) …
CREATE FUNCTION fx_total(orders) RETURNS int LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_lock(7003); RETURN 1; END $$;
CREATE FUNCTION fx_total_stable(orders) RETURNS int LANGUAGE plpgsql STABLE AS $$ BEGIN PERFORM pg_advisory_lock(7004); RETURN 1; END $$;
-- … an operator, a cast and a domain's CHECK backed by such functions …
CREATE FUNCTION fx_op(int, int) RETURNS bool LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_lock(7005); RETURN true; END $$;
CREATE OPERATOR ~~~ (LEFTARG = int, RIGHTARG = int, FUNCTION = fx_op);
CREATE TYPE fx_mood AS ENUM ('calm');
CREATE FUNCTION fx_cast(fx_mood) RETURNS int LANGUAGE plpgsql AS $$ BEGIN PERFORM set_config('search_path', 'pg_catalog', true); RETURN 1; END $$;
CREATE CAST (fx_mood AS int) WITH FUNCTION fx_cast(fx_mood);
CREATE FUNCTION fx_check(int) RETURNS bool LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_lock(7006); RETURN true; END $$;
CREATE DOMAIN fx_checked AS int CHECK (fx_check(VALUE));
-- … a view whose definition calls one …
CREATE FUNCTION fx_view_fn() RETURNS int LANGUAGE plpgsql AS $$ BEGIN PERFORM set_config('work_mem', '9MB', false); RETURN 1; END $$;
CREATE VIEW fx_view AS SELECT fx_view_fn() AS a;
-- … set-returning functions in FROM …
CREATE FUNCTION fx_rows() RETURNS SETOF int LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_lock(7007); RETURN NEXT 1; END $$;
CREATE FUNCTION fx_rows_stable() RETURNS SETOF int LANGUAGE plpgsql STABLE AS $$ BEGIN PERFORM pg_advisory_lock(7008); RETURN NEXT 1; END $$;
-- … and an aggregate over one (CREATE AGGREGATE labels it IMMUTABLE).
CREATE FUNCTION fx_step(int, int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_lock(7009); RETURN coalesce($1, 0) + $2; END $$;
CREATE AGGREGATE fx_sum(int) (SFUNC = fx_step, STYPE = int);
-- A function of the database without effects, labelled as it should be.
CREATE FUNCTION fx_double(int) RETURNS int LANGUAGE sql IMMUTABLE AS $$ SELECT $1 * 2 $$;
`

// dbHarness is a fresh database loaded with the policy fixture, in which
// the login role that code under test connects as is as powerful as a
// role can be short of superuser: it owns the database (so, through
// pg_database_owner, schema public) and every object in it. Writes are
// therefore stopped by the policy and the read-only transaction, never by
// a missing grant, which is what these tests set out to show.
type dbHarness struct {
	db *pgtest.DB
	// su is a superuser connection for snapshots; it never runs code
	// under test.
	su *pgx.Conn
}

func newDBHarness(t *testing.T) *dbHarness {
	t.Helper()
	db := pgtest.NewDB(t)
	fixture, err := os.ReadFile("testdata/policy_fixture.sql")
	if err != nil {
		t.Fatal(err)
	}
	role := pgx.Identifier{db.Cluster.User()}.Sanitize()
	db.Exec(t, "ALTER DATABASE "+pgx.Identifier{db.Name}.Sanitize()+" OWNER TO "+role+";\n"+
		"SET ROLE "+role+";\n"+string(fixture)+harnessFixture+"RESET ROLE;\n")
	su, err := pgx.Connect(t.Context(), db.SuperuserDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { su.Close(context.Background()) })
	return &dbHarness{db: db, su: su}
}

// executor returns an executor for the login role with a pool of one
// connection, so that every call reuses the session of the one before
// unless the executor discards it.
func (h *dbHarness) executor(t *testing.T, timeout time.Duration) *Executor {
	t.Helper()
	return newPoolOfOne(t, h.db.DSN(), timeout)
}

func newPoolOfOne(t *testing.T, dsn string, timeout time.Duration) *Executor {
	t.Helper()
	ex, err := NewExecutor(dsn, ExecOptions{StatementTimeout: timeout, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return ex
}

// dbSnapshot maps a name for each thing a write could change to a digest
// of its state.
type dbSnapshot map[string]string

// snapshotQuery lists, from the superuser's view, the state of every
// object a write, DDL or administrative function could change, except the
// contents of tables, which snapshot digests table by table. Statistics (reltuples, pg_stat_*)
// are left out: autovacuum changes them on its own.
const snapshotQuery = `
SELECT 'rel ' || c.oid::regclass::text,
       concat_ws(' ', c.relkind::text, pg_get_userbyid(c.relowner), c.relacl::text, 'node=' || c.relfilenode,
                 'persistence=' || c.relpersistence::text,
                 (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) ||
                                    CASE WHEN a.attnotnull THEN ' not null' ELSE '' END, ', ' ORDER BY a.attnum)
                    FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped))
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%'
UNION ALL SELECT 'schema ' || nspname, concat_ws(' ', pg_get_userbyid(nspowner), nspacl::text) FROM pg_namespace
UNION ALL SELECT 'sequence ' || schemaname || '.' || sequencename, coalesce(last_value::text, 'not called') FROM pg_sequences
UNION ALL SELECT 'function ' || p.oid::regprocedure::text, concat_ws(' ', md5(p.prosrc), pg_get_userbyid(p.proowner), p.proacl::text)
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
UNION ALL SELECT 'index ' || indexrelid::regclass::text, concat_ws(' ', indisvalid, indisready, indisclustered) FROM pg_index WHERE indexrelid >= 16384
UNION ALL SELECT 'trigger ' || tgrelid::regclass::text || '.' || tgname, tgenabled::text FROM pg_trigger WHERE NOT tgisinternal
UNION ALL SELECT 'rule ' || ev_class::regclass::text || '.' || rulename, ev_enabled::text AS v FROM pg_rewrite WHERE ev_class >= 16384
UNION ALL SELECT 'rls policy ' || polrelid::regclass::text || '.' || polname, '' FROM pg_policy
UNION ALL SELECT 'extension ' || extname, extversion FROM pg_extension
UNION ALL SELECT 'comment ' || classoid::regclass::text || '/' || objoid || '/' || objsubid, md5(description) FROM pg_description WHERE objoid >= 16384
UNION ALL SELECT 'shared comment ' || classoid::regclass::text || '/' || objoid, md5(description) FROM pg_shdescription
UNION ALL SELECT 'large object ' || oid, concat_ws(' ', pg_get_userbyid(lomowner), lomacl::text) FROM pg_largeobject_metadata
UNION ALL SELECT 'large object data', md5(coalesce(string_agg(loid || ':' || pageno || ':' || encode(data, 'hex'), ',' ORDER BY loid, pageno), '')) FROM pg_largeobject
UNION ALL SELECT 'role ' || rolname, concat_ws(' ', rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin,
                 rolreplication, rolbypassrls, rolconnlimit, rolconfig::text) FROM pg_roles
UNION ALL SELECT 'membership ' || roleid::regrole::text || ' > ' || member::regrole::text, '' FROM pg_auth_members
UNION ALL SELECT 'database ' || datname, concat_ws(' ', pg_get_userbyid(datdba), datacl::text, datallowconn, datconnlimit) FROM pg_database
UNION ALL SELECT 'db/role setting ' || setdatabase || '/' || setrole, array_to_string(setconfig, ',') FROM pg_db_role_setting
UNION ALL SELECT 'default acl ' || oid, defaclacl::text FROM pg_default_acl
UNION ALL SELECT 'replication slot ' || slot_name, coalesce(plugin, '') FROM pg_replication_slots
UNION ALL SELECT 'replication origin ' || roname, '' FROM pg_replication_origin
UNION ALL SELECT 'prepared transaction ' || gid, '' FROM pg_prepared_xacts
UNION ALL SELECT 'file setting ' || name, coalesce(setting, '') FROM pg_file_settings WHERE sourcefile LIKE '%postgresql.auto.conf'
UNION ALL SELECT 'locks held by other sessions',
       coalesce(string_agg(concat_ws(' ', l.locktype, l.mode, l.granted, l.relation::regclass::text, l.classid, l.objid, l.objsubid), '; '
                           ORDER BY l.locktype, l.mode, l.relation, l.classid, l.objid), '')
  FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
 WHERE a.backend_type = 'client backend' AND l.pid <> pg_backend_pid()`

// snapshot captures the database's state. It first waits for advisory
// locks left by sessions the executor has just discarded (a backend
// exits shortly after its client closes the socket) and fails if one is
// still held after ten seconds: that would be a live session holding it.
func (h *dbHarness) snapshot(t *testing.T) dbSnapshot {
	t.Helper()
	ctx := t.Context()
	h.awaitAdvisoryLocks(t)
	snap := dbSnapshot{}
	rows, err := h.su.Query(ctx, snapshotQuery)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		if _, dup := snap[k]; dup {
			t.Fatalf("snapshot key %q twice", k)
		}
		snap[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// Table contents: one digest of every row of every table and
	// materialized view, in a fixed order.
	var tables []string
	rows, err = h.su.Query(ctx, `SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'm', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%'`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		var sum string
		q := "SELECT md5(coalesce(string_agg(x::text, E'\\n' ORDER BY x::text), '')) || ' rows=' || count(*) FROM " + tb + " x"
		if err := h.su.QueryRow(ctx, q).Scan(&sum); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		snap["contents "+tb] = sum
	}
	return snap
}

// awaitAdvisoryLocks takes and releases, as the superuser, every advisory
// lock another session of this database holds, waiting up to ten seconds
// for each: a lock of a discarded connection goes away when its backend
// exits, a lock of a live session does not, and fails the test.
func (h *dbHarness) awaitAdvisoryLocks(t *testing.T) {
	t.Helper()
	if err := h.waitAdvisoryLocks(t.Context(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// waitAdvisoryLocks is awaitAdvisoryLocks with a timeout per lock; it
// returns an error naming a lock still held when the timeout expires.
func (h *dbHarness) waitAdvisoryLocks(ctx context.Context, timeout time.Duration) error {
	rows, err := h.su.Query(ctx, `SELECT DISTINCT classid::bigint, objid::bigint, objsubid FROM pg_locks
WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND pid <> pg_backend_pid()`)
	if err != nil {
		return err
	}
	type key struct {
		classid, objid int64
		subid          int16
	}
	var keys []key
	var k key
	if _, err := pgx.ForEachRow(rows, []any{&k.classid, &k.objid, &k.subid}, func() error {
		keys = append(keys, k)
		return nil
	}); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	if _, err := h.su.Exec(ctx, fmt.Sprintf("SET lock_timeout = %d", timeout.Milliseconds())); err != nil {
		return err
	}
	defer h.su.Exec(context.Background(), "RESET lock_timeout")
	for _, k := range keys {
		// A bigint key is stored as its two halves (objsubid 1), a pair
		// of int4 keys as they are (objsubid 2).
		lock, unlock := "SELECT pg_advisory_lock($1::bigint)", "SELECT pg_advisory_unlock($1::bigint)"
		args := []any{k.classid<<32 | k.objid}
		if k.subid == 2 {
			lock, unlock = "SELECT pg_advisory_lock($1::int, $2::int)", "SELECT pg_advisory_unlock($1::int, $2::int)"
			args = []any{int32(uint32(k.classid)), int32(uint32(k.objid))}
		}
		if _, err := h.su.Exec(ctx, lock, args...); err != nil {
			return fmt.Errorf("advisory lock %+v is still held by another session after %v: %w", k, timeout, err)
		}
		if _, err := h.su.Exec(ctx, unlock, args...); err != nil {
			return err
		}
	}
	return nil
}

// diffSnapshots describes how got differs from want, or returns "".
func diffSnapshots(want, got dbSnapshot) string {
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		w, inW := want[k]
		g, inG := got[k]
		switch {
		case !inW:
			fmt.Fprintf(&b, "  + %s: %s\n", k, g)
		case !inG:
			fmt.Fprintf(&b, "  - %s: %s\n", k, w)
		case w != g:
			fmt.Fprintf(&b, "  ~ %s:\n      -%s\n      +%s\n", k, w, g)
		}
	}
	return b.String()
}

// sessionQuery describes a pooled session: who it is, every setting with
// its source, and the session state a rollback does not undo (prepared
// statements, held cursors, advisory locks, LISTEN channels, temporary
// schema).
const sessionQuery = `SELECT pg_backend_pid(), concat_ws(E'\n',
  'current_user=' || current_user, 'session_user=' || session_user,
  'prepared statements=' || (SELECT count(*) FROM pg_prepared_statements),
  'cursors=' || (SELECT count(*) FROM pg_cursors),
  'advisory locks=' || (SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'),
  'listening=' || coalesce((SELECT string_agg(c, ',' ORDER BY c) FROM pg_listening_channels() c), ''),
  'temporary schema=' || (pg_my_temp_schema() <> 0),
  (SELECT string_agg(name || '=' || setting || ' (' || source || ')', E'\n' ORDER BY name) FROM pg_settings
    WHERE source <> 'default' OR name NOT LIKE '%.%'))`

// sessionQuery describes a session: its locks, listeners, prepared
// statements, cursors, temporary schema and every built-in setting. A
// setting an extension defines (its name has a dot) counts once it is
// not at its default: PL/pgSQL, loaded the first time a session runs a
// PL/pgSQL function, adds its settings at their defaults.
//
// pooledSession returns the backend pid and the description of the
// session the executor's pool hands out next. It reads it on that very
// connection, outside the executor's transaction, so settings a SET LOCAL
// of the executor would mask are seen as the session holds them.
func pooledSession(t *testing.T, ex *Executor) (uint32, string) {
	t.Helper()
	conn, err := ex.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var pid uint32
	var state string
	if err := conn.QueryRow(t.Context(), sessionQuery).Scan(&pid, &state); err != nil {
		t.Fatal(err)
	}
	return pid, state
}

// diffLines describes how the lines of got differ from want, or returns "".
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			fmt.Fprintf(&b, "  - %s\n", l)
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			fmt.Fprintf(&b, "  + %s\n", l)
		}
	}
	return b.String()
}

// sqlState returns the SQLSTATE the database raised for err, or "".
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// readOnlyViolation reports whether err is the database refusing a write
// because the transaction is read-only: 25006 (cannot execute … in a
// read-only transaction, also nextval, lo_*, SELECT FOR UPDATE) or 25001
// for SET TRANSACTION READ WRITE after the first query. Either means a
// write reached the server.
func readOnlyViolation(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return pgErr.Code == "25006" || pgErr.Code == "25001" ||
		strings.Contains(pgErr.Message, "read-only transaction") || strings.Contains(pgErr.Message, "read-write")
}

// toolArgs is the arguments object of a read_only_sql call.
func toolArgs(t *testing.T, query string) jsontext.Value {
	t.Helper()
	b, err := json.Marshal(Input{Query: query})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCorpusAgainstDatabase runs every corpus entry through the whole tool,
// as a session would (JSON arguments, policy, executor), against the
// fixture database, and checks after each one that nothing changed: table
// contents, sequences, catalog objects, locks held by other sessions, and
// the pooled session's settings and state.
func TestCorpusAgainstDatabase(t *testing.T) {
	h := newDBHarness(t)
	ex := h.executor(t, 5*time.Second)
	pol := newTestPolicy(t)
	tl, err := NewTool(pol, ex, corpusMaxRows)
	if err != nil {
		t.Fatal(err)
	}
	entries := loadCorpus(t)
	if len(entries) < 150 {
		t.Fatalf("corpus has %d entries, want at least 150", len(entries))
	}
	base := h.snapshot(t)
	basePID, baseSession := pooledSession(t, ex)

	var allowed, denied, serverErrors, executorRefused int
	for i, e := range entries {
		res, err := tl.Call(t.Context(), toolArgs(t, e.SQL))
		switch {
		case e.Executor != "":
			executorRefused++
			if got := executorRefusal(err); got != e.Executor {
				t.Errorf("entry %d %q: %v (%s), want refused by the %s check", i, e.SQL, err, got, e.Executor)
			}
			if err == nil {
				break
			}
			if e.Executor == "session effect" {
				// The session is closed, never pooled: a new one
				// takes its place.
				if pid, _ := pooledSession(t, ex); pid == basePID {
					t.Errorf("entry %d %q: the session that held the effect went back to the pool", i, e.SQL)
				} else {
					basePID = pid
				}
			}
		case e.Verdict == "allow":
			allowed++
			if err == nil {
				if verr := tool.ValidateOutput(tl, res.Structured); verr != nil {
					t.Errorf("entry %d %q: result does not match the output schema: %v", i, e.SQL, verr)
				}
				if e.DBSQLState != "" {
					t.Errorf("entry %d %q: succeeded, want SQLSTATE %s", i, e.SQL, e.DBSQLState)
				}
				break
			}
			var prob *problem.Problem
			if !errors.As(err, &prob) {
				t.Errorf("entry %d %q: allowed query failed with an internal error: %v", i, e.SQL, err)
				break
			}
			state, fromDB := prob.Metadata["sqlstate"].(string)
			switch {
			case !fromDB:
				t.Errorf("entry %d %q: allowed query refused: %s %s", i, e.SQL, prob.Code, prob.Detail)
			case readOnlyViolation(err) || strings.HasPrefix(state, "25"):
				t.Errorf("entry %d %q: the policy let a write through; the read-only transaction stopped it: %s", i, e.SQL, prob.Detail)
			case e.DBSQLState != "" && state != e.DBSQLState:
				t.Errorf("entry %d %q: SQLSTATE %s, want %s", i, e.SQL, state, e.DBSQLState)
			default:
				serverErrors++
				// The server is older than the parser (PostgreSQL 15
				// against 17's grammar), or the query is wrong: either
				// way a refusal, never a write.
				t.Logf("allowed, refused by the server: %q: %s", e.SQL, prob.Detail)
			}
		case e.Verdict == "deny":
			denied++
			if err == nil {
				t.Errorf("entry %d %q: ran, want %s", i, e.SQL, e.Code)
				break
			}
			var prob *problem.Problem
			if !errors.As(err, &prob) {
				t.Errorf("entry %d %q: %v, want a %s problem", i, e.SQL, err, e.Code)
				break
			}
			if string(prob.Code) != e.Code {
				t.Errorf("entry %d %q: %s (%s), want %s", i, e.SQL, prob.Code, prob.Detail, e.Code)
			}
			if state, fromDB := prob.Metadata["sqlstate"]; fromDB {
				t.Errorf("entry %d %q: reached the database (SQLSTATE %v), want it refused by the policy", i, e.SQL, state)
			}
		default:
			t.Fatalf("entry %d: verdict %q", i, e.Verdict)
		}
		// After every entry, whatever it did: the database as it was,
		// and on the pooled connection no lock, setting, listener,
		// prepared statement, cursor or temporary object.
		if d := diffSnapshots(base, h.snapshot(t)); d != "" {
			t.Fatalf("entry %d %q changed the database:\n%s", i, e.SQL, d)
		}
		pid, session := pooledSession(t, ex)
		if d := diffLines(baseSession, session); d != "" {
			t.Fatalf("entry %d %q changed the pooled session:\n%s", i, e.SQL, d)
		}
		if pid != basePID {
			// Only an anomaly makes the executor discard a session, and
			// the corpus has none that reaches the database.
			t.Errorf("entry %d %q: the pooled session was replaced (pid %d, was %d)", i, e.SQL, pid, basePID)
			basePID = pid
		}
	}
	if executorRefused < 20 {
		t.Errorf("only %d corpus entries hide code from the tree; the hiding places are not all covered", executorRefused)
	}
	t.Logf("%d corpus entries ran against the database: %d allowed (%d refused by the server), %d refused by the executor's checks, %d denied",
		len(entries), allowed, serverErrors, executorRefused, denied)
}

// executorRefusal names the executor check that refused err: "catalog",
// "session effect", or err itself when neither did.
func executorRefusal(err error) string {
	var prob *problem.Problem
	switch {
	case err == nil:
		return "no refusal"
	case !errors.As(err, &prob) || prob.Code != problem.QueryViolation:
		return fmt.Sprintf("not a refusal: %v", err)
	case prob.Metadata["function"] != nil:
		return "catalog"
	case prob.Metadata["session_effects"] != nil:
		return "session effect"
	}
	return "another refusal: " + prob.Detail
}

// directRun is what the database does with each denied corpus entry when
// it is sent straight to the executor, bypassing the policy: the second
// line of defence on its own. Outcomes are a SQLSTATE; "one statement"
// (42601, the extended protocol refuses a second command); "not a query"
// (42601, the statement is no query a cursor can be declared for);
// "session effect" (the session-effect check refused the call);
// "internal" (an error the executor does not map, reported as an
// infrastructure fault, connection discarded); "ok" (ran, on the same
// pooled session, and left nothing behind); "ok, discarded" (ran, and the
// executor then discarded the session). Alternatives are separated by
// "|". Whatever the outcome, the database and the pooled session must be
// unchanged afterwards.
//
// The login role owns every object of the fixture, so a write is stopped
// by the transaction, not by a missing grant; only what needs superuser or
// a predefined role fails with 42501.
var directRun = []struct {
	outcome string
	why     string
	sqls    []string
}{
	{"one statement", "the extended protocol carries exactly one statement", []string{
		"SELECT 1; SELECT 2",
		"SELECT 1; DELETE FROM orders",
		"SELECT 1; COMMIT",
		"SELECT '\\' ; DROP TABLE t; -- '",
		"SELECT $$a$$; SELECT $$b$$",
		"SELECT 1 --\n; DELETE FROM orders",
		"select/**/1;/**/delete from orders",
	}},
	{"not a query", "the query runs as DECLARE … CURSOR FOR, whose grammar takes a query only: any other statement is a syntax error before anything runs", []string{
		"COMMIT; DROP SCHEMA public CASCADE;",
		"SET TRANSACTION READ WRITE; SELECT 1",
		"ROLLBACK; INSERT INTO t VALUES (1)",
		"INSERT INTO t VALUES (1)",
		"UPDATE t SET a = 1",
		"DELETE FROM orders",
		"MERGE INTO t USING (SELECT 1 AS a) s ON t.a = s.a WHEN MATCHED THEN DELETE",
		"DROP TABLE t",
		"DROP SCHEMA public CASCADE",
		"TRUNCATE orders",
		"CREATE TABLE x (a int)",
		"CREATE TEMP TABLE x (a int)",
		"CREATE TABLE x AS SELECT 1",
		"CREATE VIEW v AS SELECT 1",
		"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
		"CREATE EXTENSION dblink",
		"CREATE INDEX ON orders (amount)",
		"CREATE ROLE evil SUPERUSER",
		"ALTER TABLE t ADD COLUMN c int",
		"ALTER SYSTEM SET fsync = off",
		"ALTER ROLE mcp_reader SET default_transaction_read_only = off",
		"GRANT SELECT ON orders TO PUBLIC",
		"REVOKE SELECT ON orders FROM PUBLIC",
		"COMMENT ON TABLE t IS 'x'",
		"REFRESH MATERIALIZED VIEW mv",
		"ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO PUBLIC",
		"REASSIGN OWNED BY a TO b",
		"DROP OWNED BY a",
		"SET search_path = evil, public",
		"SET LOCAL statement_timeout = 0",
		"SET TRANSACTION READ WRITE",
		"SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
		"SET ROLE postgres",
		"RESET ALL",
		"SHOW search_path",
		"COPY t TO PROGRAM 'id'",
		"COPY t FROM '/etc/passwd'",
		"COPY (SELECT 1) TO STDOUT",
		"DO $$ BEGIN PERFORM pg_sleep(1); END $$",
		"CALL p()",
		"LISTEN ch",
		"NOTIFY ch, 'x'",
		"UNLISTEN *",
		"PREPARE p AS SELECT 1",
		"EXECUTE p",
		"DEALLOCATE ALL",
		"DECLARE c CURSOR FOR SELECT 1",
		"FETCH NEXT FROM c",
		"MOVE NEXT IN c",
		"CLOSE c",
		"LOCK TABLE orders IN ACCESS EXCLUSIVE MODE",
		"VACUUM",
		"VACUUM FULL orders",
		"ANALYZE orders",
		"CLUSTER orders USING orders_pkey",
		"REINDEX TABLE orders",
		"CHECKPOINT",
		"DISCARD ALL",
		"LOAD 'auto_explain'",
		"EXPLAIN SELECT 1",
		"EXPLAIN ANALYZE DELETE FROM orders",
		"EXPLAIN (ANALYZE, BUFFERS) SELECT 1",
		"BEGIN",
		"START TRANSACTION READ WRITE",
		"COMMIT",
		"ROLLBACK",
		"END",
		"ABORT",
		"SAVEPOINT s",
		"RELEASE SAVEPOINT s",
		"ROLLBACK TO SAVEPOINT s",
		"PREPARE TRANSACTION 'x'",
		"COMMIT PREPARED 'x'",
		"SET CONSTRAINTS ALL DEFERRED",
		"WITH m AS (MERGE INTO t USING (SELECT 1 AS a) s ON t.a = s.a WHEN MATCHED THEN DELETE RETURNING t.*) SELECT * FROM m",
		";",
		"SELEC 1",
		"SELECT FROM WHERE",
		"SET TRANSACTION READ WRITE; DELETE FROM orders",
		"COMMIT; SET TRANSACTION READ WRITE; DELETE FROM orders",
		"EXPLAIN ANALYZE WITH d AS (DELETE FROM orders RETURNING *) SELECT * FROM d",
		"COPY (SELECT 1) TO PROGRAM 'id'",
	}},
	{"25006", "the read-only transaction refuses every write a query can make", []string{
		"SELECT * FROM orders FOR UPDATE",
		"SELECT * FROM orders FOR NO KEY UPDATE",
		"SELECT * FROM orders FOR SHARE",
		"SELECT * FROM orders FOR KEY SHARE",
		"SELECT * FROM orders FOR UPDATE SKIP LOCKED",
		"SELECT * FROM orders o FOR UPDATE OF o NOWAIT",
		"SELECT * FROM (SELECT * FROM orders FOR UPDATE) s",
		"WITH x AS (SELECT * FROM orders FOR SHARE) SELECT * FROM x",
		"SELECT * FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id FOR KEY SHARE)",
		"SELECT nextval('order_seq')",
		"SELECT setval('order_seq', 1)",
		"SELECT 1 FROM orders WHERE id IN (SELECT nextval('order_seq'))",
		"SELECT * FROM orders WHERE id = (SELECT setval('order_seq', 1))",
		"VALUES (nextval('order_seq'))",
		"SELECT * FROM ROWS FROM (nextval('order_seq'))",
	}},
	{"0A000", "PostgreSQL refuses the construct itself; a cursor refuses a WITH that modifies data", []string{
		"WITH d AS (DELETE FROM orders RETURNING *) SELECT * FROM d",
		"WITH i AS (INSERT INTO t VALUES (1) RETURNING *) SELECT * FROM i",
		"WITH u AS (UPDATE t SET a = 1 RETURNING *) SELECT 1",
		"SELECT * FROM (WITH d AS (DELETE FROM t RETURNING a) SELECT a FROM d) s",
		"WITH a AS (SELECT 1), b AS (DELETE FROM t RETURNING a) SELECT * FROM a",
		"WITH x AS (WITH d AS (DELETE FROM t RETURNING a) SELECT a FROM d) SELECT * FROM x",
		"SELECT 1 UNION ALL (WITH d AS (DELETE FROM t RETURNING a) SELECT a FROM d)",
		"(SELECT id FROM orders FOR UPDATE) UNION SELECT 2",
		"SELECT mydb.pg_catalog.pg_sleep(1)",
		"SELECT query_to_xml('DELETE FROM orders RETURNING 1', true, false, '')",
	}},
	{"42601", "not valid SQL, or SELECT … INTO, which a cursor refuses", []string{
		"SELECT 1 INTO x",
		"SELECT * INTO TEMP t2 FROM t",
		"SELECT * INTO UNLOGGED t3 FROM t",
		"VALUES (DEFAULT)",
		"",
		"   \n\t ",
		"-- only a comment",
		"/* only a comment */",
		"SELECT 'unterminated",
	}},
	{"42501", "needs superuser or a predefined role the login role lacks", []string{
		"SELECT lo_import('/etc/passwd')",
		"SELECT lo_export(1234, '/tmp/x')",
		"SELECT pg_read_file('/etc/passwd')",
		"SELECT pg_read_binary_file('/etc/passwd')",
		"SELECT * FROM pg_ls_dir('.')",
		"SELECT * FROM pg_ls_waldir()",
		"SELECT pg_stat_file('postgresql.conf')",
		"SELECT pg_reload_conf()",
		"SELECT pg_rotate_logfile()",
		"SELECT pg_create_logical_replication_slot('s', 'test_decoding')",
		"SELECT pg_drop_replication_slot('s')",
		"SELECT * FROM pg_logical_slot_get_changes('s', NULL, NULL)",
		"SELECT pg_replication_origin_create('x')",
		"SELECT pg_switch_wal()",
		"SELECT pg_wal_replay_pause()",
		"SELECT pg_backup_start('x')",
		"SELECT pg_create_restore_point('x')",
		"SELECT pg_stat_reset()",
		"SELECT * FROM pg_read_file('/etc/passwd')",
	}},
	{"42501|57014", "cancels its own session (57014) if it reaches it before a superuser's (42501)", []string{
		"SELECT pg_cancel_backend(pid) FROM pg_stat_activity",
	}},
	{"57014", "the transaction-local statement_timeout", []string{
		"SELECT pg_sleep(1)",
		"SELECT pg_sleep_for('1 second')",
		"SELECT pg_sleep_until(now() + interval '1 second')",
		"SELECT pg_catalog.pg_sleep(1)",
		"SELECT PG_SLEEP(1)",
		"SELECT \"pg_sleep\"(1)",
		"SELECT \"pg_catalog\".\"pg_sleep\"(1)",
		"SELECT U&\"pg\\005fsleep\"(1)",
		"SELECT U&\"pg!005fsleep\" UESCAPE '!' (1)",
		"SELECT * FROM customers WHERE pg_sleep(1) IS NOT NULL",
		"SELECT count(*) FILTER (WHERE pg_sleep(1) IS NULL) FROM customers",
		"SELECT country FROM customers GROUP BY country HAVING count(pg_sleep(1)) > 0",
		"SELECT * FROM (VALUES (pg_sleep(1))) v",
		"SELECT CASE WHEN true THEN pg_sleep(1) END",
		"SELECT * FROM pg_sleep(1)",
		"SELECT * FROM ROWS FROM (generate_series(1, 2), pg_sleep(1))",
		"SELECT * FROM customers c CROSS JOIN LATERAL (SELECT pg_sleep(1)) s",
		"SELECT * FROM customers c JOIN orders o ON pg_sleep(1) IS NULL",
		"WITH x AS (SELECT pg_sleep(1)) SELECT * FROM x",
		"SELECT coalesce(NULL, pg_sleep(1))",
		"SELECT CAST(pg_sleep(1) AS text)",
		"SELECT * FROM XMLTABLE('/a' PASSING (pg_sleep(1)::text::xml) COLUMNS a int)",
		"SELECT $x$ $$ $x$, pg_sleep(1)",
		"SELECT /* */ pg_sleep(1) -- ",
	}},
	{"42883", "no such function or operator", []string{
		"SELECT public.pg_sleep(1)",
		"SELECT * FROM customers ORDER BY pg_sleep(1)",
		"SELECT row_number() OVER (PARTITION BY pg_sleep(1)) FROM customers",
		"SELECT id FROM customers WINDOW w AS (ORDER BY pg_sleep(1))",
		"SELECT 1 FROM customers GROUP BY pg_sleep(1)",
		"SELECT DISTINCT ON (pg_sleep(1)) 1",
		"SELECT JSON_VALUE(pg_sleep(1)::text::jsonb, '$')",
		"SELECT dblink('host=evil', 'DELETE FROM t')",
		"SELECT dblink_exec('host=evil', 'DROP TABLE t')",
		"SELECT * FROM dblink('host=evil', 'SELECT 1') AS r(a int)",
		"SELECT http_get('http://169.254.169.254/')",
	}},
	{"42804", "type mismatch", []string{
		"VALUES (1), (pg_sleep(1))",
	}},
	{"42846", "void cannot be cast", []string{
		"SELECT 1 LIMIT (SELECT pg_sleep(1)::int)",
		"SELECT 1 OFFSET (SELECT pg_sleep(1)::int)",
		"SELECT * FROM customers TABLESAMPLE BERNOULLI (pg_sleep(1)::int)",
		"SELECT 1 WHERE 1 IN (SELECT pg_sleep(1)::int)",
	}},
	{"42704", "no such type or large-object descriptor", []string{
		"SELECT ARRAY[pg_sleep(1)]",
		"SELECT loread(0, 10)",
	}},
	{"42P18", "parameter type unknown", []string{
		"SELECT 1 OFFSET $2",
	}},
	{"3F000", "no such schema", []string{
		"SELECT evil.pg_sleep(1)",
	}},
	{"session effect", "the session-effect check sees an advisory lock or a changed setting inside the transaction: the call is refused and the session discarded", []string{
		"SELECT database_to_xml(true, false, '')", // it reads fx_view, whose function changes a setting
		"SELECT E'\\'', set_config('default_transaction_read_only', 'off', false) -- '",
		"SELECT '\\', set_config('default_transaction_read_only', 'off', false) -- '",
		"SELECT pg_advisory_lock(1)",
		"SELECT pg_try_advisory_lock(1)",
		"SELECT pg_advisory_xact_lock_shared(1)",
		"SELECT pg_try_advisory_xact_lock(1, 2)",
		"SELECT set_config('default_transaction_read_only', 'off', false)",
		"SELECT set_config('search_path', 'evil', true)",
		"SELECT pg_advisory_lock(hashtext('x'))",
		"SELECT pg_advisory_lock_shared(1, 2)",
		"SELECT pg_catalog.set_config('search_path', 'evil', false)",
	}},
	{"internal", "refused by the server or pgx with an error the executor does not map; session discarded", []string{
		"SELECT cursor_to_xml('c', 1, true, false, '')",
		"SELECT $1",
		"SELECT * FROM t WHERE a = $1",
		"SELECT 1 LIMIT $1",
		"SELECT 1\x00; DROP TABLE t",
		"SELECT pg_terminate_backend(pg_backend_pid())",
	}},
	{"ok", "allowed in a read-only transaction, and undone by the rollback: NOTIFY waits for a commit that never comes, and a transaction id or a sibling backend's signal changes nothing the session keeps", []string{
		"SELECT lo_get(1234)",
		"SELECT pg_advisory_unlock_all()",
		"SELECT pg_terminate_backend(1)",
		"SELECT pg_notify('ch', 'x')",
		"SELECT txid_current()",
		"SELECT query_to_xml_and_xmlschema('SELECT 1', true, false, '')",
		"SELECT table_to_xml('orders', true, false, '')",
		"SELECT * FROM ts_stat('SELECT to_tsvector(name) FROM customers')",
		"SELECT brin_summarize_new_values('orders_brin')",
		"SELECT xmlexists('/a' PASSING BY REF ('<a/>'::xml))",
		"SELECT * FROM XMLTABLE('/r' PASSING ('<r/>'::xml) COLUMNS id int PATH 'id')",
	}},
	{"ok|25006", "PostgreSQL 15 lets large-object functions write in a read-only transaction (16 refuses them); the rollback undoes them", []string{
		"SELECT lo_unlink(1234)",
		"SELECT lo_put(1234, 0, 'x')",
		"SELECT lo_from_bytea(0, 'x')",
	}},
}

// knownSessionGaps are direct-run entries known to leave state in the
// pooled session that the executor neither undoes nor detects. The test
// logs them and repairs the session; it fails when a gap is closed, so
// that the entry is removed from here.
var knownSessionGaps = map[string]string{}

// directOutcome names what happened to a query sent straight to the
// executor, in the terms of directRun.
func directOutcome(err error, discarded bool) string {
	if err == nil {
		if discarded {
			return "ok, discarded"
		}
		return "ok"
	}
	var prob *problem.Problem
	if !errors.As(err, &prob) {
		return "internal"
	}
	state, _ := prob.Metadata["sqlstate"].(string)
	if state == "42601" && strings.Contains(prob.Detail, "cannot insert multiple commands") {
		return "one statement"
	}
	if state == "42601" && strings.Contains(prob.Detail, "syntax error at or near") {
		return "not a query"
	}
	if _, ok := prob.Metadata["session_effects"]; ok {
		return "session effect"
	}
	if state == "" {
		return "problem without SQLSTATE: " + string(prob.Code)
	}
	return state
}

// TestDeniedCorpusBypassingPolicy sends every denied corpus entry straight
// to the executor, as if the policy had let it through, and checks that
// the second line alone (read-only transaction, read-only session default,
// one statement per extended-protocol call, rollback, discarding anomalous
// sessions) stops every write and leaves the database and the pooled
// session as they were.
func TestDeniedCorpusBypassingPolicy(t *testing.T) {
	h := newDBHarness(t)
	ex := h.executor(t, 250*time.Millisecond)
	type expectation struct{ outcome, why string }
	want := map[string]expectation{}
	for _, g := range directRun {
		for _, sql := range g.sqls {
			if _, dup := want[sql]; dup {
				t.Fatalf("directRun lists %q twice", sql)
			}
			want[sql] = expectation{g.outcome, g.why}
		}
	}
	base := h.snapshot(t)
	pid, baseSession := pooledSession(t, ex)
	var ran, writesStopped int
	for i, e := range loadCorpus(t) {
		if e.Verdict != "deny" {
			continue
		}
		ran++
		_, err := ex.Run(t.Context(), &Prepared{SQL: e.SQL, Limit: corpusMaxRows})
		newPID, session := pooledSession(t, ex)
		got := directOutcome(err, newPID != pid)
		pid = newPID
		w, known := want[e.SQL]
		delete(want, e.SQL)
		switch {
		case known && !slices.Contains(strings.Split(w.outcome, "|"), got):
			t.Errorf("entry %d %q sent straight to the executor: %s (%v), want %s (%s)", i, e.SQL, got, err, w.outcome, w.why)
		case !known:
			t.Logf("entry %d %q sent straight to the executor: %s (%v); add it to directRun", i, e.SQL, got, err)
		}

		if got == "25006" || got == "one statement" || got == "not a query" || got == "session effect" {
			writesStopped++
		}
		if d := diffSnapshots(base, h.snapshot(t)); d != "" {
			t.Fatalf("entry %d %q sent straight to the executor changed the database:\n%s", i, e.SQL, d)
		}
		d := diffLines(baseSession, session)
		gap, isGap := knownSessionGaps[e.SQL]
		switch {
		case isGap && d == "":
			t.Errorf("entry %d %q: known session gap is closed (%s); remove it from knownSessionGaps", i, e.SQL, gap)
		case isGap:
			t.Logf("KNOWN GAP: entry %d %q left state in the pooled session: %s\n%s", i, e.SQL, gap, d)
			repairSession(t, ex)
		case d != "":
			t.Fatalf("entry %d %q sent straight to the executor changed the pooled session:\n%s", i, e.SQL, d)
		}
	}
	for sql := range want {
		t.Errorf("directRun lists %q, which is not a denied corpus entry", sql)
	}
	t.Logf("%d denied entries sent straight to the executor; %d stopped by the read-only transaction, the one-statement protocol, the cursor or the session-effect check", ran, writesStopped)
}

// repairSession undoes the session state of knownSessionGaps on the
// pooled connection.
func repairSession(t *testing.T, ex *Executor) {
	t.Helper()
	conn, err := ex.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(t.Context(), "DEALLOCATE ALL"); err != nil {
		t.Fatal(err)
	}
}
