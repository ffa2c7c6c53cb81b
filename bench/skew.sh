#!/usr/bin/env bash
# Key affinity against the anchor, side by side in one run: HAProxy 2.6
# round robin, HAProxy's consistent hashing on the key (balance url_param
# key, hash-type consistent), without and with its bounded load
# (hash-balance-factor 125, Mirrokni, Thorup and Zadimoghaddam 2017), and
# tailgate serve in affinity mode (-affinity-key query:key: a key's
# primaries to its partition's home, hedges to another owner, hot keys
# over more replicas, homes moved off replicas above 1.25x the mean), one
# gateway and three gateways behind HAProxy round robin (they do not talk:
# the placement is a function of the backends' names). Every row has fresh
# cache replicas (bench/skew replicas: 4 of them, each an LRU of 2,000
# keys, a hit 1 ms, a miss 15 ms, 4 workers) and a fresh proxy, and reads
# the same keys: Zipf 1.1 over 50,000 keys in the key query parameter,
# 10,000 reads open loop (Poisson) at each rate of SKEW_RATES (500 and
# 1,500 reads/s), the first 2 s a warm-up ramped up from a quarter of the
# rate. One table per rate: the replicas' hit ratio, the most reads one
# replica received over the mean, the clients' p50 and p99 (from each
# read's scheduled time; a read that failed counts as infinitely slow),
# attempts per read as the replicas saw them (1 plus hedges; the whole
# run, every read sent and every arrival), and for tailgate the
# partitions moved and the hot keys (its /debug/partitions;
# each gateway's for three, and the partitions whose home is not the same
# in all three: keys warm in more than one cache). The host's load
# (uptime) is printed with each table: the machine is shared. About 2.5
# minutes with the build; everything on 127.0.0.1, processes stopped at
# the end (or on interrupt). SKEW_KEEP=1 keeps the proxies' logs.
#
#   bench/skew.sh
#
# Environment: SKEW_PORT (first of 40 ports, 19300), SKEW_RATES ("500
# 1500"), SKEW_READS (10000), SKEW_WARMUP (2s), SKEW_SEED (1), SKEW_ROWS
# (which rows, default "haproxy-roundrobin haproxy haproxy-bounded
# tailgate-affinity tailgate-affinity-3"; also "tailgate", tailgate serve
# without affinity, and "tailgate-affinity-nohedge", affinity mode without
# hedging). The tier: SKEW_REPLICAS (4), SKEW_WORKERS (4),
# SKEW_CACHE_KEYS (2000), SKEW_KEYS (50000), SKEW_HIT (1ms), SKEW_MISS
# (15ms), SKEW_EXPONENT (1.1). Needs Go, bash and haproxy (apt-get install
# haproxy).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
command -v haproxy >/dev/null || { echo "haproxy not found: apt-get install haproxy" >&2; exit 1; }
PORT=${SKEW_PORT:-19300}
RATES=${SKEW_RATES:-500 1500}
READS=${SKEW_READS:-10000}
WARMUP=${SKEW_WARMUP:-2s}
SEED=${SKEW_SEED:-1}
ROWS=${SKEW_ROWS:-haproxy-roundrobin haproxy haproxy-bounded tailgate-affinity tailgate-affinity-3}
N=${SKEW_REPLICAS:-4}
TIER=(-workers "${SKEW_WORKERS:-4}" -cache-keys "${SKEW_CACHE_KEYS:-2000}" -keys "${SKEW_KEYS:-50000}"
	-hit "${SKEW_HIT:-1ms}" -miss "${SKEW_MISS:-15ms}" -exponent "${SKEW_EXPONENT:-1.1}" -seed "$SEED")

TMP=$(mktemp -d)
PIDS=()
stop() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	PIDS=()
}
cleanup() { stop; if [[ -n ${SKEW_KEEP:-} ]]; then echo "kept $TMP" >&2; else rm -rf "$TMP"; fi; }
trap cleanup EXIT
trap 'exit 130' INT TERM

go build -o "$TMP/tailgate" ./cmd/tailgate
go build -o "$TMP/skew" ./bench/skew

FRONT=127.0.0.1:$PORT
rep() { echo "127.0.0.1:$((PORT + $1))"; }        # replica i, in 1..N (N <= 16)
gw() { echo "127.0.0.1:$((PORT + 20 + $1))"; }    # gateway j, in 1..3
admin() { echo "127.0.0.1:$((PORT + 30 + $1))"; } # its admin listener
ADDRS=$(for i in $(seq "$N"); do rep "$i"; done | paste -sd,)
URLS=$(for i in $(seq "$N"); do echo "http://$(rep "$i")"; done | paste -sd,)

# waitfor URL: until it answers 200, for at most 10 s.
waitfor() {
	for _ in $(seq 100); do
		if "$TMP/skew" probe "$1" 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	echo "FAIL: $1 did not come up" >&2
	return 1
}

# haproxy_up BALANCE SERVERS [BALANCE_FACTOR]: HAProxy in HTTP mode on the
# front address over SERVERS (comma-separated addresses), balancing by
# BALANCE: "roundrobin", or "consistent" (the key query parameter hashed
# onto a consistent-hash ring), bounded by BALANCE_FACTOR when given.
haproxy_up() {
	local balance=$1 servers=$2 factor=${3:-}
	{
		cat <<CFG
global
	maxconn 8192
defaults
	mode http
	timeout connect 1s
	timeout client 30s
	timeout server 30s
frontend skew
	bind $FRONT
	default_backend servers
backend servers
CFG
		if [[ $balance == roundrobin ]]; then
			echo "	balance roundrobin"
		else
			echo "	balance url_param key"
			echo "	hash-type consistent"
			[[ -n $factor ]] && echo "	hash-balance-factor $factor"
		fi
		local i=1
		for a in ${servers//,/ }; do
			echo "	server s$i $a"
			i=$((i + 1))
		done
	} >"$TMP/haproxy.cfg"
	haproxy -db -f "$TMP/haproxy.cfg" >"$TMP/haproxy.log" 2>&1 & PIDS+=($!)
}

# tailgate_up J LISTEN [FLAGS...]: tailgate serve number J on LISTEN. It
# admits as many reads at once as HAProxy (maxconn 8192): at its default
# of 128 a stall of the shared host sheds the backlog with 503s, which is
# admission control, not placement, and HAProxy would queue them.
tailgate_up() {
	local j=$1 listen=$2
	shift 2
	"$TMP/tailgate" serve -backends "$URLS" -listen "$listen" -admin "$(admin "$j")" -log-level error -max-requests 8192 "$@" 2>"$TMP/tailgate$j.log" & PIDS+=($!)
}

# row NAME RATE HEADER: fresh replicas and the proxy for NAME, then one run.
row() {
	local name=$1 rate=$2 header=$3 label parts=()
	"$TMP/skew" replicas -addrs "$ADDRS" "${TIER[@]}" 2>"$TMP/replicas.log" & PIDS+=($!)
	for i in $(seq "$N"); do waitfor "http://$(rep "$i")/stats"; done
	case $name in
	haproxy-roundrobin)
		label="haproxy: roundrobin"
		haproxy_up roundrobin "$ADDRS" ;;
	haproxy)
		label="haproxy: url_param key, consistent"
		haproxy_up consistent "$ADDRS" ;;
	haproxy-bounded)
		label="haproxy: ... + hash-balance-factor 125"
		haproxy_up consistent "$ADDRS" 125 ;;
	tailgate)
		label="tailgate serve (no affinity)"
		tailgate_up 1 "$FRONT" ;;
	tailgate-affinity)
		label="tailgate serve -affinity-key query:key"
		tailgate_up 1 "$FRONT" -affinity-key query:key
		parts=(-partitions "http://$(admin 1)/debug/partitions") ;;
	tailgate-affinity-nohedge)
		label="... -attempts-per-request 1 (no hedging)"
		tailgate_up 1 "$FRONT" -affinity-key query:key -attempts-per-request 1
		parts=(-partitions "http://$(admin 1)/debug/partitions") ;;
	tailgate-affinity-3)
		label="3 such gateways behind haproxy roundrobin"
		for j in 1 2 3; do
			tailgate_up "$j" "$(gw "$j")" -affinity-key query:key
			waitfor "http://$(gw "$j")/item?id=0&key=warm-check"
		done
		haproxy_up roundrobin "$(gw 1),$(gw 2),$(gw 3)"
		parts=(-partitions "http://$(admin 1)/debug/partitions,http://$(admin 2)/debug/partitions,http://$(admin 3)/debug/partitions") ;;
	*)
		echo "unknown row $name" >&2
		return 1 ;;
	esac
	waitfor "http://$FRONT/item?id=0&key=warm-check"
	local h=()
	[[ $header == 1 ]] && h=(-header)
	"$TMP/skew" drive -name "$label" -target "$FRONT" -replicas "$URLS" "${parts[@]}" -rate "$rate" -reads "$READS" -warmup "$WARMUP" "${TIER[@]}" "${h[@]}"
	stop
}

echo "skew: HAProxy $(haproxy -v | awk 'NR==1 {print $3}') and tailgate serve ($(git rev-parse --short HEAD 2>/dev/null || echo '?')) in front of $N cache replicas on 127.0.0.1; $(nproc) cores shared by all"
for rate in $RATES; do
	echo
	echo "host load before: $(uptime)"
	first=1
	for r in $ROWS; do
		row "$r" "$rate" "$first"
		first=0
	done
	echo "host load after:  $(uptime)"
done
