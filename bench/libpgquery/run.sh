#!/usr/bin/env bash
# run.sh builds bench/libpgquery/main.c against the libpg_query sources
# vendored in the pg_query_go module that go.mod pins, with the flags
# pg_query_go's cgo build uses plus -O2 (cgo's default), and times
# libpg_query's C entry points on a query: by default the ten-join query of
# BenchmarkPrepare (internal/tools/sqlquery/testdata/analytics_query.sql).
# The build compiles about 75 C files and takes a minute or two.
#
# Usage: bench/libpgquery/run.sh [QUERY_FILE [ITERS]]
set -euo pipefail
export GOTOOLCHAIN=go1.26.10

root=$(cd "$(dirname "$0")/../.." && pwd)
query=${1:-$root/internal/tools/sqlquery/testdata/analytics_query.sql}
iters=${2:-2000}
src=$(cd "$root" && go mod download -json github.com/pganalyze/pg_query_go/v6 | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')/parser
if [[ ! -f $src/include/pg_query.h ]]; then
	echo "run.sh: libpg_query sources not found under $src" >&2
	exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cflags=(-O2 -g -fstack-protector -std=gnu99 -w -DXXH_NAMESPACE=PG_QUERY_
	-I"$src/include" -I"$src/include/postgres" -I"$src")

echo "building libpg_query from the pinned pg_query_go module ..." >&2
# shellcheck disable=SC2016 # the inner sh expands them, per file
find "$src" -maxdepth 1 -name '*.c' -print0 |
	xargs -0 -P "$(nproc)" -I{} sh -c 'f=$1 out=$2; shift 2; exec cc "$@" -c "$f" -o "$out/$(basename "$f" .c).o"' \
		_ {} "$work" "${cflags[@]}"
cc "${cflags[@]}" -c "$root/bench/libpgquery/main.c" -o "$work/bench_main.o"
cc -o "$work/libpgquery-bench" "$work"/*.o
"$work/libpgquery-bench" "$iters" <"$query"
