#!/usr/bin/env bash
# README "Run": builds bastion, starts a throwaway PostgreSQL with the sample
# dataset (installing the server package when it is missing), serves the
# sample files in testdata/demo-data, and drives a real MCP exchange with
# `bastion serve` over stdio, printing both sides.
set -euo pipefail
export GOTOOLCHAIN=go1.26.10
cd "$(dirname "$0")/.."

scripts/ensure-postgres.sh >/dev/null
mkdir -p bin
go build -o bin/bastion ./cmd/bastion
go build -o bin/pgthrowaway ./internal/cmd/pgthrowaway

# The cluster lives as long as this coprocess's stdin stays open.
coproc DB { bin/pgthrowaway 2>bin/demo-db.log; }
trap 'exec {DB[1]}>&- 2>/dev/null || true; wait 2>/dev/null || true' EXIT
read -r dsn_line <&"${DB[0]}" || { echo "demo: PostgreSQL did not start; see bin/demo-db.log" >&2; exit 1; }
dsn=${dsn_line#MCP_SQL_DSN=}

requests=(
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"demo","version":"1"}}}'
  '{"jsonrpc":"2.0","method":"notifications/initialized"}'
  '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
  '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_only_sql","arguments":{"query":"SELECT c.full_name, count(o.order_id) AS orders, sum(t.total) AS spent FROM reporting.customers c LEFT JOIN reporting.order_totals t USING (customer_id) LEFT JOIN reporting.orders o USING (order_id) GROUP BY c.full_name ORDER BY spent DESC NULLS LAST","max_rows":3}}}'
  '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read_only_sql","arguments":{"query":"COMMIT; DROP SCHEMA reporting CASCADE;"}}}'
  '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"read_only_sql","arguments":{"query":"WITH d AS (DELETE FROM reporting.orders RETURNING *) SELECT count(*) FROM d"}}}'
  '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"sandbox_fs_read","arguments":{"relative_path":"reports/2026-q3.md"}}}'
  '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"sandbox_fs_read","arguments":{"relative_path":"../../../../etc/passwd"}}}'
  '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"system_metrics","arguments":{}}}'
)

echo "== client -> bastion serve"
printf '%s\n' "${requests[@]}"
echo
echo "== bastion serve -> client (server logs: bin/demo.log)"
printf '%s\n' "${requests[@]}" | MCP_LOG_FORMAT=text MCP_SQL_DSN="$dsn" MCP_SAFE_DATA_DIR="$PWD/testdata/demo-data" bin/bastion serve 2>bin/demo.log
