#!/usr/bin/env bash
# README "Run": builds bastion, starts a throwaway PostgreSQL with the sample
# dataset (installing the server package when it is missing), serves the
# sample files in testdata/demo-data, and drives a real MCP exchange with
# `bastion serve` over stdio, printing both sides; then runs bastion gateway
# in front of examples/refund and bastion serve (the shipped example
# configuration) and drives it over Streamable HTTP with curl.
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

# The gateway in front of the two shipped servers (examples/refund and
# bastion serve, both over stdio), configured by the shipped example on a
# free port, answering over Streamable HTTP.
go build -o bin/refund ./examples/refund
port=$(( 20000 + RANDOM % 20000 ))
sed "s/127\.0\.0\.1:8080/127.0.0.1:$port/g" examples/gateway/gateway.yaml >bin/demo-gateway.yaml
export MCP_GATEWAY_SESSION_KEY
MCP_GATEWAY_SESSION_KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
# Two callers, with tokens made for this run only: alice (admin), bob (viewer).
rnd() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
admin_token=$(rnd)
viewer_token=$(rnd)
export MCP_GATEWAY_TOKENS="{\"$admin_token\":{\"sub\":\"alice\",\"role\":\"admin\"},\"$viewer_token\":{\"sub\":\"bob\",\"role\":\"viewer\"}}"
sed -i 's#^  file: stderr#  file: bin/demo-audit.jsonl#; s#^state_dir: state#state_dir: bin/demo-state#' bin/demo-gateway.yaml
: >bin/demo-audit.jsonl
rm -rf bin/demo-state bin/demo-evidence

# The admission gate first: one discovery, every descriptor checked and
# held for review (first_use: review), the evidence bundle written.
echo
echo "== bastion admit --evidence: discover, check and pin every downstream descriptor (bundle: bin/demo-evidence)"
MCP_SQL_DSN="$dsn" bin/bastion admit --config bin/demo-gateway.yaml --evidence bin/demo-evidence 2>&1 | grep -v '^{' || true
echo "-- bastion admit review list: what waits for a reviewer"
bin/bastion admit --config bin/demo-gateway.yaml review list
echo "-- the reviewer reads each descriptor (review show NAME) and approves the digest read"
bin/bastion admit --config bin/demo-gateway.yaml review list | awk '$1 == "pending_review" { print $3, $4 }' |
  while read -r name digest; do
    bin/bastion admit --config bin/demo-gateway.yaml review approve "$name" --digest "$digest" --by demo-reviewer 2>&1
  done
MCP_SQL_DSN="$dsn" bin/bastion gateway --config bin/demo-gateway.yaml 2>bin/demo-gateway.log &
gateway=$!
trap 'kill -TERM "$gateway" 2>/dev/null || true; wait "$gateway" 2>/dev/null || true; exec {DB[1]}>&- 2>/dev/null || true; wait 2>/dev/null || true' EXIT
url="http://127.0.0.1:$port/mcp"
for _ in $(seq 100); do
  curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || { echo "demo: the gateway did not become ready; see bin/demo-gateway.log" >&2; exit 1; }

# post METHOD NAME BODY: one stateless 2026-07-28 request, its headers
# mirroring the body, as the caller whose token is in $token; the HTTP
# status is printed after the body.
token=$viewer_token
post() {
  local method=$1 name=$2 body=$3
  echo "-> $body"
  printf '<- '
  curl -sS -X POST "$url" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H "Authorization: Bearer $token" -w '   [HTTP %{http_code}]\n' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H "Mcp-Method: $method" ${name:+-H "Mcp-Name: $name"} -d "$body"
}
meta='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'

echo
echo "== client -> bastion gateway -> refund and bastion serve (Streamable HTTP at $url; gateway logs: bin/demo-gateway.log)"
post tools/list "" '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{'"$meta"'}}'
post tools/call refund.get_customer_record '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"refund.get_customer_record","arguments":{"customer_id":"CUST-00001"},'"$meta"'}}'
post tools/call db.read_only_sql '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"db.read_only_sql","arguments":{"query":"SELECT full_name FROM reporting.customers ORDER BY 1","max_rows":2},'"$meta"'}}'
post tools/call db.read_only_sql '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"db.read_only_sql","arguments":{"query":"COMMIT; DROP SCHEMA reporting CASCADE;"},'"$meta"'}}'
post tools/call refund.trigger_refund '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"refund.trigger_refund","arguments":{"customer_id":"CUST-00001","amount":"10.0","reason":"a string is not an amount"},'"$meta"'}}'
post tools/call read_only_sql '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"read_only_sql","arguments":{},'"$meta"'}}'
post tools/call "" '{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{'"$meta"'}}'

echo
echo "== authorization: bob (viewer) and alice (admin) call refund.admin_reset_key"
echo "-- bob, viewer: refused by the gateway alone (403, -32001)"
post tools/call refund.admin_reset_key '{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"refund.admin_reset_key","arguments":{"key_id":"KEY-PRIMARY"},'"$meta"'}}'
echo "-- no token at all (401, -32000)"
curl -sS -X POST "$url" -H 'Content-Type: application/json' -w '   [HTTP %{http_code}]\n' -d '{"jsonrpc":"2.0","id":11,"method":"tools/list"}'
token=$admin_token
echo "-- alice, admin: forwarded"
post tools/call refund.admin_reset_key '{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"refund.admin_reset_key","arguments":{"key_id":"KEY-PRIMARY"},'"$meta"'}}'
echo "-- what reached the refund server: its own audit log (one reset, alice's)"
post tools/call refund.admin_list_audit_log '{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"refund.admin_list_audit_log","arguments":{},'"$meta"'}}'
echo "-- the gateway's decision log (bin/demo-audit.jsonl): names, never values or tokens"
grep -E '"method":"tools/call"' bin/demo-audit.jsonl | tail -4
kill -TERM "$gateway"
wait "$gateway"
echo
echo "== bastion gateway stopped (SIGTERM): its children were shut down with it"
