#!/usr/bin/env bash
# Mutation check for the defences of bastion serve and bastion gateway (DESIGN.md: "every
# defence has a test that fails when the defence is removed; a script runs
# those mutations and reports which survive").
#
# The script copies the working tree (tracked and untracked, not ignored,
# files) into a temporary directory, checks that the tests pass there, and
# then, one mutation at a time, removes one defence by a precise edit, runs
# the tests and puts the file back. A mutation is KILLED when a test fails
# and SURVIVED when all pass. It exits non-zero if any mutation survived,
# if an edit did not apply, or if a mutant did not compile.
#
# Usage: scripts/mutate.sh [NAME...]     (no NAME: every mutation)
#
# The mutations run in MUTATE_WORKERS (default 2) worker processes side by
# side, each in a copy of its own, the i-th mutation in worker i mod
# MUTATE_WORKERS; the go build cache is shared. Each worker's report is
# printed when it ends, then the summary of all of them.
#
# Adding a mutation:
#
#   mutate NAME DESCRIPTION FILE PATTERN REPLACEMENT [FILE PATTERN REPLACEMENT ...] -- TEST_PKG [TEST_RUN]
#
# PATTERN is a Perl regular expression that must match exactly once in
# FILE (relative to the repository root), or the script stops: an edit that
# no longer applies must not silently test nothing. REPLACEMENT is literal
# text, in which \n and \t stand for a newline and a tab. TEST_PKG is a go
# test package pattern; TEST_RUN, when given, is passed to -run.
set -euo pipefail
export GOTOOLCHAIN=go1.26.10
root=$(cd "$(dirname "$0")/.." && pwd)

workers=${MUTATE_WORKERS:-2}
# MUTATE_WORKER is set for a worker by the script itself: its index.
worker=${MUTATE_WORKER:-}

work=$(mktemp -d "${TMPDIR:-/tmp}/bastion-mutate.XXXXXX")
trap 'rm -rf "$work"' EXIT
tree=$work/tree
mkdir -p "$tree" "$work/orig" "$work/logs"

# The working tree as it is, uncommitted changes included; bin/, .cache/
# and everything else .gitignore names stay behind.
(
	cd "$root"
	git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do
			[[ -e $f || -L $f ]] && printf '%s\0' "$f"
		done |
		tar --null -T - -cf -
) | tar -xf - -C "$tree"

only=("$@")
declare -a results=()
failed=0

# edit FILE PATTERN REPLACEMENT applies one edit in the copy.
edit() {
	local file=$1 pat=$2 rep=$3
	[[ -f $tree/$file ]] || { echo "   no such file: $file" >&2; return 1; }
	PAT=$pat REP=$rep perl -0777 -e '
		my $file = shift;
		open(my $in, "<", $file) or die "$file: $!\n";
		local $/; my $text = <$in>; close $in;
		my ($pat, $rep) = ($ENV{PAT}, $ENV{REP});
		$rep =~ s/\\n/\n/g; $rep =~ s/\\t/\t/g;
		my $n = () = $text =~ /$pat/g;
		die "pattern matched $n times, want exactly once: $pat\n" if $n != 1;
		$text =~ s/$pat/$rep/;
		open(my $out, ">", $file) or die "$file: $!\n";
		print $out $text; close $out or die "$file: $!\n";
	' "$tree/$file"
}

# run_tests PKG RUN LOG runs the tests in the copy; it returns go test's
# status, or 3 when the mutant does not compile, which must not count as
# killed: go test says so of the package under test and what it imports
# ("[build failed]"), and the e2e tests' TestMain of the binaries it
# builds ("e2e: build"). The e2e binaries are kept between mutants
# (E2E_BIN_DIR), so that only those a mutant changes are linked again.
run_tests() {
	local pkg=$1 run=$2 log=$3
	local -a skip=()
	if [[ $pkg == "$sqlpkg" && -n $sqlskip ]]; then
		skip=(-skip "$sqlskip")
	fi
	local status=0
	(cd "$tree" && E2E_BIN_DIR="$work/e2ebin" go test -count=1 -timeout 15m ${run:+-run "$run"} "${skip[@]}" "$pkg") >"$log" 2>&1 || status=$?
	if ((status != 0)) && grep -qE '\[(build|setup) failed\]|^e2e: build ' "$log"; then
		return 3
	fi
	return "$status"
}

# killers LOG lists the top-level tests that failed.
killers() {
	grep -oE '^--- FAIL: [^/ ]+' "$1" | sed 's/^--- FAIL: //' | sort -u | tr '\n' ' '
}

index=0

mutate() {
	local name=$1 desc=$2
	shift 2
	if ((${#only[@]})) && [[ " ${only[*]} " != *" $name "* ]]; then
		return 0
	fi
	index=$((index + 1))
	if [[ -z $worker ]] || (((index - 1) % workers != worker)); then
		return 0
	fi
	local -a files=()
	while [[ $1 != -- ]]; do
		# Keep the original once, before the first edit of a file.
		if [[ " ${files[*]} " != *" $1 "* ]]; then
			files+=("$1")
			cp -p "$tree/$1" "$work/orig/$(echo "$1" | tr / _)"
		fi
		if ! edit "$1" "$2" "$3"; then
			echo "== $name: $desc"
			echo "   ERROR: the edit of $1 does not apply"
			results+=("ERROR     $name")
			failed=1
			restore "${files[@]}"
			return 0
		fi
		shift 3
	done
	shift
	local pkg=$1 run=${2:-}
	local log=$work/logs/$name.log
	echo "== $name: $desc"
	echo "   edited ${files[*]}; running go test ${run:+-run "$run" }$pkg"
	local start=$SECONDS status=0
	run_tests "$pkg" "$run" "$log" || status=$?
	local took=$((SECONDS - start))
	case $status in
	0)
		echo "   SURVIVED (${took}s): no test failed"
		results+=("SURVIVED  $name")
		failed=1
		;;
	3)
		echo "   ERROR (${took}s): the mutant does not compile:"
		sed 's/^/     /' "$log" | head -20
		results+=("ERROR     $name")
		failed=1
		;;
	*)
		echo "   KILLED (${took}s) by: $(killers "$log")"
		results+=("KILLED    $name")
		;;
	esac
	restore "${files[@]}"
}

# restore FILE... puts the originals back and checks that the copy is
# the unmutated tree again, so that one mutation never leaks into the next.
restore() {
	local f
	for f in "$@"; do
		cp -p "$work/orig/$(echo "$f" | tr / _)" "$tree/$f"
		rm "$work/orig/$(echo "$f" | tr / _)"
	done
	if [[ $(tree_digest) != "$pristine" ]]; then
		echo "   the copy differs from the unmutated tree after restoring ${*}" >&2
		exit 2
	fi
}

tree_digest() {
	(cd "$tree" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum)
}

sqlpkg=./internal/tools/sqlquery/...
e2epkg=./e2e
# The two longest SQL tests, the generated halves of the differential and
# prefix properties (half a minute together), kill no mutation the corpus
# tests do not kill too; the mutants skip them, make test runs them.
sqlskip='^(TestClampIsPrefixGenerated|TestDifferentialGenerated)$'
fspkg=./internal/tools/sandboxfs/...
guardpkg=./internal/guard/...
wirepkg=./internal/wire/...
sessionpkg=./internal/session/...
pristine=$(tree_digest)

if [[ -z $worker ]]; then
	echo "== baseline: the unmutated copy must pass"
	for pkg in "$sqlpkg" "$fspkg" "$guardpkg" "$wirepkg" "$sessionpkg"; do
		if ! run_tests "$pkg" "" "$work/logs/baseline.log"; then
			sed 's/^/   /' "$work/logs/baseline.log" | tail -40
			echo "   baseline FAILED in $pkg: mutation results would mean nothing" >&2
			exit 2
		fi
	done
	echo "   ok"
	echo "== $workers workers"
	pids=()
	for ((k = 0; k < workers; k++)); do
		MUTATE_WORKER=$k "$0" "$@" >"$work/worker$k.log" 2>&1 &
		pids+=($!)
	done
	status=0
	for ((k = 0; k < workers; k++)); do
		wait "${pids[k]}" || status=$?
		echo "== worker $k"
		sed -n '/^== summary$/q;p' "$work/worker$k.log"
	done
	echo
	echo "== summary"
	# Each worker's summary: its results, one line a mutation.
	results=$(for ((k = 0; k < workers; k++)); do
		sed -n '/^== summary$/,$p' "$work/worker$k.log" | grep -E '^   (KILLED|SURVIVED|ERROR) +[^ (]' || true
	done | sort -k2)
	if [[ -n $results ]]; then
		echo "$results"
	fi
	n=$(grep -c . <<<"$results" || true)
	if ((status != 0)); then
		echo "   some defences are not covered by a test (SURVIVED) or could not be mutated (ERROR)" >&2
		exit 1
	fi
	if ((n == 0)); then
		echo "   no mutation matched: ${only[*]}" >&2
		exit 2
	fi
	echo "   every mutation was killed ($n)"
	exit 0
fi

# (a) The walk stops at WITH: a write or a denied function in a CTE passes.
mutate cte-walk "the tree walk does not descend into WITH clauses" \
	internal/tools/sqlquery/walk.go \
	'\tif prob := w\.judge\(m\); prob != nil \{\n' \
	'\tif _, ok := m.Interface().(*pg.WithClause); ok {\n\t\treturn nil\n\t}\n\tif prob := w.judge(m); prob != nil {\n' \
	-- "$sqlpkg" 'TestCorpus$'

# (b) The function denylist is never consulted.
mutate func-denylist "the function denylist check is disabled" \
	internal/tools/sqlquery/walk.go \
	'if _, denied := p\.denied\(last\); denied \{' \
	'if _, denied := p.denied(last); denied && false {' \
	-- "$sqlpkg" 'TestCorpus$|TestWithDeniedFunctions'

# (c) The row bound: the executor fetches every row of the cursor instead
# of max_rows + 1.
mutate fetch-bound "the executor fetches all rows instead of max_rows" \
	internal/tools/sqlquery/executor.go \
	'fmt\.Sprintf\("FETCH FORWARD %d FROM %s", q\.prep\.Limit, cursorName\)' \
	'"FETCH FORWARD ALL FROM "+cursorName' \
	-- "$sqlpkg" 'TestToolClampStopsUnboundedQuery|TestExecutorProbeRowNotSent|TestClampIsPrefixCorpus'

# The second validation accepts whatever the regenerated SQL parses to, as
# long as the policy allows it: a deparser that rewrote the checked tree
# into another allowed query would go unnoticed.
mutate deparse-compare "the regenerated tree is not compared with the checked one" \
	internal/tools/sqlquery/policy.go \
	'if enc, err := encode\(tree\); err != nil \|\| !sameEncoding\(tree\.ProtoReflect\(\)\.Descriptor\(\), enc, checked\) \{' \
	'if _, _ = tree, checked; false {' \
	-- "$sqlpkg" 'TestRecheck'

# (d) The read-only transaction, in its two layers and both at once. Each
# layer is one list of FILE PATTERN REPLACEMENT triples, used alone and
# together.
begin_rw=(internal/tools/sqlquery/executor.go
	'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; '
	'BEGIN ISOLATION LEVEL REPEATABLE READ; ')
session_rw=(internal/tools/sqlquery/executor.go
	'\tcfg\.ConnConfig\.RuntimeParams\["default_transaction_read_only"\] = "on"\n'
	''
	internal/tools/sqlquery/executor.go
	'\t\tif ro != "on" \{'
	'\t\tif false {')

mutate begin-read-only "BEGIN without READ ONLY (the session default still holds)" \
	"${begin_rw[@]}" -- "$sqlpkg" 'TestExecutorTransactionReadOnlyWithoutSessionDefault'

mutate session-read-only "pooled sessions no longer default to read-only (nor check it at connect)" \
	"${session_rw[@]}" -- "$sqlpkg" 'TestExecutorSessionsDefaultReadOnly|TestExecutorRefusesWrites'

mutate read-only-both "neither BEGIN READ ONLY nor a read-only session default" \
	"${begin_rw[@]}" "${session_rw[@]}" -- "$sqlpkg" 'TestExecutorRefusesWrites|TestExecutorTransactionReadOnlyWithoutSessionDefault'

# (e) The query goes out with the simple protocol, whose Query message
# runs every statement it holds, as a DSN with
# default_query_exec_mode=simple_protocol would make pgx do.
mutate one-statement "the query is sent with the simple protocol" \
	internal/tools/sqlquery/executor.go \
	'_, err := pc\.ExecParams\(ctx, sql, nil, nil, nil, nil\)\.Close\(\)' \
	'_, err := pc.Exec(ctx, sql).ReadAll()' \
	-- "$sqlpkg" 'TestExecutorOneStatementPerCall'

# The executor's lines behind the policy: the catalog check of the
# functions a query names, the session-effect check inside the
# transaction, closing a session that held an effect, and the rollback.
mutate catalog-vet "functions of the database are not vetted in the catalog" \
	internal/tools/sqlquery/executor.go \
	'if len\(q\.prep\.Functions\) > 0 \{' \
	'if false {' \
	-- "$sqlpkg" 'TestCatalogCheckJudgesByOrigin|TestToolUserFunctionWriteStoppedByTransaction'

mutate sql-attr-denied "a denied function is called through attribute notation: (0.5::float8).pg_sleep" \
	internal/tools/sqlquery/walk.go \
	'if _, denied := w\.p\.denied\(ref\.Name\); denied \{' \
	'if false {' \
	-- "$sqlpkg" 'TestAttributeNotationJudgedByPolicy'

mutate sql-attr-allowlist "in allowlist mode a function off the list is called through attribute notation" \
	internal/tools/sqlquery/walk.go \
	'\} else if _, allowed := w\.p\.allow\[ref\.Name\]; w\.p\.allow != nil && !allowed \{' \
	'} else if false {' \
	-- "$sqlpkg" 'TestAttributeNotationJudgedByPolicy'

mutate sql-attr-builtin "the catalog check looks only at the database's functions for a refused attribute name" \
	internal/tools/sqlquery/vet.go \
	'AND \(r\.named OR p\.oid OPERATOR' \
	'AND (p.oid OPERATOR' \
	-- "$sqlpkg" 'TestAttributeNotationJudgedByPolicy'

mutate sql-attr-allow-override "MCP_SQL_ALLOW_FUNCTIONS lifts the denylist for an attribute name" \
	internal/tools/sqlquery/vet.go \
	'if \(!allowed \|\| missing\[i-1\]\.Refused != ""\) && ' \
	'if !allowed && ' \
	-- "$sqlpkg" 'TestAttributeNotationJudgedByPolicy'

mutate sql-json-portable "a json value no reader can take as it is (1e999, nested 33 deep) is embedded" \
	internal/tools/sqlquery/values.go \
	'v\.IsValid\(\) && jsondec\.Portable\(v, maxEmbeddedDepth\)' \
	'v.IsValid() && (jsondec.Portable(v, maxEmbeddedDepth) || true)' \
	-- "$sqlpkg" 'TestValueMapping'

mutate jsondec-depth "the nesting bound of jsondec.Portable is not applied" \
	internal/jsondec/jsondec.go \
	'if maxDepth > 0 && d\.StackDepth\(\) > maxDepth \{' \
	'if false {' \
	-- "$sqlpkg" 'TestValueMapping'

mutate session-effects "effects a query leaves on the session are not looked for" \
	internal/tools/sqlquery/executor.go \
	'what := fx\.found\(q\.settings, !inTx\)' \
	'what := fx.found(q.settings, !inTx)[:0]' \
	-- "$sqlpkg" 'TestExecutorRefusesSessionEffects'

mutate anomaly-discard "a session that held an effect goes back to the pool" \
	internal/tools/sqlquery/executor.go \
	'\*healthy = clean && cleanError\(runErr\)' \
	'*healthy = (clean || true) && cleanError(runErr)' \
	-- "$sqlpkg" 'TestExecutorRefusesSessionEffects|TestExecutorTransactionReadOnlyWithoutSessionDefault'

mutate reseed "random() is not reseeded for every call" \
	internal/tools/sqlquery/executor.go \
	'"SELECT pg_catalog\.setseed\(%s\)",' \
	'"SELECT 1 WHERE %s IS NOT NULL",' \
	-- "$sqlpkg" 'TestExecutorReseedsRandom'

mutate always-rollback "the transaction is committed instead of rolled back" \
	internal/tools/sqlquery/executor.go \
	'sql \+= inTxCheck \+ "; ROLLBACK; " \+ readOnlyCanary' \
	'sql += inTxCheck + "; COMMIT; " + readOnlyCanary' \
	-- "$sqlpkg" 'TestExecutorRollbackUndoesLargeObjectWrites|TestExecutorTransactionalEffectsNeverEscape'

# The result bound: rows are read whatever their size.
mutate sql-result-bound "the executor does not bound result bytes" \
	internal/tools/sqlquery/executor.go \
	'if size > e\.opts\.MaxResultBytes \{' \
	'if size > e.opts.MaxResultBytes && false {' \
	-- "$sqlpkg" 'TestExecutorBoundsResultBytes'

# sandbox_fs_read: resolution beneath the root, the file-type check on the
# open descriptor, and the bounded read.
mutate fs-beneath "openat2 resolves without RESOLVE_BENEATH and RESOLVE_NO_MAGICLINKS" \
	internal/tools/sandboxfs/resolve_linux.go \
	'const resolveFlags = unix\.RESOLVE_BENEATH \| unix\.RESOLVE_NO_MAGICLINKS' \
	'const resolveFlags = 0' \
	-- "$fspkg"

mutate fs-type-check "every file type passes the fstat check" \
	internal/tools/sandboxfs/sandboxfs.go \
	'\tcase m\.IsRegular\(\):\n' \
	'\tcase true || m.IsRegular():\n' \
	-- "$fspkg"

mutate fs-byte-cap "the read is not bounded by max_bytes + 1" \
	internal/tools/sandboxfs/sandboxfs.go \
	'want := int\(limit \+ 1\)' \
	'want := int(limit + 1 + 1<<20)' \
	-- "$fspkg"

mutate fs-control-chars "text reads pass control characters through" \
	internal/tools/sandboxfs/sandboxfs.go \
	'if i, r := control\(data\); i >= 0 \{' \
	'if i, r := control(data); i >= 0 && false {' \
	-- "$fspkg"

mutate fs-control-del-c1 "text reads pass DEL and C1 controls (twelve bytes out per byte read, 8-bit CSI)" \
	internal/tools/sandboxfs/sandboxfs.go \
	", c == 0x7f:\n\t\t\treturn i, rune\(c\)\n\t\tcase c == 0xc2 && " \
	":\n\t\t\treturn i, rune(c)\n\t\tcase false && c == 0xc2 && " \
	-- "$fspkg"

# The core: the frame cap while a line streams in, and the sanitizer's
# depth and container-size bounds.
mutate wire-frame-cap "an oversized line is buffered whole instead of discarded" \
	internal/wire/reader.go \
	'if len\(r\.frame\)\+len\(chunk\) > r\.max\+2 \{' \
	'if false {' \
	-- "$wirepkg"

mutate wire-queue-bytes "the output queue is bounded by its count only, not by bytes" \
	internal/wire/conn.go \
	'&& c\.queued\+n <= c\.maxQueued\)\n' \
	'&& true)\n' \
	-- "$wirepkg" 'TestConn'

mutate wire-queue-passing-unbounded "Writes that fit pass a waiting one without bound (a ping flood starves a large answer)" \
	internal/wire/conn.go \
	'if oldest := front\.Value\.\(\*waiter\); oldest\.passed < maxPassed \{' \
	'if oldest := front.Value.(*waiter); oldest.passed >= 0 {' \
	-- "$wirepkg" 'TestConn'

mutate wire-queue-no-passing "no Write passes one waiting for room (the reader stops behind a large answer and misses its cancellation)" \
	internal/wire/conn.go \
	'if oldest := front\.Value\.\(\*waiter\); oldest\.passed < maxPassed \{' \
	'if oldest := front.Value.(*waiter); false && oldest.passed < maxPassed {' \
	-- "$wirepkg" 'TestConn'

mutate wire-queue-no-passing-session "a session's reader waits behind a large answer for room, and misses its cancellation" \
	internal/wire/conn.go \
	'if oldest := front\.Value\.\(\*waiter\); oldest\.passed < maxPassed \{' \
	'if oldest := front.Value.(*waiter); false && oldest.passed < maxPassed {' \
	-- ./internal/session 'TestCancelReadBehindWaitingAnswer'

mutate wire-queue-giveback "a Write admitted as it gives up keeps its room in the output queue for good" \
	internal/wire/conn.go \
	'\t\tc\.queued -= n\n\t\tc\.queuedN--\n\tdefault:' \
	'\tdefault:' \
	-- "$wirepkg" 'TestConn'

mutate wire-queue-withdraw "a Write that gives up its wait for room leaves those behind it waiting" \
	internal/wire/conn.go \
	'\t// Whoever waited behind w may fit now\.\n\tc\.admit\(\)\n' \
	'' \
	-- "$wirepkg" 'TestConn'

mutate guard-depth "the sanitizer does not bound nesting" \
	internal/guard/sanitize.go \
	'object\(depth int\) \*problem\.Problem \{\n\tif depth > s\.lim\.MaxDepth \{' \
	'object(depth int) *problem.Problem {\n\tif false && depth > s.lim.MaxDepth {' \
	internal/guard/sanitize.go \
	'array\(depth int\) \*problem\.Problem \{\n\tif depth > s\.lim\.MaxDepth \{' \
	'array(depth int) *problem.Problem {\n\tif false && depth > s.lim.MaxDepth {' \
	-- "$guardpkg"

# The session: a 2025-03-26 batch answered as one array, and the limiter's
# queue in the order calls arrived.
mutate batch-array "batch members are answered on lines of their own" \
	internal/session/dispatch.go \
	'\t\tr := b\.member\(itemID\(it\)\)\n' \
	'\t\tr := direct\n' \
	-- "$sessionpkg"

mutate arrival-order "a call takes its place in the queue when its task runs, not when it arrives" \
	internal/session/call.go \
	'place := ss\.srv\.limiter\.Reserve\(\)\n\tss\.workers\.run\(func\(\) \{ ss\.runCall\(ctx, c, r, m, version, j\.tool, j\.args, place, asks\) \}\)' \
	'ss.workers.run(func() { ss.runCall(ctx, c, r, m, version, j.tool, j.args, ss.srv.limiter.Reserve(), asks) })' \
	-- "$sessionpkg"

mutate validity-first "the pending cap is checked before the call's own validity" \
	internal/session/call.go \
	'\tj, name, outcome, msg := ss\.judgeCall\(m, version\)\n\tif msg != nil \{' \
	'\tss.mu.Lock()\n\tif len(ss.inflight) >= ss.srv.opts.MaxPending {\n\t\tss.mu.Unlock()\n\t\tr.send(jsonrpc.AppendResult(nil, m.ID, ss.srv.enc.AppendCallProblem(nil, version, problem.New(problem.ConcurrencyLimit, "full"))))\n\t\treturn\n\t}\n\tss.mu.Unlock()\n\tj, name, outcome, msg := ss.judgeCall(m, version)\n\tif msg != nil {' \
	-- "$sessionpkg"

# The gateway (bastion gateway): its front, its invoke path, its
# connectors and its discovery.
gwpkg=./internal/gateway
uppkg=./internal/gateway/upstream

mutate gw-header-sentinel-case "an identity value spelled as the sentinel in upper case travels plain" \
	internal/gateway/upstream/http.go \
	'strings\.EqualFold\(s\[:len\(sentinel\)\], sentinel\)' \
	's[:len(sentinel)] == sentinel' \
	-- "$uppkg" 'TestHeaderValue'

mutate gw-host-check "the front accepts any Host (DNS rebinding)" \
	internal/gateway/front/front.go \
	'if !a\.hosts\[asciiLower\(r\.Host\)\] \{' \
	'if false && !a.hosts[asciiLower(r.Host)] {' \
	-- "$e2epkg" 'TestGatewayFrontRefusals'

mutate gw-origin-check "the front accepts any Origin" \
	internal/gateway/front/front.go \
	'len\(origins\) == 1 && origins\[0\] != "" && asciiLower\(origins\[0\]\) != a\.origin \{' \
	'false && origins[0] != "" && asciiLower(origins[0]) != a.origin {' \
	-- "$e2epkg" 'TestGatewayFrontRefusals'

mutate gw-header-mirror "Mcp-Name is not compared with params.name" \
	internal/gateway/front/mcp.go \
	'if len\(h\.Values\(hdrName\)\) != 1 \|\| !ok \|\| got != \*p\.Name \{' \
	'if false && (len(h.Values(hdrName)) != 1 || !ok || got != *p.Name) {' \
	-- "$e2epkg" 'TestGatewayFrontRefusals'

mutate gw-session-seal "a legacy session id is not checked against its seal" \
	internal/gateway/front/sessions.go \
	'if !hmac\.Equal\(s\.seal\(body\)\[:16\], mac\) \{' \
	'if false && !hmac.Equal(s.seal(body)[:16], mac) {' \
	-- "$e2epkg" 'TestGatewayLegacySessions'

mutate gw-cancel-scope "any session may cancel any session's call" \
	internal/gateway/front/mcp.go \
	'x\.s\.calls\.cancel\(callKey\{session: x\.sess\.nonce, id: id\}\)' \
	'x.s.calls.cancelAny(id)' \
	internal/gateway/front/front.go \
	'var errPeerCancelled = ' \
	'func (c *calls) cancelAny(id jsonrpc.ID) {\n\tc.mu.Lock()\n\tdefer c.mu.Unlock()\n\tfor k, cancel := range c.m {\n\t\tif k.id == id {\n\t\t\tcancel(errPeerCancelled)\n\t\t}\n\t}\n}\n\nvar errPeerCancelled = ' \
	-- "$e2epkg" 'TestGatewayCancellation'

mutate gw-cursor-seal "the gateway's tools/list cursors are not checked against their seal" \
	internal/gateway/list.go \
	'if !hmac\.Equal\(l\.mac\(list, b\[:16\], owner\), b\[16:\]\) \{' \
	'if false && !hmac.Equal(l.mac(list, b[:16], owner), b[16:]) {' \
	-- "$gwpkg" 'TestListerCursors|TestListerPrompts'

mutate gw-ledger-kinds "judging one kind's list marks the other kind's records removed" \
	internal/gateway/admission.go \
	'if r\.Kind != kind \|\| seen\[key\]' \
	'if seen[key]' \
	-- "$gwpkg" 'TestLedgerKinds'

mutate gw-prompt-authz "a prompts/get the deciding rule refuses is forwarded" \
	internal/gateway/prompt.go \
	'\tcase !d\.Allow && !d\.NeedsArgs:' \
	'\tcase false:' \
	-- "$e2epkg" 'TestGatewayPrompts'

mutate gw-prompt-required "a prompts/get without a required argument is forwarded" \
	internal/gateway/prompt.go \
	'\} else if a\.Required \{' \
	'} else if false && a.Required {' \
	-- "$e2epkg" 'TestGatewayPrompts'

mutate gw-prompt-undeclared "a prompts/get with an argument the prompt does not declare is forwarded" \
	internal/gateway/prompt.go \
	'if _, ok := p\.Argument\(k\); !ok \{' \
	'if _, ok := p.Argument(k); false && !ok {' \
	-- "$e2epkg" 'TestGatewayPrompts'

mutate gw-prompt-result "a prompt message of a role the spec does not have is relayed" \
	internal/gateway/prompt.go \
	'if m\.Role == nil \|\| \(\*m\.Role != "user" && \*m\.Role != "assistant"\) \{' \
	'if m.Role == nil {' \
	-- "$e2epkg" 'TestGatewayPrompts'

mutate gw-prompt-scan "a prompt descriptor is not scanned" \
	internal/gateway/catalog/prompt.go \
	'p\.Findings = admit\.Scan\(canon, others\)' \
	'p.Findings = nil' \
	-- ./internal/gateway/catalog 'TestPromptsBesideTools'

mutate gw-prompt-rules "a rule's tool patterns also decide prompts" \
	internal/gateway/policy/policy.go \
	'patterns = pol\.rules\[i\]\.prompts' \
	'patterns = append(pol.rules[i].prompts, pol.rules[i].patterns...)' \
	-- ./internal/gateway/policy 'TestDecidePrompts'

mutate gw-resource-authz "a resources/read the deciding rule refuses is forwarded" \
	internal/gateway/resource.go \
	'\tif !d\.Allow \{\n\t\tev\.Outcome' \
	'\tif false && !d.Allow {\n\t\tev.Outcome' \
	-- "$e2epkg" 'TestGatewayResources'

mutate gw-resource-list-filter "a caller lists resources no rule lets it read" \
	internal/gateway/list.go \
	'return g\.policy\.ListableKind\(pp, policy\.KindResource, server\+":"\+uri\)' \
	'return true' \
	-- "$e2epkg" 'TestGatewayResources'

mutate gw-resource-owner "the owner of a URI two servers offer is decided by their names, not the configuration's order" \
	internal/gateway/catalog/resource.go \
	'order := slices\.Clone\(c\.order\)' \
	'order := slices.Clone(names)' \
	-- "$e2epkg" 'TestGatewayResources'

mutate gw-resource-contents "a resources/read result whose contents lack a uri is relayed" \
	internal/gateway/resource.go \
	'if c\.URI == nil \|\| \(c\.Text == nil\) == \(c\.Blob == nil\) \{' \
	'if false {' \
	-- "$e2epkg" 'TestGatewayResources'

mutate gw-resource-scan "a resource descriptor is not scanned" \
	internal/gateway/catalog/resource.go \
	'r\.Findings = admit\.Scan\(canon, others\)' \
	'r.Findings = nil' \
	-- "$e2epkg" 'TestAdmissionResources'

mutate gw-bare-one-server "names: bare is accepted with two servers, whose names can collide" \
	internal/gateway/config/config.go \
	'case c\.Names == "bare" && len\(c\.Servers\) != 1:' \
	'case false:' \
	-- ./internal/gateway/config 'TestErrorsNameTheKey'

mutate gw-sub-everyone "a resource update reaches every session's stream, not only the subscribers'" \
	internal/gateway/front/sessions.go \
	'\tfor _, n := range nonces \{\n\t\tset := s\.streams\[n\]' \
	'\tfor n := range s.streams {\n\t\tset := s.streams[n]' \
	-- "$e2epkg" 'TestGatewayResourceSubscriptions'

mutate gw-sub-authz "a resources/subscribe the deciding rule refuses reaches the downstream" \
	internal/gateway/resource.go \
	'\tif !d\.Allow \{\n\t\tev\.Outcome' \
	'\tif false && !d.Allow {\n\t\tev.Outcome' \
	-- "$e2epkg" 'TestGatewayResourceSubscriptions'

mutate gw-resource-rule-halves "a resource pattern is matched whole against <server>:<uri>, its server half's * crossing the colon" \
	internal/gateway/policy/policy.go \
	'if Match\(pat\.server, server\) && Match\(pat\.uri, uri\) \{' \
	'if Match(pat.server+":"+pat.uri, server+":"+uri) {' \
	-- ./internal/gateway/policy 'TestResourceHalves'

mutate gw-resource-normal-form "a template-routed URI that is not in normal form is decided and read" \
	internal/gateway/resource.go \
	'if why := catalog\.NotNormal\(uri\); why != "" \{' \
	'if why := catalog.NotNormal(uri); false && why != "" {' \
	-- ./internal/gateway 'TestRouteReadNormalForm'

mutate gw-resource-normal-form-e2e "through the front, other spellings of a template-routed URI reach the server" \
	internal/gateway/resource.go \
	'if why := catalog\.NotNormal\(uri\); why != "" \{' \
	'if why := catalog.NotNormal(uri); false && why != "" {' \
	-- "$e2epkg" 'TestGatewayResourceSpellings'

mutate gw-uri-normal-scheme "a URI's scheme in upper case is normal" \
	internal/gateway/catalog/resource.go \
	'return NotNormalScheme' \
	'_ = NotNormalScheme' \
	-- ./internal/gateway/catalog 'TestNotNormal'

mutate gw-uri-normal-space "a raw space or control character in a URI is normal" \
	internal/gateway/catalog/resource.go \
	'return NotNormalSpace' \
	'_ = NotNormalSpace' \
	-- ./internal/gateway/catalog 'TestNotNormal'

mutate gw-uri-normal-percent "a '%' not followed by two hex digits is normal" \
	internal/gateway/catalog/resource.go \
	'if i\+2 >= len\(uri\) \|\| !isHex\(uri\[i\+1\]\) \|\| !isHex\(uri\[i\+2\]\) \{' \
	'if i+2 >= len(uri) {' \
	-- ./internal/gateway/catalog 'TestNotNormal'

mutate gw-uri-normal-hexcase "a lower-case hex digit in a percent-encoding is normal" \
	internal/gateway/catalog/resource.go \
	'return NotNormalHexCase' \
	'_ = NotNormalHexCase' \
	-- ./internal/gateway/catalog 'TestNotNormal'

mutate gw-uri-normal-unreserved "a percent-encoded unreserved character (%70 for p) is normal" \
	internal/gateway/catalog/resource.go \
	'return NotNormalUnreserved' \
	'_ = NotNormalUnreserved' \
	-- ./internal/gateway/catalog 'TestNotNormal'

mutate gw-uri-normal-encoded "a percent-encoded '/', '\\' or control character is normal" \
	internal/gateway/catalog/resource.go \
	'return NotNormalEncoded' \
	'_ = NotNormalEncoded' \
	-- ./internal/gateway/catalog 'TestNotNormal'

mutate gw-uri-normal-backslash "a backslash before a URI's query is normal" \
	internal/gateway/catalog/resource.go \
	'return NotNormalBackslash' \
	'_ = NotNormalBackslash' \
	-- ./internal/gateway/catalog 'TestNotNormal'

mutate gw-uri-normal-dot "a '.' or '..' path segment is normal" \
	internal/gateway/catalog/resource.go \
	'case seg == "\." \|\| seg == "\.\.":\n\t\t\treturn NotNormalDotSegment' \
	'case seg == "." || seg == "..":\n\t\t\t_ = NotNormalDotSegment' \
	-- ./internal/gateway/catalog 'TestNotNormal'

mutate gw-uri-normal-empty "an empty path segment ('//') is normal" \
	internal/gateway/catalog/resource.go \
	'return NotNormalEmptySegment' \
	'_ = NotNormalEmptySegment' \
	-- ./internal/gateway/catalog 'TestNotNormal'

mutate gw-resource-blob "a read result's blob that is not base64 is relayed" \
	internal/gateway/resource.go \
	'if c\.Blob != nil && !strictBase64\(\*c\.Blob\) \{' \
	'if false {' \
	-- ./internal/gateway 'TestParseContentsBlob|TestReadResourceContents'

mutate gw-resource-blob-strict "a blob with non-zero pad bits is relayed" \
	internal/gateway/resource.go \
	'base64\.StdEncoding\.Strict\(\)\.DecodeString' \
	'base64.StdEncoding.DecodeString' \
	-- ./internal/gateway 'TestParseContentsBlob'

mutate gw-resource-blob-lines "a blob with line breaks, which the decoder skips, is relayed" \
	internal/gateway/resource.go \
	'if strings\.ContainsAny\(s, ' \
	'if false && strings.ContainsAny(s, ' \
	-- ./internal/gateway 'TestParseContentsBlob'

mutate gw-resource-contents-checked "a read's contents are relayed unchecked against the catalog and the rules" \
	internal/gateway/resource.go \
	'if perr := g\.checkContents\(c\.Principal, server, c\.URI, contents\); perr != nil \{' \
	'if perr := g.checkContents(c.Principal, server, c.URI, contents); false && perr != nil {' \
	-- ./internal/gateway 'TestReadResourceContents'

mutate gw-resource-contents-owner "a read's contents may be labelled with a URI another server owns" \
	internal/gateway/resource.go \
	'case o != "" && o != server:\n\t\t\t// Another server.s, whether it serves it now or not\.\n\t\t\treturn fmt\.Errorf\("contents' \
	'case false && o != server:\n\t\t\treturn fmt.Errorf("contents' \
	-- ./internal/gateway 'TestCheckContents|TestReadResourceContents'

mutate gw-resource-contents-authz "a read's contents may be labelled with a URI the caller may not read" \
	internal/gateway/resource.go \
	'if !d\.Allow \{\n\t\t\treturn fmt\.Errorf' \
	'if false {\n\t\t\treturn fmt.Errorf' \
	-- ./internal/gateway 'TestCheckContents|TestReadResourceContents'

mutate gw-stdio-one-line "a message with a raw newline is written to a stdio downstream as it is" \
	internal/gateway/upstream/stdio.go \
	'if !bytes\.ContainsAny\(msg, "\\r\\n"\) \{' \
	'if true {' \
	-- "$uppkg" 'TestStdioWriterOneLine'

mutate gw-relay-answer-compact "the client's answer to a downstream's request is framed uncompacted" \
	internal/gateway/upstream/client.go \
	'if err := \(\*jsontext\.Value\)\(&res\)\.Compact\(\); err != nil \|\| res\.Kind\(\) != .\{. \{' \
	'if res.Kind() != 0x7b {' \
	-- "$uppkg" 'TestRelayedAnswerCompact'

mutate gw-relay-answer-line "neither the writer nor the relay compacts a client's answer (injection into stdio)" \
	internal/gateway/upstream/stdio.go \
	'if !bytes\.ContainsAny\(msg, "\\r\\n"\) \{' \
	'if true {' \
	internal/gateway/upstream/client.go \
	'if err := \(\*jsontext\.Value\)\(&res\)\.Compact\(\); err != nil \|\| res\.Kind\(\) != .\{. \{' \
	'if res.Kind() != 0x7b {' \
	-- "$e2epkg" 'TestGatewayRelayAnswerOneLine'

mutate gw-sse-compact "an SSE event is written with the raw CRs and LFs of its message" \
	internal/gateway/front/mcp.go \
	'if bytes\.ContainsAny\(msg, "\\r\\n"\) \{' \
	'if false {' \
	-- ./internal/gateway/front/ 'TestEventsCompact'

mutate gw-ask-params-compact "a downstream's request params reach the client with their whitespace" \
	internal/jsonrpc/pending.go \
	'if v\.Compact\(\) != nil \{' \
	'if false {' \
	-- ./internal/gateway/front/ 'TestAskParamsCompact'

mutate gw-sse-line "neither the SSE writer nor the ask compacts: a bare CR cuts the client's event" \
	internal/gateway/front/mcp.go \
	'if bytes\.ContainsAny\(msg, "\\r\\n"\) \{' \
	'if false {' \
	internal/jsonrpc/pending.go \
	'if v\.Compact\(\) != nil \{' \
	'if false {' \
	-- "$e2epkg" 'TestGatewayRelaySSECompact'

mutate gw-progress-compact "re-encoded progress params keep the downstream's whitespace" \
	internal/gateway/upstream/meta.go \
	'if err := v\.Compact\(\); err != nil \{' \
	'if false {' \
	-- "$uppkg" 'TestProgressParamsCompact'

mutate gw-http-get-stream "a request on an HTTP downstream's GET stream is attributed to the one call in flight" \
	internal/gateway/upstream/client.go \
	'if stream <= 0 \{\n\t\treturn nil\n\t\}' \
	'if stream <= 0 {\n\t\treturn c.onlyCall()\n\t}' \
	-- "$uppkg" 'TestHTTPGetStreamRequestNotAttributed'

mutate gw-http-call-stream "a request on an HTTP call's response stream is attributed by the one-call rule" \
	internal/gateway/upstream/http.go \
	't\.c\.deliverOn\(msg, id\)' \
	't.c.deliver(msg)' \
	-- "$uppkg" 'TestHTTPCallStreamRequestAttributed'

mutate gw-http-answer-body-read "the body of a POST that carries an answer to the downstream is delivered" \
	internal/gateway/upstream/http.go \
	'case resp\.StatusCode == http\.StatusOK && out\.id == 0:' \
	'case false:' \
	-- "$uppkg" 'TestHTTPAnswerToAnAnswerIsNotRead'

mutate gw-http-unanswered-waits "a POST's response that does not answer its call leaves the call waiting for its deadline" \
	internal/gateway/upstream/http.go \
	't\.c\.fail\(out\.id, ErrMalformed\)' \
	'_ = ErrMalformed' \
	-- "$uppkg" 'TestHTTPUnreadableAnswerFailsAtOnce'

mutate gw-http-accepted-request "a request the downstream accepts with 202 waits for its deadline" \
	internal/gateway/upstream/http.go \
	'case resp\.StatusCode == http\.StatusAccepted && out\.id != 0:' \
	'case false:' \
	-- "$uppkg" 'TestHTTPUnreadableAnswerFailsAtOnce'

mutate gw-http-session-loop "a session the downstream forgets at once is made again at once, in a loop" \
	internal/gateway/upstream/http.go \
	'if time\.Since\(connected\) >= stableSession \{' \
	'if _ = connected; true {' \
	-- "$uppkg" 'TestHTTPForgottenSessionBacksOff'

mutate gw-sse-cr-lines "a lone CR does not end an event stream's line" \
	internal/gateway/upstream/http.go \
	'i := bytes\.IndexAny\(buf, "\\r\\n"\)' \
	'i := bytes.IndexByte(buf, 10)' \
	-- "$uppkg" 'TestSSELines'

mutate gw-sse-bom "an event stream's leading byte order mark is read as data" \
	internal/gateway/upstream/http.go \
	'if b, err := br\.Peek\(3\); err == nil' \
	'if b, err := br.Peek(3); false && err == nil' \
	-- "$uppkg" 'TestSSELines'

mutate gw-unreadable-answer-waits "a stdio line the strict reader refuses, carrying a call's id, leaves the call waiting for its deadline" \
	internal/gateway/upstream/client.go \
	'if id, ok := unreadableResponseID\(frame\); ok && !f\.Batch \{' \
	'if id, ok := unreadableResponseID(frame); false && ok && !f.Batch {' \
	-- "$uppkg" 'FuzzClientResponses'

mutate gw-relay-queue-messages "a caller's log messages are handed over on the downstream's read loop" \
	internal/gateway/upstream/client.go \
	'c\.toCaller\(p, "log message", len\(params\), func\(\) \{ p\.messages\(params\) \}\)' \
	'p.messages(params)' \
	-- "$uppkg" 'TestSlowCallerDoesNotStallConnection'

mutate gw-relay-queue-progress "a caller's progress is handed over on the downstream's read loop" \
	internal/gateway/upstream/client.go \
	'c\.toCaller\(p, "progress", len\(params\), func\(\) \{ p\.progress\(params\) \}\)' \
	'p.progress(params)' \
	-- "$uppkg" 'TestSlowCallerDoesNotStallConnection'

mutate gw-relay-queue-slow-client "a client that stops reading stalls the downstream for every caller" \
	internal/gateway/upstream/client.go \
	'c\.toCaller\(p, "log message", len\(params\), func\(\) \{ p\.messages\(params\) \}\)' \
	'p.messages(params)' \
	-- "$e2epkg" 'TestGatewayRelaySlowClient'

mutate gw-relay-queue-drain "what is queued for a caller is dropped when its call ends" \
	internal/gateway/upstream/client.go \
	'\t\t\t\tcase q := <-r\.ch:\n\t\t\t\t\tr\.run1\(q\)' \
	'\t\t\t\tcase <-r.ch:' \
	-- "$uppkg" 'TestProgressBeforeAnswer'

mutate gw-relay-queue-order "a call's answer is returned before what is queued for its caller" \
	internal/gateway/upstream/client.go \
	'case <-r\.done:\n\tcase <-ctx\.Done\(\):' \
	'default:' \
	-- "$uppkg" 'TestProgressBeforeAnswer'

mutate gw-uri-normal-query-dot "a '..' segment in a template-routed URI's query is normal" \
	internal/gateway/catalog/resource.go \
	'\t\t\tif seg == "\." \|\| seg == "\.\." \{\n\t\t\t\treturn NotNormalDotSegment' \
	'\t\t\tif false && (seg == "." || seg == "..") {\n\t\t\t\treturn NotNormalDotSegment' \
	-- ./internal/gateway/catalog 'TestNotNormal'

mutate gw-uri-normal-nonascii "raw non-ASCII in a template-routed URI is normal" \
	internal/gateway/catalog/resource.go \
	'return NotNormalNonASCII' \
	'_ = NotNormalNonASCII' \
	-- ./internal/gateway/catalog 'TestNotNormal'

mutate gw-relay-after-return "what is queued for a caller reaches it after its call returned" \
	internal/gateway/upstream/client.go \
	'\tdefer r\.bytes\.Add\(-q\.n\)\n\tif r\.over\.Load\(\) \{' \
	'\tdefer r.bytes.Add(-q.n)\n\tif false && r.over.Load() {' \
	-- "$uppkg" 'TestNoProgressAfterCallReturned'

mutate gw-relay-drain-bound "an answered call waits for a caller that takes nothing until its deadline" \
	internal/gateway/upstream/client.go \
	'\tcase <-t\.C:\n' \
	'' \
	-- "$uppkg" 'TestAnsweredCallNotHeldByStalledCaller'

mutate gw-resource-readings "a template-routed URI is decided only as spelled, not as a server that reads its path reads it" \
	internal/gateway/resource.go \
	'if o := decide\(u\); !o\.Allow && o\.Reason != policy\.ReasonNoRule \{' \
	'if o := decide(u); false && !o.Allow {' \
	-- ./internal/gateway 'TestRouteReadReadings'

mutate gw-contents-normal "contents labelled with a URI not in normal form are judged by that spelling" \
	internal/gateway/resource.go \
	'case !exact && catalog\.NotNormal\(c\.URI\) != "":' \
	'case false:' \
	-- ./internal/gateway 'TestCheckContentsSpelling'

mutate gw-uri-normal-authority "an upper-case authority, or a file URI naming a host, is normal" \
	internal/gateway/catalog/resource.go \
	'if strings\.ToLower\(authority\) != authority \|\| scheme == "file" && authority != "" \{' \
	'if _ = authority; false {' \
	-- ./internal/gateway/catalog 'TestNotNormal'

mutate gw-uri-file-no-authority "file:/p is normal beside file:///p, two spellings of one file" \
	internal/gateway/catalog/resource.go \
	'if scheme == "file" && !strings\.HasPrefix\(path, "//"\) \{' \
	'if false {' \
	-- ./internal/gateway/catalog 'TestNotNormal'

mutate gw-policy-server-case "a resource pattern whose server half is not lower case compiles, and matches nothing" \
	internal/gateway/policy/policy.go \
	'if strings\.ToLower\(server\) != server \{' \
	'if false {' \
	-- ./internal/gateway/policy 'TestDecideResources'

mutate gw-sub-unsubscribe "resources/unsubscribe leaves the subscription in place" \
	internal/gateway/subscribe.go \
	'\tif !found \{' \
	'\tif found || !found {' \
	-- "$e2epkg" 'TestGatewayResourceSubscriptions'

mutate gw-complete-authz "a completion of a prompt the caller may not get is forwarded" \
	internal/gateway/complete.go \
	'ev\.Rule = d\.Rule\n\tif !d\.Allow \{' \
	'ev.Rule = d.Rule\n\tif false {' \
	-- "$e2epkg" 'TestGatewayPrompts'

mutate gw-sub-restart "a downstream that restarted is not subscribed again to what its subscribers follow" \
	internal/gateway/gateway.go \
	'\t\td\.g\.wg\.Go\(func\(\) \{ d\.g\.resubscribe\(d\.name\) \}\)' \
	'' \
	-- ./internal/gateway/ 'TestSubscriptionsSurviveARestart'

mutate gw-listchanged-view "a notification stream hears of list changes its caller cannot see" \
	internal/gateway/front/mcp.go \
	'if d == sl\.last\[i\] \{' \
	'if false {' \
	-- "$e2epkg" 'TestGatewayListChangedFollowsTheView'

mutate session-relay-offered "a relayed method is served though the relay does not offer its feature" \
	internal/session/relay.go \
	'return true, rl != nil && feature\(rl\.Offered\(\)\)' \
	'return true, rl != nil && (feature(rl.Offered()) || true)' \
	-- "$sessionpkg" 'TestRelayServed'

mutate session-task-recover "a panic in a task ends the whole process instead of its one request" \
	internal/session/call.go \
	'\t\tdefer func\(\) \{\n\t\t\tif p := recover\(\); p != nil \{\n\t\t\t\tref := newRef\(\)\n\t\t\t\tss\.log\.Error\("panic in "\+m\.Method' \
	'\t\tdefer func() {\n\t\t\tif p := any(nil); p != nil {\n\t\t\t\tref := newRef()\n\t\t\t\tss.log.Error("panic in "+m.Method' \
	-- "$sessionpkg" 'TestRelayServed'

mutate session-relay-task "a relayed request runs on the read loop, which it holds until it ends" \
	internal/session/relay.go \
	'ss\.workers\.run\(func\(\) \{ ss\.runRelay\(ctx, c, r, m, version\) \}\)' \
	'ss.runRelay(ctx, c, r, m, version)' \
	-- "$sessionpkg" 'TestRelayIsATask'

mutate session-cancelled-withheld "a request the client cancelled is answered anyway" \
	internal/session/call.go \
	'\t\treturn !cancelled\n\t\}\n\tif !cancelled && out != nil \{' \
	'\t\treturn !cancelled || true\n\t}\n\tif (!cancelled || true) && out != nil {' \
	-- "$sessionpkg" 'TestRelayIsATask'

mutate session-leave-after-send "a call stops counting only after its answer is queued, when the client may already have read it" \
	internal/session/call.go \
	'ss\.sendQueued\(wctx, out, leave\)' \
	'ss.sendQueued(wctx, out, nil)' \
	-- "$sessionpkg" 'TestAnsweredCallNoLongerCounts'

mutate session-batch-leave-after-send "a batch's calls and bytes stop counting only after the array is queued" \
	internal/session/reply.go \
	"ss\.sendQueued\(ss\.writeCtx, append\(out, '\]'\), leave\)" \
	"ss.sendQueued(ss.writeCtx, append(out, ']'), nil)" \
	-- "$sessionpkg" 'TestAnsweredCallNoLongerCounts'

mutate session-slot-until-queued "a call's slot is freed before its answer is queued: a client that does not read holds an answer per pending call" \
	internal/session/call.go \
	'\tc\.slot = release\n' \
	'\tdefer release()\n' \
	-- "$sessionpkg" 'TestUnreadAnswersCountAsPending'

mutate session-unread-pending "a call leaves the pending count before its answer is queued (a client that does not read)" \
	internal/session/call.go \
	'\t\tss\.sendQueued\(wctx, out, leave\)\n' \
	'\t\tss.mu.Lock()\n\t\tdelete(ss.inflight, m.ID)\n\t\tss.mu.Unlock()\n\t\tss.sendQueued(wctx, out, leave)\n' \
	-- "$sessionpkg" 'TestUnreadAnswersCountAsPending'

mutate session-batch-unread-pending "a batch's calls leave the pending count before its array is queued" \
	internal/session/reply.go \
	'\tss\.mu\.Unlock\(\)\n\t// The calls leave inflight only once the array' \
	'\tfor _, a := range answers {\n\t\tif a.call != nil {\n\t\t\tdelete(ss.inflight, a.id)\n\t\t}\n\t}\n\tss.mu.Unlock()\n\t// The calls leave inflight only once the array' \
	-- "$sessionpkg" 'TestUnreadAnswersCountAsPending'

mutate session-unread-withdraw "a cancellation leaves an ended call's answer waiting for room" \
	internal/session/call.go \
	'\t\t\tc\.withdraw\(ErrPeerCancelled\)\n' \
	'\t\t\t_ = ErrPeerCancelled\n' \
	-- "$sessionpkg" 'TestUnreadAnswersCountAsPending'

mutate session-batch-bytes "answers held for batches are not bounded in bytes" \
	internal/session/reply.go \
	'fits := ss\.batchBytes\+len\(msg\) <= limit' \
	'fits := true' \
	-- "$sessionpkg" 'TestBatchAnswersBounded'

mutate session-batch-bytes-release "a written batch never frees its part of the batch bound" \
	internal/session/reply.go \
	'\tss\.batchBytes -= b\.held\n' \
	'' \
	-- "$sessionpkg" 'TestBatchAnswersBounded'

mutate session-relay-listen-offered "a 2026-07-28 subscription on a server without a relay is told it will hear prompt list changes" \
	internal/session/subscribe.go \
	'\tif rl != nil \{\n\t\tsub\.heard\.Prompts, sub\.heard\.Resources' \
	'\tif true {\n\t\tsub.heard.Prompts, sub.heard.Resources' \
	-- "$sessionpkg" 'TestRelayListChanged'

mutate loglevel-filter "a relaying session passes on log messages below the client's level" \
	internal/session/call.go \
	'min > 0 && logLevelRank\(params\) < min' \
	'false && logLevelRank(params) < min' \
	-- "$sessionpkg" 'TestRelayMessagesLevel'

mutate loglevel-record "a relaying session never records the client's logging/setLevel" \
	internal/session/relay.go \
	'if m\.Method == "logging/setLevel" \{' \
	'if m.Method == "logging/setlevel" {' \
	-- "$sessionpkg" 'TestRelayMessagesLevel'

mutate stdio-waits-settled "--stdio serves before every server settled, so initialize declares no prompts" \
	cmd/bastion/gateway.go \
	'for !g\.Ready\(\) \{' \
	'for false {' \
	-- ./e2e 'TestGatewayStdioDeclaresAtInitialize'

mutate stdio-unsubscribe "resources/unsubscribe leaves the subscription in place" \
	internal/gateway/methods.go \
	'err = ms\.g\.Unsubscribe\(ctx, c\)' \
	'err = nil' \
	-- ./e2e 'TestGatewayStdioSubscriptions'

mutate gw-stdio-messages "a downstream's log messages during a --stdio call never reach the client" \
	internal/gateway/session.go \
	'\tc\.Messages = tool\.MessagesOf\(ctx\)\n' \
	'' \
	-- ./e2e 'TestGatewayStdioDeclares'

mutate session-messages-compact "a relayed log message goes out with the downstream's own whitespace" \
	internal/session/call.go \
	'\tparams = params\.Clone\(\)\n\tif params\.Compact\(\) != nil \{\n\t\treturn\n\t\}\n' \
	'' \
	-- "$sessionpkg" 'TestRelayMessages'

mutate session-messages-relay-only "a tool of a server without a relay may send log messages it never declared" \
	internal/session/call.go \
	'\tif ss\.srv\.opts\.Relay != nil \{\n\t\t// Only a relaying server declares logging' \
	'\tif true {\n\t\t// Only a relaying server declares logging' \
	-- "$sessionpkg" 'TestRelayMessages'

mutate gw-stdio-modern-subscribe "a 2026-07-28 --stdio client subscribes, though it has no session to hear updates on" \
	internal/gateway/session.go \
	'if !mcp\.IsModern\(version\) \{' \
	'if true {' \
	-- ./e2e 'TestGatewayStdioDeclares'

mutate gw-stdio-relay-principal "--stdio prompts and resources are decided for nobody instead of its principal" \
	internal/gateway/session.go \
	'RequestID: rid, Principal: r\.p\}' \
	'RequestID: rid}' \
	-- ./e2e 'TestGatewayStdioRelay'

mutate gw-stdio-listchanged-view "the --stdio client is told of tool list changes it cannot see" \
	internal/gateway/session.go \
	'if d := g\.ViewDigest\(list, view\); d != last\[list\] \{' \
	'if d := g.ViewDigest(list, view); d != last[list] || true {' \
	-- ./internal/gateway/ 'TestSession(Catalog|Relay)WatchFollowsTheView'

mutate gw-complete-condition "a completion under a rule with a condition is forwarded without the condition" \
	internal/gateway/complete.go \
	'\tcall\.Args\[name\] = value\n\treturn g\.policy\.Decide\(p\.Policy\(\), call\)' \
	'\tcall.Args[name] = value\n\td.Allow = true\n\treturn d' \
	-- ./internal/gateway/ 'TestCompletionCondition'

mutate gw-complete-audit-name "a completion audits an argument name the prompt does not declare" \
	internal/gateway/complete.go \
	'if _, ok := pr\.Argument\(name\); ok \{' \
	'if true {' \
	-- ./internal/gateway/ 'TestCompletionAuditNames'

mutate gw-setlevel-offered "logging/setLevel is answered as applied when no server offers logging" \
	internal/gateway/complete.go \
	'if !g\.Offered\(\)\.Logging \{' \
	'if false {' \
	-- ./internal/gateway/ 'TestSetLogLevel'

mutate gw-setlevel-audit "an applied logging/setLevel leaves no audit event" \
	internal/gateway/complete.go \
	'\tev\.Outcome = audit\.Allow\n\tg\.audit\.Record\(ev\)\n\tlevel := c\.Level' \
	'\tlevel := c.Level' \
	-- ./internal/gateway/ 'TestSetLogLevel'

mutate gw-audit-forwarded-code "a forwarded call that failed downstream is audited as answered with a result" \
	internal/gateway/invoke.go \
	'\t\tev\.Code = gwErr\.Code\n\tcase errors\.As\(err, &argErr\)' \
	'\tcase errors.As(err, &argErr)' \
	-- ./e2e 'TestGatewayDownstreamUnavailableWithAuth'

mutate gw-sub-per-principal "one principal's sessions may fill the whole subscription table" \
	internal/gateway/subscribe.go \
	' \|\| s\.byPrincipal\[pk\] >= maxSubscriptionsPerPrincipal' \
	'' \
	-- ./internal/gateway/ 'TestSubscriptionBoundPerPrincipal'

mutate gw-sub-expired "subscriptions of expired sessions are kept when the table is full" \
	internal/gateway/subscribe.go \
	'if !sub\.expires\.IsZero\(\) && now\.After\(sub\.expires\) \{' \
	'if false && now.After(sub.expires) {' \
	-- ./internal/gateway/ 'TestSubscriptionsOfExpiredSessions'

mutate gw-sub-wait-first "a subscriber is told it is subscribed while the first subscribe is on its way, and stays so when it fails" \
	internal/gateway/subscribe.go \
	'\tfor !s\.active\[k\] \{' \
	'\tfor len(s.byURI[k]) == 1 && !s.active[k] {' \
	-- ./internal/gateway/ 'TestSubscribeWhileTheFirstFails'

mutate gw-relay-capability "a downstream's sampling request is relayed to a client that did not declare sampling" \
	internal/gateway/relay.go \
	'if c\.ClientRequests == nil \|\| !declared \{' \
	'if c.ClientRequests == nil || !declared && false {' \
	-- "$e2epkg" 'TestGatewaySampling'

mutate gw-relay-one-call "a downstream's request is attributed to a call while several are in flight" \
	internal/gateway/upstream/client.go \
	'\t\tif only != nil \{\n\t\t\treturn nil\n\t\t\}' \
	'\t\tif only != nil {\n\t\t\treturn only\n\t\t}' \
	-- "$e2epkg" 'TestGatewaySampling'

mutate gw-relay-session "a client's answer counts on a session other than the one asked" \
	internal/jsonrpc/pending.go \
	'p\.m\[pendingKey\{owner, id\}\] = ch' \
	'p.m[pendingKey{"", id}] = ch' \
	internal/jsonrpc/pending.go \
	'ch := p\.m\[pendingKey\{owner, id\}\]' \
	'ch := p.m[pendingKey{"", id}]' \
	-- "$e2epkg" 'TestGatewaySampling'

mutate gw-log-tag "a downstream's log message is relayed without its server's name" \
	internal/gateway/relay.go \
	'\t\tlogger := server\n' \
	'\t\tlogger := ""\n' \
	-- "$e2epkg" 'TestGatewaySampling'

mutate gw-session-header-era "a legacy session is served under a 2026-07-28 or unknown MCP-Protocol-Version header" \
	internal/gateway/front/mcp.go \
	'if hv != "" && !mcp\.IsLegacy\(hv\) \{\n\t\t\treturn invalid\("the MCP-Protocol-Version header is not a session-era' \
	'if false {\n\t\t\treturn invalid("the MCP-Protocol-Version header is not a session-era' \
	-- "$e2epkg" 'TestGatewayLegacySessions'

mutate gw-offered "the gateway declares prompts though no connected server offers them" \
	internal/gateway/complete.go \
	'o\.Prompts = o\.Prompts \|\| offersCapability\(caps, "prompts"\)' \
	'o.Prompts = true' \
	-- "$e2epkg" 'TestGatewayCapabilities'

mutate gw-cursor-list "a tools/list cursor is read as a prompts/list cursor" \
	internal/gateway/list.go \
	'm\.Write\(\[\]byte\("mcp-bastion " \+ list \+ " cursor' \
	'm.Write([]byte("mcp-bastion cursor' \
	-- "$gwpkg" 'TestListerCursors|TestListerPrompts'

mutate gw-argument-schema "arguments are not checked against the tool's input schema" \
	internal/gateway/invoke.go \
	'if err := tool\.ValidateValue\(t\.Input, c\.Arguments\); err != nil \{\n\t\treturn d, err' \
	'if err := tool.ValidateValue(t.Input, c.Arguments); false && err != nil {\n\t\treturn d, err' \
	-- "$gwpkg" 'TestInvokeValidatesArguments'

mutate gw-argument-schema-plain "arguments under a rule without a condition are not checked, or audited as allowed" \
	internal/gateway/invoke.go \
	'if !d\.Allow && !d\.NeedsArgs \{' \
	'if !d.NeedsArgs {' \
	-- "$gwpkg" 'TestInvokeValidatesArguments'

mutate policy-member-check "a condition naming a member principal or tool does not have compiles" \
	internal/gateway/policy/policy.go \
	'if err := unknownField\(ast\.NativeRep\(\)\.Expr\(\)\); err != nil \{' \
	'if err := unknownField(ast.NativeRep().Expr()); false && err != nil {' \
	-- ./internal/gateway/policy 'TestCompileErrorsNameTheRule'

mutate gw-condition-fault-log "a condition that cannot be decided denies without a word to the operator" \
	internal/gateway/invoke.go \
	'if d\.Fault == "" \{\n\t\treturn' \
	'if true {\n\t\treturn' \
	-- "$gwpkg" 'TestConditionFaultLogged'

mutate gw-relay-codes "every downstream error code is relayed as the gateway's own" \
	internal/gateway/invoke.go \
	'case jsonrpc\.CodeParseError, jsonrpc\.CodeInvalidRequest, jsonrpc\.CodeMethodNotFound, jsonrpc\.CodeInvalidParams, jsonrpc\.CodeInternalError:' \
	'case e.Code:' \
	-- "$gwpkg" 'TestRelayError'

mutate gw-metrics-labels "a caller's unknown tool name becomes a metrics label" \
	internal/gateway/invoke.go \
	'g\.metrics\.ToolCall\("", metrics\.Unknown, "unknown_tool", time\.Since\(start\)\)' \
	'g.metrics.ToolCall("", c.Name+metrics.Unknown[:0], "unknown_tool", time.Since(start))' \
	-- "$e2epkg" 'TestGatewayMetrics'

mutate gw-cycle "discovery does not notice a repeated cursor" \
	internal/gateway/discover/discover.go \
	'\t\tif seen\[next\.value\] \{' \
	'\t\tif false && seen[next.value] {' \
	-- ./internal/gateway/discover

mutate gw-progress-token "the downstream's progress token reaches the caller untranslated" \
	internal/gateway/upstream/client.go \
	'params, err := replaceProgressToken\(m\.Params, p\.token\)' \
	'params, err := jsontext.Value(m.Params), error(nil)' \
	-- "$uppkg" 'TestProgressTranslated'

mutate gw-no-listen "the connector holds no notification stream open, so a change between calls is unheard" \
	internal/gateway/upstream/listen.go \
	'if info, ok := c\.Info\(\); !ok \|\| !offersListChanged\(info\.Capabilities\) \{' \
	'if true {' \
	-- "$uppkg" 'TestNotificationsRelayed|TestHTTPListChanged'

mutate gw-list-before-listen "the server is discovered before its notification stream is open" \
	internal/gateway/upstream/listen.go \
	'\tcase <-c\.streaming:\n' \
	'\tdefault:\n' \
	-- "$uppkg" 'TestHTTPListChanged'

mutate session-subscription-silent "a 2026-07-28 stdio client's subscription never hears that the tool list changed" \
	internal/session/relay.go \
	'if sub\.acked && list\.changed\(sub\.heard\) && !ss\.stopping\.Load\(\) \{' \
	'if false && list.changed(sub.heard) {' \
	-- ./internal/session 'TestSubscriptionsListen'

mutate gw-authz "a tools/call the deciding rule refuses is forwarded" \
	internal/gateway/invoke.go \
	'\tif !d\.Allow \{' \
	'\tif false && !d.Allow {' \
	-- "$e2epkg" 'TestGatewayAuthorization'

mutate gw-condition "a rule's condition is not required to hold" \
	internal/gateway/policy/policy.go \
	'\tif b \{\n\t\td\.Allow, d\.Reason = true, ""' \
	'\tif b || true {\n\t\td.Allow, d.Reason = true, ""' \
	-- ./internal/gateway/policy 'TestDecide'

mutate gw-token-compare "any bearer token is taken for the first configured one" \
	internal/gateway/auth/auth.go \
	'if subtle\.ConstantTimeCompare\(sum\[:\], a\.static\[i\]\.SHA256\[:\]\) == 1 \{' \
	'if subtle.ConstantTimeCompare(sum[:], a.static[i].SHA256[:]) == 1 || i == 0 {' \
	-- ./internal/gateway/auth 'TestStaticTokens'

mutate gw-session-owner "a legacy session id is accepted with another principal's token" \
	internal/gateway/front/sessions.go \
	'if !hmac\.Equal\(b\[1\+n\+8\+16:1\+n\+8\+16\+16\], owner\) \{' \
	'if false && !hmac.Equal(b[1+n+8+16:1+n+8+16+16], owner) {' \
	-- "$e2epkg" 'TestGatewayAuthorization'

mutate gw-list-filter "a caller lists tools no rule lets it call" \
	internal/gateway/list.go \
	'\tif g\.filter \{' \
	'\tif false && g.filter {' \
	-- "$e2epkg" 'TestGatewayAuthorization'

mutate gw-identity-role "an HTTP downstream is not told the caller's role" \
	internal/gateway/upstream/http.go \
	'h\.set\(hdrRole, strings\.Join\(who\.Roles, ","\)\)' \
	'_ = who.Roles' \
	-- "$e2epkg" 'TestGatewayIdentityHeaders'

mutate gw-rate "a principal past its rate is served" \
	internal/gateway/front/mcp.go \
	'if ok, wait := s\.limiters\.allow\(x\.p\); !ok \{' \
	'if ok, wait := s.limiters.allow(x.p); false && !ok {' \
	-- "$e2epkg" 'TestGatewayRateLimit'

mutate gw-jwt-audience "a JWT for another audience is accepted" \
	internal/gateway/auth/jwt.go \
	'\t\tjwt\.WithAudience\(v\.opts\.Audience\),\n' \
	'' \
	-- ./internal/gateway/auth 'TestJWT'

mutate gw-auth-failures "failed authentications from one address are not limited" \
	internal/gateway/front/authn.go \
	'\tif blocked \{\n\t\tsecs := max' \
	'\tif false && blocked {\n\t\tsecs := max' \
	-- "$e2epkg" 'TestGatewayAuthFailuresPerAddress'

mutate gw-auth-success-counted "a successful authentication counts against its address as a failure" \
	internal/gateway/front/authn.go \
	'\tsettle\(err != nil\)' \
	'\tsettle(true)' \
	-- "$e2epkg" 'TestGatewayAuthFailuresPerAddress'

mutate gw-auth-held "a token held for a request in flight is counted by another" \
	internal/gateway/front/authn.go \
	'e\.lim\.TokensAt\(now\) - float64\(e\.held\)' \
	'e.lim.TokensAt(now) - 0*float64(e.held)' \
	-- ./internal/gateway/front 'TestAuthFailureHold'

mutate gw-stream-share "one principal may hold every notification stream" \
	internal/gateway/front/sessions.go \
	'\|\|\n\t\ts\.owned\[principal\] >= maxStreamsPerPrincipal \{' \
	'|| false && s.owned[principal] >= maxStreamsPerPrincipal {' \
	-- "$e2epkg" 'TestGatewayListenBounded'

mutate gw-folded-names "a condition may judge one of two case-colliding members while the downstream reads the other" \
	internal/gateway/invoke.go \
	'if name, ok := foldedDuplicate\(c\.Arguments\); ok \{' \
	'if name, ok := foldedDuplicate(c.Arguments); false && ok {' \
	-- "$e2epkg" 'TestGatewayConditionSeesWhatTheDownstreamReads'

mutate gw-case-variant "an argument named as a declared one but for case passes the schema and a condition, and a case-folding downstream reads it as the declared one" \
	internal/gateway/invoke.go \
	'if given, declared, ok := caseVariant\(t\.Input, c\.Arguments\); ok \{' \
	'if given, declared, ok := caseVariant(t.Input, c.Arguments); false && ok {' \
	-- "$e2epkg" 'TestGatewayCaseVariantArgument$'

mutate gw-case-variant-fold "a case variant is looked for as written, not folded" \
	internal/gateway/argcase.go \
	'folded := variantFold\(name\)' \
	'folded := name' \
	-- "$gwpkg" 'TestCaseVariant$'

mutate gw-case-variant-nested "a case variant below the top level is not looked for" \
	internal/gateway/argcase.go \
	'if w\.value\(sub\) \{' \
	'if w.dec.SkipValue() != nil && w.value(sub) {' \
	-- "$gwpkg" 'TestCaseVariant$'

mutate gw-case-variant-items "a case variant in an array's items is not looked for" \
	internal/gateway/argcase.go \
	'if w\.value\(items\(ss, i\)\) \{' \
	'if w.dec.SkipValue() != nil && w.value(items(ss, i)) {' \
	-- "$gwpkg" 'TestCaseVariant$'

mutate gw-case-variant-ref "the properties a \$ref or allOf declares are not known at the level it applies to" \
	internal/gateway/argcase.go \
	'\tdst = append\(dst, s\)\n' \
	'\tdst = append(dst, s)\n\treturn dst\n' \
	-- "$gwpkg" 'TestCaseVariant$'

mutate gw-metrics-host "the metrics endpoint answers any Host, so a page through a rebound DNS name reads it" \
	internal/gateway/metrics/metrics.go \
	'h = guard\(ln\.Addr\(\)\.String\(\), mux, log\)' \
	'h = mux' \
	-- "$e2epkg" 'TestGatewayMetricsHost$'

mutate gw-guard-listener-loopback "a listener on loopback is not put behind the Host and Origin guard" \
	internal/gateway/front/front.go \
	'if !config\.Loopback\(addr\) \{' \
	'if true {' \
	-- ./internal/gateway/front 'TestGuardListener$'

mutate gw-outcome-unknown "a tool gone while its call waited is counted as a downstream error" \
	internal/gateway/invoke.go \
	'case errors\.As\(err, &gwErr\) && gwErr\.unknown:' \
	'case false:' \
	-- "$gwpkg" 'TestOutcome$'

mutate gw-prompt-input-required "a prompts/get answered input_required is reported as a malformed result" \
	internal/gateway/prompt.go \
	'\tif askedForInput\(raw\) \{' \
	'\tif false {' \
	-- "$gwpkg" 'TestInputRequiredOutsideToolsCall'

mutate gw-read-input-required "a resources/read answered input_required is reported as a malformed result" \
	internal/gateway/resource.go \
	'\tif askedForInput\(raw\) \{' \
	'\tif false {' \
	-- "$gwpkg" 'TestInputRequiredOutsideToolsCall'

mutate gw-outcome-denied "a call the policy refused is counted as a downstream's error" \
	internal/gateway/invoke.go \
	'case errors\.As\(err, &gwErr\) && gwErr\.Code == CodeUnauthorized:' \
	'case false:' \
	-- "$gwpkg" 'TestOutcome$'

mutate gw-jwt-roles-split "a roles string is split at any Unicode space, so viewer<NBSP>admin is two roles" \
	internal/gateway/auth/jwt.go \
	'roles = strings\.Split\(x, " "\)' \
	'roles = strings.Fields(x)' \
	-- ./internal/gateway/auth 'TestJWT$'

mutate gw-listen-credential "a subscriptions/listen stream outlives the JWT that opened it" \
	internal/gateway/front/mcp.go \
	'\t\texpired = t\.C\n' \
	'\t\t_ = t.C\n' \
	-- "$e2epkg" 'TestGatewayStreamsEndWithCredential$'

mutate gw-get-credential "a legacy GET stream outlives the JWT that opened it" \
	internal/gateway/front/mcp.go \
	'if !p\.Expires\.IsZero\(\) && p\.Expires\.Before\(end\) \{' \
	'if false {' \
	-- "$e2epkg" 'TestGatewayStreamsEndWithCredential$'

mutate gw-jwt-expires-leeway "a JWT's principal expires at exp, not at exp plus the leeway it is still accepted within" \
	internal/gateway/auth/jwt.go \
	'Expires: exp\.Add\(v\.opts\.Leeway\)' \
	'Expires: exp' \
	-- ./internal/gateway/auth 'TestJWT$'

mutate gw-jwt-empty-sub "a JWT with an empty subject is accepted" \
	internal/gateway/auth/jwt.go \
	'\tif sub == "" \{' \
	'\tif false && sub == "" {' \
	-- ./internal/gateway/auth 'TestJWT'

mutate gw-explicit-env "a stdio child inherits the gateway's environment" \
	internal/gateway/upstream/stdio.go \
	'cmd\.Env = \[\]string\{"PATH=" \+ os\.Getenv\("PATH"\)\}' \
	'cmd.Env = os.Environ()' \
	-- "$uppkg" 'TestExplicitEnvironment'

mutate gw-sigkill "a child that ignores SIGTERM is not killed" \
	internal/gateway/upstream/stdio.go \
	'for _, sig := range \[\]syscall\.Signal\{0, syscall\.SIGTERM, syscall\.SIGKILL\} \{' \
	'for _, sig := range []syscall.Signal{0, syscall.SIGTERM} {' \
	-- "$uppkg" 'TestShutdownKillsProcessThatIgnoresTerm'

# The admission gate (issue 12): pure checks and lifecycle, tested
# without a server; what a downstream receives is the e2e suite's.
admitpkg=./internal/gateway/admit
catpkg=./internal/gateway/catalog

mutate gw-header-nested "strict mode lets x-mcp-header sit on a nested property" \
	internal/gateway/admit/headers.go \
	'if len\(path\) > 0 && \(mode == HeaderSpec \|\| len\(path\) == 1\) \{' \
	'if len(path) > 0 {' \
	-- "$admitpkg" 'TestHeaders'

mutate gw-header-output "an x-mcp-header in the output schema is not looked for" \
	internal/gateway/admit/headers.go \
	'if found == nil && hasOutput \{' \
	'if false && found == nil && hasOutput {' \
	-- "$admitpkg" 'TestHeaders'

mutate gw-header-sensitive "a sensitive name may be mirrored into a header" \
	internal/gateway/admit/headers.go \
	'if s := sensitiveMatch\(legal, name, sensitive\); s != ""' \
	'if s := sensitiveMatch(legal, name, sensitive); false && s != ""' \
	-- "$catpkg" 'TestSchemaRejections'

mutate gw-pin-digest "a changed descriptor keeps its approval (rug pull)" \
	internal/gateway/admit/lifecycle.go \
	'case c\.Digest != r\.Digest:' \
	'case false:' \
	-- "$admitpkg" 'TestObserve'

mutate gw-pin-identity "a changed server identity keeps every approval" \
	internal/gateway/admit/lifecycle.go \
	'case r\.Identity == nil \|\| \*r\.Identity != c\.Identity:' \
	'case r.Identity == nil:' \
	-- "$admitpkg" 'TestObserve'

mutate gw-first-use-findings "pin mode trusts a descriptor the scanner found something in" \
	internal/gateway/admit/lifecycle.go \
	'case len\(c\.Findings\) > 0:' \
	'case false:' \
	-- "$admitpkg" 'TestObserve'

mutate gw-approve-digest "an approval pins whatever waits, not the digest that was read" \
	internal/gateway/admit/lifecycle.go \
	'if prev\.Pending\.Digest != digest \{' \
	'if false {' \
	-- "$admitpkg" 'TestReview'

mutate gw-held-offered "a tool the ledger holds is offered anyway" \
	internal/gateway/catalog/catalog.go \
	'\t\tif r\.Status == admit\.Admitted \{\n\t\t\tadmitted\[r\.Name\] = r\.Digest' \
	'\t\tif r.Status != "" {\n\t\t\tadmitted[r.Name] = r.Digest' \
	-- "$catpkg" 'TestJudgeHolds'

mutate cat-duplicate-case "tool and prompt names that differ only in case are two names, one taking over the other's grant" \
	internal/gateway/catalog/catalog.go \
	'return strings\.ToLower\(name\)\n\}\n\n// nameCounts' \
	'return name\n}\n\n// nameCounts' \
	-- "$catpkg" 'TestDuplicateNames|TestPromptDuplicateNames'

mutate gw-output-schema "a result that fails the pinned outputSchema is relayed" \
	internal/gateway/invoke.go \
	'\tif tool\.ValidateValue\(t\.Output, r\.Structured\) != nil \{' \
	'\tif false {' \
	-- "$gwpkg" 'TestCheckOutput'

mutate gw-param-sentinel "a mirrored value that is not plain ASCII is audited as plain" \
	internal/gateway/invoke.go \
	'\t\t\tif value != x \{\n\t\t\t\tencoding = "base64"' \
	'\t\t\tif false {\n\t\t\t\tencoding = "base64"' \
	-- "$gwpkg" 'TestParamHeaders'

mutate gw-page-duplicates "a repeated envelope member is tolerated in a downstream frame" \
	internal/jsonrpc/decode.go \
	'if names\[name\] \|\| \(name != "result" && !val\.IsValid\(\)\)' \
	'if name != "result" && !val.IsValid()' \
	-- ./internal/jsonrpc 'TestDecodeFrameResults'

mutate admit-diff-items "an array whose item changed is one change, cut before the change it holds" \
	internal/gateway/admit/diff.go \
	'unmarshalRaw\(b, &bs\) == nil && len\(as\) == len\(bs\) \{' \
	'unmarshalRaw(b, &bs) == nil && false {' \
	-- "$admitpkg" 'TestDiff$'

mutate admit-diff-cut "a long changed value is shown by its first bytes, a change past them as no change" \
	internal/gateway/admit/diff.go \
	'before, after := differing\(as, bs\)' \
	'before, after := shown(a), shown(b)\n\t_, _ = as, bs' \
	-- "$admitpkg" 'TestDiff$'

mutate gw-digest-range "a number beyond float64 is clamped into a shared digest" \
	internal/gateway/admit/lifecycle.go \
	'\tif !FiniteNumbers\(raw\) \{' \
	'\tif false {' \
	-- "$admitpkg" 'TestDigestMatchesReferenceJCS'

mutate gw-scan-invisible "invisible characters are not evidence" \
	internal/gateway/admit/scan.go \
	'if at, end, ok := invisible\(s\); ok \{' \
	'if at, end, ok := invisible(s); false && ok {' \
	-- "$admitpkg" 'TestScan'

mutate gw-scan-prefilter-derived "a rule's prefilter forgets the first branch of an alternation" \
	internal/gateway/admit/scan.go \
	'for _, sub := range re\.Sub \{\n\t\t\tset := required\(sub\)' \
	'for _, sub := range re.Sub[1:] {\n\t\t\tset := required(sub)' \
	-- "$admitpkg" 'TestPrefilterHidesNoMatch'

mutate gw-scan-normalized-refs "blobs and tool references are looked for only in the text as written" \
	internal/gateway/admit/scan.go \
	'texts = append\(texts, n\)' \
	'_ = n' \
	-- "$admitpkg" 'TestScan'

mutate gw-scan-vertical-breaks "a vertical tab or form feed is not a line break" \
	internal/gateway/admit/scan.go \
	"r == '\\\\v' \\|\\| r == '\\\\f' \\|\\| " \
	'' \
	-- "$admitpkg" 'TestScan'

mutate gw-scan-numeric-host "only dotted decimal hosts of up to three digits a part are numeric" \
	internal/gateway/admit/scan.go \
	'\(0x\[0-9a-f\]\+\|\\d\+\)\(\\\.\(0x\[0-9a-f\]\+\|\\d\+\)\)\{0,3\}' \
	'\d{1,3}(\.\d{1,3}){1,3}' \
	-- "$admitpkg" 'TestScan'

mutate gw-scan-wrapped-blob "a blob wrapped across lines is not joined" \
	internal/gateway/admit/scan.go \
	'case from >= 0 && wrapped && ' \
	'case false && from >= 0 && wrapped && ' \
	-- "$admitpkg" 'TestScan'

mutate gw-scan-fold-rescan "each mixed word re-reads its whole token for a URL" \
	internal/gateway/admit/scan.go \
	'\t\tif to < end \{\n\t\t\tto = len\(s\)' \
	'\t\tif true {\n\t\t\tto = len(s)' \
	-- ./internal/gateway/admit 'TestScanLinear'

mutate gw-scan-link-text-unbounded "each \"](\" looks back over the whole string for its \"[\"" \
	internal/gateway/admit/scan.go \
	'lo := max\(mid-maxLinkText, 0\)' \
	'lo := 0' \
	-- ./internal/gateway/admit 'TestScanLinear'

mutate gw-scan-link-target-unbounded "each link's target is read to the end of the string" \
	internal/gateway/admit/scan.go \
	'\t\tdest = dest\[:min\(len\(dest\), maxLinkTarget\)\]\n' \
	'' \
	-- ./internal/gateway/admit 'TestScanLinear'

mutate gw-scan-lookalike-words "a word wholly of look-alike letters is read as written" \
	internal/gateway/admit/scan.go \
	'return other && \(latin \|\| lookalike\)' \
	'return other && latin' \
	-- ./internal/gateway/admit 'TestScan$'

mutate gw-scan-marks-kept "combining marks stay on the letters the rules read" \
	internal/gateway/admit/scan.go \
	'\t\tcase unicode\.Is\(unicode\.Mn, r\):\n\t\t\tcontinue\n' \
	'' \
	-- ./internal/gateway/admit 'TestScan$'

mutate gw-scan-latin-lookalikes "Latin look-alikes (small capitals, dotless i) are read as written" \
	internal/gateway/admit/scan.go \
	'\t\tif l, ok := latinLookalikes\[r\]; ok \{\n\t\t\tr = l\n\t\t\}\n' \
	'' \
	-- ./internal/gateway/admit 'TestScan$'

mutate gw-scan-refdef-words "a link definition whose target is words is not evidence" \
	internal/gateway/admit/scan.go \
	'\t\t\t`\|\(\?m:\^\[ >\]\*\\\[\[\^\\\]\\n\]\{1,100\}\\\]: \?<\[\^>\\n\]\* \[\^>\\n\]\*>\)`\+ // a definition whose <target> is words\n' \
	'' \
	-- ./internal/gateway/admit 'TestScan$'

mutate gw-scan-reference-links "reference links are not compared with their definitions' targets" \
	internal/gateway/admit/scan.go \
	'\tif at, end, ok := misleadingReference\(s\); ok \{' \
	'\tif at, end, ok := misleadingReference(s); ok && false {' \
	-- ./internal/gateway/admit 'TestScan$'

mutate gw-scan-lenient-schemes "a target with one slash or a backslash after https: is not read" \
	internal/gateway/admit/scan.go \
	'k > 0 && specialSchemes\[strings\.ToLower\(u\[:k\]\)\] \{' \
	'k > 0 && false && specialSchemes[strings.ToLower(u[:k])] {' \
	-- ./internal/gateway/admit 'TestScan$'

mutate gw-scan-oversized "a string past the bound is read whole and is no finding" \
	internal/gateway/admit/scan.go \
	'\tif len\(s\) > maxScanned \{' \
	'\tif false {' \
	-- ./internal/gateway/admit 'TestScanOversized|TestScanLinear'

mutate gw-scan-reference-hosts "a server's name in a host name is a tool reference" \
	internal/gateway/admit/scan.go \
	'\t\tif at > 0 && strings\.ContainsRune\("/@\.:", rune\(t\[at-1\]\)\) \|\| end < len\(t\) && \(t\[end\] == '"'"'/'"'"' \|\| t\[end\] == '"'"':'"'"'\) \{' \
	'\t\tif false {' \
	-- ./internal/gateway/admit 'TestScan$'

mutate gw-scan-reference-dunder "a client's mcp__server__tool name is no tool reference" \
	internal/gateway/admit/scan.go \
	'`\)\\\.\[A-Za-z0-9_\]\[A-Za-z0-9_\.-\]\*\|\\bmcp__\(` \+ names \+ `\)__\[A-Za-z0-9_\]\+`' \
	'`)\\.[A-Za-z0-9_][A-Za-z0-9_.-]*`' \
	-- ./internal/gateway/admit 'TestScan$'

mutate gw-scan-private-use "private-use characters and the unassigned tags carry hidden bytes unseen" \
	internal/gateway/admit/scan.go \
	'\t\tr >= 0xE0000 && r <= 0xE0FFF,' \
	'\t\tr >= 0xE0000 && r <= 0xE007F,' \
	internal/gateway/admit/scan.go \
	'\t\tunicode\.Is\(unicode\.Co, r\),' \
	'\t\tfalse,' \
	-- ./internal/gateway/admit 'TestScan$'

mutate gw-scan-joiner-lookalikes "a joiner between look-alike letters passes as a script's own" \
	internal/gateway/admit/scan.go \
	' &&\n\t\t\t!slices\.ContainsFunc\(lookalikeScripts, func\(t \*unicode\.RangeTable\) bool \{ return unicode\.Is\(t, c\) \}\)' \
	'' \
	-- ./internal/gateway/admit 'TestScan$'

mutate gw-scan-flag-length "any run of tag characters after a flag passes as a subdivision flag" \
	internal/gateway/admit/scan.go \
	'case n < 7 && \(r >= 0xE0061' \
	'case n < 70 && (r >= 0xE0061' \
	-- ./internal/gateway/admit 'TestScan$'

mutate gw-scan-hidden-markup "HTML comments, markdown comments and hiding styles are not evidence" \
	internal/gateway/admit/scan.go \
	'newRule\(ScanConcealment,\n\t\t`\(\?i\)<!' \
	'newRule("hidden_markup",\n\t\t`(?i)<!' \
	-- "$admitpkg" 'TestScan'

mutate gw-scan-unrendered-elements "text inside template, script, style and noscript elements is not evidence" \
	internal/gateway/admit/scan.go \
	'\t\t\t`\|\(\?s:<\(template[^\n]*\n' \
	'' \
	-- "$admitpkg" 'TestScan'

mutate gw-scan-hiding-styles "zero-size boxes, clips to nothing and text moved off the page are not evidence" \
	internal/gateway/admit/scan.go \
	'\t\t\t`\|\(max-\)\?\(height[^\n]*\n\t\t\t`\|overflow[^\n]*\n\t\t\t`\|clip [^\n]*\n\t\t\t`\|\(left\|[^\n]*\n' \
	'\t\t\t`)`),\n' \
	-- "$admitpkg" 'TestScan'

mutate gw-scan-style-property-start "a hiding property matches inside another's name (min-width, background-color)" \
	internal/gateway/admit/scan.go \
	'\?= \?\["'"'"'\]\?\(\[\^"'"'"'>\]\{0,200\}\?\[;\\s/\]\)\?\(display' \
	'?= ?["'"'"']?[^"'"'"'>]{0,200}?\b(display' \
	-- "$admitpkg" 'TestScan'

mutate gw-scan-greek-variables "Greek variables beside Latin letters (βx, γt) are mixed-script findings" \
	internal/gateway/admit/scan.go \
	'const scientificGreek = "βγδζθλμξπσφψΓΔΘΛΞΠΣΦΨΩ' \
	'const scientificGreek = "μΩΔλπσθφ' \
	-- ./internal/gateway/admit 'TestScan$'

mutate gw-scan-mixed-script "a word mixing Latin and Cyrillic or Greek letters is not evidence" \
	internal/gateway/admit/scan.go \
	'if at, end, ok := mixedWord\(s\); ok \{' \
	'if at, end, ok := mixedWord(s); false && ok {' \
	internal/gateway/admit/scan.go \
	'\} else if at, end, ok := mixedWord\(read\); ok \{' \
	'} else if at, end, ok := mixedWord(read); false && ok {' \
	-- "$admitpkg" 'TestScan'

mutate gw-scan-mixed-digits "a digit ends a word, so a look-alike half after it is a word of one script" \
	internal/gateway/admit/scan.go \
	' && !unicode\.IsDigit\(r\) \{' \
	' {' \
	-- "$admitpkg" 'TestScan'

mutate gw-scan-confusables-fold "the rules read look-alike letters as written" \
	internal/gateway/admit/scan.go \
	'n := foldMixed\(read\) // normalizeText\(s\), keeping read for mixedWord' \
	'n := read' \
	-- "$admitpkg" 'TestScan'

mutate gw-scan-misleading-link "a link whose text names another host is not evidence" \
	internal/gateway/admit/scan.go \
	'if at, end, ok := misleadingLink\(n, lower\); ok \{' \
	'if at, end, ok := misleadingLink(n, lower); false && ok {' \
	-- "$admitpkg" 'TestScan'

mutate gw-scan-link-subdomain "a link's text is compared with its target by suffix alone" \
	internal/gateway/admit/scan.go \
	'strings\.HasSuffix\(a, "\."\+b\)' \
	'strings.HasSuffix(a, b)' \
	-- "$admitpkg" 'TestScan'

# sql_schema: only what the role may SELECT is listed, from the catalog
# query's privilege and system-schema filters; the keyset walks every
# table once; a cursor is read in its one spelling, for its listing.
mutate sql-schema-table-privilege "sql_schema lists relations the role has no SELECT on" \
	internal/tools/sqlquery/schema.go \
	'pg_catalog\.has_any_column_privilege\(c\.oid, .SELECT.\)' \
	'true' \
	-- "$sqlpkg" 'TestSchemaListsWhatTheRoleMaySelect'

mutate sql-schema-column-privilege "sql_schema lists columns outside the role's column grant" \
	internal/tools/sqlquery/schema.go \
	'pg_catalog\.has_column_privilege\(r\.oid, a\.attnum, .SELECT.\)' \
	'true' \
	-- "$sqlpkg" 'TestSchemaListsWhatTheRoleMaySelect'

mutate sql-schema-usage "sql_schema lists tables in schemas the role has no USAGE on" \
	internal/tools/sqlquery/schema.go \
	'pg_catalog\.has_schema_privilege\(n\.oid, .USAGE.\)' \
	'true' \
	-- "$sqlpkg" 'TestSchemaListsWhatTheRoleMaySelect'

mutate sql-schema-system "sql_schema lists the pg_ schemas" \
	internal/tools/sqlquery/schema.go \
	'pg_catalog\.left\(n\.nspname::pg_catalog\.text, 3\) OPERATOR\(pg_catalog\.<>\) .pg_.' \
	'true' \
	-- "$sqlpkg" 'TestSchemaListsWhatTheRoleMaySelect'

mutate sql-schema-information-schema "sql_schema lists information_schema" \
	internal/tools/sqlquery/schema.go \
	'n\.nspname OPERATOR\(pg_catalog\.<>\) .information_schema.' \
	'true' \
	-- "$sqlpkg" 'TestSchemaListsWhatTheRoleMaySelect'

mutate sql-schema-keyset "the next page starts at the last table of the one before" \
	internal/tools/sqlquery/schema.go \
	'pg_catalog\.namesend\(c\.relname\) OPERATOR\(pg_catalog\.>\)' \
	'pg_catalog.namesend(c.relname) OPERATOR(pg_catalog.>=)' \
	-- "$sqlpkg" 'TestSchemaPagination'

mutate sql-schema-cursor-canonical "a cursor is accepted in any spelling that decodes" \
	internal/tools/sqlquery/schema.go \
	'if c\.V != cursorVersion \|\| c\.encode\(\) != s \{' \
	'if c.V != cursorVersion {' \
	-- "$sqlpkg" 'TestSchemaCursorRefused'

mutate sql-schema-cursor-filter "a cursor is accepted for a listing with another schema filter" \
	internal/tools/sqlquery/schema.go \
	'\tif c\.Filter != filter \{' \
	'\tif false {' \
	-- "$sqlpkg" 'TestSchemaCursorRefused'

mutate sql-schema-name-length "a schema filter longer than a name is cut to one by the cast" \
	internal/tools/sqlquery/schema.go \
	'case len\(s\) > maxIdentifierBytes:' \
	'case false:' \
	-- "$sqlpkg" 'TestSchemaArguments'

mutate gw-replica-evidence "a replica's evidence ignores a decision it read from the shared ledger" \
	internal/gateway/gateway.go \
	'\tif admissionState\(d\.g\.catalog\.Snapshot\(\), d\.name\) != before \{' \
	'\tif false && admissionState(d.g.catalog.Snapshot(), d.name) != before {' \
	-- "$e2epkg" 'TestAdmissionSharedLedger'

# bastion serve as a new user meets it: a misspelt variable of ours is not
# taken for another program's; every call, refused or not, leaves its line
# at the default level, without argument values.
mutate serve-near-miss "a misspelt MCP_* variable is ignored like another program's" \
	internal/config/config.go \
	'if near := resembles\(k\); near != "" \{' \
	'if near := ""; near != "" {' \
	-- ./internal/config 'TestUnknownVariables'

mutate serve-call-log-level "the line of a tools/call is not written at the default level" \
	internal/session/call.go \
	'slog\.LevelInfo, "tools/call", ' \
	'slog.LevelDebug, "tools/call", ' \
	-- "$sessionpkg" 'TestCallLogLine'

mutate serve-call-log-refusals "a call refused before it starts leaves no line" \
	internal/session/call.go \
	'\tif msg != nil \{\n\t\tss\.logCall\(name, m\.ID, outcome, start\)' \
	'\tif msg != nil {\n\t\t_ = outcome' \
	-- "$sessionpkg" 'TestCallLogLine'

# A DSN pgx would misread as keyword=value pairs (a URL with an upper-case
# scheme, or none) sends its user, password and host to the default server
# as a setting's name: refused before pgx reads it, and after.
mutate serve-dsn-form "a URL DSN with an upper-case scheme is read as keyword=value pairs" \
	internal/tools/sqlquery/executor.go \
	'if p := dsnFormProblem\(dsn\); p != "" \{' \
	'if p := ""; p != "" {' \
	-- "$sqlpkg" 'TestDSN'

mutate serve-dsn-settings "a keyword that is no setting name is sent to the server" \
	internal/tools/sqlquery/executor.go \
	'if p := settingsProblem\(cfg\.ConnConfig\.RuntimeParams\); p != "" \{' \
	'if p := ""; p != "" {' \
	-- "$sqlpkg" 'TestDSN'

# sql_schema under the result bound: every row of its catalog query fits
# the bound on its own, costed in escaped bytes, so that every page lists
# or skips a table and its cursor moves on: a table's column comments go
# first, then its last columns, and a table whose names alone do not fit
# is passed over.
mutate sql-schema-row-columns "sql_schema lists every column of a table whatever the result bound" \
	internal/tools/sqlquery/schema.go \
	' AND \{\{running\}\} OPERATOR\(pg_catalog\.<=\) \$5::pg_catalog\.int8\) AS keep' \
	') AS keep' \
	-- "$sqlpkg" 'TestSchemaBounds|TestSchemaOversizedTables'

mutate sql-schema-row-comments "sql_schema keeps the column comments whatever the result bound" \
	internal/tools/sqlquery/schema.go \
	'CASE WHEN \{\{with_comments\}\} OPERATOR\(pg_catalog\.<=\) \$5::pg_catalog\.int8 THEN cols\.comments END' \
	'cols.comments' \
	-- "$sqlpkg" 'TestSchemaBounds|TestSchemaOversizedTables'

mutate sql-schema-row-names "sql_schema lists a table whose names alone exceed the result bound" \
	internal/tools/sqlquery/schema.go \
	'CASE WHEN r\.head OPERATOR\(pg_catalog\.<=\) \$5::pg_catalog\.int8 THEN r\.nspname END' \
	'r.nspname' \
	internal/tools/sqlquery/schema.go \
	'CASE WHEN r\.head OPERATOR\(pg_catalog\.<=\) \$5::pg_catalog\.int8 THEN r\.relname END' \
	'r.relname' \
	-- "$sqlpkg" 'TestSchemaOversizedTables'

mutate sql-schema-row-escapes "sql_schema costs a control character as one byte, not as its escape" \
	internal/tools/sqlquery/schema.go \
	'sqlMul\("5", sqlCount\(x, controlBytes\)\)' \
	'sqlMul("0", sqlCount(x, controlBytes))' \
	-- "$sqlpkg" 'TestSchemaCostBound|TestSchemaOversizedTables'

mutate gw-listen-honour-all "a listen is told it follows every resource it named, refused or not" \
	internal/gateway/subscribe.go \
	'ok\[i\] = err == nil' \
	'ok[i] = err == nil || true' \
	-- "$e2epkg" 'TestGatewayListenResources'

mutate gw-listen-no-unsubscribe "a closed listen stream leaves its resources subscribed downstream" \
	internal/gateway/front/mcp.go \
	'defer x\.s\.g\.Unsubscribed\(context\.WithoutCancel\(x\.r\.Context\(\)\), key\)' \
	'_ = context.WithoutCancel' \
	-- "$e2epkg" 'TestGatewayListenResources'

mutate gw-listen-shared-subscriber "every listen stream is one subscriber, so an update reaches one stream of those following it" \
	internal/gateway/front/mcp.go \
	'key := listenPrefix \+ hex\.EncodeToString\(newNonce\(\)\)' \
	'key := listenPrefix + hex.EncodeToString(newNonce()[:0])' \
	-- "$e2epkg" 'TestGatewayListenResources'

mutate listen-unbounded "a listen may name any number of resources" \
	internal/mcp/subscription.go \
	'if n\.URIs != nil && len\(\*n\.URIs\) > MaxListenResources \{' \
	'if n.URIs != nil && len(*n.URIs) > MaxListenResources*1000 {' \
	-- ./internal/mcp 'TestListenParams'

mutate gw-listen-unbounded "a listen over HTTP may name any number of resources" \
	internal/mcp/subscription.go \
	'if n\.URIs != nil && len\(\*n\.URIs\) > MaxListenResources \{' \
	'if n.URIs != nil && len(*n.URIs) > MaxListenResources*1000 {' \
	-- "$e2epkg" 'TestGatewayListenResources'

mutate session-listen-early-dropped "a stdio listen loses the updates that came before its acknowledgement" \
	internal/session/subscribe.go \
	'for _, uri := range sub\.early \{' \
	'for _, uri := range sub.early[:0] {' \
	-- "$sessionpkg" 'TestRelayListenSlowFollow'

mutate session-listen-unfollow-race "a stdio listen follows a resource while it is being unfollowed" \
	internal/session/subscribe.go \
	'if ch, ok := ss\.unfollowing\[uri\]; ok \{' \
	'if ch, ok := ss.unfollowing[uri]; ok && false {' \
	-- "$sessionpkg" 'TestRelayListenAfterUnfollow'

mutate mcp-listen-repeats "a resource named twice in resourceSubscriptions is followed twice" \
	internal/mcp/subscription.go \
	'if !seen\[u\] \{' \
	'if true || !seen[u] {' \
	-- ./internal/mcp 'TestListenParams'

mutate session-listen-ack-asked "a stdio listen is acknowledged with what it asked for, not what is followed" \
	internal/session/subscribe.go \
	'followed, e := rl\.Follow\(ss\.taskCtx, sub\.uris\)' \
	'_, e := rl.Follow(ss.taskCtx, sub.uris)\n\tfollowed := sub.uris' \
	-- "$sessionpkg" 'TestRelayListenFollows'

mutate session-listen-updates-all "a stdio listen hears updates of resources it does not follow" \
	internal/session/subscribe.go \
	'case !slices\.Contains\(sub\.uris, uri\):' \
	'case false:' \
	-- "$sessionpkg" 'TestRelayListenFollows'

mutate session-listen-unfollow-shared "a resource is unfollowed while another stdio listen still follows it" \
	internal/session/subscribe.go \
	'wanted = wanted \|\| slices\.Contains\(sub\.uris, uri\)' \
	'wanted = wanted && slices.Contains(sub.uris, uri)' \
	-- "$sessionpkg" 'TestRelayListenFollows'

mutate session-listen-cancel-keeps "a cancelled stdio listen leaves its resources followed" \
	internal/session/subscribe.go \
	'if !ok \|\| len\(sub\.uris\) == 0 \|\| rl == nil \{' \
	'if true || !ok || len(sub.uris) == 0 || rl == nil {' \
	-- "$sessionpkg" 'TestRelayListenFollows'

mutate stdio-unfollow-silent "the stdio relay's Unfollow leaves the downstream subscribed" \
	internal/gateway/session.go \
	'if err := r\.g\.Unsubscribe\(ctx, c\); err != nil \{' \
	'if err := error(nil); err != nil {' \
	-- "$e2epkg" 'TestGatewayStdioListenResources'

mutate stdio-settle-input-ignored "a --stdio client that closes its input while servers settle holds the gateway until the wait ends" \
	cmd/bastion/gateway.go \
	'if inputClosed\(\) \{' \
	'if false && inputClosed() {' \
	-- "$e2epkg" 'TestGatewayStdioClientGoneWhileSettling'

mutate stdio-input-closed-unread "a --stdio client whose request is still unread is taken for gone" \
	internal/stdio/stdio.go \
	'closed = err == nil && waiting == 0' \
	'closed = err == nil && waiting >= 0' \
	-- "$e2epkg" 'TestGatewayStdioClientGoneWhileSettling'

mutate stdio-input-closed-socket "a client on a socket (as Node's child processes get) is never seen to close its input" \
	internal/stdio/stdio.go \
	'closed = err == nil && waiting == 0' \
	'closed = false && err == nil && waiting == 0' \
	-- ./internal/stdio 'TestInputClosed'

mutate gw-listen-rate-per-resource "a listen costs the rate one token however many resources it subscribes" \
	internal/gateway/front/mcp.go \
	'if len\(uris\) > 0 && pastRate\(x\.s\.limiters\.allowMore\(x\.p, len\(uris\)\)\) \{' \
	'if len(uris) < 0 && pastRate(x.s.limiters.allowMore(x.p, len(uris))) {' \
	-- "$e2epkg" 'TestGatewayListenBounded'

mutate session-listen-at-drain "a subscription read as the session begins to drain is never answered" \
	internal/session/subscribe.go \
	'if ss\.stopping\.Load\(\) \{\n\t\t// Read just as' \
	'if false {\n\t\t// Read just as' \
	-- "$sessionpkg" 'TestSubscriptionsListenAtDrain'

mutate session-drain-subscriptions-unbounded "a drain waits for a client that does not read to take the subscriptions' answers" \
	internal/session/subscribe.go \
	'ctx, cancel := context\.WithTimeoutCause\(ss\.writeCtx, ss\.srv\.opts\.DrainGrace, errFlushTimeout\)' \
	'ctx, cancel := context.WithCancel(ss.writeCtx)' \
	-- "$sessionpkg" 'TestDrainWithOpenSubscriptionsBounded'

mutate session-watch-after-read "a session reads its first message before it watches its catalog" \
	internal/session/session.go \
	'\t// Watch before reading: a change' \
	'\treadDone := make(chan error, 1)\n\tgo func() { readDone <- ss.readLoop() }()\n\t// Watch before reading: a change' \
	internal/session/session.go \
	'\t\}\n\treadDone := make\(chan error, 1\)\n\tgo func\(\) \{ readDone <- ss\.readLoop\(\) \}\(\)\n' \
	'\t}\n' \
	-- "$sessionpkg" 'TestCatalogWatchedBeforeReading'

mutate gw-subscribe-no-slot "a resources/subscribe is sent past the server's in-flight bound" \
	internal/gateway/subscribe.go \
	'\trelease, err := d\.slots\.acquire\(dctx, c\.Principal\)\n\tif err != nil \{\n\t\treturn g\.callError\(ctx, dctx, log, server, method, context\.Cause\(dctx\)\)\n\t\}\n\tdefer release\(\)\n\t_, err = ' \
	'\t_, err := ' \
	-- "$e2epkg" 'TestGatewaySubscribeTakesASlot'

mutate gw-input-ignored "a 2026-07-28 server's input_required result is taken for a malformed one, never fulfilled" \
	internal/gateway/invoke.go \
	'for round := first; err == nil; round\+\+ \{' \
	'for round := first; err == nil && false; round++ {' \
	-- "$e2epkg" 'TestGatewayInputRequired'

mutate gw-input-unbounded "a server that asks for input without end holds the call until its deadline" \
	internal/gateway/invoke.go \
	'if perr == nil && round > maxInputRounds \{' \
	'if perr == nil && round > maxInputRounds*1000 {' \
	-- "$e2epkg" 'TestGatewayInputRequired'

mutate gw-input-state-dropped "the retry of an input_required round loses the server's requestState" \
	internal/gateway/input.go \
	'if state != nil \{' \
	'if state != nil && false {' \
	-- "$gwpkg" 'TestWithInput'

mutate gw-input-undeclared "a caller is asked for input it did not declare it can give" \
	internal/gateway/relay.go \
	'if c\.ClientRequests == nil \|\| !declared \{' \
	'if c.ClientRequests == nil || !declared && false {' \
	-- "$e2epkg" 'TestGatewayInputRequired'

mutate gw-input-methods "an input_required result may ask the caller any method" \
	internal/gateway/input.go \
	'if !isInputMethod\(q\.Method\) \{' \
	'if false {' \
	-- "$gwpkg" 'TestParseInputRound'

mutate gw-input-requests-bound "an input_required result may name any number of requests" \
	internal/gateway/input.go \
	'case len\(r\.Requests\) > maxInputRequests:' \
	'case len(r.Requests) > maxInputRequests*1000:' \
	-- "$gwpkg" 'TestParseInputRound'

mutate gw-input-caps-undeclared "a 2026-07-28 call declares its caller can give no input, so the server never asks" \
	internal/gateway/invoke.go \
	'ClientCapabilities: capabilitiesOf\(c\),' \
	'ClientCapabilities: nil,' \
	-- "$e2epkg" 'TestGatewayInputRequired'

mutate gw-input-caps-unaskable "a 2026-07-28 call declares capabilities for a caller the gateway cannot ask" \
	internal/gateway/relay.go \
	'\tif c\.ClientRequests == nil && !c\.TakesRounds \{\n\t\treturn jsontext\.Value\(`\{\}`\)\n\t\}\n' \
	'' \
	-- "$gwpkg" 'TestCapabilitiesOf'

mutate gw-listen-rate-past-burst "a listen naming resources costs more than a full burst, so it can never be opened" \
	internal/gateway/front/authn.go \
	'if n = min\(n, l\.burst-1\); n <= 0 \{' \
	'if n = min(n, l.burst); n <= 0 {' \
	-- "$e2epkg" 'TestGatewayListenBounded'

mutate gw-input-escaped "an input_required result whose resultType is spelled with an escape is not read as one" \
	internal/gateway/input.go \
	' && !bytes\.Contains\(res, \[\]byte\(`\\u`\)\)' \
	'' \
	-- "$gwpkg" 'TestParseInputRound'

mutate gw-result-kind "a result of a kind other than complete is relayed as a complete one" \
	internal/gateway/invoke.go \
	'if r\.ResultType != nil && \*r\.ResultType != "complete" \{' \
	'if r.ResultType != nil && false {' \
	-- "$gwpkg" 'TestParseResultKinds'

mutate gw-result-words "a malformed result's log line quotes the server's member names" \
	internal/gateway/invoke.go \
	'if json\.Unmarshal\(res, &r\) != nil \{\n\t\treturn nil, errors\.New\("the result does not match CallToolResult"\)' \
	'if err := json.Unmarshal(res, &r); err != nil {\n\t\treturn nil, err' \
	-- "$gwpkg" 'TestParseResultKinds'

mutate gw-input-caller-timeout "a caller that takes the deadline to answer a round of input is reported as the server's timeout" \
	internal/gateway/input.go \
	'if context\.Cause\(ctx\) == errCallTimeout \{' \
	'if false {' \
	-- "$e2epkg" 'TestGatewayInputRequiredCallerSlow'

mutate gw-input-downstream-time "the audit's downstream_ms counts the caller's time answering a round of input" \
	internal/gateway/invoke.go \
	'defer func\(\) \{ \*took = downstreamTime \}\(\)' \
	'defer func() { *took = time.Since(start) }()' \
	-- "$e2epkg" 'TestGatewayInputRequiredCallerSlow'

mutate gw-seal-principal "a round of input handed to one caller is answered by another" \
	internal/gateway/inputseal.go \
	'if r\.Issuer != p\.Issuer \|\| r\.Subject != p\.Subject \|\| ' \
	'if ' \
	-- "$gwpkg" 'TestInputSeal'

mutate gw-seal-principal-e2e "a round of input handed to one caller is answered by another (over HTTP)" \
	internal/gateway/inputseal.go \
	'if r\.Issuer != p\.Issuer \|\| r\.Subject != p\.Subject \|\| ' \
	'if ' \
	-- "$e2epkg" 'TestGatewayInputHandedOver'

mutate gw-seal-tool "a round of input handed for one tool answers a call of another" \
	internal/gateway/inputseal.go \
	'r\.Tool != tool \|\|' \
	'' \
	-- "$e2epkg" 'TestGatewayInputHandedOver'

mutate gw-seal-args "a round of input answered for some arguments is resumed with others" \
	internal/gateway/inputseal.go \
	'!bytes\.Equal\(r\.Args, argsDigest\(args\)\) \|\| ' \
	'' \
	-- "$e2epkg" 'TestGatewayInputHandedOver'

mutate gw-seal-expiry "a round of input handed to a caller never expires" \
	internal/gateway/inputseal.go \
	'now\.Unix\(\) >= r\.Expires' \
	'false && now.Unix() >= r.Expires' \
	-- "$gwpkg" 'TestInputSeal'

mutate gw-seal-prefix "a sealed requestState without its prefix (of another use or version) is opened" \
	internal/gateway/inputseal.go \
	'if !ok \|\| len\(state\) > maxSealedState \{' \
	'if !ok && false || len(state) > maxSealedState {' \
	-- "$gwpkg" 'TestInputSeal'

mutate gw-seal-leaks-state "the downstream's requestState reaches the caller beside the seal" \
	internal/gateway/input.go \
	'in := &InputRound\{State: state\}' \
	'in := &InputRound{State: state + "." + *round.State}' \
	-- "$e2epkg" 'TestGatewayInputHandedOver'

mutate gw-handover-rounds "rounds of input handed to the caller do not count against the bound of a call" \
	internal/gateway/invoke.go \
	'first = from\.round \+ 1' \
	'first = from.round*0 + 1' \
	-- "$e2epkg" 'TestGatewayInputHandedOver'

mutate gw-handover-undeclared "a 2026-07-28 caller is handed a request it did not declare it can answer" \
	internal/gateway/input.go \
	'if ok, _ := c\.ClientCapabilities\.declares\(q\.Method, q\.Params\); !ok \{' \
	'if ok, _ := c.ClientCapabilities.declares(q.Method, q.Params); !ok && false {' \
	-- "$e2epkg" 'TestGatewayInputRequired$'

mutate gw-answers-unasked "a retry may answer requests the round did not ask" \
	internal/gateway/input.go \
	'if _, ok := asked\[key\]; !ok \{' \
	'if false {' \
	-- "$gwpkg" 'TestAnswersTo'

mutate gw-answers-all "a retry may leave requests of the round unanswered" \
	internal/gateway/input.go \
	'if len\(got\) != len\(asked\) \{' \
	'if false {' \
	-- "$e2epkg" 'TestGatewayInputHandedOver'

mutate gw-answers-objects "a retry's answer may be any JSON value" \
	internal/gateway/input.go \
	"if v\.Kind\(\) != '\{' \|\| v\.Compact\(\) != nil \{" \
	'if v.Compact() != nil {' \
	-- "$gwpkg" 'TestAnswersTo'

mutate front-legacy-answers "a session-era caller sends inputResponses and a requestState" \
	internal/gateway/front/mcp.go \
	'case !x\.modern && \(p\.InputResponses != nil \|\| p\.RequestState != nil\):' \
	'case false:' \
	-- "$e2epkg" 'TestGatewayInputHandedOver'

mutate session-legacy-answers "a session-era stdio client sends inputResponses and a requestState" \
	internal/session/call.go \
	'case answers && !mcp\.IsModern\(version\):' \
	'case false:' \
	-- "$sessionpkg" 'TestCallRounds'

mutate session-roundtaker "a requestState reaches a tool that hands out no rounds" \
	internal/session/call.go \
	'if _, takes := t\.\(tool\.RoundTaker\); answers && !takes \{' \
	'if _, takes := t.(tool.RoundTaker); answers && !takes && false {' \
	-- "$sessionpkg" 'TestCallRounds'

mutate gw-stdio-handover "a 2026-07-28 client on --stdio is never handed its call's round of input" \
	internal/gateway/session.go \
	'c\.TakesRounds, c\.ClientCapabilities = true, CapabilitiesIn\(r\.Capabilities\)' \
	'c.TakesRounds, c.ClientCapabilities = false, CapabilitiesIn(r.Capabilities)' \
	-- "$e2epkg" 'TestGatewayStdioInputHandedOver'

mutate gw-stdio-asks-undeclared "a --stdio client is asked for what it did not declare at initialize" \
	internal/gateway/session.go \
	'c\.ClientRequests, c\.ClientCapabilities = q\.Ask, CapabilitiesIn\(q\.Capabilities\)' \
	'c.ClientRequests, c.ClientCapabilities = q.Ask, ClientCapabilities{Sampling: true, Elicitation: true, Roots: true}' \
	-- "$e2epkg" 'TestGatewayStdioAsks'

mutate gw-stdio-asks-unheard "a --stdio client's answers to the gateway's requests are dropped" \
	internal/session/dispatch.go \
	'if !ss\.asks\.Deliver\("", m\) \{' \
	'if !false {' \
	-- "$e2epkg" 'TestGatewayStdioAsks'

mutate gw-answers-sanitized "a caller's answers to a round handed to it skip the argument sanitizer" \
	internal/gateway/input.go \
	'if why := answerFault\(v\); why != "" \{' \
	'if why := answerFault(v); why != "" && false {' \
	-- "$e2epkg" 'TestGatewayInputHandedOver'

mutate gw-relay-answer-sanitized "a caller's answer relayed on its session skips the argument sanitizer" \
	internal/gateway/relay.go \
	'case answerFault\(res\) != "":' \
	'case false:' \
	-- "$gwpkg" 'TestRelayAnswerSanitized'

mutate guard-data-names "an answer's member names are held to the identifier grammar of arguments" \
	internal/guard/sanitize.go \
	'\tlim\.AnyNames = true\n\treturn Sanitize' \
	'\treturn Sanitize' \
	-- "$gwpkg" 'TestAnswersTo'

mutate gw-elicit-url-mode "a url-mode elicitation is relayed to a client that declared only forms" \
	internal/gateway/relay.go \
	'return caps\.ElicitationURL, "elicitation\.url"' \
	'return caps.Elicitation, "elicitation.url"' \
	-- "$gwpkg" 'TestCapabilityDetails'

mutate gw-sampling-tools "a sampling request with tools is relayed to a client that did not declare them" \
	internal/gateway/relay.go \
	'return caps\.SamplingTools, "sampling\.tools"' \
	'return caps.Sampling, "sampling.tools"' \
	-- "$gwpkg" 'TestCapabilityDetails'

mutate gw-answers-audited "a refused retry of a round of input is audited as allowed" \
	internal/gateway/invoke.go \
	'ev\.Outcome, ev\.Reason, ev\.Code = audit\.Invalid, "input_answers", jsonrpc\.CodeInvalidParams' \
	'ev.Outcome, ev.Reason, ev.Code = audit.Allow, "", jsonrpc.CodeInvalidParams' \
	-- "$e2epkg" 'TestGatewayInputHandedOver'

mutate session-asks-abandon "a call asking a --stdio client whose input ended waits out the drain's grace" \
	internal/session/session.go \
	'\tss\.asks\.Abandon\(""\)\n' \
	'' \
	-- "$e2epkg" 'TestGatewayStdioAsks'

mutate session-asks-order "a request a call leaves behind is withdrawn after the call's answer" \
	internal/session/call.go \
	'defer asks\.close\(\) // before the answer' \
	'// before the answer' \
	-- "$e2epkg" 'TestGatewayStdioAsks'

mutate pending-abandon-new "an owner that can no longer answer is still sent requests" \
	internal/jsonrpc/pending.go \
	' \|\| p\.gone\[owner\]' \
	'' \
	-- ./internal/jsonrpc/ 'TestPendingAbandon'

mutate pending-plain-text "a client's error message reaches the downstream with its controls" \
	internal/jsonrpc/pending.go \
	'0x202A <= r && r <= 0x202E, 0x2066 <= r && r <= 0x2069:\n\t\t\treturn -1' \
	'0x202A <= r && r <= 0x202E, 0x2066 <= r && r <= 0x2069:\n\t\t\treturn r' \
	-- ./internal/jsonrpc/ 'TestPlainText'

# --- Session 24: defences found by the adversarial reviews of the front,
# the downstreams, authentication and a newcomer's trial.

mutate gw-audit-method-label "a request past its rate is audited with the caller's own method text" \
	internal/gateway/front/mcp.go \
	'Method: label\(m\.Method\), Outcome: audit\.RateLimited' \
	'Method: m.Method, Outcome: audit.RateLimited' \
	-- "$e2epkg" 'TestGatewayRateLimit$'

mutate auth-tokens-duplicates "MCP_GATEWAY_TOKENS may name a token twice, the last winning" \
	internal/gateway/auth/auth.go \
	'dec := jsontext\.NewDecoder\(strings\.NewReader\(v\)\)' \
	'dec := jsontext.NewDecoder(strings.NewReader(v), jsontext.AllowDuplicateNames(true))' \
	-- ./internal/gateway/auth 'TestParseTokensEnvErrors'

mutate auth-tokens-case "MCP_GATEWAY_TOKENS matches a member in another case (ROLE as role)" \
	internal/gateway/auth/auth.go \
	'json\.Unmarshal\(spec, &o, json\.RejectUnknownMembers\(true\)\)' \
	'json.Unmarshal(spec, &o, json.RejectUnknownMembers(true), json.MatchCaseInsensitiveNames(true))' \
	-- ./internal/gateway/auth 'TestParseTokensEnvErrors'

mutate auth-token-length "a bearer token of any length is accepted" \
	internal/gateway/auth/auth.go \
	'if len\(tok\) < MinTokenLength \{' \
	'if false {' \
	-- ./internal/gateway/auth 'TestParseTokensEnvErrors'

mutate policy-issuer "conditions cannot read the caller's issuer" \
	internal/gateway/policy/policy.go \
	'"issuer": p\.Issuer, ' \
	'' \
	-- ./internal/gateway/policy 'TestConditionsSeeTheIssuer'

mutate auth-policy-issuer "the rules are given the principal without its issuer" \
	internal/gateway/auth/auth.go \
	'Subject: p\.Subject, Issuer: p\.Issuer, Roles: p\.Roles' \
	'Subject: p.Subject, Roles: p.Roles' \
	-- ./internal/gateway/auth 'TestStaticTokens'

mutate up-identity-issuer "an HTTP downstream is not told the caller's issuer" \
	internal/gateway/upstream/http.go \
	'\t\th\.set\(hdrIssuer, HeaderValue\(who\.Issuer\)\)\n' \
	'' \
	-- "$e2epkg" 'TestGatewayIdentityHeaders'

mutate gw-complete-filter "a completion relays every value the server offers, those the caller may not use too" \
	internal/gateway/complete.go \
	'return keepAllowed\(out, allowed\), nil' \
	'return out, nil' \
	-- "$gwpkg" 'TestCompletionOfATemplateIsARead'

mutate gw-complete-template-value "a template's completion is decided without the value typed" \
	internal/gateway/complete.go \
	'\tvars\[name\] = value\n' \
	'' \
	-- "$gwpkg" 'TestCompletionOfATemplateIsARead'

mutate gw-complete-prompt-value "a prompt's completion is decided without the value typed" \
	internal/gateway/complete.go \
	'\tcall\.Args\[name\] = value\n' \
	'' \
	-- "$gwpkg" 'TestCompletionConditionOnTheValue'

mutate gw-complete-undeclared "a completion's condition reads an argument the prompt does not declare" \
	internal/gateway/complete.go \
	'\t\tif _, ok := pr\.Argument\(k\); !ok \{\n\t\t\treturn refuse\n\t\t\}\n' \
	'' \
	-- "$gwpkg" 'TestCompletionConditionOnTheValue'

mutate up-event-cap "an SSE event's data lines grow without bound until the event ends" \
	internal/gateway/upstream/http.go \
	'if e\.tooBig \|\| int64\(e\.buf\.Len\(\)\+1\+len\(payload\)\) > e\.max \{' \
	'if e.tooBig {' \
	-- "$uppkg" 'TestEventCap'

mutate up-relay-bytes "a call's queue to its caller is bounded by count only" \
	internal/gateway/upstream/client.go \
	'held != n && held > relayQueueBytes' \
	'held < 0' \
	-- "$uppkg" 'TestRelayQueueBytes'

mutate up-ask-flood "every request of a server's call gets a goroutine, without bound" \
	internal/gateway/upstream/client.go \
	'if p\.asking\.Add\(1\) > maxAsksPerCall \{' \
	'if p.asking.Add(1) > 1<<30 {' \
	-- "$uppkg" 'TestRequestFloodBounded'

mutate gw-refusal-audit-once "every refused request of a server is audited, however often it repeats" \
	internal/gateway/relay.go \
	'\t\tif !again \{' \
	'\t\tif true || !again {' \
	-- "$gwpkg" 'TestRelayRefusalsAuditedOnce'

mutate up-connect-before-live "a new connection is made live before its owner judged it" \
	internal/gateway/upstream/conn.go \
	'\t\ts\.onConnect\(c\)\n' \
	'\t\tgo s.onConnect(c)\n' \
	-- "$uppkg" 'TestConnectBeforeLive'

mutate up-current-check "a request is sent whatever its Current check says" \
	internal/gateway/upstream/conn.go \
	'if opts\.Current != nil \{' \
	'if false && opts.Current != nil {' \
	-- "$uppkg" 'TestCurrentFailsUnsent'

mutate gw-call-current "a call decided before a rug pull is sent after it" \
	internal/gateway/invoke.go \
	'ok && cur\.Server == t\.Server && cur\.Digest == t\.Digest \{' \
	'true || ok && cur.Server == t.Server && cur.Digest == t.Digest {' \
	-- "$gwpkg" 'TestCallWaitingForASlotSeesTheRugPull'

mutate up-noise "every junk line a server writes is a warning in the gateway's log" \
	internal/gateway/upstream/noise.go \
	'ok := l\.n <= stderrBurst' \
	'ok := true' \
	-- "$uppkg" 'TestGarbageWarningsBounded'

mutate up-stderr-grace "a dead child's stderr is read until it ends, which a grandchild can hold open" \
	internal/gateway/upstream/stdio.go \
	'case <-time\.After\(stderrGrace\):' \
	'case <-time.After(time.Hour):' \
	-- "$uppkg" 'TestExitBeforeHandshake'

mutate up-exit-handshake "a child that exits before its handshake is reported as the handshake's timeout" \
	internal/gateway/upstream/stdio.go \
	'\tcase <-ch\.readDone:\n\t\tlost = true' \
	'\tcase <-make(chan struct{}):\n\t\tlost = true' \
	internal/gateway/upstream/stdio.go \
	'\tcase <-ch\.exited:\n\t\tlost = true' \
	'\tcase <-make(chan struct{}):\n\t\tlost = true' \
	-- "$uppkg" 'TestExitBeforeHandshake'

mutate up-wait-exit "a child is waited for only once its stdout ends, which a grandchild can hold open after it died" \
	internal/gateway/upstream/stdio.go \
	'\t\tch\.waitErr = cmd\.Wait\(\)' \
	'\t\t<-ch.readDone\n\t\tch.waitErr = cmd.Wait()' \
	-- "$uppkg" 'TestCrashWhileGrandchildHoldsOutput'

mutate up-exit-group "what a dead child left in its process group lives on" \
	internal/gateway/upstream/stdio.go \
	'left := s\.signalGroup\(pgid, syscall\.SIGTERM\)' \
	'left := false' \
	-- "$uppkg" 'TestCrashWhileGrandchildHoldsOutput'

mutate gw-held-audit "a call of a tool held for review is audited as an unknown name" \
	internal/gateway/invoke.go \
	'if r, held := g\.heldTool\(snap, c\.Name\); held \{' \
	'if r, held := g.heldTool(snap, c.Name); false && held {' \
	-- "$gwpkg" 'TestHeldToolAudited'

mutate up-null-id-error "a POST's error answer with a null id is dropped, and discovery waits out its timeout" \
	internal/gateway/upstream/http.go \
	'if e := nullIDError\(body\); e != nil \{' \
	'if e := nullIDError(body); e != nil && false {' \
	-- "$uppkg" 'TestHTTPDiscoverRefusedWithNullID'

mutate gw-embedded-tool "a tool result may embed a resource labelled with another server's URI" \
	internal/gateway/invoke.go \
	'g\.checkEmbedded\(t\.Server, out\.embedded\)' \
	'g.checkEmbedded(t.Server, nil)' \
	-- "$gwpkg" 'TestEmbeddedResourceOfAnotherServer'

mutate gw-embedded-prompt "a prompt message may embed a resource labelled with another server's URI" \
	internal/gateway/prompt.go \
	'g\.checkEmbedded\(p\.Server, embedded\)' \
	'g.checkEmbedded(p.Server, embedded[:0])' \
	-- "$gwpkg" 'TestEmbeddedResourceOfAnotherServer'

mutate gw-embedded-owner "an embedded resource is judged without its URI's owner" \
	internal/gateway/invoke.go \
	'\t\tcase o != "" && o != server:\n\t\t\t// Another server.s, whether it serves it now or not\.\n\t\t\treturn fmt\.Errorf\("embedded' \
	'\t\tcase false:\n\t\t\treturn fmt.Errorf("embedded' \
	-- "$gwpkg" 'TestCheckEmbedded'

mutate cat-claimed-uri "a URI its owner claims but does not offer now is routed to a later server" \
	internal/gateway/catalog/catalog.go \
	'return s\.held\[k\] \}\) \{' \
	'return s.held[k] }) && false {' \
	-- "$catpkg" 'TestResourceClaims|TestHeldNotRoutedByItsOwnTemplate'

mutate cat-claimed-template "a template its owner claims but does not offer now routes nothing" \
	internal/gateway/catalog/resource.go \
	'\t\t\t\tnext\.routes = append\(next\.routes, route\{server: name, compiled: t\.compiled\}\)\n' \
	'' \
	-- "$catpkg" 'TestResourceClaims'

mutate cat-claims-listed "what a server lists, held items included, claims nothing" \
	internal/gateway/catalog/resource.go \
	'\tc\.claims\[srv\.Name\] = cl\n' \
	'' \
	-- "$catpkg" 'TestResourceClaims'

mutate gw-claims-ledger "a server down at start claims nothing the ledger holds for it" \
	internal/gateway/gateway.go \
	'\tg\.claimFromLedger\(\)\n' \
	'' \
	-- "$gwpkg" 'TestClaimsOutliveTheServer'

mutate gw-pending-findings "the reviewer reads the findings of the record's first walk, not those of what is served" \
	internal/gateway/admission.go \
	'case findingsChanged\(\*p, r\):' \
	'case false:' \
	-- "$gwpkg" 'TestPendingEvidence'

mutate gw-pending-identity-unseen "a changed identity is written into what waits, and an approval of the digest pins it unseen" \
	internal/gateway/admission.go \
	'changed = append\(changed, w\)' \
	'changed = append(changed, r); _ = w' \
	-- "$gwpkg" 'TestPendingEvidence'

mutate gw-stdio-unknown-audited "the stdio front refuses a name the catalog does not offer itself, unaudited" \
	internal/gateway/session.go \
	'\tif t, ok := c\.g\.catalog\.Snapshot\(\)\.Lookup\(name\); ok \{' \
	'\tt, ok := c.g.catalog.Snapshot().Lookup(name)\n\tif !ok {\n\t\treturn nil, false\n\t}\n\t{' \
	-- "$gwpkg" 'TestHeldToolAudited'

mutate gw-argument-names "the gateway holds a downstream's argument names to the core's identifier grammar" \
	internal/gateway/session.go \
	'\tlim\.AnyNames = true\n' \
	'' \
	-- "$e2epkg" 'TestGatewayDownstreamArgumentNames'

mutate gw-stdio-argument-names "the stdio front holds a downstream's argument names to the core's identifier grammar" \
	cmd/bastion/gateway.go \
	'\t\tLimits:         gateway\.ArgumentLimits\(\),\n' \
	'' \
	-- "$e2epkg" 'TestGatewayDownstreamArgumentNames'

mutate gw-approval-on-return "an approval takes effect only when the server's next walk ends, after review returns" \
	internal/gateway/admission.go \
	'\t\t\td\.reread\(\)\n\t\t\td\.discover\(\)' \
	'\t\t\td.discover()' \
	-- "$gwpkg" 'TestApprovalInEffectOnReturn'

mutate gw-config-stdio-principal-alone "a configuration for --stdio alone must name an HTTP authentication method too" \
	internal/gateway/config/auth.go \
	'if v\.noCallers && a\.StdioPrincipal != nil \{' \
	'if false {' \
	-- ./internal/gateway/config 'TestStdioPrincipalAlone'

mutate gw-config-yaml-parser-lines "a YAML parser error names the line before the one it means" \
	internal/gateway/config/yaml.go \
	'return fmt\.Sprintf\("line %d or the block that begins there: %s", n\+1, problem\)' \
	'return fmt.Sprintf("line %d or the block that begins there: %s", n, problem)' \
	-- ./internal/gateway/config 'TestSyntaxErrorLines'

mutate session-request-id-unshared "a tool is not told the request id its call is logged under" \
	internal/session/call.go \
	'\tctx = tool\.WithRequestID\(ctx, rid\)\n' \
	'' \
	-- ./internal/session 'TestCallRequestID'

mutate gw-stdio-request-id "the stdio front's audit event carries an id of its own, not the one the session logged" \
	internal/gateway/session.go \
	'rid := tool\.RequestIDOf\(ctx\)' \
	'rid := ""' \
	-- "$gwpkg" 'TestHeldToolAudited'

mutate gw-config-rule-line "a rule that does not compile is reported at the rules list, not at its own line" \
	internal/gateway/config/auth.go \
	'path = fmt\.Sprintf\("policy\.rules\[%d\]", re\.Index\)' \
	'path = "policy.rules"; _ = re' \
	-- ./internal/gateway/config 'TestErrorsGiveTheLine'

mutate gw-check-key-with-file-errors "--check names the missing session key only once the file's own errors are fixed" \
	cmd/bastion/gateway.go \
	'if off, offErr := gwconfig\.LoadOffline\(\*path, getenv\); offErr == nil && !\*stdioMode \{' \
	'if off, offErr := gwconfig.LoadOffline(*path, getenv); false && offErr == nil && !*stdioMode {' \
	-- "$e2epkg" 'TestGatewayCheckAndStart'

mutate gw-stdio-log-caller-name "the stdio front logs a name the catalog does not hold as the caller sent it" \
	internal/gateway/session.go \
	'desc := tool\.Descriptor\{Name: LogName\(name\)\}' \
	'desc := tool.Descriptor{Name: name}' \
	-- "$e2epkg" 'TestGatewayLogsNoCallerText'

mutate gw-http-log-caller-name "the HTTP front logs a tools/call's name as the caller sent it" \
	internal/gateway/front/mcp.go \
	'slog\.String\("tool", gateway\.LogName\(\*p\.Name\)\)' \
	'slog.String("tool", problem.Cap(*p.Name))' \
	-- "$e2epkg" 'TestGatewayLogsNoCallerText'

mutate gw-stdio-unknown-outcome "the stdio session's line of a call of no tool says error_-32602, not unknown_tool" \
	internal/gateway/session.go \
	'pe\.Outcome = "unknown_tool"' \
	'pe.Outcome = ""' \
	-- "$e2epkg" 'TestGatewayLogsNoCallerText'

mutate gw-argcase-dashes "an argument named as a declared one but for dashes or underscores passes the case-variant check" \
	internal/gateway/argcase.go \
	'if strings\.ContainsAny\(name, "-_"\) \{' \
	'if false {' \
	-- "$gwpkg" 'TestCaseVariant'

mutate gw-reread-no-tools "a server that lists no tools is never judged again on a re-read (an approval of its prompt waits for a walk)" \
	internal/gateway/gateway.go \
	'\t\td\.lastTools = \[\]jsontext\.Value\{\}\n' \
	'' \
	-- "$gwpkg" 'TestApprovalInEffectOnReturnWithoutTools'

mutate gw-ledger-forget "removed names are kept without bound" \
	internal/gateway/admission.go \
	'forget := admit\.Forget\(removed\)' \
	'forget := admit.Forget(nil)' \
	-- "$gwpkg" 'TestChurnBoundsTheLedger'

mutate admit-forget-rejected "a removed record that holds a rejected digest may be forgotten" \
	internal/gateway/admit/lifecycle.go \
	' && len\(r\.RejectedDigests\) == 0\n' \
	'\n' \
	-- "$admitpkg" 'TestForget'

mutate front-revoke-store "an ended session is ended in this process only" \
	internal/gateway/front/sessions.go \
	'\tif s\.store != nil \{\n\t\tctx, cancel := context\.WithTimeout\(ctx, revokeTimeout\)' \
	'\tif false {\n\t\tctx, cancel := context.WithTimeout(ctx, revokeTimeout)' \
	-- "$e2epkg" 'TestGatewaySessionEndedForGood'

mutate front-revoke-share "one principal may fill the table of ended sessions for everyone" \
	internal/gateway/front/sessions.go \
	'full := len\(s\.revoked\) >= maxRevoked \|\| s\.revokedBy\[who\] >= maxRevokedPerPrincipal' \
	'full := len(s.revoked) >= maxRevoked' \
	-- ./internal/gateway/front 'TestRevokeShare'

mutate gw-uri-too-long "a caller's URI of any length is routed" \
	internal/gateway/resource.go \
	'if len\(uri\) > catalog\.MaxURI \{' \
	'if false {' \
	-- "$gwpkg" 'TestRouteReadURITooLong'

mutate gw-slots-share "one principal may hold every in-flight slot of a server" \
	internal/gateway/slots.go \
	'if p\.Issuer != "none" && p\.Issuer != "stdio" && p\.Issuer != "" \{' \
	'if false {' \
	-- "$gwpkg" 'TestSlotsShared'

mutate front-version-once "MCP-Protocol-Version given twice is read by its first copy" \
	internal/gateway/front/mcp.go \
	'if len\(r\.Header\.Values\(hdrProtocolVersion\)\) > 1 \{' \
	'if false {' \
	-- ./internal/gateway/front 'TestHeaderRules'

mutate front-session-version "a GET or DELETE names any protocol version" \
	internal/gateway/front/mcp.go \
	'if len\(vs\) > 1 \|\| \(len\(vs\) == 1 && !mcp\.IsLegacy\(vs\[0\]\)\) \{' \
	'if len(vs) < 0 {' \
	-- ./internal/gateway/front 'TestHeaderRules'

mutate front-unsupported-both "a version both header and body name, not spoken, is -32600 without what is" \
	internal/gateway/front/mcp.go \
	' && !\(hasMeta && metaV == hv\):' \
	':' \
	-- ./internal/gateway/front 'TestHeaderRules'

mutate front-accept-zero "a zero weight spelt 0.0 in Accept is taken as acceptable" \
	internal/gateway/front/mcp.go \
	'return err == nil && w == 0' \
	'return q == "0" && err == nil && w == 0' \
	-- ./internal/gateway/front 'TestHeaderRules'

mutate front-stream-retry-after "a 429 where an event stream was asked for has no Retry-After" \
	internal/gateway/front/mcp.go \
	'\t\tif rep\.retryAfter > 0 \{\n\t\t\tw\.Header\(\)\.Set\("Retry-After", strconv\.Itoa\(rep\.retryAfter\)\)\n\t\t\}\n\t\tw\.WriteHeader\(rep\.status\)\n\t\tw\.Write\(append\(rep\.msg, .\\n.\)\)\n\tdefault:' \
	'\t\tw.WriteHeader(rep.status)\n\t\tw.Write(append(rep.msg, 10))\n\tdefault:' \
	-- ./internal/gateway/front 'TestRateLimitedStream'

mutate front-stream-cancel-204 "a call cancelled before anything was streamed ends 200 with no body" \
	internal/gateway/front/mcp.go \
	'// JSON path\.\n\t\tw\.WriteHeader\(http\.StatusNoContent\)' \
	'// JSON path.' \
	-- "$e2epkg" 'TestGatewayCancellation'

mutate gw-directory-reading "a directory read by its name escapes the rule for what is under it" \
	internal/gateway/resource.go \
	'if !strings\.HasSuffix\(bare, "/"\) && \(spelled \|\| bare == uri\) \{' \
	'if false {' \
	-- "$gwpkg" 'TestRouteReadNormalForm'

# --- Session 24, second review: spellings, completion routes, result shapes.

mutate cat-alias-route "another spelling of a URI one server owns is served by a later server's template" \
	internal/gateway/catalog/catalog.go \
	'if o := s\.owner\(a\); o != "" && o != rt\.server \{' \
	'if o := s.owner(a); false && o != rt.server {' \
	-- "$catpkg" 'TestAliasesOwned'

mutate cat-alias-owner "another spelling of a URI one server owns is judged as the later server's" \
	internal/gateway/catalog/catalog.go \
	'if ao := s\.owner\(a\); ao != "" && ao != o \{' \
	'if ao := s.owner(a); false && ao != o {' \
	-- "$catpkg" 'TestAliasesOwned'

mutate cat-file-authority "file:/p passes as a spelling of its own" \
	internal/gateway/catalog/resource.go \
	'if scheme == "file" && !strings\.HasPrefix\(path, "//"\) \{' \
	'if false {' \
	-- "$catpkg" 'TestNotNormal$'

mutate gw-read-literal "a rule that names a URI itself is overridden by a reading of it" \
	internal/gateway/resource.go \
	'if !d\.Allow \|\| d\.Literal \{' \
	'if !d.Allow {' \
	-- "$gwpkg" 'TestDecideReadDirectory'

mutate gw-directory-exact "a directory a server lists as a resource escapes the rule for what is under it" \
	internal/gateway/resource.go \
	'&& \(spelled \|\| bare == uri\) \{' \
	'&& spelled {' \
	-- "$gwpkg" 'TestDecideReadDirectory'

mutate gw-complete-owner "a template completes a URI another server owns" \
	internal/gateway/complete.go \
	'if o := snap\.Owner\(uri\); o != "" && o != t\.Server \{' \
	'if o := snap.Owner(uri); false && o != t.Server {' \
	-- "$gwpkg" 'TestCompletionOfATemplateRouted'

mutate gw-complete-bound "a completion's URI has no bound" \
	internal/gateway/complete.go \
	'case len\(uri\) > catalog\.MaxURI \|\| catalog\.NotNormal\(uri\) != "":' \
	'case catalog.NotNormal(uri) != "":' \
	-- "$gwpkg" 'TestCompletionOfATemplateRouted'

mutate gw-complete-any-value "a template's variable not given yet expands to nothing, so no variable but the last completes" \
	internal/gateway/complete.go \
	'vars\[v\] = anyValue' \
	'vars[v] = ""' \
	-- "$gwpkg" 'TestCompletionOfATemplateIsARead'

mutate gw-complete-whole-uri "a template's completion is decided without the text after the variable" \
	internal/gateway/complete.go \
	'uri, err := t\.Expand\(vars\)\n' \
	'uri, err := t.Expand(vars)\n\tfor len(uri) > 0 && uri[len(uri)-1] != 47 {\n\t\turi = uri[:len(uri)-1]\n\t}\n' \
	-- "$gwpkg" 'TestCompletionOfATemplateIsARead'

mutate gw-complete-current "a completion that waited for a slot is sent after its reference lost its pin" \
	internal/gateway/complete.go \
	'if current\(g\.catalog\.Snapshot\(\)\) \{' \
	'if _ = current; true {' \
	-- "$gwpkg" 'TestCompletionWaitingForASlotSeesTheRugPull'

mutate gw-result-folded "a tool result's content may hold member names that differ only in case" \
	internal/gateway/invoke.go \
	'if _, dup := foldedDuplicate\(r\.Content\); dup \{' \
	'if _, dup := foldedDuplicate(r.Content); false && dup {' \
	-- "$gwpkg" 'TestCheckEmbedded'

mutate gw-folded-many "an object of many members is not checked for case-colliding names past the first few" \
	internal/gateway/invoke.go \
	'if _, dup := c\.set\[folded\]; dup \{' \
	'if _, dup := c.set[folded]; false && dup {' \
	-- "$gwpkg" 'TestFoldedDuplicate'

mutate gw-folded-set-seeded "the set an object of many members moves to forgets the names before it" \
	internal/gateway/invoke.go \
	'c\.set\[f\] = struct\{\}\{\}' \
	'_ = f' \
	-- "$gwpkg" 'TestFoldedDuplicate'

mutate gw-folded-nested "a nested object's names are judged with its parent's" \
	internal/gateway/invoke.go \
	'names = names\[:open\[len\(open\)-1\]\.start\]' \
	'_ = names' \
	-- "$gwpkg" 'TestFoldedDuplicate'

mutate gw-folded-fold "names are compared as written, not folded" \
	internal/gateway/invoke.go \
	'folded, c := foldCase\(name\), &open\[len\(open\)-1\]' \
	'folded, c := name, &open[len(open)-1]' \
	-- "$gwpkg" 'TestFoldedDuplicate'

mutate gw-folded-unicode "a non-ASCII name is folded as ASCII" \
	internal/gateway/invoke.go \
	'return strings\.ToLower\(strings\.ToUpper\(s\)\)' \
	'return strings.ToLower(s)' \
	-- "$gwpkg" 'TestFoldedDuplicate'

mutate up-header-canonical "an identity header set as written in another case travels beside a configured one" \
	internal/gateway/upstream/http.go \
	'hdrRole        = "X-Mcp-Gateway-Role"' \
	'hdrRole        = "X-MCP-Gateway-Role"' \
	-- ./internal/gateway/upstream/ 'TestHeaderNamesCanonical'

mutate mcp-compact-invalid "what is not one JSON value is relayed as it came" \
	internal/mcp/relay.go \
	'return append\(out\[:len\(dst\)\], "null"\.\.\.\)' \
	'return out' \
	-- ./internal/mcp/ 'TestAppendCompact'

mutate jsondec-reset "a borrowed decoder goes on from where the previous borrower left it" \
	internal/jsondec/jsondec.go \
	'd\.Reset\(bytes\.NewBuffer\(v\), opts\.\.\.\)' \
	'_ = opts' \
	-- ./internal/jsondec/ 'TestBorrowStartsAfresh'

mutate audit-member-dropped "an audit event is written without its rule" \
	internal/gateway/audit/audit.go \
	'b = appendString\(b, "rule", e\.Rule\)' \
	'_ = e.Rule' \
	-- ./internal/gateway/audit/ 'TestAppendJSON'

mutate audit-code-zero "an audit event of a result writes code 0" \
	internal/gateway/audit/audit.go \
	'if e\.Code != 0 \{' \
	'if true {' \
	-- ./internal/gateway/audit/ 'TestAppendJSON'

mutate audit-unescaped "an audit string is written without quoting" \
	internal/gateway/audit/audit.go \
	'b, _ = jsontext\.AppendQuote\(b, v\) // invalid' \
	'b = append(append(append(b, 0x22), v...), 0x22) // invalid' \
	-- ./internal/gateway/audit/ 'TestAppendJSON'

mutate front-progress-escaped "a progress token whose name is escaped is not seen" \
	internal/gateway/front/mcp.go \
	'bytes\.Contains\(params, \[\]byte\(`\\u`\)\)' \
	'false' \
	-- ./internal/gateway/front/ 'TestCallProgressToken'

mutate mcp-compact-spare "a refused relayed value stays behind the output" \
	internal/mcp/relay.go \
	'clear\(out\[len\(dst\):\]\)' \
	'_ = out' \
	-- ./internal/mcp/ 'TestAppendCompact'

mutate audit-line-separator "an audit string writes U+2028 raw, splitting the event for line-oriented readers" \
	internal/gateway/audit/audit.go \
	'if !strings\.ContainsAny\(v, "\\u2028\\u2029"\) \{' \
	'if _ = strings.ContainsAny; true {' \
	-- ./internal/gateway/audit/ 'TestAppendJSON'

mutate gw-sealed-newlines "a sealed value opens with CR or LF inside it" \
	internal/gateway/sealed.go \
	'return nil, errNotSealed' \
	'continue' \
	-- "$gwpkg" 'TestDecodeSealed'

mutate gw-sealed-strict "a sealed value opens with other bits in its last character" \
	internal/gateway/sealed.go \
	'base64\.RawURLEncoding\.Strict\(\)\.DecodeString' \
	'base64.RawURLEncoding.DecodeString' \
	-- "$gwpkg" 'TestDecodeSealed'

mutate front-session-spelling "a session id with a newline in it opens the session" \
	internal/gateway/front/sessions.go \
	'gateway\.DecodeSealed\(id\)' \
	'base64.RawURLEncoding.DecodeString(id)' \
	-- ./internal/gateway/front/ 'FuzzFront'

mutate up-header-shared "a downstream header's value shares its array with the next one's" \
	internal/gateway/upstream/http.go \
	'h\.vals\[n-1 : n : n\]' \
	'h.vals[n-1 : n]' \
	-- "$uppkg" 'TestRequestHeader'

mutate mcp-mediatype-fast "a media type is taken as written, not as ParseMediaType reads it" \
	internal/mcp/mediatype.go \
	'case "application/json", "text/event-stream":' \
	'case "application/json", "text/event-stream", "Application/JSON":' \
	-- ./internal/mcp 'TestMediaType'

mutate front-accept-asis "an Accept member is taken as written, not as ParseMediaType reads it" \
	internal/gateway/front/mcp.go \
	'\t\treturn true\n\t\}\n\treturn false\n\}' \
	'\t\treturn true\n\t}\n\treturn true\n}' \
	-- ./internal/gateway/front/ 'TestAccepts'

mutate front-accept-specific "a broad Accept range takes a form a more specific one refused" \
	internal/gateway/front/mcp.go \
	'jsonForm\.offer\(1, no\)\n\t\t\t\tsseForm\.offer\(1, no\)' \
	'jsonForm.offer(3, no)\n\t\t\t\tsseForm.offer(3, no)' \
	-- ./internal/gateway/front/ 'TestAccepts'

mutate front-name-not-string "a tools/call whose name is no string is refused for its headers (-32020), not its params" \
	internal/gateway/front/mcp.go \
	'if json\.Unmarshal\(m\.Params, &p\) != nil \|\| p\.Name == nil \{' \
	'if _ = json.Unmarshal(m.Params, &p); p.Name == nil {' \
	-- ./internal/gateway/front/ 'TestHeaderRules'

mutate front-stream-expiry "a GET notification stream outlives its session" \
	internal/gateway/front/mcp.go \
	'\t\tcase <-expired\.C:\n\t\t\treturn\n' \
	'' \
	-- ./internal/gateway/front/ 'TestStreamEndsWithSession'

mutate front-revoked-elsewhere-streams "a session ended on another replica keeps its streams here" \
	internal/gateway/front/sessions.go \
	'\t\t\ts\.endStreams\(r\.Nonce\)\n' \
	'' \
	-- ./internal/gateway/front/ 'TestRevokedElsewhereEndsStreams'

mutate front-session-id-twice "a POST with two session ids is served on the first" \
	internal/gateway/front/mcp.go \
	'\tif len\(r\.Header\.Values\(hdrSessionID\)\) > 1 \{\n\t\treturn invalid' \
	'\tif false {\n\t\treturn invalid' \
	-- ./internal/gateway/front/ 'TestHeadersGivenTwice'

mutate front-stream-session-id-twice "a GET or DELETE with two session ids acts on the first" \
	internal/gateway/front/mcp.go \
	'\tif len\(r\.Header\.Values\(hdrSessionID\)\) > 1 \{\n\t\thttp\.Error' \
	'\tif false {\n\t\thttp.Error' \
	-- ./internal/gateway/front/ 'TestHeadersGivenTwice'

mutate front-content-type-twice "a body of two declared types is read as the first" \
	internal/gateway/front/mcp.go \
	'if len\(r\.Header\.Values\("Content-Type"\)\) > 1 \{' \
	'if false {' \
	-- ./internal/gateway/front/ 'TestHeadersGivenTwice'

mutate front-origin-twice "a request with two Origins is judged by the first" \
	internal/gateway/front/front.go \
	'len\(origins\) > 1 \|\| ' \
	'' \
	-- ./internal/gateway/front/ 'TestHeadersGivenTwice'

mutate cli-flag-hint "a mistake in the flags is answered with the whole help, the error buried above it" \
	cmd/bastion/run.go \
	'\tfs\.Usage = func\(\) \{\}\n' \
	'\tfs.Usage = full\n' \
	-- "$e2epkg" 'TestCheckAndVersion'

mutate config-value-line "an error in a value does not say its line" \
	internal/gateway/config/config.go \
	'Line: lineOf\(v\.lines, path\), ' \
	'' \
	-- ./internal/gateway/config 'TestErrorsGiveTheLine'

mutate front-session-mac-reset "a reused MAC state carries the last session id into the next" \
	internal/gateway/front/sessions.go \
	'\tm\.Reset\(\)\n' \
	'' \
	-- ./internal/gateway/front/ 'TestSessionSealReused'

mutate gw-prompt-folded "a prompt message may hold member names that differ only in case" \
	internal/gateway/prompt.go \
	'if _, dup := foldedDuplicate\(m\.Content\); dup \{' \
	'if _, dup := foldedDuplicate(m.Content); false && dup {' \
	-- "$gwpkg" 'TestCheckEmbedded'

mutate gw-relay-embedded "a server's request to its caller may embed another server's resource" \
	internal/gateway/relay.go \
	'if g\.foreignEmbedded\(t\.Server, params\) \{' \
	'if false {' \
	-- "$gwpkg" 'TestRelayedRequestEmbeds'

mutate gw-handover-embedded "a round of input handed to the caller may embed another server's resource" \
	internal/gateway/input.go \
	'if g\.foreignEmbedded\(t\.Server, q\.Params\) \{' \
	'if false {' \
	-- "$gwpkg" 'TestHandOverEmbeds'

mutate gw-claims-rejected "a URI a reviewer rejected is claimed by no one while its server is down" \
	internal/gateway/gateway.go \
	'!ok \|\| r\.Status == admit\.Removed \{' \
	'!ok || r.Status == admit.Removed || r.Status == admit.Rejected {' \
	-- "$gwpkg" 'TestClaimsOutliveTheServer'

# --- Session 24, third review: pins kept, shares kept, every request a slot.

mutate admit-forget-pin "a removed record pinned on first use may be forgotten, undoing its quarantine" \
	internal/gateway/admit/lifecycle.go \
	'return r\.Status == Removed && r\.Approval == nil && ' \
	'return r.Status == Removed && (r.Approval == nil || r.Approval.Mode == string(FirstUsePin)) && ' \
	-- "$gwpkg" 'TestChurnKeepsTheQuarantine'

mutate gw-ledger-bound "a server's new names are recorded without bound" \
	internal/gateway/admission.go \
	'\} else if n\+\+; n > bound \{' \
	'} else if n++; false && n > bound {' \
	-- "$gwpkg" 'TestChurnBoundsTheLedger'

mutate front-revoke-owner "the store keeps no owner of an ended session, so a principal's share resets at a restart" \
	internal/gateway/front/sessions.go \
	'Until: ss\.issued\.Add\(s\.ttl\), Owner: who\}' \
	'Until: ss.issued.Add(s.ttl)}' \
	-- ./internal/gateway/front 'TestRevokeShareKeptInTheStore'

mutate gw-complete-slot "a completion takes no slot of the server's in-flight bound" \
	internal/gateway/complete.go \
	'release, err := ds\.slots\.acquire\(dctx, c\.Principal\)' \
	'release, err := func() {}, error(nil)' \
	-- "$gwpkg" 'TestCompletionTakesASlot'

mutate gw-resubscribe-served "a server that came back as another is subscribed again to what it no longer serves" \
	internal/gateway/subscribe.go \
	'Route\(k\.uri\); !\(r != nil' \
	'Route(k.uri); false && !(r != nil' \
	-- "$gwpkg" 'TestResubscribeOnlyWhatIsServed'

mutate gw-slots-own "the gateway's own requests take a share of a quarter of the slots" \
	internal/gateway/slots.go \
	' && p\.Issuer != "" \{' \
	' {' \
	-- "$gwpkg" 'TestSlotsShared'

mutate ledger-add-column-unbounded "adding a missing column waits for ever behind a transaction on its table" \
	internal/gateway/ledger/postgres.go \
	'SET LOCAL lock_timeout = %d' \
	'SET LOCAL statement_timeout = %d0' \
	-- ./internal/gateway/ledger/ 'TestPostgresAddColumnWaitsBounded'

mutate ledger-added-columns "a revocations' table made before owners were kept is opened as it is" \
	internal/gateway/ledger/postgres.go \
	'\t\t\t\tif err := addColumns\(ctx, tx, t\.name, t\.added\); err != nil \{' \
	'\t\t\t\tif err := error(nil); err != nil {' \
	-- ./internal/gateway/ledger 'TestPostgresRevokedTableFromBefore'

mutate ledger-added-column-held "a column the table has is added again, which a role that may not alter the table cannot" \
	internal/gateway/ledger/postgres.go \
	'\t\tif has \{' \
	'\t\tif false {' \
	-- ./internal/gateway/ledger 'TestPostgresRevokedTableFromBefore'

mutate review-forget-listed "a reviewer forgets the pin of a name its server still lists" \
	internal/gateway/review/review.go \
	'if err := admit\.CheckForget\(r\); err != nil \{' \
	'if err := error(nil); err != nil {' \
	-- ./internal/gateway/review 'TestForget'

mutate review-forget-audit "a forgotten record is audited as if it were still there" \
	internal/gateway/review/review.go \
	'l\.decided\(by, gone, statusForgotten\)' \
	'l.decided(by, gone, string(gone.Status))' \
	-- ./internal/gateway/review 'TestForget'

mutate review-socket-conflict "the socket answers a forget of a listed name as a failure of its own" \
	internal/gateway/review/socket.go \
	'admit\.ErrStillListed, admit\.ErrHeld\}' \
	'admit.ErrHeld}' \
	-- ./internal/gateway/review 'TestForget'

mutate admit-forget-held "a reviewer forgets a name removed while quarantined or refused, so the change comes back as a first use" \
	internal/gateway/admit/lifecycle.go \
	'case len\(r\.RejectedDigests\) > 0, len\(r\.HeldDigests\) > 0, r\.Overflowed, r\.Approval != nil && r\.Reason != "":' \
	'case false:' \
	-- "$gwpkg" 'TestForgetKeepsWhatWasHeld'

mutate admit-remove-reason "a name removed while quarantined looks removed clean" \
	internal/gateway/admit/lifecycle.go \
	'if prev\.Status != Quarantined && prev\.Status != Rejected \{' \
	'if true {' \
	-- ./internal/gateway/admit 'TestCheckForget'

mutate review-client-older "a command an older running gateway does not know reads as a name the ledger lacks" \
	internal/gateway/review/socket.go \
	'if e\.Error == "" \{' \
	'if false {' \
	-- ./internal/gateway/review 'TestClientOfAnOlderGateway'

mutate gw-route-templated "another spelling of an owned URI a later template matches is answered as unknown, not as not normal" \
	internal/gateway/resource.go \
	'case t != nil \|\| snap\.Templated\(uri\):' \
	'case t != nil:' \
	-- ./internal/gateway 'TestRouteReadNormalForm'

mutate admit-held-digests "a quarantine is forgotten once the server serves the pinned descriptor again" \
	internal/gateway/admit/lifecycle.go \
	'\t\tif s == Quarantined \{\n\t\t\tr\.HeldDigests' \
	'\t\tif false {\n\t\t\tr.HeldDigests' \
	-- "$gwpkg" 'TestForgetKeepsWhatWasHeld'

mutate admit-held-approved "a quarantined digest a reviewer approved still holds the record" \
	internal/gateway/admit/lifecycle.go \
	'\tprev\.HeldDigests = slices\.DeleteFunc' \
	'\t_ = slices.DeleteFunc' \
	-- ./internal/gateway/admit 'TestCheckForget'

mutate cat-normal-encoded-query "p%3Fq and p%23q pass as a path of their own" \
	internal/gateway/catalog/resource.go \
	'\(b == .\?. \|\| b == .#.\) && i < pathEnd,' \
	'false,' \
	-- ./internal/gateway/catalog 'TestNotNormal'

mutate cat-normal-encoded-twice "a percent-encoding encoded again passes" \
	internal/gateway/catalog/resource.go \
	'b == .%. && i\+4 < len\(uri\) && isHex\(uri\[i\+3\]\) && isHex\(uri\[i\+4\]\):' \
	'false:' \
	-- ./internal/gateway/catalog 'TestNotNormal'

mutate cat-spelling-listed "a later server that lists another spelling of a URI an earlier server owns exactly serves it" \
	internal/gateway/catalog/resource.go \
	'keys := resourceKeys\(r\.URI\)' \
	'keys := []string{r.URI}' \
	-- ./internal/gateway/catalog 'TestSpellingsListedExactly'

mutate cat-spelling-claim "a later server's claim of another spelling of a URI an earlier server owns is its own" \
	internal/gateway/catalog/resource.go \
	'keys := resourceKeys\(u\)' \
	'keys := []string{u}' \
	-- ./internal/gateway/catalog 'TestSpellingsListedExactly'

mutate cat-spelling-route "a later server's template serves another spelling of a URI an earlier server lists exactly" \
	internal/gateway/catalog/catalog.go \
	'if o := keyOwner\(s\.sameAs, keys, rt\.server\); o != "" \{' \
	'if o := ""; o != "" {' \
	-- ./internal/gateway/catalog 'TestSpellingsListedExactly'

mutate cat-spelling-owner "another spelling of a URI an earlier server lists exactly is owned by a later server's template" \
	internal/gateway/catalog/catalog.go \
	'if so := keyOwner\(s\.sameAs, resourceKeys\(uri\), o\); so != "" \{' \
	'if so := ""; so != "" {' \
	-- ./internal/gateway/catalog 'TestSpellingsListedExactly'

mutate cat-key-dots "a dot segment makes another resource of the same file" \
	internal/gateway/catalog/catalog.go \
	'\t\tcase "", "\.":\n' \
	'\t\tcase "":\n\t\t\tsegs = append(segs, seg)\n\t\tcase ".":\n' \
	-- ./internal/gateway/catalog 'TestSpellingsListedExactly'

mutate cat-key-file-host "file://localhost/p is another resource than file:///p" \
	internal/gateway/catalog/catalog.go \
	'after, ok := strings\.CutPrefix\(rest, "//"\)\n\tif !ok \{\n\t\treturn rest' \
	'after, ok := strings.CutPrefix(rest, "//")\n\tif true || !ok {\n\t\treturn rest' \
	-- ./internal/gateway/catalog 'TestSpellingsListedExactly'

mutate cat-key-host-raw "file:/%2Fdir/p, whose host a server that parses first cuts before decoding, is another resource than file:///dir/p" \
	internal/gateway/catalog/catalog.go \
	'parsedFirst := pathKey\(scheme, decodedPath\(dropHost\(rest\)\)\)' \
	'parsedFirst := decodedFirst' \
	-- ./internal/gateway/catalog 'TestSpellingsListedExactly'

mutate cat-key-decode "a percent-encoded spelling is another resource" \
	internal/gateway/catalog/catalog.go \
	'decoded := percentDecode\(rest\)' \
	'decoded := rest' \
	-- ./internal/gateway/catalog 'TestSpellingsListedExactly'

mutate cat-key-cut-decoded "an encoded '?' or '#' makes another resource of the same file" \
	internal/gateway/catalog/catalog.go \
	'\tfor range maxDecodes \{' \
	'\tif i := strings.IndexAny(rest, "?#"); i >= 0 {\n\t\trest = rest[:i]\n\t}\n\tfor range maxDecodes {' \
	internal/gateway/catalog/catalog.go \
	'"/"\)\n\tif i := strings\.IndexAny\(rest, "\?#"\); i >= 0 \{\n\t\trest = rest\[:i\]\n\t\}\n\treturn rest' \
	'"/")\n\treturn rest' \
	-- ./internal/gateway/catalog 'TestSpellingsListedExactly'

mutate cat-key-decode-twice "a doubly encoded spelling is another resource" \
	internal/gateway/catalog/catalog.go \
	'const maxDecodes = 3' \
	'const maxDecodes = 1' \
	-- ./internal/gateway/catalog 'TestSpellingsListedExactly'

mutate cat-key-segment-case "another scheme's host in another case is another resource" \
	internal/gateway/catalog/catalog.go \
	'\t\tsegs\[0\] = strings\.ToLower\(segs\[0\]\)' \
	'\t\t_ = segs[0]' \
	-- ./internal/gateway/catalog 'TestSpellingsListedExactly'

mutate cat-key-port "a default or empty port makes another resource of the same page" \
	internal/gateway/catalog/catalog.go \
	'port == "" \|\| port == defaultPort\(scheme\)' \
	'port != port' \
	-- ./internal/gateway/catalog 'TestSpellingsListedExactly'

mutate cat-key-userinfo "user information makes another resource of the same page" \
	internal/gateway/catalog/catalog.go \
	'if i := strings\.LastIndexByte\(authority, .@.\); i >= 0 \{' \
	'if i := strings.LastIndexByte(authority, 64); false && i >= 0 {' \
	-- ./internal/gateway/catalog 'TestSpellingsListedExactly'

mutate cat-key-trailing-dot "a host's trailing dot makes another resource of the same page" \
	internal/gateway/catalog/catalog.go \
	'return "/" \+ strings\.TrimSuffix\(authority, "\."\) \+ rest' \
	'return "/" + authority + rest' \
	-- ./internal/gateway/catalog 'TestSpellingsListedExactly'

mutate gw-embedded-uri-bound "an embedded resource's label of any length is matched against every template" \
	internal/gateway/invoke.go \
	'if len\(u\) > catalog\.MaxURI \{' \
	'if false {' \
	-- ./internal/gateway 'TestCheckEmbedded'

mutate gw-contents-uri-bound "a read's contents labelled with a URI of any length are matched against every template" \
	internal/gateway/resource.go \
	'if len\(c\.URI\) > catalog\.MaxURI \{' \
	'if false {' \
	-- ./internal/gateway 'TestCheckContents$'

mutate admit-overflow "a held digest pushed out of its bounded list is forgotten with it" \
	internal/gateway/admit/lifecycle.go \
	'digests, r\.Overflowed = digests\[n-maxRejected:\], true' \
	'digests = digests[n-maxRejected:]' \
	-- ./internal/gateway/admit 'TestCheckForget'

mutate cat-held-keys "a held URI is read through its owner's template in another spelling" \
	internal/gateway/catalog/resource.go \
	'\t\t\t\tfor _, k := range resourceKeys\(u\) \{\n\t\t\t\t\tnext\.held\[k\] = true' \
	'\t\t\t\tnext.held[u] = true\n\t\t\t\tfor _, k := range resourceKeys(u)[:0] {\n\t\t\t\t\tnext.held[k] = true' \
	-- ./internal/gateway/catalog 'TestHeldNotRoutedByItsOwnTemplate'

# A worker's summary, which the coordinator reads.
echo
echo "== summary"
if ((${#results[@]})); then
	printf '   %s\n' "${results[@]}"
fi
exit "$failed"
