#!/usr/bin/env bash
# What forward-auth costs: envoy-rls's CPU per decision on the forward-auth
# path (GET /v1/forward-auth/{policy}, over HTTP/1.1 kept-alive
# connections) beside the gRPC path, on the same limits and the same Redis;
# and the latency nginx with forward-auth adds (p50, p99), beside nginx
# straight to the application and the application alone. The application
# is a second nginx answering 200 at once, so that what is measured is the
# proxying and the decision, not an application.
#
#   scripts/bench-forward-auth.sh
#
# Every request is one descriptor, remote_address=127.0.0.1, under a
# fixed window of 10^9 a second (nothing is refused): the gRPC path sends
# that descriptor with rls-bench, the forward-auth path gets it from the
# policy's remote_address action. Closed loop: BENCH_CONCURRENCY callers
# (16) for BENCH_DURATION (5s) per row of CPU; the latency rows have
# BENCH_LATENCY_CALLERS (1) callers, one request at a time, so that they
# show what each hop adds rather than a queue. The nginx config is
# config/nginx/forward-auth.conf, the documented one. Needs Go, jq, wrk,
# nginx and redis-server; everything it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION="${BENCH_DURATION:-5s}"
CALLERS="${BENCH_CONCURRENCY:-16}"
LATENCY_CALLERS="${BENCH_LATENCY_CALLERS:-1}"

NAME=bench-forward-auth.sh
# shellcheck source=scripts/procs.sh
source scripts/procs.sh
need go jq wrk redis-server envsubst
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
[[ -x "$NGINX" ]] || { echo "$NAME: nginx is required" >&2; exit 1; }
build

cat >"$tmp/limits.yaml" <<'YAML'
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {name: per-ip, algorithm: fixed_window, unit: second, requests_per_unit: 1000000000}
YAML
cat >"$tmp/forward-auth.yaml" <<'YAML'
trusted_proxies: [127.0.0.1/32]
policies:
  - name: edge
    domain: edge
    rate_limits:
      - actions: [{remote_address: {}}]
YAML

start_redis
start_envoy_rls bin/envoy-rls "$tmp/limits.yaml" -forward-auth-config "$tmp/forward-auth.yaml"
wait_port "$svc_http_port" "$svc_pid"

# cpu_ticks PID: the process's utime+stime, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz="$(getconf CLK_TCK)"

# wrk_run CALLERS URL: wrk with CALLERS connections for the duration;
# prints "requests p50_us p99_us".
wrk_run() {
	"${on_gen[@]}" wrk -t "$(( $1 < 2 ? 1 : 2 ))" -c "$1" -d "$DURATION" --latency "$2" >"$tmp/wrk.out"
	awk '
		function us(v) { if (v ~ /us$/) return v + 0; if (v ~ /ms$/) return v * 1000; if (v ~ /s$/) return v * 1000000; return v }
		/^ +50%/ { p50 = us($2) } /^ +99%/ { p99 = us($2) } / requests in / { n = $1 }
		END { print n, p50, p99 }' "$tmp/wrk.out"
}

# The gRPC path.
grpc="$("${on_gen[@]}" bin/rls-bench -json -duration "$DURATION" -addr "127.0.0.1:$svc_port" -concurrency "$CALLERS" -keys 1 \
	-domain edge -descriptor "remote_address=127.0.0.1" -pids "$svc_pid,$redis_pid")"
grpc_row="$(jq -r '"| gRPC ShouldRateLimit | \(.throughput|floor) | \(.latency.p50_us|floor) | \(.latency.p99_us|floor) | \(.cpu[0].cpu_us_per_decision*100|round/100) | \(.cpu[1].cpu_us_per_decision*100|round/100) |"' <<<"$grpc")"

# The forward-auth path, straight from wrk.
svc0="$(cpu_ticks "$svc_pid")" redis0="$(cpu_ticks "$redis_pid")"
read -r n p50 p99 < <(wrk_run "$CALLERS" "http://127.0.0.1:$svc_http_port/v1/forward-auth/edge")
svc1="$(cpu_ticks "$svc_pid")" redis1="$(cpu_ticks "$redis_pid")"
secs="${DURATION%s}"
fa_row="$(awk -v n="$n" -v p50="$p50" -v p99="$p99" -v s="$((svc1 - svc0))" -v r="$((redis1 - redis0))" -v hz="$hz" -v d="$secs" \
	'BEGIN { printf "| GET /v1/forward-auth | %d | %d | %d | %.2f | %.2f |", n / d, p50, p99, s * 1e6 / hz / n, r * 1e6 / hz / n }')"

# nginx: the application (a second nginx answering 200), nginx straight to
# it, and nginx with forward-auth (the documented config).
mkdir -p "$tmp/nginx/tmp"
app_port="$(free_port)" plain_port="$(free_port)" fa_port="$(free_port)"
user=""
[[ "$(id -u)" == 0 ]] && user="user root;"
cat >"$tmp/nginx/app.conf" <<CONF
worker_processes 1;
events { worker_connections 1024; }
http { access_log off; server { listen 127.0.0.1:$app_port; location / { return 200 "app\n"; } } }
CONF
cat >"$tmp/nginx/plain.conf" <<CONF
worker_processes 1;
events { worker_connections 1024; }
http {
    access_log off;
    proxy_temp_path tmp/proxy; client_body_temp_path tmp/body;
    upstream app { server 127.0.0.1:$app_port; keepalive 32; }
    server { listen 127.0.0.1:$plain_port; location / { proxy_pass http://app; proxy_http_version 1.1; proxy_set_header Connection ""; } }
}
CONF
LISTEN="127.0.0.1:$fa_port" RLS_ADDR="127.0.0.1:$svc_http_port" APP_ADDR="127.0.0.1:$app_port" \
	envsubst '${LISTEN} ${RLS_ADDR} ${APP_ADDR}' <config/nginx/forward-auth.conf >"$tmp/nginx/fa.conf"
sed -i 's/^worker_processes auto;/worker_processes 1;/' "$tmp/nginx/fa.conf"
for conf in app plain fa; do
	port_var="${conf}_port"
	[[ "$conf" == fa ]] && port_var=fa_port
	"${on_svc[@]}" "$NGINX" -p "$tmp/nginx" -c "$tmp/nginx/$conf.conf" -e "$tmp/nginx/$conf.log" \
		-g "daemon off; pid $tmp/nginx/$conf.pid; $user" &
	pids+=("$!")
	wait_port "${!port_var}" "$!"
done

rows=()
for target in "application alone:$app_port" "nginx → application:$plain_port" "nginx + forward-auth → application:$fa_port"; do
	label="${target%%:*}" port="${target##*:}"
	read -r n p50 p99 < <(wrk_run "$LATENCY_CALLERS" "http://127.0.0.1:$port/")
	rows+=("$(awk -v l="$label" -v n="$n" -v p50="$p50" -v p99="$p99" -v d="$secs" 'BEGIN { printf "| %s | %d | %d | %d |", l, n / d, p50, p99 }')")
done

cat <<TABLE
envoy-rls on one redis-server, $CALLERS callers, $DURATION a row, $(nproc) cores$([[ -n "${BENCH_PIN:-}" ]] && echo ", generator pinned").

| path | decisions/s | p50 µs | p99 µs | envoy-rls CPU µs/decision | Redis CPU µs/decision |
|---|---|---|---|---|---|
$grpc_row
$fa_row

$LATENCY_CALLERS caller(s), one request at a time each:

| through | requests/s | p50 µs | p99 µs |
|---|---|---|---|
$(printf '%s\n' "${rows[@]}")
TABLE
