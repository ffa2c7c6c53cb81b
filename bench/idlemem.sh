#!/usr/bin/env bash
# Memory of the gateway around a wave of idle client connections, on
# 127.0.0.1 only: RSS (from /proc, Linux) and the Go runtime's view (from
# the admin /metrics) before, while N keep-alive connections that each
# made one read are held idle, and at intervals after they all close.
#
#   bench/idlemem.sh [connections=5000] [seconds after closing to sample="1 5 10 30 60"] [-- serve flags...]
#   bench/idlemem.sh 5000 "1 10 60 120 180 240" -- -max-conns 1000
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
N=${1:-5000}
SAMPLES=${2:-1 5 10 30 60}
shift $(($# < 2 ? $# : 2))
[[ ${1:-} == -- ]] && shift
PORT=${IDLEMEM_PORT:-19280}

TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
go build -o "$TMP/tailgate" ./cmd/tailgate
go build -o "$TMP/soak" ./bench/soak

"$TMP/tailgate" fixture -listen 127.0.0.1:$((PORT + 1)) -model const:1ms >/dev/null 2>&1 & PIDS+=($!)
"$TMP/tailgate" serve -backends http://127.0.0.1:$((PORT + 1)) -listen 127.0.0.1:$PORT -admin 127.0.0.1:$((PORT + 10)) \
	-log-level warn "$@" 2>"$TMP/gateway.log" & PIDS+=($!)
GW=$!
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$((PORT + 10))) 2>/dev/null && break; sleep 0.1; done

metrics() { # the admin /metrics, without curl
	exec 3<>/dev/tcp/127.0.0.1/$((PORT + 10))
	printf 'GET /metrics HTTP/1.0\r\nHost: idlemem\r\n\r\n' >&3
	cat <&3
	exec 3<&-
}
show() {
	local rss
	rss=$(awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$GW/status")
	metrics | awk -v label="$1" -v rss="$rss" '
		$1=="go_goroutines" {g=$2} $1=="go_memstats_heap_inuse_bytes" {h=$2}
		$1=="go_memstats_stack_inuse_bytes" {s=$2} $1=="go_memstats_heap_released_bytes" {r=$2}
		END {printf "%-22s RSS %6.1f MiB  goroutines %5d  heap in use %5.1f  stacks %5.1f  released to the OS %5.1f (MiB)\n", label, rss, g, h/1048576, s/1048576, r/1048576}'
}

show "start"
mkfifo "$TMP/ctl"
"$TMP/soak" idle -target 127.0.0.1:$PORT -n "$N" <"$TMP/ctl" >"$TMP/idle.out" & PIDS+=($!)
IDLE=$!
exec 4>"$TMP/ctl"
until grep -q '^open' "$TMP/idle.out"; do kill -0 "$IDLE" || exit 1; sleep 0.2; done
echo "$(head -1 "$TMP/idle.out")"
show "$N opened, held"
sleep 5
show "held 5s later"
echo >&4
exec 4>&-
wait "$IDLE"
T0=$(date +%s)
for s in $SAMPLES; do
	sleep $((T0 + s - $(date +%s) > 0 ? T0 + s - $(date +%s) : 0))
	show "closed +${s}s"
done
