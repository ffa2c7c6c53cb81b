# nginx_conf dir listen workers keepalive server... writes dir/nginx.conf:
# nginx as the benchmarks run it beside tailgate serve, in the foreground,
# its files under dir, proxying every path to an upstream of the servers
# (host:port) over HTTP/1.1 keep-alive (keepalive idle connections per
# worker), as a reverse proxy in front of replicas is set up. Sourced by
# bench/gateway.sh and bench/tail.sh; run it with
#   nginx -c dir/nginx.conf -p dir
nginx_conf() {
	local dir=$1 listen=$2 workers=$3 keepalive=$4
	shift 4
	local servers=""
	for s in "$@"; do servers+="server $s; "; done
	mkdir -p "$dir"
	cat >"$dir/nginx.conf" <<CONF
worker_processes $workers;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
daemon off;
events { worker_connections 4096; }
http {
	access_log off;
	client_body_temp_path $dir; proxy_temp_path $dir; fastcgi_temp_path $dir;
	uwsgi_temp_path $dir; scgi_temp_path $dir;
	upstream replicas { ${servers}keepalive $keepalive; }
	server {
		listen $listen;
		location / {
			proxy_pass http://replicas;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
		}
	}
}
CONF
}
