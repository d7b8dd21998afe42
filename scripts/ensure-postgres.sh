#!/usr/bin/env bash
# ensure-postgres.sh makes sure the PostgreSQL server binaries (initdb,
# pg_ctl, postgres) are installed, installing Debian's postgresql package
# when they are not, and prints their bin directory on stdout.
#
# The test command runs it before `go test`: tests that need PostgreSQL start
# a throwaway cluster from these binaries (internal/pgcluster), and under CI
# they fail rather than skip when the binaries are missing.
#
# $PG_BIN, when set, names the bin directory to use instead; it is checked,
# never installed into.
set -euo pipefail

say() { printf 'ensure-postgres: %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

has_server() { [[ -x "$1/initdb" && -x "$1/pg_ctl" ]]; }

# An override that does not work is an error, not a reason to install
# something else.
if [[ -n "${PG_BIN:-}" ]]; then
	has_server "$PG_BIN" || die "PG_BIN=$PG_BIN has no initdb and pg_ctl"
	printf '%s\n' "$PG_BIN"
	exit 0
fi

# find_bindir prints the bin directory of the highest installed major
# version, as internal/pgcluster.FindBinDir chooses it.
find_bindir() {
	local dir best=""
	while IFS= read -r dir; do
		if has_server "$dir"; then
			best=$dir
		fi
	done < <(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V)
	[[ -n "$best" ]] || return 1
	printf '%s\n' "$best"
}

if bindir=$(find_bindir); then
	printf '%s\n' "$bindir"
	exit 0
fi

say "no PostgreSQL server binaries under /usr/lib/postgresql; installing the postgresql package"
command -v apt-get >/dev/null || die "apt-get not found: install the PostgreSQL server (initdb, pg_ctl) by hand or set PG_BIN"
sudo=()
if [[ $(id -u) -ne 0 ]]; then
	command -v sudo >/dev/null || die "not root and no sudo: cannot install postgresql"
	sudo=(sudo -n)
fi
# apt output goes to stderr so that stdout carries only the bin directory.
"${sudo[@]}" apt-get update >&2 || die "apt-get update failed"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y --no-install-recommends postgresql >&2 || die "apt-get install postgresql failed"

bindir=$(find_bindir) || die "postgresql installed, but no initdb and pg_ctl under /usr/lib/postgresql/*/bin"
say "installed; server binaries in $bindir"
printf '%s\n' "$bindir"
