#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (default 10s),
# starting from its checked-in corpus in testdata/fuzz/<Target>/.
set -euo pipefail
export GOTOOLCHAIN=go1.26.10
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "-- $pkg $target ($FUZZTIME)"
    go test -run='^$' -fuzz="^${target}\$" -fuzztime="$FUZZTIME" "$pkg"
  done
done
