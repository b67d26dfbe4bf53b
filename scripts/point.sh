#!/usr/bin/env bash
# One benchmark point on Redis, looked into: a redis-server and envoy-rls
# (bin/envoy-rls, or RLS_BIN) on free loopback ports, loaded by bin/rls-bench
# with one algorithm's descriptor over 10,000 keys, 10^9 a second so that
# nothing is refused (fixed_window counts refused hits, as
# envoyproxy/ratelimit's). It prints rls-bench's JSON line (throughput, p99,
# CPU per decision of envoy-rls and of Redis), Redis's INFO commandstats
# (the time of each command) and stats (bytes, reads, writes), and
# envoy-rls's pipeline sizes (rls_redis_pipeline_runs: the mean, and the
# share of pipelines that carried one decision).
#
#   scripts/point.sh [ALGORITHM [CALLERS [DURATION]]]     # fixed_window 16 4s
#   PROFILE=out/ scripts/point.sh token_bucket 64         # and a CPU and an allocation profile
#   RLS_BIN=/tmp/envoy-rls-old scripts/point.sh           # another build, for an A/B
#   SVC_ENV="GOGC=400" scripts/point.sh                    # envoy-rls's environment
#   POINT_UNIT=minute scripts/point.sh sliding_window 64   # minute windows (second by default)
#   BENCH_PIN=1 scripts/point.sh                           # rls-bench on CPU 0, the rest on CPU 1
#   POINT_KEYS=100 scripts/point.sh token_bucket 64        # 100 keys instead of 10,000
#
# Alternate builds point by point and compare medians: on a shared VM a
# point moves by ±15% from one run to the next. Needs Go, jq, curl and
# redis-server (redis-cli); everything it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
ALGO="${1:-fixed_window}"
CALLERS="${2:-16}"
DURATION="${3:-4s}"
NAME=point.sh
# shellcheck source=scripts/procs.sh
source scripts/procs.sh
need go jq curl redis-server redis-cli
build >/dev/null 2>&1
BIN="${RLS_BIN:-bin/envoy-rls}"

bench_limits "$tmp/limits.yaml"
if [[ -n "${POINT_UNIT:-}" ]]; then
	# The 10^9 limits per POINT_UNIT (minute, hour) instead of per second.
	sed -i "s/unit: second, requests_per_unit: 1000000000/unit: $POINT_UNIT, requests_per_unit: 1000000000/" "$tmp/limits.yaml"
fi

start_redis

debug_port="$(free_port)"
# shellcheck disable=SC2206 # SVC_ENV is a list of NAME=VALUE words
svc_env=(${SVC_ENV:-}) svc_debug_addr="127.0.0.1:$debug_port"
start_envoy_rls "$BIN" "$tmp/limits.yaml"

if [[ -n "${PROFILE:-}" ]]; then
	mkdir -p "$PROFILE"
	(sleep 1; curl -s -o "$PROFILE/cpu.pprof" "http://127.0.0.1:$debug_port/debug/pprof/profile?seconds=3"
		curl -s -o "$PROFILE/allocs.pprof" "http://127.0.0.1:$debug_port/debug/pprof/allocs") &
	profiler=$!
fi
"${on_gen[@]}" bin/rls-bench -json -duration "$DURATION" -addr "127.0.0.1:$svc_port" -concurrency "$CALLERS" -keys "${POINT_KEYS:-10000}" -domain bench \
	-descriptor "$ALGO=k{n}" -pids "$svc_pid,$redis_pid" |
	jq -c '{algorithm: .descriptor, callers: .concurrency, calls_per_s: (.throughput|floor), p99_us: (.latency.p99_us|floor),
		service_cpu_us: .cpu[0].cpu_us_per_decision, redis_cpu_us: .cpu[1].cpu_us_per_decision, steal_pct: (.steal * 100 | round), cpus_busy_pct: [.cpu_busy[]? * 100 | round]}'
redis-cli -p "$redis_port" info commandstats | grep '^cmdstat_' | sed 's/,rejected_calls.*//'
redis-cli -p "$redis_port" info stats | grep -E '^total_(commands_processed|net_input_bytes|net_output_bytes|reads_processed|writes_processed):'
curl -s "http://127.0.0.1:$svc_http_port/metrics" | awk '
	/^rls_redis_pipeline_runs_bucket\{le="1"\}/ { one = $2 }
	/^rls_redis_pipeline_runs_sum/ { sum = $2 }
	/^rls_redis_pipeline_runs_count/ { n = $2 }
	END { if (n > 0) printf "pipelines %d, %.1f decisions each, %.0f%% with one\n", n, sum / n, 100 * one / n }'
if [[ -n "${PROFILE:-}" ]]; then
	wait "$profiler"
	echo "profiles: $PROFILE/cpu.pprof, $PROFILE/allocs.pprof (go tool pprof -top $BIN $PROFILE/cpu.pprof)"
fi
