#!/usr/bin/env bash
# run-load.sh measures whole-process tools/call throughput of the bastion
# server core (bench/echoserver) against github.com/mark3labs/mcp-go
# (bench/mcpgo) with the same echo tool, driven by bench/mcpload over stdio.
#
# Both servers are measured in the same run, alternating which goes first in
# each round so that drift in machine load hits both alike. The table shows
# medians over the rounds and, as x_mcp-go, the median of the per-round
# ratios to mcp-go: runs of one round are adjacent in time, so their ratio
# holds up better on a busy machine than any absolute figure.
#
# Settings (environment):
#   ROUNDS=3          rounds per server and in-flight level
#   DURATION=5s       measured window of each run
#   WARMUP=1s         unmeasured warm-up of each run
#   INFLIGHT="1 16"   in-flight levels
#   MCPGO_VALIDATE=1  also measure mcp-go with its opt-in schema validation
#                     (bastion always validates arguments); 0 skips it
#   PROFILE=path      afterwards, write a CPU profile of bastion-echo at the
#                     highest in-flight level to path and print its top
#
# Usage: bench/run-load.sh   (from anywhere; it finds the repository)
set -euo pipefail
export GOTOOLCHAIN=go1.26.10

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
WARMUP=${WARMUP:-1s}
INFLIGHT=${INFLIGHT:-"1 16"}
MCPGO_VALIDATE=${MCPGO_VALIDATE:-1}
PROFILE=${PROFILE:-}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "building into $tmp ..." >&2
(cd "$root" && go build -o "$tmp/bastion-echo" ./bench/echoserver)
(cd "$root" && go build -o "$tmp/mcpload" ./bench/mcpload)
(cd "$root/bench/mcpgo" && go build -o "$tmp/mcpgo-echo" .)

servers=(bastion mcp-go)
if [[ $MCPGO_VALIDATE == 1 ]]; then
	servers+=(mcp-go+validate)
fi

# command_of prints the server command line of a server name.
command_of() {
	case $1 in
	bastion) echo "env MCP_LOG_LEVEL=warn $tmp/bastion-echo" ;;
	mcp-go) echo "$tmp/mcpgo-echo" ;;
	mcp-go+validate) echo "$tmp/mcpgo-echo -validate" ;;
	esac
}

# measure SERVER INFLIGHT appends "calls_per_second p50_ms p99_ms
# server_cpu_us_per_call" of one run to $tmp/SERVER.INFLIGHT.
measure() {
	local server=$1 n=$2 out
	# shellcheck disable=SC2046 # the command line is split on purpose
	out=$("$tmp/mcpload" -json -inflight "$n" -duration "$DURATION" -warmup "$WARMUP" -- $(command_of "$server"))
	field() { sed -E "s/.*\"$1\":([0-9.eE+-]+).*/\1/" <<<"$out"; }
	echo "$(field calls_per_second) $(field p50_ms) $(field p99_ms) $(field server_cpu_us_per_call)" >>"$tmp/$server.$n"
}

# Other work on the machine skews every figure; the load average is
# printed with the table so that a noisy run can be recognised.
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((round = 1; round <= ROUNDS; round++)); do
	order=("${servers[@]}")
	if ((round % 2 == 0)); then
		# Reverse the order every other round.
		order=()
		for ((i = ${#servers[@]} - 1; i >= 0; i--)); do order+=("${servers[i]}"); done
	fi
	for n in $INFLIGHT; do
		for s in "${order[@]}"; do
			measure "$s" "$n"
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

echo
echo "whole-process tools/call throughput, echo tool, stdio; $(nproc) CPUs; $ROUNDS rounds of $DURATION (+$WARMUP warm-up); medians"
echo "$(date -u +%Y-%m-%dT%H:%MZ); $(go version | cut -d' ' -f3); load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "x_mcp-go: median over rounds of (calls/s of the server / calls/s of mcp-go in the same round)"
echo "cpu_us: server CPU time (user+sys) per call over the whole run; it depends far less on other load than calls/s"
printf '%-16s %8s %10s %8s %8s %8s %7s  %s\n' server inflight calls/s p50_ms p99_ms x_mcp-go cpu_us "per-round calls/s"
for n in $INFLIGHT; do
	for s in "${servers[@]}"; do
		f="$tmp/$s.$n"
		ratios "$f" "$tmp/mcp-go.$n" >"$f.ratio"
		printf '%-16s %8s %10.0f %8.3f %8.3f %8.2f %7.1f  %s\n' "$s" "$n" "$(median 1 "$f")" "$(median 2 "$f")" "$(median 3 "$f")" \
			"$(median 1 "$f.ratio")" "$(median 4 "$f")" "$(awk '{printf "%.0f ", $1}' "$f")"
	done
done

if [[ -n $PROFILE ]]; then
	n=$(tr ' ' '\n' <<<"$INFLIGHT" | sort -n | tail -1)
	echo
	echo "CPU profile of bastion-echo at inflight $n -> $PROFILE"
	BASTION_CPUPROFILE=$PROFILE MCP_LOG_LEVEL=warn "$tmp/mcpload" -inflight "$n" -duration "$DURATION" -warmup "$WARMUP" -- "$tmp/bastion-echo"
	go tool pprof -top -cum -nodecount=45 "$tmp/bastion-echo" "$PROFILE" 2>/dev/null
fi
