package sqlquery

import (
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mcp-bastion/bastion/internal/problem"
)

// The session-effect check. A query can call code the parse tree does not
// show: a function of the database (by name, through attribute notation
// or behind an operator, a cast, a domain's CHECK or a view), and that code
// can change the session the pooled connection will carry into the next
// call. The executor therefore looks at the session itself, inside the
// query's transaction after its last row, before the rollback, and again
// after the rollback, in the same round trip: any effect found refuses the
// call (no rows are returned) and the connection is closed, never reused.
//
// What PostgreSQL lets a session see of itself, and so what is compared:
//
//   - advisory locks the backend holds (session- and transaction-level);
//   - every setting set in the session, as name and value, against the
//     same list read when the connection's first transaction began (so a
//     setting changed, added or reset is seen, with no list kept by hand);
//   - channels the session listens on, prepared statements, named open
//     cursors, and whether the session has a temporary schema.
//
// What it does not let a session see: a LISTEN, UNLISTEN or NOTIFY queued
// in the current transaction takes effect only at commit and is listed
// nowhere before; and custom settings ("app.tenant") that no extension
// defines are missing from pg_settings. Both are transactional, and the
// executor never commits, so the rollback discards them. docs/sql-policy.md
// lists these limits.

// effectsColumns is the part of the check the two reads share. Every
// operator and function is named by schema: a query may have changed the
// search_path before the check runs, and nothing the database defines
// may stand in for what the check calls.
const effectsColumns = `SELECT
 (SELECT pg_catalog.count(*) FROM pg_catalog.pg_locks l WHERE l.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid() AND l.locktype OPERATOR(pg_catalog.=) 'advisory'),
 (SELECT pg_catalog.count(*) FROM pg_catalog.pg_listening_channels()),
 (SELECT pg_catalog.count(*) FROM pg_catalog.pg_prepared_statements),
 (SELECT pg_catalog.count(*) FROM pg_catalog.pg_cursors c WHERE c.name OPERATOR(pg_catalog.<>) ''),
 pg_catalog.pg_my_temp_schema() OPERATOR(pg_catalog.<>) 0::pg_catalog.oid, `

// settingsExpr lists the settings set in the session (source "session":
// every SET, SET LOCAL and set_config, the executor's own included), one
// "name=value" per line in name order. A query that sets a setting adds
// or changes a line; one that resets a setting the executor set removes
// one. Settings from the configuration file are left out, so that a
// reload of the server's configuration is not taken for a query's doing.
const settingsExpr = `(SELECT pg_catalog.string_agg(s.name OPERATOR(pg_catalog.||) '=' OPERATOR(pg_catalog.||) COALESCE(s.setting, ''), E'\n' ORDER BY s.name)
 FROM pg_catalog.pg_settings s WHERE s.source OPERATOR(pg_catalog.=) 'session')`

// inTxCheck reads the session inside the query's transaction; its last
// column is the settings list, to compare with the one read after BEGIN.
const inTxCheck = effectsColumns + settingsExpr

// afterRollbackCheck reads the session once a transaction that could not
// be checked (it failed, or its fetch was cancelled) is gone; its last
// column must still say that transactions start read-only.
const afterRollbackCheck = effectsColumns + `pg_catalog.current_setting('default_transaction_read_only')`

// readOnlyCanary follows the rollback of a checked transaction: a session
// that no longer starts transactions read-only is not reused.
const readOnlyCanary = `SELECT pg_catalog.current_setting('default_transaction_read_only')`

// effectColumns is the number of columns both checks return.
const effectColumns = 6

// sessionEffects is what one check read.
type sessionEffects struct {
	advisoryLocks, listening, prepared, cursors string // counts, as text
	tempSchema                                  string // "t" or "f"
	last                                        string // settings, or the read-only default
}

// readEffects decodes the one row of a check.
func readEffects(r *pgconn.Result) (sessionEffects, error) {
	if r.Err != nil {
		return sessionEffects{}, r.Err
	}
	if len(r.Rows) != 1 || len(r.Rows[0]) != effectColumns {
		return sessionEffects{}, fmt.Errorf("sqlquery: session check returned %d rows", len(r.Rows))
	}
	v := r.Rows[0]
	return sessionEffects{
		advisoryLocks: string(v[0]), listening: string(v[1]), prepared: string(v[2]),
		cursors: string(v[3]), tempSchema: string(v[4]), last: string(v[5]),
	}, nil
}

// found names what the session holds that it did not hold before, or
// returns nil. settings is the list read when the connection's first
// transaction began, to compare with the check inside the transaction;
// the check after a rollback carries the read-only default instead.
//
// A session that no longer starts transactions read-only after the
// rollback never did (a rollback undoes every SET, and a change inside
// the transaction is a changed setting there): the connection's set-up
// failed, and the executor closes it without refusing the call.
func (s sessionEffects) found(settings string, afterRollback bool) []string {
	var what []string
	if s.advisoryLocks != "0" {
		what = append(what, "an advisory lock")
	}
	if s.listening != "0" {
		what = append(what, "a LISTEN channel")
	}
	if s.prepared != "0" {
		what = append(what, "a prepared statement")
	}
	if s.cursors != "0" {
		what = append(what, "an open cursor")
	}
	if s.tempSchema != "f" {
		what = append(what, "a temporary object")
	}
	if !afterRollback && s.last != settings {
		what = append(what, "changed settings ("+strings.Join(changedSettings(settings, s.last), ", ")+")")
	}
	return what
}

// changedSettings names the settings whose line differs between two
// lists: a name present in one only, or with another value.
func changedSettings(before, after string) []string {
	values := func(list string) map[string]string {
		m := map[string]string{}
		for _, line := range strings.Split(list, "\n") {
			if name, value, ok := strings.Cut(line, "="); ok {
				m[name] = value
			}
		}
		return m
	}
	b, a := values(before), values(after)
	var names []string
	for name, v := range a {
		if old, ok := b[name]; !ok || old != v {
			names = append(names, name)
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		names = append(names, "the list of settings")
	}
	slices.Sort(names)
	if len(names) > 8 {
		names = append(names[:8], "…")
	}
	for i, n := range names {
		names[i] = problem.Quote(n)
	}
	return names
}

// effectProblem refuses a call whose query left effects on the session.
func effectProblem(what []string) *problem.Problem {
	return violation("the query changed the database session: it left "+strings.Join(what, ", ")+
		"; only queries without side effects are allowed").
		WithMetadata("session_effects", len(what))
}
