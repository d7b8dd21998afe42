#!/usr/bin/env bash
# The project's test command (README "Test"): installs what the tests need
# when it is missing, then runs the gates and the whole suite with -race,
# then each fuzz target briefly. CI runs exactly this (.ci/run).
set -euo pipefail
export GOTOOLCHAIN=go1.26.10
cd "$(dirname "$0")/.."

FUZZTIME=${FUZZTIME:-10s}

step() { printf '\n== %s\n' "$*"; }

step "PostgreSQL server binaries"
scripts/ensure-postgres.sh >/dev/null

if [ -f e2e/clients/ts/package-lock.json ]; then
  step "TypeScript SDK client (npm ci)"
  npm ci --prefix e2e/clients/ts --no-audit --no-fund --loglevel=error
fi

if [ -f e2e/clients/conformance/package-lock.json ]; then
  step "MCP conformance suite (npm ci)"
  npm ci --prefix e2e/clients/conformance --no-audit --no-fund --loglevel=error
fi

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.cache/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go vet"
go vet ./...

step "staticcheck"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

step "container profile (scripts/smoke-container.sh --offline)"
scripts/smoke-container.sh --offline

step "go test -race"
go test -race -count=1 -timeout 30m ./...

step "fuzz (each target for $FUZZTIME)"
FUZZTIME=$FUZZTIME scripts/fuzz.sh

step "mutation check: every defence must have a test that fails without it"
scripts/mutate.sh

step "all tests passed"
