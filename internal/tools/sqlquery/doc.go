// Package sqlquery is the read_only_sql tool, and sql_schema beside it
// (the relations and columns the role may SELECT, from one fixed catalog
// query with bound parameters, run by the same executor; see schema.go).
// A query first passes the policy: [Policy.Prepare] decides whether the caller's SQL may run and
// returns the SQL that actually will ([Prepared]). Only that SQL reaches
// the database, inside a read-only transaction. This documentation covers
// the policy.
//
// # How a query is judged
//
// The query goes through the real PostgreSQL parser (libpg_query via
// pg_query_go, cgo), never through regular expressions or a parser of our
// own, so lexer tricks (backslash-escaped quotes in E strings, dollar
// quotes, U&"" identifiers, comments swallowing a suffix) are read exactly
// as the server would read them. Exactly one statement is allowed and it
// must be a SELECT: plain, VALUES, TABLE or a UNION/INTERSECT/EXCEPT of
// those. Every node of the parse tree is then visited by a walk driven by
// the protobuf descriptors of the pg_query messages, not by a list of
// fields kept by hand, so a write or a denied function hidden in a CTE, a
// subquery, LATERAL, a function in FROM, a VALUES list, ORDER BY or a
// window is seen.
// Node kinds are allowed by an explicit list: a kind not on it, including
// any kind a future parser version adds, is refused.
//
// # What runs
//
// The SQL to run is regenerated from the checked tree (deparse; comments
// cannot survive), parsed and checked a second time, must give back the
// same tree, and must contain no comment token. The query's own LIMIT is
// never rewritten: the executor bounds the rows from outside (see
// [Prepared]). The functions the tree names are listed for the
// executor's catalog check ([FuncRef]).
//
// # The executor
//
// [Executor.Run] runs the regenerated SQL as a cursor in a read-only
// transaction that is always rolled back, fetches max_rows rows (and
// moves past one more to learn whether rows were cut), vets
// the query's functions against the catalog before it runs (vet.go) and
// looks, before the rollback, for anything the query left on its session
// (effects.go). A refusal by either is MCP_QUERY_VIOLATION.
//
// # What this is not
//
// The policy is a filter over a parse tree, not an isolation boundary: the
// read-only transaction the executor opens and the least-privilege role it
// connects as are the boundary. docs/sql-policy.md lists every rule and the
// residual risks.
package sqlquery
