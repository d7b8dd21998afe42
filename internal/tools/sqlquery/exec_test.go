package sqlquery

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/jackc/pgx/v5"

	"github.com/mcp-bastion/bastion/internal/pgcluster/pgtest"
	"github.com/mcp-bastion/bastion/internal/problem"
)

// The tests in this file bypass the policy: they hand SQL straight to the
// Executor, as if the policy had a hole, and check that the executor's own
// defences hold. Each one is the test that fails when one defence is
// removed (scripts/mutate.sh removes them one at a time).

// runDirect runs sql through ex without the policy.
func runDirect(t *testing.T, ex *Executor, sql string) (*ResultSet, error) {
	t.Helper()
	return ex.Run(t.Context(), &Prepared{SQL: sql, Limit: 100})
}

// wantSQLState fails t unless err is a problem carrying the SQLSTATE
// state and the problem code that state maps to.
func wantSQLState(t *testing.T, sql string, err error, state string, code problem.Code) {
	t.Helper()
	if err == nil {
		t.Errorf("%q ran, want SQLSTATE %s", sql, state)
		return
	}
	var prob *problem.Problem
	if !errors.As(err, &prob) {
		t.Errorf("%q: %v, want a problem with SQLSTATE %s", sql, err, state)
		return
	}
	if got := prob.Metadata["sqlstate"]; got != state || prob.Code != code {
		t.Errorf("%q: %s SQLSTATE %v (%s), want %s SQLSTATE %s", sql, prob.Code, got, prob.Detail, code, state)
	}
}

// queryWrites are queries that write, as the policy would refuse them,
// against objects the login role owns: a cursor can be declared for each,
// so only the read-only transaction stops them.
var queryWrites = []string{
	"SELECT * FROM orders FOR UPDATE",
	"SELECT nextval('order_seq')",
	"SELECT setval('counters_id_seq', 1000)",
	"SELECT bump_order_seq()",
	"SELECT delete_from_t()",
	"SELECT * FROM t WHERE a = (SELECT delete_from_t())",
}

// statementWrites are writes that are not queries. The executor runs a
// query as DECLARE … CURSOR FOR, which takes a query only, so each is
// refused before anything runs.
var statementWrites = []string{
	"DELETE FROM t",
	"INSERT INTO t VALUES (7)",
	"UPDATE orders SET amount = 0",
	"TRUNCATE orders",
	"DROP TABLE t",
	"CREATE TABLE x (a int)",
	"ALTER TABLE t ADD COLUMN b int",
	"WITH d AS (DELETE FROM orders RETURNING *) SELECT * FROM d",
	"SELECT * INTO copy_of_t FROM t",
	"CALL p()",
	"EXPLAIN ANALYZE DELETE FROM t",
	"COMMENT ON TABLE t IS 'x'",
}

// TestExecutorRefusesWrites: with no policy in front, every write a query
// can make fails with 25006 inside the executor's transaction, every
// other write is not a query and never runs, and nothing changes. It
// fails when the transaction is not read-only.
func TestExecutorRefusesWrites(t *testing.T) {
	h := newDBHarness(t)
	ex := h.executor(t, 5*time.Second)
	base := h.snapshot(t)
	for _, sql := range queryWrites {
		_, err := runDirect(t, ex, sql)
		wantSQLState(t, sql, err, "25006", problem.QueryViolation)
		if d := diffSnapshots(base, h.snapshot(t)); d != "" {
			t.Fatalf("%q changed the database:\n%s", sql, d)
		}
	}
	for _, sql := range statementWrites {
		_, err := runDirect(t, ex, sql)
		if s := sqlState(err); s != "42601" && s != "0A000" {
			t.Errorf("%q: %v, want SQLSTATE 42601 or 0A000: a cursor takes a query only", sql, err)
		}
		if d := diffSnapshots(base, h.snapshot(t)); d != "" {
			t.Fatalf("%q changed the database:\n%s", sql, d)
		}
	}
}

// TestExecutorRollbackUndoesLargeObjectWrites: PostgreSQL 15 lets the
// large-object functions write in a READ ONLY transaction (16 refuses them
// with 25006); the policy denies lo_*, and the executor's unconditional
// rollback is what undoes them when the policy is bypassed.
func TestExecutorRollbackUndoesLargeObjectWrites(t *testing.T) {
	h := newDBHarness(t)
	ex := h.executor(t, 5*time.Second)
	base := h.snapshot(t)
	for _, sql := range []string{
		"SELECT lo_unlink(1234)",
		"SELECT lo_put(1234, 0, 'overwritten')",
		"SELECT lo_truncate(lo_open(1234, 131072), 0)",
		"SELECT lo_create(77)",
		"SELECT lo_from_bytea(0, 'new')",
	} {
		_, err := runDirect(t, ex, sql)
		if err != nil && sqlState(err) != "25006" {
			t.Errorf("%q: %v, want success (PostgreSQL 15) or SQLSTATE 25006 (16 and later)", sql, err)
		}
		if d := diffSnapshots(base, h.snapshot(t)); d != "" {
			t.Fatalf("%q changed the database:\n%s", sql, d)
		}
	}
}

// TestExecutorTransactionReadOnlyWithoutSessionDefault: a session whose
// read-only default was lost (a pooler, a DSN, a bug) still runs every
// query in a READ ONLY transaction, and the executor then discards that
// session. It fails when BEGIN loses READ ONLY, which the session default
// otherwise hides.
func TestExecutorTransactionReadOnlyWithoutSessionDefault(t *testing.T) {
	h := newDBHarness(t)
	ex := h.executor(t, 5*time.Second)
	base := h.snapshot(t)
	for _, sql := range []string{"SELECT delete_from_t()", "SELECT nextval('order_seq')", "SELECT * FROM orders FOR SHARE"} {
		conn, err := ex.pool.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		pid := conn.Conn().PgConn().PID()
		_, err = conn.Exec(t.Context(), "SET default_transaction_read_only = off")
		conn.Release()
		if err != nil {
			t.Fatal(err)
		}
		_, err = runDirect(t, ex, sql)
		wantSQLState(t, sql, err, "25006", problem.QueryViolation)
		if d := diffSnapshots(base, h.snapshot(t)); d != "" {
			t.Fatalf("%q changed the database:\n%s", sql, d)
		}
		newPID, session := pooledSession(t, ex)
		if newPID == pid {
			t.Errorf("%q: the session without its read-only default was returned to the pool", sql)
		}
		if !strings.Contains(session, "\ndefault_transaction_read_only=on ") {
			t.Errorf("%q: next session is not read-only by default:\n%s", sql, session)
		}
	}
}

// TestExecutorSessionsDefaultReadOnly: every pooled session is read-only
// by default, outside any transaction of the executor, even when the DSN
// asks otherwise. It fails when the pool stops setting
// default_transaction_read_only.
func TestExecutorSessionsDefaultReadOnly(t *testing.T) {
	h := newDBHarness(t)
	base := h.snapshot(t)
	for _, dsn := range []string{
		h.db.DSN(),
		h.db.DSN() + " options='-c default_transaction_read_only=off'",
	} {
		ex := newPoolOfOne(t, dsn, 5*time.Second)
		conn, err := ex.pool.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var ro string
		if err := conn.QueryRow(t.Context(), "SHOW default_transaction_read_only").Scan(&ro); err != nil {
			t.Fatal(err)
		}
		if ro != "on" {
			t.Errorf("DSN %q: pooled session has default_transaction_read_only = %s, want on", dsn, ro)
		}
		// An autocommit write, outside the executor's transaction.
		_, err = conn.Exec(t.Context(), "DELETE FROM t")
		conn.Release()
		if sqlState(err) != "25006" {
			t.Errorf("DSN %q: autocommit DELETE on a pooled session: %v, want SQLSTATE 25006", dsn, err)
		}
		if d := diffSnapshots(base, h.snapshot(t)); d != "" {
			t.Fatalf("DSN %q: changed the database:\n%s", dsn, d)
		}
		ex.Close()
	}
}

// TestExecutorOneStatementPerCall: a second statement never runs, even
// when the DSN asks pgx for the simple protocol, whose Query message runs
// every statement it holds. "COMMIT; SET TRANSACTION READ WRITE; …" would
// otherwise end the read-only transaction and commit a write. The query
// goes to the server with the extended protocol, one statement per Parse,
// as the query of a DECLARE, so a second statement is refused (42601,
// "cannot insert multiple commands") and a first one that is no query is
// a syntax error (42601). It fails when the query goes out with the
// simple protocol.
func TestExecutorOneStatementPerCall(t *testing.T) {
	h := newDBHarness(t)
	base := h.snapshot(t)
	for _, dsn := range []string{
		h.db.DSN(),
		h.db.DSN() + " default_query_exec_mode=simple_protocol",
	} {
		ex := newPoolOfOne(t, dsn, 5*time.Second)
		for _, sql := range []string{
			"SELECT 1; DELETE FROM t",
			"SELECT 1; COMMIT; SET TRANSACTION READ WRITE; DELETE FROM t",
			"SELECT 1; ROLLBACK; BEGIN READ WRITE; DELETE FROM t; COMMIT",
			"SELECT 1; COMMIT; SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE; SELECT 1",
			"COMMIT; SET TRANSACTION READ WRITE; DELETE FROM t",
			"ROLLBACK; BEGIN READ WRITE; DELETE FROM t; COMMIT",
		} {
			_, err := runDirect(t, ex, sql)
			var prob *problem.Problem
			if !errors.As(err, &prob) || prob.Metadata["sqlstate"] != "42601" ||
				!strings.Contains(prob.Detail, "cannot insert multiple commands") && !strings.Contains(prob.Detail, "syntax error at or near") {
				t.Errorf("DSN %q: %q: %v, want SQLSTATE 42601 (cannot insert multiple commands, or a syntax error)", dsn, sql, err)
			}
			if d := diffSnapshots(base, h.snapshot(t)); d != "" {
				t.Fatalf("DSN %q: %q changed the database:\n%s", dsn, sql, d)
			}
		}
		_, session := pooledSession(t, ex)
		if !strings.Contains(session, "\ndefault_transaction_read_only=on ") {
			t.Errorf("DSN %q: the pooled session is no longer read-only by default:\n%s", dsn, session)
		}
		ex.Close()
	}
}

// sessionEffectQueries leave an effect on the session that a rollback
// either keeps (session-level advisory locks, prepared statements) or
// would undo too late to matter for the call (settings, transaction-level
// locks, open cursors). The fixture functions are in harnessFixture.
var sessionEffectQueries = []struct{ sql, effect string }{
	{"SELECT pg_advisory_lock(4242)", "an advisory lock"},
	{"SELECT pg_try_advisory_lock(4242)", "an advisory lock"},
	{"SELECT pg_advisory_lock_shared(1, 2)", "an advisory lock"},
	{"SELECT pg_advisory_xact_lock(7)", "an advisory lock"},
	{"SELECT set_config('search_path', 'evil', false)", `changed settings ("search_path")`},
	{"SELECT set_config('search_path', 'evil', true)", `changed settings ("search_path")`},
	{"SELECT set_config('default_transaction_read_only', 'off', false)", `changed settings ("default_transaction_read_only")`},
	{"SELECT set_config('work_mem', '7MB', false), set_config('application_name', 'x', false)", `changed settings ("application_name", "work_mem")`},
	{"SELECT fx_prepare()", "a prepared statement"},
	{"SELECT fx_cursor_stable()", "an open cursor"},
	{"SELECT fx_hold()", "an open cursor"},
	{"SELECT fx_lock_stable(), fx_config_stable()", `an advisory lock, changed settings ("work_mem")`},
}

// TestExecutorRefusesSessionEffects: with no policy in front, a query
// that leaves any effect on the session is refused — no rows — and its
// session is closed rather than pooled, so the next call meets a clean
// session and no lock is held afterwards. It fails when the
// session-effect check is removed.
func TestExecutorRefusesSessionEffects(t *testing.T) {
	h := newDBHarness(t)
	ex := h.executor(t, 5*time.Second)
	pid, baseSession := pooledSession(t, ex)
	// Control: an ordinary query leaves the session in the pool.
	if _, err := runDirect(t, ex, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if again, _ := pooledSession(t, ex); again != pid {
		t.Fatalf("a clean session was discarded (pid %d, then %d); the checks below would prove nothing", pid, again)
	}
	for _, c := range sessionEffectQueries {
		rs, err := runDirect(t, ex, c.sql)
		var prob *problem.Problem
		switch {
		case rs != nil:
			t.Errorf("%q returned rows, want a refusal", c.sql)
		case !errors.As(err, &prob) || prob.Code != problem.QueryViolation || prob.Metadata["session_effects"] == nil:
			t.Errorf("%q: %v, want a session-effect refusal", c.sql, err)
		case !strings.Contains(prob.Detail, "it left "+c.effect+";"):
			t.Errorf("%q: detail %q, want it to name %s", c.sql, prob.Detail, c.effect)
		}
		newPID, session := pooledSession(t, ex)
		if newPID == pid {
			t.Errorf("%q: the session went back to the pool", c.sql)
		}
		pid = newPID
		if d := diffLines(baseSession, session); d != "" {
			t.Errorf("%q: the next pooled session differs:\n%s", c.sql, d)
		}
		// The superuser takes every advisory lock another session holds,
		// waiting at most 10 s: the discarded backend's exit frees them.
		h.awaitAdvisoryLocks(t)
	}
}

// TestExecutorTransactionalEffectsNeverEscape: what PostgreSQL does not
// show a session before commit — a NOTIFY, a LISTEN, a custom setting no
// extension defines — the session-effect check cannot see, and such a
// query runs. The rollback discards all three: no notification is
// delivered, no channel is listened to, no setting is seen by the next
// call. A superuser listening on the channel proves the first: it sends a
// marker after the call, and the marker is the first notification it
// receives.
func TestExecutorTransactionalEffectsNeverEscape(t *testing.T) {
	h := newDBHarness(t)
	ex := h.executor(t, 5*time.Second)
	if _, err := h.su.Exec(t.Context(), "LISTEN bastion_fx"); err != nil {
		t.Fatal(err)
	}
	pid, baseSession := pooledSession(t, ex)
	for _, sql := range []string{
		"SELECT pg_notify('bastion_fx', 'from the query')",
		"SELECT fx_notify_stable()",
		"SELECT fx_listen()",
		"SELECT set_config('bastion.probe', 'leaked', false)",
	} {
		if _, err := runDirect(t, ex, sql); err != nil {
			t.Fatalf("%q: %v", sql, err)
		}
		if _, err := h.su.Exec(t.Context(), "NOTIFY bastion_fx, 'marker'"); err != nil {
			t.Fatal(err)
		}
		n, err := h.su.WaitForNotification(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if n.Payload != "marker" {
			t.Errorf("%q: a notification of the query was delivered: %q", sql, n.Payload)
		}
		res, err := runDirect(t, ex, "SELECT coalesce(current_setting('bastion.probe', true), '')")
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Rows[0][0]; got != "" {
			t.Errorf("after %q the next call sees bastion.probe = %v", sql, got)
		}
		newPID, session := pooledSession(t, ex)
		if newPID != pid {
			t.Errorf("%q: session replaced (pid %d, was %d); nothing was found, so it should stay", sql, newPID, pid)
			pid = newPID
		}
		if d := diffLines(baseSession, session); d != "" {
			t.Errorf("%q changed the pooled session:\n%s", sql, d)
		}
	}
}

// TestToolClampStopsUnboundedQuery: an endless query returns its first
// rows at once because the executor fetches max_rows + 1 rows of its
// cursor and no more; fetching them all, the server computes until the
// statement timeout. It fails when the row bound is removed.
func TestToolClampStopsUnboundedQuery(t *testing.T) {
	h := newDBHarness(t)
	ex := h.executor(t, 3*time.Second)
	tl, err := NewTool(newTestPolicy(t), ex, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		"WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n FROM r",
		"SELECT generate_series(1, 10000000000)",
		"SELECT n FROM (WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n FROM r) s LIMIT ALL",
	} {
		res, err := tl.Call(t.Context(), toolArgs(t, sql))
		if err != nil {
			t.Errorf("%q: %v", sql, err)
			continue
		}
		var out struct {
			Rows      [][]int64 `json:"rows"`
			RowCount  int       `json:"row_count"`
			Truncated bool      `json:"truncated"`
		}
		if err := json.Unmarshal(res.Structured, &out); err != nil {
			t.Fatal(err)
		}
		if out.RowCount != 5 || !out.Truncated || out.Rows[4][0] != 5 {
			t.Errorf("%q: %s, want rows 1..5, truncated", sql, res.Structured)
		}
	}
}

// TestToolUserFunctionWriteStoppedByTransaction: the denylist knows
// PostgreSQL's functions, not the database's own. A VOLATILE function of
// the database is refused by the catalog check; one the operator allows
// runs, and when it writes, the read-only transaction stops it.
func TestToolUserFunctionWriteStoppedByTransaction(t *testing.T) {
	h := newDBHarness(t)
	queries := []string{"SELECT delete_from_t()", "SELECT bump_order_seq()", "SELECT * FROM orders WHERE id = bump_order_seq()"}
	base := h.snapshot(t)
	for _, allow := range [][]string{nil, {"public.delete_from_t", "public.bump_order_seq"}} {
		ex, err := NewExecutor(h.db.DSN(), ExecOptions{MaxConns: 1, AllowFunctions: allow})
		if err != nil {
			t.Fatal(err)
		}
		tl, err := NewTool(newTestPolicy(t), ex, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, sql := range queries {
			_, err := tl.Call(t.Context(), toolArgs(t, sql))
			if allow == nil {
				if got := executorRefusal(err); got != "catalog" {
					t.Errorf("%q: %v, want a refusal by the catalog check", sql, err)
				}
			} else {
				wantSQLState(t, sql, err, "25006", problem.QueryViolation)
			}
			if d := diffSnapshots(base, h.snapshot(t)); d != "" {
				t.Fatalf("%q changed the database:\n%s", sql, d)
			}
		}
		ex.Close()
	}
}

// TestHarnessSeesChanges proves that the snapshot and the session
// fingerprint the database tests rely on do notice a change.
func TestHarnessSeesChanges(t *testing.T) {
	h := newDBHarness(t)
	ex := h.executor(t, 5*time.Second)
	for _, c := range []struct{ sql, key string }{
		{"INSERT INTO t VALUES (42)", "contents t"},
		{"UPDATE counters SET n = n + 1 WHERE id = 1", "contents counters"},
		{"SELECT nextval('order_seq')", "sequence public.order_seq"},
		{"SELECT nextval('counters_id_seq')", "sequence public.counters_id_seq"},
		{"COMMENT ON TABLE orders IS 'x'", "comment pg_class/"},
		{"ALTER TABLE t ADD COLUMN b int", "rel t"},
		{"CREATE TABLE extra (a int)", "rel extra"},
		{"SELECT lo_put(1234, 0, 'L')", "large object data"},
		{"GRANT SELECT ON orders TO PUBLIC", "rel orders"},
		{"ALTER DATABASE " + h.db.Name + " SET work_mem = '7MB'", "db/role setting "},
	} {
		before := h.snapshot(t)
		h.db.Exec(t, c.sql)
		d := diffSnapshots(before, h.snapshot(t))
		if !strings.Contains(d, c.key) {
			t.Errorf("%q: snapshot diff %q does not mention %q", c.sql, d, c.key)
		}
	}
	// Advisory locks: one a live session holds is reported (so the
	// superuser really asks for that key), one of a closed session is
	// waited for. Both key forms, negative halves included.
	for _, lock := range []string{"SELECT pg_advisory_lock(-4242)", "SELECT pg_advisory_lock(-1, 7)", "SELECT pg_advisory_lock_shared(3, -9)"} {
		conn, err := pgx.Connect(t.Context(), h.db.DSN())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(t.Context(), lock); err != nil {
			t.Fatal(err)
		}
		if err := h.waitAdvisoryLocks(t.Context(), 50*time.Millisecond); err == nil {
			t.Errorf("%s: a lock held by a live session went unnoticed", lock)
		}
		conn.Close(t.Context())
		h.awaitAdvisoryLocks(t)
		var held int
		if err := h.su.QueryRow(t.Context(), "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").Scan(&held); err != nil {
			t.Fatal(err)
		}
		if held != 0 {
			t.Errorf("%s: %d advisory locks held after the session closed", lock, held)
		}
	}

	for _, sql := range []string{"SET work_mem = '7MB'", "PREPARE x AS SELECT 1", "SET search_path = pg_catalog", "LISTEN ch"} {
		_, before := pooledSession(t, ex)
		conn, err := ex.pool.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(t.Context(), sql)
		conn.Release()
		if err != nil {
			t.Fatal(err)
		}
		if _, after := pooledSession(t, ex); diffLines(before, after) == "" {
			t.Errorf("%q: the session fingerprint did not change", sql)
		}
	}
}

// knownClassificationGaps are queries the policy allows whose error is the
// caller's doing but which the executor reports as an infrastructure fault
// (a plain error, -32603 on the wire) and for which it discards the
// session, because their SQLSTATE class is not in the mapping. The test
// logs them and fails once one is mapped, so that it is removed from here.
var knownClassificationGaps = map[string]string{}

// TestToolCallerErrorsAreInBand: errors a query causes come back as
// in-band problems with their SQLSTATE, never as internal errors.
func TestToolCallerErrorsAreInBand(t *testing.T) {
	h := newDBHarness(t)
	ex := h.executor(t, 5*time.Second)
	tl, err := NewTool(newTestPolicy(t), ex, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sql   string
		state string
		code  problem.Code
	}{
		{"SELECT 1 / 0", "22012", problem.Validation},
		{"SELECT 'x'::int", "22P02", problem.Validation},
		{"SELECT (SELECT 1 UNION SELECT 2)", "21000", problem.Validation},
		{"SELECT * FROM nosuch", "42P01", problem.Validation},
		{"SELECT * FROM nosuch.t", "42P01", problem.Validation},
		{"SELECT nosuch()", "42883", problem.Validation},
		{"SELECT * FROM pg_authid", "42501", problem.AccessDenied},
		{"SELECT currval('order_seq')", "55000", problem.Validation},
		{"SELECT lastval()", "55000", problem.Validation},
		{"SELECT nosuch.lower('a')", "3F000", problem.Validation},
		{"SELECT * FROM customers WHERE nosuch.f(id)", "3F000", problem.Validation},
	} {
		_, err := tl.Call(t.Context(), toolArgs(t, c.sql))
		var prob *problem.Problem
		inBand := errors.As(err, &prob)
		gap, known := knownClassificationGaps[c.sql]
		switch {
		case !inBand && known:
			t.Logf("KNOWN GAP: %q: %v: %s", c.sql, err, gap)
		case !inBand:
			t.Errorf("%q: %v, want an in-band %s problem with SQLSTATE %s", c.sql, err, c.code, c.state)
		case known:
			t.Errorf("%q: known classification gap is closed (%s); remove it from knownClassificationGaps", c.sql, gap)
			fallthrough
		default:
			wantSQLState(t, c.sql, err, c.state, c.code)
		}
	}
}

// TestExecutorBoundsResultBytes: rows past MaxResultBytes are not read and
// the result says truncated; a first row larger than the bound, or one
// protocol message larger than the bound and its slack, is refused with
// MCP_PAYLOAD_TOO_LARGE. Each time the fetch is stopped on the server,
// and the next call works.
func TestExecutorBoundsResultBytes(t *testing.T) {
	db := pgtest.NewSampleDB(t)
	const limit = 64 << 10
	ex, err := NewExecutor(db.DSN(), ExecOptions{MaxConns: 1, MaxResultBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })

	// 10 KiB rows: six fit in 64 KiB, the seventh does not.
	rs, err := ex.Run(t.Context(), &Prepared{SQL: "SELECT repeat('x', 10240) FROM generate_series(1, 1000000)", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if rs.RowCount != 6 || !rs.Truncated {
		t.Errorf("10 KiB rows under a 64 KiB bound: %d rows, truncated %v; want 6, true", rs.RowCount, rs.Truncated)
	}

	// NULLs and JSON escapes count: neither can inflate a result past
	// the bound unnoticed.
	rs, err = ex.Run(t.Context(), &Prepared{SQL: "SELECT NULL::int, NULL::int FROM generate_series(1, 1000000)", Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	if !rs.Truncated || rs.RowCount > limit/10 {
		t.Errorf("NULL rows under a 64 KiB bound: %d rows, truncated %v; want at most %d, true", rs.RowCount, rs.Truncated, limit/10)
	}

	// What is emitted stays within 3x of the count, booleans in arrays
	// (f, counted as 2 bytes, emitted as false,) being the worst case.
	for _, sql := range []string{
		"SELECT array_fill(false, ARRAY[3000]) FROM generate_series(1, 1000)",
		"SELECT array_fill(1::numeric, ARRAY[3000]) FROM generate_series(1, 1000)",
		"SELECT false, 1::numeric, '\\x00'::bytea FROM generate_series(1, 100000)",
	} {
		rs, err := ex.Run(t.Context(), &Prepared{SQL: sql, Limit: 100000})
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(rs.Rows)
		if err != nil {
			t.Fatal(err)
		}
		if !rs.Truncated || len(b) > 3*limit {
			t.Errorf("%q: %d bytes of rows, truncated %v; want at most %d, true", sql, len(b), rs.Truncated, 3*limit)
		}
	}

	for _, sql := range []string{
		"SELECT repeat('x', 40000), repeat('y', 40000)", // one row over the bound
		"SELECT repeat(chr(1), 20000)",                  // 20 KB sent, 120 KB as JSON
		"SELECT repeat('x', 1048576)",                   // one message over bound and slack
		"SELECT repeat('x', 400000)::int",               // an error message over it
	} {
		_, err := ex.Run(t.Context(), &Prepared{SQL: sql, Limit: 10})
		var prob *problem.Problem
		if !errors.As(err, &prob) || prob.Code != problem.PayloadTooLarge || prob.Metadata["max_result_bytes"] != limit {
			t.Errorf("%q: %v, want MCP_PAYLOAD_TOO_LARGE with max_result_bytes %d", sql, err, limit)
		}
		rs, err := ex.Run(t.Context(), &Prepared{SQL: "SELECT 1", Limit: 10})
		if err != nil || rs.RowCount != 1 {
			t.Fatalf("the call after %q: %v, %+v", sql, err, rs)
		}
	}

	// Nothing of the stopped queries is still running on the server.
	su, err := pgx.Connect(t.Context(), db.SuperuserDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer su.Close(t.Context())
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := su.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%repeat(%' AND pid <> pg_backend_pid() AND state = 'active'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d stopped queries still active on the server", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
