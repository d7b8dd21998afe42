#!/usr/bin/env bash
# README "Run": builds bastion and runs `bastion serve` with its embedded
# defaults, driving a real MCP exchange over stdio and printing both sides.
set -euo pipefail
export GOTOOLCHAIN=go1.26.10
cd "$(dirname "$0")/.."

go build -o bin/bastion ./cmd/bastion

requests=(
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"demo","version":"1"}}}'
  '{"jsonrpc":"2.0","method":"notifications/initialized"}'
  '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
  '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"system_metrics","arguments":{}}}'
  '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"system_metrics","arguments":{"unexpected":1}}}'
  '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"no_such_tool"}}'
)

echo "== client -> bastion serve"
printf '%s\n' "${requests[@]}"
echo
echo "== bastion serve -> client (logs on stderr are in bin/demo.log)"
printf '%s\n' "${requests[@]}" | MCP_LOG_FORMAT=text bin/bastion serve 2>bin/demo.log
