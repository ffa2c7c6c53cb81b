#!/usr/bin/env bash
# The cost of a hop: the gateway (hedging armed, never firing) against a
# plain httputil.ReverseProxy, Caddy's reverse_proxy and nginx's proxy_pass,
# all in front of the same trivial backend on 127.0.0.1, measured side by
# side in one run with wrk. Each round measures, in an order that rotates
# from round to round:
#   - throughput: wrk -t2 -c$CONNS for $DURATION against each proxy;
#   - latency at one client: wrk -t1 -c1 for $LATDUR against the backend
#     reached directly and against each proxy; a proxy's added p50 is its
#     p50 less the direct one's in the same round.
# Prints each round, then the medians and the ratios the gateway is judged
# by (issue 17: >= 0.7x nginx's requests/s, >= 2x ReverseProxy's, added p50
# at one client <= 100 us).
#
#   bench/gateway.sh [duration=10s] [connections=50] [rounds=5] [latency-duration=5s]
#
# Needs wrk (apt-get install wrk). Caddy and nginx are optional (apt-get
# install caddy nginx-light): what is not installed is skipped, and said so.
# Each throughput line also gives the proxy's own CPU time per request
# (user + system, of its processes, from /proc): unlike requests/s it does
# not depend on how much of the machine the others left it.
# Environment: GATEWAY_FLAGS adds flags to tailgate serve (say
# "-backend-protocol h2c"); BASELINE=<git revision> adds that revision's
# tailgate serve as "baseline", for a before/after in one run;
# NGINX_WORKERS (default 1, as issue 17 measured); ONLY=name,name...
# measures only the proxies named (tailgate, baseline, reverseproxy, caddy,
# nginx), so that many short rounds of two builds fit in a few minutes:
# "ONLY=tailgate,baseline BASELINE=REV bench/gateway.sh 3s 50 20 1s";
# PORT_BASE (default 18080: uses it and the next five ports).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/nginx.bash
export PATH="/usr/local/go/bin:$PATH"
DURATION=${1:-10s}
CONNS=${2:-50}
ROUNDS=${3:-5}
LATDUR=${4:-5s}
PORT_BASE=${PORT_BASE:-18080}
NGINX_WORKERS=${NGINX_WORKERS:-1}
command -v wrk >/dev/null || { echo "wrk not found: apt-get install wrk" >&2; exit 1; }

TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT

go build -o "$TMP/tailgate" ./cmd/tailgate
go build -o "$TMP/proxies" ./bench/proxies

BACKEND=127.0.0.1:$((PORT_BASE + 1))
"$TMP/proxies" backend -listen "$BACKEND" & PIDS+=($!)
"$TMP/proxies" reverseproxy -listen 127.0.0.1:$((PORT_BASE + 2)) -backend "http://$BACKEND" & PIDS+=($!)
# shellcheck disable=SC2086 # GATEWAY_FLAGS is a list of flags
"$TMP/tailgate" serve -backends "http://$BACKEND" -listen 127.0.0.1:$PORT_BASE -admin "" -log-level warn \
	-max-requests 1024 -max-attempts 2048 ${GATEWAY_FLAGS:-} & PIDS+=($!)
TARGETS=("tailgate 127.0.0.1:$PORT_BASE" "reverseproxy 127.0.0.1:$((PORT_BASE + 2))")
declare -A PID
PID[tailgate]=${PIDS[2]}
PID[reverseproxy]=${PIDS[1]}

if [[ -n ${BASELINE:-} ]]; then
	mkdir -p "$TMP/baseline"
	git archive "$BASELINE" | tar -x -C "$TMP/baseline"
	(cd "$TMP/baseline" && go build -o "$TMP/tailgate-baseline" ./cmd/tailgate)
	# shellcheck disable=SC2086
	"$TMP/tailgate-baseline" serve -backends "http://$BACKEND" -listen 127.0.0.1:$((PORT_BASE + 5)) -admin "" -log-level warn \
		-max-requests 1024 -max-attempts 2048 ${GATEWAY_FLAGS:-} & PIDS+=($!)
	PID[baseline]=$!
	TARGETS+=("baseline 127.0.0.1:$((PORT_BASE + 5))")
fi

if command -v caddy >/dev/null; then
	mkdir -p "$TMP/caddy"
	cat >"$TMP/caddy/Caddyfile" <<CONF
{
	admin off
	auto_https off
	storage file_system $TMP/caddy
}
http://127.0.0.1:$((PORT_BASE + 4)) {
	reverse_proxy $BACKEND {
		transport http {
			keepalive_idle_conns_per_host 256
		}
	}
}
CONF
	HOME="$TMP/caddy" XDG_DATA_HOME="$TMP/caddy" XDG_CONFIG_HOME="$TMP/caddy" \
		caddy run --adapter caddyfile --config "$TMP/caddy/Caddyfile" >"$TMP/caddy/log" 2>&1 & PIDS+=($!)
	PID[caddy]=$!
	TARGETS+=("caddy 127.0.0.1:$((PORT_BASE + 4))")
else
	echo "caddy not installed: skipped (apt-get install caddy)"
fi

if command -v nginx >/dev/null; then
	nginx_conf "$TMP/nginx" 127.0.0.1:$((PORT_BASE + 3)) "$NGINX_WORKERS" 256 "$BACKEND"
	nginx -c "$TMP/nginx/nginx.conf" -p "$TMP/nginx" & PIDS+=($!)
	PID[nginx]=$!
	TARGETS+=("nginx 127.0.0.1:$((PORT_BASE + 3))")
else
	echo "nginx not installed: skipped (apt-get install nginx-light)"
fi

if [[ -n ${ONLY:-} ]]; then
	kept=()
	for t in "${TARGETS[@]}"; do [[ ,$ONLY, == *,${t%% *},* ]] && kept+=("$t"); done
	[[ ,$ONLY, == *,tailgate,* ]] || { echo "ONLY must name tailgate, which the others are judged against" >&2; exit 1; }
	TARGETS=("${kept[@]}")
fi

# Wait for every listener, then warm each up (connections, JIT-free but
# pools and buffers).
for t in "backend $BACKEND" "${TARGETS[@]}"; do
	addr=${t#* }
	ok=
	for _ in $(seq 100); do curl -fsS -o /dev/null "http://$addr/item?id=1" 2>/dev/null && { ok=1; break; }; sleep 0.1; done
	if [[ -z $ok ]]; then
		echo "${t%% *} at $addr never answered" >&2
		tail -5 "$TMP/${t%% *}/log" "$TMP/${t%% *}/error.log" 2>/dev/null >&2 || true
		exit 1
	fi
	wrk -t2 -c"$CONNS" -d1s "http://$addr/item?id=1" >/dev/null
done

# us converts a wrk latency ("312.00us", "1.20ms", "1.00s") to microseconds.
us() { awk -v v="$1" 'BEGIN {
	if (v ~ /us$/) f = 1; else if (v ~ /ms$/) f = 1000; else if (v ~ /s$/) f = 1000000; else { print "nan"; exit }
	sub(/[a-z]+$/, "", v); printf "%.1f", v * f }'; }

# ticks prints the CPU clock ticks (user + system) a process and its
# children (nginx's workers) have used.
ticks() {
	local p sum=0
	for p in "$1" $(pgrep -P "$1" || true); do
		sum=$((sum + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	echo "$sum"
}
HZ=$(getconf CLK_TCK)

declare -A RPS P50 P99 C1 ADD CPU
n=${#TARGETS[@]}
for round in $(seq "$ROUNDS"); do
	# Rotate the order, so that no proxy always runs first (or right after
	# the one that heats the machine most).
	order=()
	for i in $(seq 0 $((n - 1))); do order+=("${TARGETS[$(((i + round - 1) % n))]}"); done
	for t in "${order[@]}"; do
		name=${t%% *}; addr=${t#* }
		t0=$(ticks "${PID[$name]}")
		out=$(wrk -t2 -c"$CONNS" -d"$DURATION" --latency "http://$addr/item?id=1")
		t1=$(ticks "${PID[$name]}")
		rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
		reqs=$(awk '/requests in/ {print $1}' <<<"$out")
		cpu=$(awk -v t="$((t1 - t0))" -v hz="$HZ" -v n="$reqs" 'BEGIN {printf "%.1f", t / hz * 1e6 / n}')
		p50=$(us "$(awk '$1=="50%" {print $2}' <<<"$out")")
		p99=$(us "$(awk '$1=="99%" {print $2}' <<<"$out")")
		errs=$(awk '/Non-2xx|Socket errors/ {printf "  %s", $0}' <<<"$out")
		printf "round %d  %-12s c%-3s %9.0f req/s  %5.1f us CPU/req  p50 %7.0f us  p99 %7.0f us%s\n" "$round" "$name" "$CONNS" "$rps" "$cpu" "$p50" "$p99" "$errs"
		RPS[$name]+="$rps "; P50[$name]+="$p50 "; P99[$name]+="$p99 "; CPU[$name]+="$cpu "
	done
	direct=
	for t in "direct $BACKEND" "${order[@]}"; do
		name=${t%% *}; addr=${t#* }
		out=$(wrk -t1 -c1 -d"$LATDUR" --latency "http://$addr/item?id=1")
		p50=$(us "$(awk '$1=="50%" {print $2}' <<<"$out")")
		C1[$name]+="$p50 "
		if [[ $name == direct ]]; then
			direct=$p50
			printf "round %d  %-12s c1   p50 %6.0f us\n" "$round" "$name" "$p50"
		else
			add=$(awk -v a="$p50" -v b="$direct" 'BEGIN {printf "%.1f", a - b}')
			ADD[$name]+="$add "
			printf "round %d  %-12s c1   p50 %6.0f us  (+%.0f us over direct)\n" "$round" "$name" "$p50" "$add"
		fi
	done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
range() { tr ' ' '\n' | grep -v '^$' | sort -g | awk 'NR==1 {lo=$1} {hi=$1} END {printf "%.0f-%.0f", lo, hi}'; }
echo
echo "medians of $ROUNDS rounds (wrk -t2 -c$CONNS -d$DURATION; one client: wrk -t1 -c1 -d$LATDUR; $(nproc) cores shared by all):"
printf "  %-13s %10s %14s %11s %10s %10s %12s %12s\n" proxy "req/s" "(range)" "CPU us/req" "p50 us" "p99 us" "c1 p50 us" "added p50"
printf "  %-13s %10s %14s %11s %10s %10s %12.0f %12s\n" direct - - - - - "$(median <<<"${C1[direct]}")" -
for t in "${TARGETS[@]}"; do
	name=${t%% *}
	printf "  %-13s %10.0f %14s %11.1f %10.0f %10.0f %12.0f %+12.0f\n" "$name" "$(median <<<"${RPS[$name]}")" "($(range <<<"${RPS[$name]}"))" \
		"$(median <<<"${CPU[$name]}")" "$(median <<<"${P50[$name]}")" "$(median <<<"${P99[$name]}")" "$(median <<<"${C1[$name]}")" "$(median <<<"${ADD[$name]}")"
done
# paired prints the median over rounds of tailgate's figure over other's,
# each round's pair measured within a minute of each other: steadier than
# a ratio of medians while the machine's load drifts.
paired() {
	paste -d' ' <(tr ' ' '\n' <<<"$1" | grep -v '^$') <(tr ' ' '\n' <<<"$2" | grep -v '^$') |
		awk '{print $1 / $2}' | sort -g | awk '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)]}'
}
echo
echo "tailgate against each, median of the per-round ratios (requests/s; CPU per request):"
for t in "${TARGETS[@]}"; do
	name=${t%% *}
	[[ $name == tailgate ]] && continue
	goal=
	case $name in
	reverseproxy) goal="   (goal: requests/s >= 2)" ;;
	nginx) goal="   (goal: requests/s >= 0.7)" ;;
	esac
	printf "  / %-13s %5sx  %5sx%s\n" "$name" "$(paired "${RPS[tailgate]}" "${RPS[$name]}")" "$(paired "${CPU[tailgate]}" "${CPU[$name]}")" "$goal"
done
echo "  tailgate added p50 at one client:   $(median <<<"${ADD[tailgate]}") us (goal <= 100)$([[ -n "${ADD[nginx]:-}" ]] && echo "; nginx's $(median <<<"${ADD[nginx]}") us")"
