#!/usr/bin/env bash
# Throughput of the gateway (hedging armed, not firing) against a plain
# httputil.ReverseProxy and, where installed, nginx proxy_pass, all in front
# of the same trivial backend on 127.0.0.1, measured one after the other in
# one run with wrk. Prints requests/s, p50 and p99 for each, and the ratios.
#
#   bench/gateway.sh [duration=10s] [connections=64] [rounds=3]
#
# Needs wrk (apt-get install wrk); nginx is optional (apt-get install nginx-light).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
DURATION=${1:-10s}
CONNS=${2:-64}
ROUNDS=${3:-3}
command -v wrk >/dev/null || { echo "wrk not found: apt-get install wrk" >&2; exit 1; }

TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT

go build -o "$TMP/tailgate" ./cmd/tailgate
go build -o "$TMP/proxies" ./bench/proxies

BACKEND=127.0.0.1:18081
"$TMP/proxies" backend -listen $BACKEND & PIDS+=($!)
"$TMP/proxies" reverseproxy -listen 127.0.0.1:18082 -backend http://$BACKEND & PIDS+=($!)
"$TMP/tailgate" serve -backends http://$BACKEND -listen 127.0.0.1:18080 -admin "" -log-level warn \
	-max-requests 1024 -max-attempts 2048 & PIDS+=($!)
TARGETS=("gateway 127.0.0.1:18080" "reverseproxy 127.0.0.1:18082")
if command -v nginx >/dev/null; then
	mkdir -p "$TMP/nginx"
	cat >"$TMP/nginx/nginx.conf" <<CONF
worker_processes 2;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
daemon off;
events { worker_connections 4096; }
http {
	access_log off;
	client_body_temp_path $TMP/nginx; proxy_temp_path $TMP/nginx; fastcgi_temp_path $TMP/nginx;
	uwsgi_temp_path $TMP/nginx; scgi_temp_path $TMP/nginx;
	upstream backend { server $BACKEND; keepalive 256; }
	server {
		listen 127.0.0.1:18083;
		location / {
			proxy_pass http://backend;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
		}
	}
}
CONF
	nginx -c "$TMP/nginx/nginx.conf" -p "$TMP/nginx" & PIDS+=($!)
	TARGETS+=("nginx 127.0.0.1:18083")
fi

# Wait for every listener.
for t in "${TARGETS[@]}" "backend $BACKEND"; do
	addr=${t#* }
	for _ in $(seq 100); do curl -fsS -o /dev/null "http://$addr/item?id=1" && break; sleep 0.1; done
done

declare -A RPS P50 P99
for round in $(seq "$ROUNDS"); do
	for t in "${TARGETS[@]}"; do
		name=${t%% *}; addr=${t#* }
		out=$(wrk -t2 -c"$CONNS" -d"$DURATION" --latency "http://$addr/item?id=1")
		rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
		p50=$(awk '$1=="50%" {print $2}' <<<"$out")
		p99=$(awk '$1=="99%" {print $2}' <<<"$out")
		errs=$(awk '/Non-2xx|Socket errors/ {print}' <<<"$out")
		echo "round $round  $name  $rps req/s  p50 $p50  p99 $p99  $errs"
		RPS[$name]+="$rps "; P50[$name]+="$p50 "; P99[$name]+="$p99 "
	done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo
echo "medians over $ROUNDS rounds ($DURATION each, $CONNS connections, wrk -t2; everything shares the machine's $(nproc) cores):"
for t in "${TARGETS[@]}"; do
	name=${t%% *}
	printf "  %-13s %10s req/s   p50 %-9s p99 %s\n" "$name" "$(median <<<"${RPS[$name]}")" "$(median <<<"${P50[$name]}")" "$(median <<<"${P99[$name]}")"
done
g=$(median <<<"${RPS[gateway]}"); r=$(median <<<"${RPS[reverseproxy]}")
echo "  gateway / reverseproxy throughput: $(awk -v a="$g" -v b="$r" 'BEGIN {printf "%.2f", a/b}')x"
if [[ -n "${RPS[nginx]:-}" ]]; then
	n=$(median <<<"${RPS[nginx]}")
	echo "  gateway / nginx throughput:        $(awk -v a="$g" -v b="$n" 'BEGIN {printf "%.2f", a/b}')x"
fi
