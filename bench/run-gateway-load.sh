#!/usr/bin/env bash
# run-gateway-load.sh measures whole-process tools/call throughput and
# latency through `bastion gateway`, against the same echo tool called
# directly, all driven by bench/mcpload over Streamable HTTP as a legacy
# (2025-11-25) session client:
#
#   direct         mcpload -> echohttp (bench/echohttp: the official Go
#                  SDK's Streamable HTTP server, JSON answers)
#   proxy          mcpload -> bench/revproxy -> echohttp: the standard
#                  library's httputil.ReverseProxy and nothing else, the
#                  price of one more HTTP hop; gateway-http's "added over
#                  proxy" is then the gateway's own work
#   gateway-http   mcpload -> bastion gateway -> echohttp
#   gateway-stdio  mcpload -> bastion gateway -> bench/echoserver, a stdio
#                  child of the gateway
#
# Every run starts its own processes (echohttp, the gateway on a free
# loopback port with log.level warn and auth.mode none, waited for on
# GET /readyz) and stops them with SIGTERM afterwards; a process that does
# not exit 0 within 20 s fails the script, as does any error mcpload counts,
# and whatever the gateway logs (at warn) is printed after its run.
# All targets are measured in the same run, reversing their order every
# other round so that drift in machine load hits them alike. The table
# shows medians over the rounds and, as x_direct, the median of the
# per-round ratios to direct: runs of one round are adjacent in time, so
# their ratio holds up better on a busy machine than any absolute figure.
# "added" is the latency the gateway adds at the median: the median over
# rounds of its p50 minus direct's p50 in the same round (paired, as
# x_direct is), with every round's difference; with proxy among the
# targets, gateway-http's added over proxy is given the same way.
#
# cpu_us is the CPU time (user+system) per call of every server process of
# the target, over the whole run; gw_us and ds_us split it into the
# gateway's and the downstream's (echohttp, or the gateway's stdio child).
# drv_us is mcpload's own. On a small machine all of them share the CPUs,
# so calls/s falls as their sum grows.
#
# Read the ratios with the downstreams in mind (docs/performance.md):
# echohttp (the SDK) spends more CPU per call than the gateway does, which
# holds direct's calls/s down and so flatters gateway-http's x_direct; and
# gateway-stdio has another, much cheaper downstream than direct, so its
# x_direct and added compare unlike things. gw_us is the gateway's own cost.
#
# Settings (environment):
#   ROUNDS=3          rounds per target and in-flight level
#   DURATION=5s       measured window of each run
#   WARMUP=1s         unmeasured warm-up of each run
#   INFLIGHT="1 16"   in-flight levels
#   TARGETS="direct proxy gateway-http gateway-stdio"  the targets
#                     (direct is needed for x_direct and added)
#   GATEWAY_ENV="K=V ..."  extra environment of every gateway and of
#                     revproxy (so that proxy stays the floor of the same
#                     hop), e.g. GOMAXPROCS=1 to run them on one P
#   PROFILE=path      afterwards, one more run of PROFILE_TARGET at the
#                     highest in-flight level with BASTION_CPUPROFILE=path
#                     in the gateway's environment (the gateway writes a
#                     pprof CPU profile there when it exits after SIGTERM),
#                     then its top. A gateway that writes none has no
#                     profiling switch yet: the script then records the run
#                     with `perf record -g` into path instead when perf is
#                     installed, and prints `perf report`.
#   PROFILE_TARGET=gateway-http  or gateway-stdio
#
# Usage: bench/run-gateway-load.sh   (from anywhere; it finds the repository)
set -euo pipefail
set -o errtrace
trap 'echo "run-gateway-load.sh: line $LINENO failed: $BASH_COMMAND" >&2' ERR
export GOTOOLCHAIN=go1.26.10

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
WARMUP=${WARMUP:-1s}
INFLIGHT=${INFLIGHT:-"1 16"}
TARGETS=${TARGETS:-"direct proxy gateway-http gateway-stdio"}
GATEWAY_ENV=${GATEWAY_ENV:-}
PROFILE=${PROFILE:-}
PROFILE_TARGET=${PROFILE_TARGET:-gateway-http}

command -v curl >/dev/null || {
	echo "run-gateway-load.sh: curl is required (to wait for GET /readyz)" >&2
	exit 2
}
read -r -a targets <<<"$TARGETS"
[[ " $TARGETS " == *" direct "* ]] || {
	echo "run-gateway-load.sh: TARGETS must include direct" >&2
	exit 2
}
case $PROFILE_TARGET in gateway-http | gateway-stdio) ;; *)
	echo "run-gateway-load.sh: PROFILE_TARGET must be gateway-http or gateway-stdio" >&2
	exit 2
	;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)

# started holds the pid of every process this script started and has not
# yet seen exit; cleanup ends them all (children of the gateway first, if
# it still has any), however the script ends.
started=()
cleanup() {
	local p c
	trap - ERR
	for p in "${started[@]}"; do
		for c in $(cat /proc/"$p"/task/*/children 2>/dev/null || true); do kill -KILL "$c" 2>/dev/null || true; done
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

forget() { # forget PID: drop it from started
	local p keep=()
	for p in "${started[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done
	started=("${keep[@]}")
}

echo "building into $tmp ..." >&2
(cd "$root" && go build -o "$tmp/bastion" ./cmd/bastion)
(cd "$root" && go build -o "$tmp/echohttp" ./bench/echohttp)
(cd "$root" && go build -o "$tmp/revproxy" ./bench/revproxy)
(cd "$root" && go build -o "$tmp/bastion-echo" ./bench/echoserver)
(cd "$root" && go build -o "$tmp/mcpload" ./bench/mcpload)

# The gateway's key, for the session ids it seals; any 32 bytes do.
MCP_GATEWAY_SESSION_KEY=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
export MCP_GATEWAY_SESSION_KEY

# state PID prints the state letter of a process, or nothing once it is
# gone. (A child that has exited stays a zombie, state Z, until waited
# for.)
state() {
	local s
	s=$(cat /proc/"$1"/stat 2>/dev/null) || return 0
	s=${s##*) }
	echo "${s%% *}"
}

# stop PID NAME LOG sends SIGTERM and waits up to 20 s for a clean exit;
# anything else fails the script with the process's log.
stop() {
	local pid=$1 name=$2 log=$3 i rc=0 st
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 400; i++)); do
		st=$(state "$pid")
		[[ -z $st || $st == Z ]] && break
		sleep 0.05
	done
	if [[ -n $st && $st != Z ]]; then
		echo "run-gateway-load.sh: $name (pid $pid) did not exit within 20 s of SIGTERM; its log:" >&2
		cat "$log" >&2
		exit 1
	fi
	wait "$pid" || rc=$?
	forget "$pid"
	if ((rc != 0)); then
		echo "run-gateway-load.sh: $name exited with status $rc after SIGTERM; its log:" >&2
		cat "$log" >&2
		exit 1
	fi
}

# start_echohttp LOG sets eh_pid and eh_url.
start_echohttp() {
	local log=$1 i
	# Created before the process starts, which opens it only after the
	# fork: the loop below may read it first.
	: >"$log.out"
	"$tmp/echohttp" -addr 127.0.0.1:0 >"$log.out" 2>"$log" &
	eh_pid=$!
	started+=("$eh_pid")
	for ((i = 0; i < 200; i++)); do
		eh_url=$(sed -n 's/^LISTEN //p' "$log.out")
		[[ -n $eh_url ]] && return 0
		[[ $(state "$eh_pid") == Z ]] && break
		sleep 0.05
	done
	echo "run-gateway-load.sh: echohttp did not start; its log:" >&2
	cat "$log" >&2
	exit 1
}

# start_revproxy TO LOG sets rp_pid and rp_url.
start_revproxy() {
	local to=$1 log=$2 i
	: >"$log.out"
	# shellcheck disable=SC2086 # GATEWAY_ENV is a list of K=V words
	env $GATEWAY_ENV "$tmp/revproxy" -addr 127.0.0.1:0 -to "$to" >"$log.out" 2>"$log" &
	rp_pid=$!
	started+=("$rp_pid")
	for ((i = 0; i < 200; i++)); do
		rp_url=$(sed -n 's/^LISTEN //p' "$log.out")
		[[ -n $rp_url ]] && return 0
		[[ $(state "$rp_pid") == Z ]] && break
		sleep 0.05
	done
	echo "run-gateway-load.sh: revproxy did not start; its log:" >&2
	cat "$log" >&2
	exit 1
}

# start_gateway KIND DOWNSTREAM_URL LOG [ENV...] writes a configuration
# for a free loopback port and starts the gateway with it; it sets gw_pid,
# gw_url and ds_pid (the stdio child, for KIND stdio). It waits for
# GET /readyz.
start_gateway() {
	local kind=$1 ds_url=$2 log=$3 try port i code children
	shift 3
	for ((try = 0; try < 10; try++)); do
		# Below the kernel's ephemeral range (32768-60999), so that no
		# outgoing connection holds it; a port already taken is tried
		# again with another.
		port=$((20000 + RANDOM % 12000))
		{
			echo "listen: 127.0.0.1:$port"
			echo "public_url: http://127.0.0.1:$port/mcp"
			echo "auth: {mode: none}"
			echo 'policy: {rules: [{id: all, tools: ["*"], roles: ["*"]}]}'
			echo "log: {level: warn}"
			# The audit (one line per call) to a file of its own, as in a
			# deployment, so that the log left at warn says only what is
			# wrong.
			echo "audit: {file: $tmp/audit-$kind.jsonl}"
			# A throwaway ledger; trust on first use, the descriptors are ours.
			echo "state_dir: $tmp/state-$kind"
			echo "admission: {first_use: pin}"
			echo "servers:"
			echo "  - name: echo"
			if [[ $kind == http ]]; then
				echo "    url: $ds_url"
			else
				echo "    command: [\"$tmp/bastion-echo\"]"
				echo "    env: {MCP_LOG_LEVEL: warn}"
			fi
		} >"$tmp/gateway-$kind.yaml"
		# shellcheck disable=SC2086 # GATEWAY_ENV is a list of K=V words
		env $GATEWAY_ENV "$@" "$tmp/bastion" gateway --config "$tmp/gateway-$kind.yaml" 2>"$log" &
		gw_pid=$!
		started+=("$gw_pid")
		gw_url=http://127.0.0.1:$port/mcp
		for ((i = 0; i < 200; i++)); do
			code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://127.0.0.1:$port/readyz" || true)
			[[ $code == 200 ]] && break
			[[ $(state "$gw_pid") == Z ]] && break
			sleep 0.05
		done
		if [[ $code == 200 ]]; then
			ds_pid=
			if [[ $kind == stdio ]]; then
				children=$(cat /proc/"$gw_pid"/task/*/children)
				read -r -a children <<<"$children"
				if ((${#children[@]} != 1)); then
					echo "run-gateway-load.sh: the gateway has ${#children[@]} children, not its one stdio server" >&2
					exit 1
				fi
				ds_pid=${children[0]}
			fi
			return 0
		fi
		if [[ $(state "$gw_pid") == Z ]] && grep -q 'address already in use' "$log"; then
			wait "$gw_pid" || true
			forget "$gw_pid"
			continue
		fi
		echo "run-gateway-load.sh: the gateway did not become ready; its log:" >&2
		cat "$log" >&2
		exit 1
	done
	echo "run-gateway-load.sh: found no free port for the gateway" >&2
	exit 1
}

# run_target TARGET INFLIGHT LOG [GATEWAY_ENV...] starts the target's
# processes, runs mcpload against it, stops them, and writes mcpload's
# JSON report to LOG.json. With PERF_OUT set, the gateway is recorded by
# perf. (It runs in the script's own shell, never in a $(...) subshell, so
# that started stays complete and wait works.)
run_target() {
	local target=$1 n=$2 log=$3 perf_pid=
	shift 3
	local tool=echo.echo url cpu=()
	case $target in
	direct)
		start_echohttp "$log.echohttp"
		url=$eh_url tool=echo
		cpu=(-cpu-pid "downstream=$eh_pid")
		;;
	proxy)
		start_echohttp "$log.echohttp"
		start_revproxy "$eh_url" "$log.revproxy"
		url=$rp_url tool=echo
		cpu=(-cpu-pid "gateway=$rp_pid" -cpu-pid "downstream=$eh_pid")
		;;
	gateway-http)
		start_echohttp "$log.echohttp"
		start_gateway http "$eh_url" "$log.gateway" "$@"
		url=$gw_url
		cpu=(-cpu-pid "gateway=$gw_pid" -cpu-pid "downstream=$eh_pid")
		;;
	gateway-stdio)
		start_gateway stdio "" "$log.gateway" "$@"
		url=$gw_url
		cpu=(-cpu-pid "gateway=$gw_pid" -cpu-pid "downstream=$ds_pid")
		;;
	esac
	if [[ -n ${PERF_OUT:-} ]]; then
		perf record -q -F 999 -g -p "$gw_pid" -o "$PERF_OUT" 2>"$log.perf" &
		perf_pid=$!
		started+=("$perf_pid")
	fi
	if ! "$tmp/mcpload" -json -url "$url" -tool "$tool" "${cpu[@]}" -inflight "$n" -duration "$DURATION" -warmup "$WARMUP" >"$log.json" 2>"$log.mcpload"; then
		echo "run-gateway-load.sh: $target at inflight $n failed:" >&2
		cat "$log.mcpload" >&2
		for f in "$log.gateway" "$log.revproxy" "$log.echohttp"; do
			[[ -s $f ]] && { echo "--- ${f##*.} log:" >&2; cat "$f" >&2; }
		done
		exit 1
	fi
	if [[ -n $perf_pid ]]; then
		kill -INT "$perf_pid"
		wait "$perf_pid" || true
		forget "$perf_pid"
	fi
	if [[ $target == gateway-* ]]; then
		stop "$gw_pid" "the gateway ($target)" "$log.gateway"
		# At log level warn a gateway under load should say nothing but
		# its start-up warning that auth mode none authenticates no one.
		if grep -v '"msg":"auth mode none' "$log.gateway" | grep -q .; then
			echo "run-gateway-load.sh: the gateway logged during $target at inflight $n:" >&2
			grep -v '"msg":"auth mode none' "$log.gateway" | head -20 >&2
		fi
	fi
	if [[ $target == proxy ]]; then
		stop "$rp_pid" revproxy "$log.revproxy"
	fi
	if [[ $target != gateway-stdio ]]; then
		stop "$eh_pid" echohttp "$log.echohttp"
	fi
}

# measure TARGET INFLIGHT appends "calls_per_second p50_ms p99_ms cpu_us
# gateway_cpu_us downstream_cpu_us driver_cpu_us" of one run to
# $tmp/TARGET.INFLIGHT.
measure() {
	local target=$1 n=$2 out
	run_target "$target" "$n" "$tmp/log.$target.$n"
	out=$(cat "$tmp/log.$target.$n.json")
	field() { sed -nE "s/.*\"$1\":([0-9.eE+-]+).*/\1/p" <<<"$out"; }
	local gw ds
	gw=$(field gateway)
	ds=$(field downstream)
	echo "$(field calls_per_second) $(field p50_ms) $(field p99_ms) $(field server_cpu_us_per_call) ${gw:-0} ${ds:-0} $(field driver_cpu_us_per_call)" >>"$tmp/$target.$n"
}

# Other work on the machine skews every figure; the load average is
# printed with the table so that a noisy run can be recognised.
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started_at=$(date +%s)
for ((round = 1; round <= ROUNDS; round++)); do
	order=("${targets[@]}")
	if ((round % 2 == 0)); then
		# Reverse the order every other round.
		order=()
		for ((i = ${#targets[@]} - 1; i >= 0; i--)); do order+=("${targets[i]}"); done
	fi
	for n in $INFLIGHT; do
		for t in "${order[@]}"; do
			echo "round $round/$ROUNDS: $t, inflight $n" >&2
			measure "$t" "$n"
		done
	done
done

# median COLUMN FILE prints the median of a column.
median() {
	sort -g -k"$1","$1" "$2" | awk -v c="$1" '{v[NR] = $c} END {
		if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# ratios FILE BASE prints, one per line, the calls/s of each round of FILE
# divided by that of the same round of BASE. Runs of one round sit next to
# each other in time, so their ratio is less exposed to drift in machine
# load than a ratio of medians.
ratios() {
	paste -d' ' "$1" "$2" | awk '{printf "%.3f\n", $1 / $(NF / 2 + 1)}'
}

# added FILE BASE prints, one per line, the p50 of each round of FILE minus
# that of the same round of BASE, in ms.
added() {
	paste -d' ' "$1" "$2" | awk '{printf "%.3f\n", $2 - $(NF / 2 + 2)}'
}

echo
echo "tools/call through bastion gateway, echo tool, Streamable HTTP (legacy session, JSON answers); $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1))"
echo "$ROUNDS rounds of $DURATION (+$WARMUP warm-up); $(date -u +%Y-%m-%dT%H:%MZ); $(go version | cut -d' ' -f3); $(($(date +%s) - started_at)) s"
echo "load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "x_direct: median over rounds of (calls/s of the target / calls/s of direct in the same round)"
echo "cpu_us = gw_us + ds_us: CPU time per call of the gateway (for proxy: of revproxy) and of the downstream; drv_us: of mcpload"
[[ -n $GATEWAY_ENV ]] && echo "every gateway and revproxy ran with $GATEWAY_ENV in its environment"
[[ " $TARGETS " == *" gateway-stdio "* ]] &&
	echo "gateway-stdio's downstream is bench/echoserver (bastion's core, stdio), not echohttp: its x_direct and added compare different downstreams"
printf '%-14s %8s %9s %8s %8s %8s %7s %7s %7s %7s  %-24s %s\n' target inflight calls/s p50_ms p99_ms x_direct cpu_us gw_us ds_us drv_us "per-round calls/s" "per-round x_direct"
for n in $INFLIGHT; do
	for t in "${targets[@]}"; do
		f="$tmp/$t.$n"
		ratios "$f" "$tmp/direct.$n" >"$f.ratio"
		printf '%-14s %8s %9.0f %8.3f %8.3f %8.2f %7.1f %7.1f %7.1f %7.1f  %-24s %s\n' "$t" "$n" "$(median 1 "$f")" "$(median 2 "$f")" "$(median 3 "$f")" \
			"$(median 1 "$f.ratio")" "$(median 4 "$f")" "$(median 5 "$f")" "$(median 6 "$f")" "$(median 7 "$f")" \
			"$(awk '{printf "%.0f ", $1}' "$f")" "$(tr '\n' ' ' <"$f.ratio")"
	done
done
echo
# report_added LABEL TARGET BASE INFLIGHT prints TARGET's added latency
# over BASE: the median of the per-round differences of p50 (paired, as
# x_direct is), then the p50 medians and every round's difference.
report_added() {
	local f="$tmp/$2.$4" b="$tmp/$3.$4"
	added "$f" "$b" >"$f.added.$3"
	printf '%-21s %-13s inflight %-3s %7.3f ms  (median p50 %.3f - %s %.3f; per round: %s)\n' "$1" "$2" "$4" \
		"$(median 1 "$f.added.$3")" "$(median 2 "$f")" "$3" "$(median 2 "$b")" "$(tr '\n' ' ' <"$f.added.$3")"
}
for n in $INFLIGHT; do
	for t in "${targets[@]}"; do
		[[ $t == direct ]] && continue
		report_added "added at the median," "$t" direct "$n"
	done
	if [[ " $TARGETS " == *" proxy "* && " $TARGETS " == *" gateway-http "* ]]; then
		report_added "added over proxy," gateway-http proxy "$n"
	fi
done

if [[ -n $PROFILE ]]; then
	n=$(tr ' ' '\n' <<<"$INFLIGHT" | sort -n | tail -1)
	echo
	echo "CPU profile of the gateway ($PROFILE_TARGET) at inflight $n -> $PROFILE"
	rm -f "$PROFILE"
	run_target "$PROFILE_TARGET" "$n" "$tmp/log.profile" BASTION_CPUPROFILE="$PROFILE"
	if [[ -s $PROFILE ]]; then
		go tool pprof -top -cum -nodecount=45 "$tmp/bastion" "$PROFILE" 2>/dev/null
	elif command -v perf >/dev/null; then
		echo "the gateway wrote no profile (no BASTION_CPUPROFILE support); recording it with perf instead"
		PERF_OUT=$PROFILE run_target "$PROFILE_TARGET" "$n" "$tmp/log.profile"
		perf report -i "$PROFILE" --stdio --children -g none --percent-limit 2 2>/dev/null | grep -v '^#' | grep -v '^$' | head -60
	else
		echo "the gateway wrote no profile (no BASTION_CPUPROFILE support), and perf is not installed" >&2
		exit 1
	fi
fi
