#!/usr/bin/env bash
# The tail a hop adds (issue 27): two trivial replicas on 127.0.0.1 read
# directly, through tailgate serve with hedging off
# (-attempts-per-request 1: the data path alone), through tailgate serve
# with its defaults, and through nginx (one worker, upstream keep-alive
# 64), open loop at each rate, each read measured from its scheduled send
# (bench/tail), three runs whose order of targets rotates; one table of
# p50/p99/p99.9/max with each run's host load and stolen CPU time.
#
#   bench/tail.sh [rates=1000,3000,5000] [seconds=4] [runs=3]
#
# 12,000 reads at 3,000/s with the defaults; about 4 minutes. The
# gateways get bench/gateway.sh's limits (-max-requests 1024
# -max-attempts 2048): nginx has none, and with the default 128 a stall
# of the host over 40 ms at 3,000/s has the gateway answer 503 (the table
# counts such reads as failed). Needs nginx
# for the nginx rows (apt-get install nginx-light): without it they are
# skipped, and said so. Environment: GATEWAY_FLAGS adds flags to both
# tailgate serves; GATEWAY_ENV sets their environment ("GOGC=200");
# BASELINE=<git revision> adds that revision's tailgate serve with hedging
# off as "baseline-off", for a before/after in the same run; EXTRA adds
# more tailgate serves with hedging off, each with settings of its own,
# space-separated name:setting[,setting...], a setting being ENV=v or a
# -flag=v ("gogc100:GOGC=100 procs1:GOMAXPROCS=1 log:-access-log=on"),
# to compare settings side by side (at most 4); ONLY=name,name... reads
# only the targets named (direct, tailgate-off, tailgate, baseline-off,
# nginx, EXTRA's: fewer targets take their turns sooner); PORT_BASE
# (default 18180: uses it and the next 29 ports).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/nginx.bash
export PATH="/usr/local/go/bin:$PATH"
RATES=${1:-1000,3000,5000}
SECONDS_EACH=${2:-4}
RUNS=${3:-3}
PORT_BASE=${PORT_BASE:-18180}

TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT

go build -o "$TMP/tailgate" ./cmd/tailgate
go build -o "$TMP/proxies" ./bench/proxies
go build -o "$TMP/tail" ./bench/tail

R1=127.0.0.1:$((PORT_BASE + 1))
R2=127.0.0.1:$((PORT_BASE + 2))
"$TMP/proxies" backend -listen "$R1" & PIDS+=($!)
"$TMP/proxies" backend -listen "$R2" & PIDS+=($!)
TARGETS=("direct=http://$R1,http://$R2")
METRICS=()

# serve name port admin-port binary [flags...] starts a tailgate serve.
serve() {
	local name=$1 port=$2 admin=$3 bin=$4
	shift 4
	# shellcheck disable=SC2086 # GATEWAY_FLAGS and GATEWAY_ENV are lists
	env ${GATEWAY_ENV:-} "$bin" serve -backends "http://$R1,http://$R2" -listen "127.0.0.1:$port" -admin "127.0.0.1:$admin" \
		-log-level warn -max-requests 1024 -max-attempts 2048 ${GATEWAY_FLAGS:-} "$@" 2>"$TMP/$name.log" & PIDS+=($!)
	TARGETS+=("$name=http://127.0.0.1:$port@$!")
	METRICS+=(-metrics "$name=http://127.0.0.1:$admin/metrics")
}
serve tailgate-off $((PORT_BASE + 3)) $((PORT_BASE + 13)) "$TMP/tailgate" -attempts-per-request 1
serve tailgate $((PORT_BASE + 4)) $((PORT_BASE + 14)) "$TMP/tailgate"

if [[ -n ${BASELINE:-} ]]; then
	mkdir -p "$TMP/baseline"
	git archive "$BASELINE" | tar -x -C "$TMP/baseline"
	(cd "$TMP/baseline" && go build -o "$TMP/tailgate-baseline" ./cmd/tailgate)
	serve baseline-off $((PORT_BASE + 6)) $((PORT_BASE + 16)) "$TMP/tailgate-baseline" -attempts-per-request 1
fi

i=0
for x in ${EXTRA:-}; do
	name=${x%%:*}
	envs=${GATEWAY_ENV:-}
	flags=()
	IFS=, read -ra settings <<<"${x#*:}"
	for s in "${settings[@]}"; do
		if [[ $s == -* ]]; then flags+=("$s"); else envs+=" $s"; fi
	done
	GATEWAY_ENV=$envs serve "$name" $((PORT_BASE + 7 + i)) $((PORT_BASE + 17 + i)) "$TMP/tailgate" -attempts-per-request 1 "${flags[@]}"
	i=$((i + 1))
done

if command -v nginx >/dev/null; then
	nginx_conf "$TMP/nginx" 127.0.0.1:$((PORT_BASE + 5)) 1 64 "$R1" "$R2"
	nginx -c "$TMP/nginx/nginx.conf" -p "$TMP/nginx" & PIDS+=($!)
	TARGETS+=("nginx=http://127.0.0.1:$((PORT_BASE + 5))@$!")
else
	echo "nginx not installed: its rows are skipped (apt-get install nginx-light)"
fi

# Wait for every listener.
for t in "${TARGETS[@]}"; do
	urls=${t#*=}
	urls=${urls%@*}
	for u in ${urls//,/ }; do
		ok=
		for _ in $(seq 100); do curl -fsS -o /dev/null "$u/item?id=1" 2>/dev/null && { ok=1; break; }; sleep 0.1; done
		[[ -n $ok ]] || { echo "${t%%=*} at $u never answered" >&2; tail -5 "$TMP/${t%%=*}.log" >&2 2>/dev/null; exit 1; }
	done
done

if [[ -n ${ONLY:-} ]]; then
	# Only the targets named (fewer targets take their turns sooner).
	kept=()
	for t in "${TARGETS[@]}"; do [[ ,$ONLY, == *,${t%%=*},* ]] && kept+=("$t"); done
	# A name that matches no target is a mistake (BASELINE's is
	# baseline-off): say so rather than measure without it.
	IFS=, read -ra wanted <<<"$ONLY"
	for w in "${wanted[@]}"; do
		found=
		for t in "${kept[@]}"; do [[ ${t%%=*} == "$w" ]] && found=1; done
		[[ -n $found ]] || { echo "ONLY names $w, which is no target here (targets: $(printf '%s ' "${TARGETS[@]%%=*}"))" >&2; exit 1; }
	done
	TARGETS=("${kept[@]}")
fi

echo "host: $(nproc) cores, $(uptime)"
"$TMP/tail" -rates "$RATES" -seconds "$SECONDS_EACH" -runs "$RUNS" "${METRICS[@]}" "${TARGETS[@]}"
echo "host after: $(uptime)"
for f in "$TMP"/*.log; do
	# What each gateway logged at warn and above (access lines aside).
	n=$(grep -vc 'msg=access' "$f" || true)
	if [[ $n -gt 0 ]]; then echo "$(basename "$f" .log) logged $n lines, the last: $(grep -v 'msg=access' "$f" | tail -1)"; fi
done
