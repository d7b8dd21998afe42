#!/usr/bin/env bash
# Smoke test of the container profile (docs/container.md).
#
#   scripts/smoke-container.sh            with a container engine (docker or podman)
#   scripts/smoke-container.sh --offline  without one: lint + bubblewrap (what CI runs)
#
# Both modes first lint deploy/Dockerfile, deploy/compose.yaml and
# deploy/kubernetes.yaml (go test ./deploy/...) and build bin/bastion and
# the static helper bin/container-smoke (deploy/smoke).
#
# With an engine, the image is built from deploy/Dockerfile and checked:
# its metadata (USER 10001:10001, STOPSIGNAL SIGTERM, the exec-form
# entrypoint); its file system, exported with tar, for a shell, a package
# manager or a setuid/setgid file; from inside, run with the profile, the
# UID and GID, the read-only root, binary directory and data mount, a
# writable noexec tmpfs /tmp, no capabilities, no_new_privs, seccomp, no
# network but lo, no user namespaces and the pids, memory and CPU limits;
# an MCP handshake through `run -i` and through `compose run -T`; and a
# clean stop (docker stop: SIGTERM, drain, exit 0).
#
# --offline cannot build the image (no engine, no pulls). It runs the
# built binary under bubblewrap with the same profile instead: host UID and
# GID 10001 (setpriv) and 10001 inside, only the libraries, the binary and
# the data bound read-only on a read-only root, every namespace unshared
# (no network but a private lo), no capabilities, no user namespaces, a
# 16 MiB tmpfs /tmp and a clean environment; from inside it checks the
# same things the probe checks in the image, except what only an engine
# provides (seccomp, noexec /tmp, cgroup limits); it completes an MCP
# handshake, a read, a refused escape and a refused write, and a clean
# stop on SIGTERM.
#
# Any failed check stops the script with a non-zero status.
set -euo pipefail
export GOTOOLCHAIN=go1.26.10
cd "$(dirname "$0")/.."

usage() {
	echo "usage: scripts/smoke-container.sh [--offline]"
	echo "  (no flag)  build the image with docker or podman and check it"
	echo "  --offline  no container engine: lint the files and run bastion under bubblewrap"
}

offline=false
case "${1:-}" in
--offline) offline=true ;;
"") ;;
-h | --help)
	usage
	exit 0
	;;
*)
	usage >&2
	exit 2
	;;
esac
[[ $# -le 1 ]] || {
	usage >&2
	exit 2
}

step() { printf '\n-- %s\n' "$*"; }
die() {
	echo "smoke-container: FAIL: $*" >&2
	exit 1
}

# The profile (docs/container.md).
readonly ID=10001
readonly TMP_BYTES=$((16 << 20))
readonly MEM_BYTES=$((256 << 20))
readonly DATA=/safe_data_dir
readonly BIN=/usr/local/bin/bastion

engine=""
if ! $offline; then
	for e in docker podman; do
		if command -v "$e" >/dev/null 2>&1 && timeout 5 "$e" info >/dev/null 2>&1; then
			engine=$e
			break
		fi
	done
	[[ -n $engine ]] || die "no container engine answers ('docker info' and 'podman info' fail or time out after 5 s).
  Without an engine, run: scripts/smoke-container.sh --offline
  (it lints the files and runs bastion under bubblewrap with the same profile; it cannot check the image itself)"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/bastion-smoke.XXXXXX")
containers=()
listener=""
cleanup() {
	local c
	for c in "${containers[@]}"; do
		"$engine" rm -f "$c" >/dev/null 2>&1 || true
	done
	if [[ -n $listener ]]; then
		kill "$listener" 2>/dev/null || true
		wait "$listener" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

step "lint: deploy/Dockerfile, deploy/compose.yaml, deploy/kubernetes.yaml (go test ./deploy/...)"
go test -count=1 ./deploy/...

step "build bin/bastion (cgo) and bin/container-smoke (static)"
mkdir -p bin
go build -o bin/bastion ./cmd/bastion
CGO_ENABLED=0 go build -o bin/container-smoke ./deploy/smoke
smoke=bin/container-smoke
want=testdata/demo-data/reports/2026-q3.md

# What the sandbox sees, staged where UID 10001 can read it whatever the
# checkout's permissions: the binaries and a copy of testdata/demo-data.
stage=$work/stage
mkdir -p "$stage"
chmod 0755 "$work" "$stage"
install -m 0755 bin/bastion "$stage/bastion"
install -m 0755 "$smoke" "$stage/smoke"
cp -a testdata/demo-data "$stage/data"
chmod -R a+rX,go-w "$stage/data"

# A listener on the host's loopback: the sandbox must not reach it.
"$smoke" listen -addr-file "$work/addr" -for 10m &
listener=$!
for _ in $(seq 50); do
	[[ -s $work/addr ]] && break
	sleep 0.1
done
[[ -s $work/addr ]] || die "the host listener did not start"
addr=$(<"$work/addr")

probe_common=(-uid "$ID" -gid "$ID"
	-readonly "/,/usr/local/bin,$BIN,$DATA,$DATA/reports,$DATA/reports/2026-q3.md"
	-writable /tmp -tmpfs-max-bytes "$TMP_BYTES"
	-no-caps -no-new-privs -loopback-only -unreachable "$addr" -no-userns)

offline_mode() {
	if ! command -v bwrap >/dev/null 2>&1; then
		step "install bubblewrap (bwrap is missing)"
		[[ $(id -u) -eq 0 ]] || die "bwrap is missing and installing it needs root: apt-get install bubblewrap"
		command -v apt-get >/dev/null 2>&1 || die "bwrap is missing and there is no apt-get to install bubblewrap with"
		export DEBIAN_FRONTEND=noninteractive
		apt-get install -y -q bubblewrap >/dev/null 2>&1 ||
			{ apt-get update -q >/dev/null && apt-get install -y -q bubblewrap >/dev/null; } ||
			die "apt-get could not install bubblewrap"
		command -v bwrap >/dev/null 2>&1 || die "bubblewrap is installed but bwrap is not on PATH"
	fi
	bwrap --version

	# As root, the sandbox runs as host UID and GID 10001 too, as in a
	# container without user-namespace remapping: root in the parent
	# namespace must not own what the server writes or reads.
	local as_user=() host_id=$ID
	if [[ $(id -u) -eq 0 ]]; then
		command -v setpriv >/dev/null 2>&1 || die "setpriv (util-linux) is needed to drop to UID $ID"
		as_user=(setpriv --reuid="$ID" --regid="$ID" --clear-groups)
	else
		echo "not root: the sandbox's UID $ID maps to host UID $(id -u)"
		host_id=$(id -u)
	fi

	# The root holds only what the image holds: the C library, the binary
	# and the data; no shell, no /etc, no /usr/bin.
	local profile=(--unshare-all --unshare-user --disable-userns
		--uid "$ID" --gid "$ID" --cap-drop ALL
		--new-session --die-with-parent --as-pid-1
		--clearenv --setenv MCP_SAFE_DATA_DIR "$DATA" --chdir /)
	local d
	for d in /usr/lib /usr/lib64 /lib /lib64; do
		if [[ -L $d ]]; then
			profile+=(--symlink "$(readlink "$d")" "$d")
		elif [[ -d $d ]]; then
			profile+=(--ro-bind "$d" "$d")
		fi
	done
	profile+=(--proc /proc --dev /dev --size "$TMP_BYTES" --tmpfs /tmp
		--ro-bind "$stage/bastion" "$BIN"
		--ro-bind "$stage/data" "$DATA")

	step "bwrap works here as UID $ID"
	"${as_user[@]}" bwrap "${profile[@]}" --ro-bind "$stage/smoke" /smoke --remount-ro / /smoke true ||
		die "bubblewrap cannot build the sandbox (are unprivileged user namespaces disabled?)"

	step "the profile, from inside the sandbox (UID, read-only root, refused writes to the data, /tmp, capabilities, network, user namespaces)"
	"${as_user[@]}" bwrap "${profile[@]}" --ro-bind "$stage/smoke" /smoke --remount-ro / \
		/smoke probe "${probe_common[@]}" ||
		die "the sandbox does not have the profile"

	step "MCP over stdio under the profile: handshake, tools/list, a read, a refused escape; EOF ends it (exit 0)"
	"$smoke" mcp -want-file "$want" -- \
		"${as_user[@]}" bwrap "${profile[@]}" --remount-ro / "$BIN" serve ||
		die "the MCP exchange under bubblewrap failed"

	step "clean stop: SIGTERM to bastion serve (pid 1 of the sandbox) with stdin open drains and exits 0"
	"$smoke" mcp -stop-info-fd -host-id "$host_id" -- \
		"${as_user[@]}" bwrap --info-fd 3 "${profile[@]}" --remount-ro / "$BIN" serve ||
		die "bastion serve did not stop cleanly on SIGTERM"

	step "container profile (offline): all checks passed"
	echo "Not checked offline (they need an engine and the image): the image's file system (no shell,"
	echo "package manager or setuid file), seccomp, noexec on /tmp, the pids/memory/CPU limits, compose."
}

engine_mode() {
	local image=mcp-bastion:smoke
	local run=(--read-only --cap-drop ALL --security-opt no-new-privileges:true --network none
		--tmpfs /tmp:rw,noexec,nosuid,nodev,size=16m
		--pids-limit 64 --memory 256m --memory-swap 256m --cpus 1
		-v "$stage/data:$DATA:ro")

	step "$engine build -f deploy/Dockerfile -t $image ."
	"$engine" build -f deploy/Dockerfile -t "$image" .

	step "image metadata: user, stop signal, entrypoint"
	local user signal entry
	user=$("$engine" image inspect -f '{{.Config.User}}' "$image")
	signal=$("$engine" image inspect -f '{{.Config.StopSignal}}' "$image")
	entry=$("$engine" image inspect -f '{{json .Config.Entrypoint}}' "$image")
	echo "user $user, stop signal $signal, entrypoint $entry"
	[[ $user == "$ID:$ID" ]] || die "the image's user is '$user', want $ID:$ID"
	[[ $signal == SIGTERM ]] || die "the image's stop signal is '$signal', want SIGTERM"
	[[ $entry == "[\"$BIN\",\"serve\"]" ]] || die "the image's entrypoint is $entry"

	step "image file system (export | tar): no shell, no package manager, no setuid or setgid file"
	local cid
	cid=$("$engine" create "$image")
	containers+=("$cid")
	"$engine" export "$cid" | tar -tvf - >"$work/fs.txt"
	"$engine" rm "$cid" >/dev/null
	echo "$(wc -l <"$work/fs.txt") entries"
	local found
	# GNU tar -tv: MODE OWNER SIZE DATE TIME NAME [-> TARGET]
	found=$(awk '$1 !~ /^d/ && $6 ~ /(^|\/)(sh|bash|dash|ash|zsh|busybox|apt|apt-get|aptitude|dpkg|dpkg-deb|apk|rpm|yum|dnf|microdnf|pip|pip3|pip3\.[0-9]+|python[0-9.]*)$/ { print $6 }' "$work/fs.txt")
	[[ -z $found ]] || die "the image holds a shell, package manager or interpreter:
$found"
	found=$(awk '$1 ~ /^-/ && (substr($1, 4, 1) ~ /[sS]/ || substr($1, 7, 1) ~ /[sS]/) { print $1, $6 }' "$work/fs.txt")
	[[ -z $found ]] || die "the image holds setuid or setgid files:
$found"
	grep -qE " (\./)?usr/local/bin/bastion$" "$work/fs.txt" || die "the image has no $BIN"
	echo "ok    none found; $BIN present"

	step "the profile, from inside the container (probe mounted at /smoke)"
	"$engine" run --rm "${run[@]}" -v "$stage/smoke:/smoke:ro" --entrypoint /smoke "$image" \
		probe "${probe_common[@]}" -noexec /tmp -seccomp \
		-pids-max 64 -memory-max "$MEM_BYTES" -cpus 1 ||
		die "the container does not have the profile"

	step "MCP over stdio: $engine run -i"
	"$smoke" mcp -want-file "$want" -timeout 60s -- "$engine" run --rm -i "${run[@]}" "$image" ||
		die "the MCP exchange through $engine run failed"

	step "MCP over stdio: $engine compose -f deploy/compose.yaml run -T bastion"
	"$engine" compose version >/dev/null 2>&1 || die "'$engine compose' is not available"
	BASTION_DATA_DIR=$stage/data "$engine" compose -f deploy/compose.yaml build bastion
	BASTION_DATA_DIR=$stage/data "$smoke" mcp -want-file "$want" -timeout 60s -- \
		"$engine" compose -f deploy/compose.yaml run --rm -T bastion ||
		die "the MCP exchange through compose failed"

	step "clean stop: $engine stop (SIGTERM) with stdin open drains and exits 0"
	cid=$("$engine" run -d -i "${run[@]}" "$image")
	containers+=("$cid")
	sleep 1
	[[ $("$engine" inspect -f '{{.State.Running}}' "$cid") == true ]] || {
		"$engine" logs "$cid" >&2 || true
		die "the container did not stay up"
	}
	local start=$SECONDS code
	"$engine" stop -t 10 "$cid" >/dev/null
	code=$("$engine" inspect -f '{{.State.ExitCode}}' "$cid")
	echo "exit code $code after $((SECONDS - start)) s"
	[[ $code == 0 ]] || {
		"$engine" logs "$cid" >&2 || true
		die "bastion serve exited $code on stop (137: killed after the grace period)"
	}
	"$engine" logs "$cid" 2>&1 | grep -q 'drained; exiting' || die "no drain in the container's log"

	step "container profile ($engine): all checks passed"
}

if $offline; then
	offline_mode
else
	engine_mode
fi
