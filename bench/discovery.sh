#!/usr/bin/env bash
# Backends from DNS, end to end: Debian's dnsmasq on a loopback port serves
# the replicas' records from a hosts file that the script rewrites (and
# SIGHUPs dnsmasq to re-read); three replicas (tailgate fixture) listen on
# 127.0.0.1, 127.0.0.2 and 127.0.0.3, one port; the gateway follows them
# with -dns-server pointed at dnsmasq, while curl reads through it without
# pause. Two phases, one gateway each:
#
#   A    -backends dns+http://replicas.tailgate.test:PORT (the name's A records)
#   SRV  -backends dnssrv+http://_http._tcp.replicas.tailgate.test (SRV records
#        to r1, r2, r3.tailgate.test, whose A records the hosts file gives)
#
# Each change is timed from the moment dnsmasq has the new file to the
# moment it is in force, read from the gateway's admin listener: an added
# replica is in use (tailgate_replica_attempts_total counts attempts to
# it), a removed one is out of the set (/debug/replicas) and drained (its
# fixture's /stats: every read started has completed), and no read starts
# on it in the second after. Phase A also empties the name and stops dnsmasq: the set
# must stay, /readyz must say that discovery is stale, and
# tailgate_discovery_errors_total must count. It prints each figure, and
# the reads sent and failed (any status but 200, or a transport error).
#
# It fails (exit 1) if a read fails, or a change takes longer than
# -dns-refresh + 1s.
#
#   bench/discovery.sh [refresh=2s]
#
# Environment: DISCOVERY_DNS_PORT (dnsmasq's port, 5353), DISCOVERY_PORT
# (the replicas' port, 18091; the gateway takes 18090 and its admin 19090),
# DISCOVERY_RATE (reads/s, 400). All on 127.0.0.0/8. Needs dnsmasq
# (apt-get install -y dnsmasq), curl and jq.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
REFRESH=${1:-2s}
DNS_PORT=${DISCOVERY_DNS_PORT:-5353}
PORT=${DISCOVERY_PORT:-18091}
RATE=${DISCOVERY_RATE:-400}
GW=127.0.0.1:18090
ADMIN=127.0.0.1:19090
DOMAIN=tailgate.test
for c in dnsmasq curl jq; do
	command -v $c >/dev/null || { echo "$c not found (apt-get install -y $c)" >&2; exit 1; }
done
REFRESH_S=$(awk -v r="$REFRESH" 'BEGIN { if (r ~ /ms$/) print r/1000; else print r+0 }')
BOUND=$(awk -v r="$REFRESH_S" 'BEGIN { print r + 1 }')

TMP=$(mktemp -d)
chmod 755 "$TMP" # dnsmasq re-reads the hosts file as the user it runs as
PIDS=()
DNSMASQ=""
GATEWAY=""
LOAD=""
cleanup() {
	for p in $LOAD $GATEWAY $DNSMASQ "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT
FAIL=0

go build -o "$TMP/tailgate" ./cmd/tailgate
for i in 1 2 3; do
	"$TMP/tailgate" fixture -listen 127.0.0.$i:$PORT -name r$i -model lognormal:p50=2ms,p99=20ms -seed $i >/dev/null &
	PIDS+=($!)
done

# hosts writes the records of replicas $@ (1 to 3): replicas.$DOMAIN has
# each one's address, r<i>.$DOMAIN its own; then dnsmasq re-reads them.
hosts() {
	: >"$TMP/hosts.new"
	for i in "$@"; do
		echo "127.0.0.$i r$i.$DOMAIN replicas.$DOMAIN" >>"$TMP/hosts.new"
	done
	chmod 644 "$TMP/hosts.new"
	mv "$TMP/hosts.new" "$TMP/hosts"
	[ -z "$DNSMASQ" ] || kill -HUP "$DNSMASQ"
}

start_dnsmasq() {
	# Authoritative for $DOMAIN (NXDOMAIN for a name it lacks), nothing
	# forwarded, records from the hosts file alone, a 30s TTL (longer than
	# the refresh: the refresh is what is measured).
	dnsmasq --keep-in-foreground --port="$DNS_PORT" --listen-address=127.0.0.1 --bind-interfaces \
		--no-resolv --no-hosts --addn-hosts="$TMP/hosts" --local=/$DOMAIN/ --local-ttl=30 \
		--srv-host=_http._tcp.replicas.$DOMAIN,r1.$DOMAIN,$PORT,10,10 \
		--srv-host=_http._tcp.replicas.$DOMAIN,r2.$DOMAIN,$PORT,10,10 \
		--srv-host=_http._tcp.replicas.$DOMAIN,r3.$DOMAIN,$PORT,10,10 \
		--user="$(id -un)" --pid-file="$TMP/dnsmasq.pid" --log-facility="$TMP/dnsmasq.log" &
	DNSMASQ=$!
	for _ in $(seq 100); do
		[ -s "$TMP/dnsmasq.pid" ] && return 0
		kill -0 "$DNSMASQ" 2>/dev/null || break
		sleep 0.05
	done
	echo "dnsmasq did not start" >&2
	cat "$TMP/dnsmasq.log" >&2 || true
	exit 1
}

now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.3f", a - b }'; }

# waitfor T0 WHAT CMD...: waits for CMD to succeed, and prints how long
# after T0 it did; a failure past the bound.
waitfor() {
	local t0=$1 what=$2
	shift 2
	until "$@"; do
		if awk -v s="$(since "$t0")" -v b="$BOUND" 'BEGIN { exit !(s > b + 4) }'; then
			printf '  %-46s NOT within %ss\n' "$what" "$BOUND"
			FAIL=1
			return 0
		fi
		sleep 0.01
	done
	local took
	took=$(since "$t0")
	local mark=""
	awk -v s="$took" -v b="$BOUND" 'BEGIN { exit !(s > b) }' && { mark="  > refresh + 1s"; FAIL=1; }
	printf '  %-46s %6.3fs%s\n' "$what" "$took" "$mark"
}

in_set() { curl -fsS "http://$ADMIN/debug/replicas" | jq -e --arg n "http://$1:$PORT" '[.replicas[].name] | index($n) != null' >/dev/null; }
not_in_set() { ! in_set "$1"; }
in_use() {
	curl -fsS "http://$ADMIN/metrics" |
		awk -v r="replica=\"http://$1:$PORT\"" 'index($0, "tailgate_replica_attempts_total{") == 1 && index($0, r) { s += $NF } END { exit !(s > 0) }'
}
stats() { curl -fsS "http://$1:$PORT/stats" | jq -r '"\(.started) \(.completed)"'; }
# drained ADDR: every read started on it has completed.
drained() {
	local s
	s=$(stats "$1")
	[ "${s% *}" = "${s#* }" ]
}

# idle ADDR: once drained, no read starts on it for a second.
idle() {
	local a b
	a=$(stats "$1")
	sleep 1
	b=$(stats "$1")
	if [ "$a" = "$b" ]; then
		printf '  %-46s none (started/completed %s)\n' "  reads started on it in the next 1s" "${b/ //}"
	else
		printf '  %-46s SOME: %s -> %s\n' "  reads started on it in the next 1s" "$a" "$b"
		FAIL=1
	fi
}
replicas() { curl -fsS "http://$ADMIN/debug/replicas" | jq -r '[.replicas[].name] | join(" ")'; }
metric() { curl -fsS "http://$ADMIN/metrics" | awk -v m="$1" 'index($0, m) == 1 { print $NF }'; }

start_gateway() {
	"$TMP/tailgate" serve -backends "$1" -dns-server 127.0.0.1:$DNS_PORT -dns-refresh "$REFRESH" \
		-listen $GW -admin $ADMIN -hedge-delay 25ms 2>>"$TMP/gateway.log" &
	GATEWAY=$!
	for _ in $(seq 200); do
		curl -fsS -o /dev/null "http://$ADMIN/readyz" 2>/dev/null && return 0
		kill -0 "$GATEWAY" 2>/dev/null || break
		sleep 0.05
	done
	echo "the gateway did not start:" >&2
	cat "$TMP/gateway.log" >&2
	exit 1
}

stop_gateway() {
	kill "$GATEWAY"
	wait "$GATEWAY" 2>/dev/null || true
	GATEWAY=""
}

# Reads without pause, at most RATE a second, one status a line (000: no
# answer) in $1.
start_load() {
	curl -s --rate "$RATE/s" -o /dev/null -w '%{stderr}%{http_code}\n' "http://$GW/item?id=[1-100000000]" 2>"$1" &
	LOAD=$!
}

stop_load() {
	kill "$LOAD"
	wait "$LOAD" 2>/dev/null || true
	LOAD=""
	local total failed
	total=$(wc -l <"$1")
	failed=$(grep -vc '^200$' "$1" || true)
	printf '  %-46s %d of %d\n' "reads failed" "$failed" "$total"
	[ "$failed" = 0 ] || { FAIL=1; sort "$1" | uniq -c | sed 's/^/    /'; }
}

echo "dnsmasq on 127.0.0.1:$DNS_PORT, replicas 127.0.0.{1,2,3}:$PORT, -dns-refresh $REFRESH, reads at up to $RATE/s"

echo "phase A: -backends dns+http://replicas.$DOMAIN:$PORT"
hosts 1 2
start_dnsmasq
start_gateway "dns+http://replicas.$DOMAIN:$PORT"
echo "  start: $(replicas)"
start_load "$TMP/load-a"
sleep 1

t0=$(now); hosts 1 2 3
waitfor "$t0" "add 127.0.0.3: in use after" in_use 127.0.0.3
t0=$(now); hosts 2 3
waitfor "$t0" "remove 127.0.0.1: out of the set after" not_in_set 127.0.0.1
waitfor "$t0" "remove 127.0.0.1: drained after" drained 127.0.0.1
idle 127.0.0.1

errors0=$(metric 'tailgate_discovery_errors_total{')
hosts # empty: NXDOMAIN
sleep "$(awk -v r="$REFRESH_S" 'BEGIN { print 3 * r }')"
set_now=$(replicas)
ready=$(curl -sS "http://$ADMIN/readyz" | tr '\n' ' ')
errorsE=$(metric 'tailgate_discovery_errors_total{')
echo "  empty answer, 3 refreshes on: replicas $set_now; tailgate_discovery_errors_total $errors0 -> $errorsE"
echo "    /readyz: $ready"
[ "$set_now" = "http://127.0.0.2:$PORT http://127.0.0.3:$PORT" ] || { echo "  the set changed on an empty answer" >&2; FAIL=1; }
case "$ready" in ready*"discovery stale"*) ;; *) echo "  /readyz does not report the stale name" >&2; FAIL=1 ;; esac

kill "$DNSMASQ"; wait "$DNSMASQ" 2>/dev/null || true; DNSMASQ=""
sleep "$(awk -v r="$REFRESH_S" 'BEGIN { print 3 * r }')"
errors1=$(metric 'tailgate_discovery_errors_total{')
echo "  dnsmasq down, 3 refreshes on: replicas $(replicas); tailgate_discovery_errors_total $errorsE -> $errors1"
[ "$(replicas)" = "$set_now" ] || { echo "  the set changed with DNS down" >&2; FAIL=1; }
awk -v a="$errors0" -v e="$errorsE" -v b="$errors1" 'BEGIN { exit !(e >= a + 2 && b >= e + 2) }' || { echo "  errors not counted" >&2; FAIL=1; }

hosts 1 2 3
t0=$(now); start_dnsmasq
waitfor "$t0" "dnsmasq back with 1, 2, 3: 127.0.0.1 in use after" in_use 127.0.0.1
stop_load "$TMP/load-a"
echo "  discovery's log lines:"
grep 'msg="discovery' "$TMP/gateway.log" | sed -E 's/^time=[^ ]+ /    /'
stop_gateway

echo "phase SRV: -backends dnssrv+http://_http._tcp.replicas.$DOMAIN"
hosts 1 2 # r3's target has no address: left out
start_gateway "dnssrv+http://_http._tcp.replicas.$DOMAIN"
echo "  start: $(replicas)"
start_load "$TMP/load-srv"
sleep 1
t0=$(now); hosts 1 2 3
waitfor "$t0" "add r3 (127.0.0.3): in use after" in_use 127.0.0.3
t0=$(now); hosts 2 3
waitfor "$t0" "remove r1 (127.0.0.1): out of the set after" not_in_set 127.0.0.1
waitfor "$t0" "remove r1 (127.0.0.1): drained after" drained 127.0.0.1
idle 127.0.0.1
stop_load "$TMP/load-srv"
stop_gateway

if [ "$FAIL" != 0 ]; then
	echo "FAILED: a read failed, or a change took longer than -dns-refresh + 1s (${BOUND}s)"
	exit 1
fi
echo "ok: every change in force within -dns-refresh + 1s (${BOUND}s), no read failed"
