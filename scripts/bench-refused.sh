#!/usr/bin/env bash
# A flood on one key over its limit, the load an attack makes: every caller
# sends the same descriptor, whose fixed window (100 an hour, refused hits
# counting, envoyproxy/ratelimit's semantics) is spent within the first
# milliseconds, so nearly every answer is OVER_LIMIT. envoy-rls runs with
# its over-limit cache on (the default) and off (-over-limit-cache=false);
# given PEER_RLS_BIN, envoyproxy/ratelimit runs beside it with its local
# cache on (LOCAL_CACHE_SIZE_IN_BYTES=1048576) and off (0, its default). Each
# on its own redis-server, one after the other, BENCH_ROUNDS times in turn.
# It prints a Markdown table: throughput, p99, and Redis's and the
# service's CPU per decision (/proc/PID/stat).
#
#   scripts/bench-refused.sh
#   PEER_RLS_BIN=/path/to/ratelimit BENCH_ROUNDS=3 scripts/bench-refused.sh
#   RLS_BIN=/tmp/envoy-rls-old scripts/bench-refused.sh                # another build of envoy-rls
#
# BENCH_DURATION (4s), BENCH_CONCURRENCY ("16 64"), BENCH_ROUNDS (1) and
# BENCH_PIN (set: the generator on CPU 0, the rest on CPU 1). Needs
# Go, jq and redis-server; everything it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

PEER="${PEER_RLS_BIN:-}"
DURATION="${BENCH_DURATION:-4s}"
CONCURRENCY="${BENCH_CONCURRENCY:-16 64}"
ROUNDS="${BENCH_ROUNDS:-1}"
[[ -z "$PEER" || -x "$PEER" ]] || { echo "bench-refused.sh: PEER_RLS_BIN $PEER is not executable" >&2; exit 1; }

NAME=bench-refused.sh
# shellcheck source=scripts/procs.sh
source scripts/procs.sh
need go jq redis-server
build

cat >"$tmp/envoy-rls.yaml" <<'YAML'
domain: bench
descriptors:
  - key: hot
    rate_limit: {algorithm: fixed_window, count_refused: true, unit: hour, requests_per_unit: 100}
YAML
mkdir -p "$tmp/runtime/ratelimit/config"
cat >"$tmp/runtime/ratelimit/config/bench.yaml" <<'YAML'
domain: bench
descriptors:
  - key: hot
    rate_limit: {unit: hour, requests_per_unit: 100}
YAML

# start SERVICE CACHE: a redis-server and the service on free ports, with
# its cache on or off; sets svc_pid, svc_port, redis_pid.
start() {
	start_redis
	if [[ "$1" == envoy-rls ]]; then
		start_envoy_rls "${RLS_BIN:-bin/envoy-rls}" "$tmp/envoy-rls.yaml" -over-limit-cache="$2"
	else
		local size=0
		[[ "$2" == true ]] && size=1048576
		start_peer "$PEER" LOCAL_CACHE_SIZE_IN_BYTES="$size"
	fi
}

services=(envoy-rls)
[[ -n "$PEER" ]] && services+=(envoyproxy/ratelimit)
rows=()
for round in $(seq "$ROUNDS"); do
	for CALLERS in $CONCURRENCY; do
		echo "round $round, $CALLERS callers…" >&2
		for svc in "${services[@]}"; do
			for cache in true false; do
				start "$svc" "$cache"
				out="$("${on_gen[@]}" bin/rls-bench -json -duration "$DURATION" -addr "127.0.0.1:$svc_port" -concurrency "$CALLERS" -keys 1 \
					-domain bench -descriptor "hot=k{n}" -pids "$svc_pid,$redis_pid")"
				stop "$svc_pid"
				stop "$redis_pid"
				rows+=("$(jq -r --arg svc "$svc" --arg cache "$cache" \
					'"| \($svc) | \($cache) | \(.concurrency) | \(.throughput|floor) | \(.latency.p99_us|floor) | \(.cpu[1].cpu_us_per_decision*100|round/100) | \(.cpu[0].cpu_us_per_decision*100|round/100) |"' <<<"$out")")
				echo "  ${rows[-1]}" >&2
			done
		done
	done
done

echo
echo "$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //' | awk '{print $1, $2}'), $(go env GOVERSION), $(redis-server --version | awk '{print $3}'), $DURATION per point, $ROUNDS round(s)"
echo
echo "| service | cache | callers | calls/s | p99 µs | Redis CPU µs/decision | service CPU µs/decision |"
echo "|---|---|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
