#!/usr/bin/env bash
# Key affinity against the anchor: HAProxy's consistent hashing on the key
# (balance url_param key, hash-type consistent), without and with its
# bounded load (hash-balance-factor 125, Mirrokni, Thorup and Zadimoghaddam
# 2017), next to tailgate serve without affinity (today's gateway: power
# of two choices over every replica) and in affinity mode (-affinity-key
# query:key: micro-partitions, rebalancing, hot keys over more replicas,
# hedges to another owner), each in front of the same cache replicas with
# the same reads as "tailgate lab skew": 8 replicas (bench/skew replicas:
# an LRU of 100 keys each, a hit 10 ms, a miss 50 ms, 2 workers), Poisson
# arrivals at 70% of the tier's capacity, Zipf keys (exponent 1.1) in the
# key query parameter. Every row starts fresh replicas (cold caches) and a
# fresh proxy, ramps the rate up over a warm-up, then measures; one table:
# the replicas' hit ratio, the most reads one replica received over the
# mean, the clients' p50 and p99 (from each read's scheduled time; a read
# that failed counts as infinitely slow), attempts per read as the
# replicas saw them (1 plus hedges; the whole run, every read sent and
# every arrival), and for affinity mode the partitions
# moved and the hot keys (its /debug/partitions). The gateway rebalances
# on its defaults (a 10 s window, moves 5 s apart), so a row of 10 s shows
# its hashing, its hot keys and hedging more than its moves; "tailgate lab
# skew" compresses those time scales.
# About a minute with the build; everything on 127.0.0.1, processes
# stopped at the end (or on interrupt).
#
#   bench/skew.sh
#
# Environment: SKEW_PORT (first of 30 ports, 19300), SKEW_WARMUP (4s),
# SKEW_DURATION (6s), SKEW_EXPONENT (1.1), SKEW_LOAD (0.7), SKEW_SEED (1),
# SKEW_ROWS (which rows, default "haproxy haproxy-bounded tailgate
# tailgate-affinity"). Needs Go, bash and haproxy (apt-get install
# haproxy).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
command -v haproxy >/dev/null || { echo "haproxy not found: apt-get install haproxy" >&2; exit 1; }
PORT=${SKEW_PORT:-19300}
WARMUP=${SKEW_WARMUP:-4s}
DURATION=${SKEW_DURATION:-6s}
EXPONENT=${SKEW_EXPONENT:-1.1}
LOAD=${SKEW_LOAD:-0.7}
SEED=${SKEW_SEED:-1}
ROWS=${SKEW_ROWS:-haproxy haproxy-bounded tailgate tailgate-affinity}
N=8

TMP=$(mktemp -d)
PIDS=()
stop() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	PIDS=()
}
cleanup() { stop; rm -rf "$TMP"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

go build -o "$TMP/tailgate" ./cmd/tailgate
go build -o "$TMP/skew" ./bench/skew

FRONT=127.0.0.1:$PORT
ADMIN=127.0.0.1:$((PORT + 20))
rep() { echo "127.0.0.1:$((PORT + $1))"; } # replica i, in 1..N
ADDRS=$(for i in $(seq $N); do rep "$i"; done | paste -sd,)
URLS=$(for i in $(seq $N); do echo "http://$(rep "$i")"; done | paste -sd,)
TIER=(-exponent "$EXPONENT" -load "$LOAD" -seed "$SEED")

# waitfor URL: until it answers 200, for at most 10 s.
waitfor() {
	for _ in $(seq 100); do
		if "$TMP/skew" probe "$1" 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	echo "FAIL: $1 did not come up" >&2
	return 1
}

# haproxy_up [BALANCE_FACTOR]: HAProxy in HTTP mode hashing the key query
# parameter over a consistent-hash ring of the replicas.
haproxy_up() {
	cat >"$TMP/haproxy.cfg" <<CFG
global
	maxconn 8192
defaults
	mode http
	timeout connect 1s
	timeout client 30s
	timeout server 30s
frontend skew
	bind $FRONT
	default_backend caches
backend caches
	balance url_param key
	hash-type consistent
$([[ $# -gt 0 ]] && echo "	hash-balance-factor $1")
$(for i in $(seq $N); do echo "	server r$i $(rep "$i")"; done)
CFG
	haproxy -db -f "$TMP/haproxy.cfg" >"$TMP/haproxy.log" 2>&1 & PIDS+=($!)
}

# row NAME HEADER: fresh replicas and the proxy for NAME, then one run.
row() {
	local name=$1 header=$2 label parts=()
	"$TMP/skew" replicas -addrs "$ADDRS" "${TIER[@]}" 2>"$TMP/replicas.log" & PIDS+=($!)
	for i in $(seq $N); do waitfor "http://$(rep "$i")/stats"; done
	case $name in
	haproxy)
		label="haproxy: url_param key, consistent"
		haproxy_up ;;
	haproxy-bounded)
		label="haproxy: ... + hash-balance-factor 125"
		haproxy_up 125 ;;
	tailgate)
		label="tailgate serve (no affinity)"
		"$TMP/tailgate" serve -backends "$URLS" -listen "$FRONT" -admin "$ADMIN" -log-level error 2>"$TMP/tailgate.log" & PIDS+=($!) ;;
	tailgate-affinity)
		label="tailgate serve -affinity-key query:key"
		"$TMP/tailgate" serve -backends "$URLS" -listen "$FRONT" -admin "$ADMIN" -log-level error -affinity-key query:key 2>"$TMP/tailgate.log" & PIDS+=($!)
		parts=(-partitions "http://$ADMIN/debug/partitions") ;;
	*)
		echo "unknown row $name" >&2
		return 1 ;;
	esac
	waitfor "http://$FRONT/item?id=0&key=warm-check"
	local h=()
	[[ $header == 1 ]] && h=(-header)
	"$TMP/skew" drive -name "$label" -target "$FRONT" -replicas "$URLS" "${parts[@]}" -warmup "$WARMUP" -duration "$DURATION" "${TIER[@]}" "${h[@]}"
	stop
}

echo "skew: HAProxy $(haproxy -v | awk 'NR==1 {print $3}') and tailgate serve in front of $N cache replicas on 127.0.0.1; $(nproc) cores shared by all"
first=1
for r in $ROWS; do
	row "$r" "$first"
	first=0
done
