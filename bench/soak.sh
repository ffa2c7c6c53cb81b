#!/usr/bin/env bash
# Soak of the gateway: normal reads, faulty replicas and client abuse at
# once, on 127.0.0.1 only, for a bounded time. It builds tailgate and the
# helper in bench/soak/, starts two good replicas (tailgate fixture), two
# faulty ones (hangs, resets, garbage, a trickled body, slow answers, 503s,
# a 101 that holds the socket, a 70 KiB header block, taken in turn) and
# the gateway with an admin listener in front of them,
# then drives, all at once: paced normal reads, connections held idle,
# slowloris headers, bodies on GET and refused methods. It prints requests
# by kind and status, attempts per answer (from /metrics), and RSS and
# goroutines at start, peak and end (from the admin listener's
# process_resident_memory_bytes and go_goroutines).
#
# It fails (exit 1) if, once idle, the gateway's RSS or goroutines do not
# come back within 10% of their start within the settle time, if any
# request takes longer than the gateway's -timeout (plus slack), if a
# slowloris connection outlives the header timeout, or if requests,
# attempts or client connections are still counted once idle. The start
# is measured after 30s of the same mix, once idle: the first wave of
# connections leaves the Go runtime a few MB larger for good (goroutine
# descriptors, GC metadata), so the cold figure cannot be the mark; but
# two thirds of that wave's rise in RSS must have come back by then. The
# gateway gives the memory of a wave of 500 connections or more back
# within seconds (serve's trimAfterWaves); with SOAK_IDLE under 500, the
# Go runtime does it alone, in about 4 minutes: raise SOAK_SETTLE.
#
#   bench/soak.sh [duration=5m]
#
# Environment: SOAK_DURATION (as the argument), SOAK_SETTLE (150s),
# SOAK_RATE (normal reads/s, 200), SOAK_IDLE (idle connections, 1000),
# SOAK_SLOWLORIS (50), SOAK_ABUSE_RATE (bad requests/s, 20),
# SOAK_MAX_CONNS (the gateway's -max-conns, 1000: below what the driver
# holds, so the limit is exercised), SOAK_FAULTS (the faulty replicas'
# -modes, ok,ok,ok,hang,reset,garbage,trickle,slow,5xx,upgrade,bigheader), SOAK_PORT (first of 20
# ports, 19180). Needs only Go and bash: not wrk, hey or curl.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
DURATION=${1:-${SOAK_DURATION:-5m}}
SETTLE=${SOAK_SETTLE:-150s}
PORT=${SOAK_PORT:-19180}
TIMEOUT=2s
FAULTS=${SOAK_FAULTS:-ok,ok,ok,hang,reset,garbage,trickle,slow,5xx,upgrade,bigheader}

TMP=$(mktemp -d)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT

go build -o "$TMP/tailgate" ./cmd/tailgate
go build -o "$TMP/soak" ./bench/soak

GOOD1=127.0.0.1:$((PORT + 1)) GOOD2=127.0.0.1:$((PORT + 2))
BAD1=127.0.0.1:$((PORT + 3)) BAD2=127.0.0.1:$((PORT + 4))
LISTEN=127.0.0.1:$PORT ADMIN=127.0.0.1:$((PORT + 10))
"$TMP/tailgate" fixture -listen "$GOOD1" -name good1 -model lognormal:p50=2ms,p99=40ms >"$TMP/good1.log" 2>&1 & PIDS+=($!)
"$TMP/tailgate" fixture -listen "$GOOD2" -name good2 -model lognormal:p50=2ms,p99=40ms -seed 2 >"$TMP/good2.log" 2>&1 & PIDS+=($!)
"$TMP/soak" faulty -listen "$BAD1" -modes "$FAULTS" >"$TMP/bad1.log" 2>&1 & PIDS+=($!)
"$TMP/soak" faulty -listen "$BAD2" -modes "$FAULTS" -slow 1500ms >"$TMP/bad2.log" 2>&1 & PIDS+=($!)
"$TMP/tailgate" serve -backends "http://$GOOD1,http://$GOOD2,http://$BAD1,http://$BAD2" \
	-listen "$LISTEN" -admin "$ADMIN" -timeout "$TIMEOUT" -max-conns "${SOAK_MAX_CONNS:-1000}" \
	-log-level warn 2>"$TMP/gateway.log" & PIDS+=($!)
GATEWAY=$!

status=0
"$TMP/soak" drive -target "$LISTEN" -admin "$ADMIN" -timeout "$TIMEOUT" -duration "$DURATION" -settle "$SETTLE" \
	-rate "${SOAK_RATE:-200}" -idle "${SOAK_IDLE:-1000}" -slowloris "${SOAK_SLOWLORIS:-50}" \
	-abuse-rate "${SOAK_ABUSE_RATE:-20}" -pid "$GATEWAY" || status=$?
if ! kill -0 "$GATEWAY" 2>/dev/null; then
	echo "FAIL: the gateway exited during the soak:"; tail -20 "$TMP/gateway.log"; status=1
fi
echo "gateway log: $(wc -l <"$TMP/gateway.log") lines at warn or above; the most frequent messages:"
sed -n 's/.*msg="\([^"]*\)".*/\1/p' "$TMP/gateway.log" | sort | uniq -c | sort -rn | head -8
exit "$status"
