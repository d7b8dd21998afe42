#!/usr/bin/env bash
# README "Run": a labelled walkthrough of bastion serve and bastion gateway.
#
# It builds bastion, starts a throwaway PostgreSQL with the sample dataset
# (installing the server package when it is missing), and has the demo's
# driver (internal/cmd/demo) play the client of `bastion serve` over stdio,
# one labelled step per request, each response described right after its
# request. Then it runs the admission gate's review workflow and bastion
# gateway in front of examples/refund and bastion serve (the shipped example
# configuration), which the driver calls over Streamable HTTP.
#
# Every request and response, as sent, goes to bin/demo-transcript.jsonl;
# DEMO_RAW=1 prints them under each step too. A step that does not get the
# response it must (a query that fails, a bypass that is not refused) stops
# the demo with a non-zero status, so that it is also a smoke test.
set -euo pipefail
export GOTOOLCHAIN=go1.26.10
cd "$(dirname "$0")/.."

raw=()
[[ -n ${DEMO_RAW:-} ]] && raw=(--raw)

ticker=
gateway=
db_pid=
# cleanup stops whatever is still running, the gateway first (its children
# with it), then the cluster: closing the coprocess's stdin stops and
# deletes it.
cleanup() {
	if [[ -n $ticker ]]; then kill "$ticker" 2>/dev/null || true; fi
	if [[ -n $gateway ]]; then
		kill -TERM "$gateway" 2>/dev/null || true
		wait "$gateway" 2>/dev/null || true
	fi
	if [[ -n $db_pid ]]; then
		# bash unsets DB once the coprocess has exited.
		if [[ -n ${DB[1]:-} ]]; then exec {DB[1]}>&-; fi
		wait "$db_pid" 2>/dev/null || true
	fi
}
trap cleanup EXIT

# with_ticker COMMAND...: runs COMMAND and, when stderr is a terminal,
# counts the seconds on stderr meanwhile, so that a long first build does
# not look like a hang.
with_ticker() {
	if [[ ! -t 2 ]]; then
		"$@"
		return
	fi
	local start=$SECONDS rc=0
	(while sleep 1; do printf '\r  … %ds' $((SECONDS - start)) >&2; done) &
	ticker=$!
	"$@" || rc=$?
	kill "$ticker" 2>/dev/null || true
	wait "$ticker" 2>/dev/null || true
	ticker=
	printf '\r\033[K' >&2
	return $rc
}

cat <<'EOF'
mcp-bastion demo: bastion serve over stdio, then bastion gateway in front of it over HTTP.

bastion serve runs on the embedded default:
  - read_only_sql reads a throwaway PostgreSQL cluster (a temporary directory and a Unix socket,
    deleted at the end) loaded with the sample dataset internal/pgcluster/sample.sql;
  - sandbox_fs_read serves the sample files of testdata/demo-data, read-only;
  - system_metrics reports this host's metrics.
Every request and response, as sent: bin/demo-transcript.jsonl (DEMO_RAW=1 make demo prints them too).

EOF

echo "checking for PostgreSQL server binaries (installs postgresql with apt-get when missing)…"
pg_bin=$(scripts/ensure-postgres.sh)
echo "  found in $pg_bin"
mkdir -p bin
echo "building bin/bastion, with bin/pgthrowaway, bin/refund and the demo's driver bin/demo"
echo "  (the first build compiles the PostgreSQL parser's C code and can take a few minutes)…"
with_ticker go build -o bin/ ./cmd/bastion ./internal/cmd/pgthrowaway ./examples/refund ./internal/cmd/demo

echo "starting the throwaway PostgreSQL cluster and loading the sample dataset…"
# The cluster lives as long as this coprocess's stdin stays open.
coproc DB { bin/pgthrowaway 2>bin/demo-db.log; }
db_pid=$DB_PID
read -r dsn_line <&"${DB[0]}" || { echo "demo: PostgreSQL did not start; see bin/demo-db.log" >&2; exit 1; }
dsn=${dsn_line#MCP_SQL_DSN=}
echo "  ready: MCP_SQL_DSN=$dsn"
echo

: >bin/demo-transcript.jsonl
MCP_LOG_FORMAT=text MCP_SQL_DSN="$dsn" MCP_SAFE_DATA_DIR="$PWD/testdata/demo-data" \
	bin/demo stdio --server bin/bastion --log bin/demo.log --transcript bin/demo-transcript.jsonl "${raw[@]}"

# The gateway in front of the two shipped servers (examples/refund and
# bastion serve, both over stdio), configured by the shipped example on a
# free port, its decision log and state under bin/.
port=$((20000 + RANDOM % 20000))
sed "s/127\.0\.0\.1:8080/127.0.0.1:$port/g" examples/gateway/gateway.yaml >bin/demo-gateway.yaml
sed -i 's#^  file: stderr#  file: bin/demo-audit.jsonl#; s#^state_dir: state#state_dir: bin/demo-state#' bin/demo-gateway.yaml
export MCP_GATEWAY_SESSION_KEY
MCP_GATEWAY_SESSION_KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
# Two callers, with tokens made for this run only: alice (admin), bob (viewer).
rnd() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
admin_token=$(rnd)
viewer_token=$(rnd)
export MCP_GATEWAY_TOKENS="{\"$admin_token\":{\"sub\":\"alice\",\"role\":\"admin\"},\"$viewer_token\":{\"sub\":\"bob\",\"role\":\"viewer\"}}"
: >bin/demo-audit.jsonl
rm -rf bin/demo-state bin/demo-evidence
admit=(bin/bastion admit --config bin/demo-gateway.yaml)

cat <<EOF

== bastion gateway, configured by examples/gateway/gateway.yaml, in front of two stdio servers:
   refund (examples/refund, bin/refund) and db (bastion serve, as above)
   a copy of the configuration listens on 127.0.0.1:$port and keeps its decision log and state under bin/
   (bin/demo-gateway.yaml); two callers have tokens made for this run: alice (admin) and bob (viewer)

== the admission gate, before the gateway serves anything: every tool descriptor is checked,
   pinned by its digest and held until a reviewer approves it (first_use: review)

discover both servers, check and pin every descriptor, write the evidence bundle (bin/demo-evidence):
  \$ ${admit[*]} --evidence bin/demo-evidence
EOF
# The JSON log lines go; the per-server summary stays.
MCP_SQL_DSN="$dsn" "${admit[@]}" --evidence bin/demo-evidence 2>&1 | { grep -v '^{' || true; } | sed 's/^/  /' ||
	{ echo "demo: bastion admit failed; a server failed closed" >&2; exit 1; }

echo
echo "what waits for a reviewer:"
echo "  \$ ${admit[*]} review list"
"${admit[@]}" review list | sed 's/^/  /'

echo
echo "the reviewer reads each descriptor (review show NAME) and approves the digest that was listed:"
echo "  \$ ${admit[*]} review approve NAME --digest DIGEST --by demo-reviewer"
approved=0
while read -r name digest; do
	"${admit[@]}" review approve "$name" --digest "$digest" --by demo-reviewer 2>&1 | sed 's/^/  /'
	approved=$((approved + 1))
done < <("${admit[@]}" review list | awk '$1 == "pending_review" { print $3, $4 }')
[[ $approved -gt 0 ]] || { echo "demo: nothing was waiting for review" >&2; exit 1; }

echo
echo "starting bastion gateway (log: bin/demo-gateway.log):"
echo "  \$ bin/bastion gateway --config bin/demo-gateway.yaml"
MCP_SQL_DSN="$dsn" bin/bastion gateway --config bin/demo-gateway.yaml 2>bin/demo-gateway.log &
gateway=$!
bin/demo gateway --url "http://127.0.0.1:$port" --audit bin/demo-audit.jsonl --transcript bin/demo-transcript.jsonl "${raw[@]}"

echo
echo "stopping bastion gateway with SIGTERM…"
kill -TERM "$gateway"
wait "$gateway" || { echo "demo: bastion gateway exited with status $?; see bin/demo-gateway.log" >&2; exit 1; }
gateway=
# Each child logs its exit on stderr, which the gateway keeps in its log.
for server in refund db; do
	if grep -q "\"server\":\"$server\",\"line\":.*drained; exiting" bin/demo-gateway.log; then
		echo "  $server drained and exited with it"
	fi
done
echo "  bastion gateway stopped"

exec {DB[1]}>&-
wait "$db_pid" || true
db_pid=
echo
echo "the throwaway PostgreSQL cluster is stopped and its directory deleted. Logs and the transcript are in bin/."
