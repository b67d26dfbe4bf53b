#!/usr/bin/env bash
# What a hold costs: envoy-rls on a redis-server it starts, one fixed
# window of a holds domain, measured with rls-bench as a plain decision
# and as a reserve and its settle (-hold: two calls, one decision), for
# 16 and 64 callers on 10,000 keys; CPU per decision of envoy-rls and of
# redis-server from /proc. Prints a Markdown table (BENCHMARKS.md,
# "Holds").
#
#   scripts/bench-holds.sh                    # 5 s per point
#   BENCH_DURATION=2s scripts/bench-holds.sh
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION="${BENCH_DURATION:-5s}"
CONCURRENCY="${BENCH_CONCURRENCY:-16 64}"
NAME=bench-holds.sh
# shellcheck source=scripts/procs.sh
source scripts/procs.sh
need go jq redis-server
build
cat >"$tmp/limits.yaml" <<YAML
domain: llm
holds: {id: request_id, settle: settle, lease: 10m}
descriptors:
  - key: api_key
    rate_limit: {name: budget, algorithm: fixed_window, unit: hour, requests_per_unit: 1000000000}
YAML
start_redis
start_envoy_rls bin/envoy-rls "$tmp/limits.yaml"
rows=()
for c in $CONCURRENCY; do
	for mode in plain hold; do
		extra=()
		[[ "$mode" == hold ]] && extra=(-hold request_id -settle settle)
		out="$("${on_gen[@]}" bin/rls-bench -json -duration "$DURATION" -addr "127.0.0.1:$svc_port" -concurrency "$c" \
			-keys 10000 -domain llm -descriptor "api_key=k{n}" -hits 100 -pids "$svc_pid,$redis_pid" "${extra[@]}")"
		rows+=("$(jq -r --arg c "$c" --arg mode "$mode" '
			def r2: (. * 100 | round) / 100;
			"| \($mode) | \($c) | \(.decisions / .elapsed_s | floor) | \(.errors) | \(.cpu[0].cpu_us_per_decision | r2) | \(.cpu[1].cpu_us_per_decision | r2) | \((.cpu[0].cpu_us_per_decision + .cpu[1].cpu_us_per_decision) | r2) |"' <<<"$out")")
		echo "  $mode c=$c: $(jq -r '"\(.decisions) decisions, errors \(.errors)"' <<<"$out")" >&2
	done
done
echo
echo "$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(go version | cut -d' ' -f3), $DURATION per point; hold: a reserve and its settle are one decision"
echo
echo "| decision | callers | decisions/s | errors | service CPU µs/decision | Redis CPU µs/decision | together |"
echo "|---|---:|---:|---|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
