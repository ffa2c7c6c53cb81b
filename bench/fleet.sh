#!/usr/bin/env bash
# Many gateways, one budget each: how duplicate work composes across a
# fleet. Three gateway instances (tailgate serve, each with its own
# -listen and -admin) run behind HAProxy (TCP mode, roundrobin, health
# checks on each admin /readyz) in front of the same three replicas
# (tailgate fixture), all on 127.0.0.1. Each instance's budget allows
# b + f·reads_i hedges, so the fleet's bound is f·(total reads) + N·b.
# Two workloads, each on a fresh fleet:
#
#   straggler  each replica answers a share of reads slowly, at random;
#              the share is above the budget's fraction, so the budget binds
#   overload   replicas with 2 workers and a 20ms service time (300 reads/s
#              for the three), offered 1.3 times that: their queues fill,
#              answers slow to the queue's length, and 503 beyond 100 queued
#
# For each, bench/fleet (the load driver, open loop, bounded in count and
# time) prints per instance and in total: reads, attempts by role and per
# read (from each /metrics: tailgate_requests_total,
# tailgate_attempts_total{role}), hedges against the bound, hedges
# suppressed by the budget and the gate; and the clients' p50/p90/p99. It
# exits 1 if an instance or the fleet sent more hedges than its bound, or
# if in the straggler workload an instance's budget never refused a hedge
# (its bound never reached, nothing tested: keep the straggler share of
# FLEET_STRAGGLER above FLEET_FRACTION).
# About 30 s with the build.
#
#   bench/fleet.sh
#
# Environment: FLEET_RATE (straggler reads/s, 300), FLEET_REQUESTS (straggler
# reads, 3000), FLEET_FRACTION (-hedge-fraction, 0.1), FLEET_BURST
# (-hedge-burst, 10), FLEET_STRAGGLER (the straggler model,
# straggler:frac=0.2,fast=1ms,slow=40ms), FLEET_OVER_SERVICE (in ms, 20ms),
# FLEET_OVER_WORKERS (2), FLEET_OVER_QUEUE (100), FLEET_OVER_LOAD (1.3; the
# overload sends 10 s of it), FLEET_PORT (first of 30 ports, 19280). Needs
# Go, bash and haproxy (apt-get install haproxy); not curl, wrk or hey.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
command -v haproxy >/dev/null || { echo "haproxy not found: apt-get install haproxy" >&2; exit 1; }
RATE=${FLEET_RATE:-300}
REQUESTS=${FLEET_REQUESTS:-3000}
FRACTION=${FLEET_FRACTION:-0.1}
BURST=${FLEET_BURST:-10}
STRAGGLER=${FLEET_STRAGGLER:-straggler:frac=0.2,fast=1ms,slow=40ms}
PORT=${FLEET_PORT:-19280}
OVER_SERVICE=${FLEET_OVER_SERVICE:-20ms}
OVER_WORKERS=${FLEET_OVER_WORKERS:-2}
OVER_QUEUE=${FLEET_OVER_QUEUE:-100}
OVER_LOAD=${FLEET_OVER_LOAD:-1.3}
N=3

TMP=$(mktemp -d)
PIDS=()
stop() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	PIDS=()
}
cleanup() { stop; rm -rf "$TMP"; }
trap cleanup EXIT

go build -o "$TMP/tailgate" ./cmd/tailgate
go build -o "$TMP/fleet" ./bench/fleet

LB=127.0.0.1:$PORT
gw() { echo "127.0.0.1:$((PORT + $1))"; }      # gateway i's client address, i in 1..N
admin() { echo "127.0.0.1:$((PORT + 10 + $1))"; } # its admin address
rep() { echo "127.0.0.1:$((PORT + 20 + $1))"; }   # replica i

# waitfor URL: until it answers 200, for at most 10 s.
waitfor() {
	for _ in $(seq 100); do
		if "$TMP/fleet" probe "$1" 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	echo "FAIL: $1 did not come up" >&2
	return 1
}

# fleet_up NAME FIXTURE_FLAGS... -- GATEWAY_FLAGS...: starts the replicas,
# the gateways and HAProxy, and waits until HAProxy sees every gateway up.
fleet_up() {
	local name=$1; shift
	local fix=() gwf=()
	while [[ $# -gt 0 && $1 != -- ]]; do fix+=("$1"); shift; done
	shift
	gwf=("$@")
	local backends=()
	for i in $(seq $N); do
		"$TMP/tailgate" fixture -listen "$(rep "$i")" -name "r$i" -seed "$i" "${fix[@]}" >"$TMP/$name-r$i.log" 2>&1 & PIDS+=($!)
		backends+=("http://$(rep "$i")")
	done
	local list
	list=$(IFS=,; echo "${backends[*]}")
	for i in $(seq $N); do
		"$TMP/tailgate" serve -backends "$list" -listen "$(gw "$i")" -admin "$(admin "$i")" \
			-hedge-fraction "$FRACTION" -hedge-burst "$BURST" -log-level warn "${gwf[@]}" \
			2>"$TMP/$name-g$i.log" & PIDS+=($!)
	done
	cat >"$TMP/haproxy.cfg" <<CFG
global
	maxconn 4096
	stats socket $TMP/haproxy.sock
defaults
	mode tcp
	timeout connect 1s
	timeout client 30s
	timeout server 30s
frontend fleet
	bind $LB
	default_backend gateways
backend gateways
	balance roundrobin
	option httpchk GET /readyz
	default-server check inter 500ms fall 2 rise 1
$(for i in $(seq $N); do echo "	server g$i $(gw "$i") port $((PORT + 10 + i))"; done)
CFG
	haproxy -db -f "$TMP/haproxy.cfg" >"$TMP/$name-haproxy.log" 2>&1 & PIDS+=($!)
	for i in $(seq $N); do waitfor "http://$(admin "$i")/readyz"; done
	waitfor "http://$LB/item?id=0"
	# HAProxy's view: every gateway UP by its /readyz check.
	for _ in $(seq 50); do
		up=$("$TMP/fleet" haproxy-up "$TMP/haproxy.sock" gateways 2>/dev/null || echo 0)
		[[ $up == "$N" ]] && return 0
		sleep 0.1
	done
	echo "FAIL: HAProxy sees $up of $N gateways up" >&2
	return 1
}

ADMINS=$(for i in $(seq $N); do admin "$i"; done | paste -sd,)
status=0
echo "fleet: $N gateways (-hedge-fraction $FRACTION -hedge-burst $BURST) behind HAProxy $(haproxy -v | awk 'NR==1 {print $3}') (tcp, roundrobin) at $LB, $N replicas; $(nproc) cores shared by all"

# 1. Stragglers: a fixed 10ms delay, as the straggler model calls for (the
# adaptive p95 would sit on the slow mode itself).
fleet_up straggler -model "$STRAGGLER" -- -hedge-delay 10ms
"$TMP/fleet" drive -name "straggler ($STRAGGLER)" -target "$LB" -admins "$ADMINS" \
	-rate "$RATE" -requests "$REQUESTS" -duration 15s -must-bind || status=1
stop

# 2. Overload: N replicas × OVER_WORKERS workers, each read OVER_SERVICE,
# offered OVER_LOAD times what they can serve: their queues fill to
# OVER_QUEUE, and 503 beyond.
cap=$(awk -v n=$N -v w="$OVER_WORKERS" -v s="${OVER_SERVICE%ms}" 'BEGIN {print n * w * 1000 / s}')
orate=$(awk -v c="$cap" -v l="$OVER_LOAD" 'BEGIN {print c * l}')
fleet_up overload -model "const:$OVER_SERVICE" -capacity "$OVER_WORKERS" -queue-limit "$OVER_QUEUE" -- -hedge-delay 10ms -timeout 2s
"$TMP/fleet" drive -name "overload (const:$OVER_SERVICE, $OVER_WORKERS workers, queue $OVER_QUEUE a replica: $cap reads/s at most, ${OVER_LOAD}x offered)" \
	-target "$LB" -admins "$ADMINS" -rate "$orate" -requests "$(awk -v r="$orate" 'BEGIN {print int(r * 10)}')" -duration 15s || status=1
stop

for f in "$TMP"/*-g*.log; do
	if [[ -s $f ]]; then echo "$(basename "$f"): $(wc -l <"$f") lines at warn or above; the most frequent:"; sed -n 's/.*msg="\([^"]*\)".*/\1/p' "$f" | sort | uniq -c | sort -rn | head -3; fi
done
if [[ $status == 0 ]]; then echo "fleet: PASS"; else echo "fleet: FAIL"; fi
exit "$status"
