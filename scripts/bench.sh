#!/usr/bin/env bash
# End-to-end benchmark: builds bin/envoy-rls and bin/rls-bench, then, on
# loopback only, measures for 16 and 64 concurrent callers, with one hot key
# and with 10,000 keys:
#   - the floor: a no-op RateLimitService in a process of its own
#     (rls-bench -serve-noop), which answers OK at once;
#   - envoy-rls on its embedded store and on a redis-server it starts
#     (--save "", a free port), for each algorithm: token_bucket,
#     sliding_window, fixed_window, sliding_log, leaky_bucket.
# It prints a Markdown table: throughput and p99 as ratios to the floor of
# the same callers and keys measured in this run, and the CPU time per
# decision of envoy-rls and of redis-server (from /proc/PID/stat), and the
# share of the CPU time the hypervisor stole during the point.
#
#   scripts/bench.sh                       # 5 s per point, about 4 minutes
#   BENCH_DURATION=2s scripts/bench.sh     # quicker, noisier
#   BENCH_STORES=memory BENCH_ALGORITHMS="token_bucket" scripts/bench.sh
#   BENCH_FLOOR=each scripts/bench.sh      # the floor again before every point
#   BENCH_GOGC=400 scripts/bench.sh        # envoy-rls (only) with GOGC=400
#   PEER_RLS_BIN=/path/to/ratelimit scripts/bench.sh   # then beside envoyproxy/ratelimit
#   BENCH_PIN=1 scripts/bench.sh           # the generator on CPU 0, the rest on CPU 1
#
# With PEER_RLS_BIN (the envoyproxy/ratelimit binary), it then runs
# scripts/bench-peer.sh, which puts the two side by side on one Redis.
#
# With BENCH_FLOOR=each (twice as long) every point's ratios are to a floor
# measured just before it, so that a machine whose speed drifts during the
# run (a shared VM) does not skew the ratios; the floor rows of the table
# are then the first measurement.
#
# Needs Go, jq, and redis-server for the Redis cases. Everything it starts is
# stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION="${BENCH_DURATION:-5s}"
CONCURRENCY="${BENCH_CONCURRENCY:-16 64}"
KEYS="${BENCH_KEYS:-1 10000}"
STORES="${BENCH_STORES:-memory redis}"
ALGORITHMS="${BENCH_ALGORITHMS:-token_bucket sliding_window fixed_window sliding_log leaky_bucket}"
FLOOR="${BENCH_FLOOR:-once}"
[[ "$FLOOR" == once || "$FLOOR" == each ]] || { echo "bench.sh: BENCH_FLOOR is once or each, not $FLOOR" >&2; exit 1; }

if [[ " $STORES " == *" redis "* ]] && ! command -v redis-server >/dev/null; then
	echo "bench.sh: redis-server not found: Redis cases skipped (make test installs it)" >&2
	STORES="${STORES//redis/}"
fi

NAME=bench.sh
# shellcheck source=scripts/procs.sh
source scripts/procs.sh
svc_env=(${BENCH_GOGC:+GOGC="$BENCH_GOGC"})
need go jq
build

# Limits high enough not to refuse at the rates one machine reaches, except
# where the algorithm bounds them: sliding_log keeps one entry per hit and
# allows at most 10,000 per period, and leaky_bucket spaces turns at least
# 100 µs apart (10,000 a second); so their hot key, above 10,000 decisions a
# second, goes over limit (and leaky_bucket's first waits its turn, at most
# burst × 100 µs = 10 ms). With 10,000 keys neither refuses. The fixed window
# is envoy-rls's own: refused hits do not count.
bench_limits "$tmp/limits.yaml" false

rows=()
# point LABEL... -- ARGS: one rls-bench run; prints its JSON to stdout.
point() {
	"${on_gen[@]}" bin/rls-bench -json -duration "$DURATION" "$@"
}

declare -A floor_tput floor_p99 floor_cpu

echo "floor: no-op RateLimitService…" >&2
start_noop
# measure_floor C K: the no-op's throughput, p99 and CPU for C callers and K
# keys, kept for the ratios of the points that follow (in this shell: not
# to be called in $(…)); its JSON goes to $tmp/floor.json.
measure_floor() {
	point -addr "127.0.0.1:$noop_port" -concurrency "$1" -keys "$2" -domain bench -descriptor "token_bucket=k{n}" -pids "$noop_pid" >"$tmp/floor.json"
	floor_tput[$1/$2]="$(jq -r .throughput "$tmp/floor.json")"
	floor_p99[$1/$2]="$(jq -r .latency.p99_us "$tmp/floor.json")"
	floor_cpu[$1/$2]="$(jq -r '.cpu[0].cpu_us_per_decision' "$tmp/floor.json")"
}
for c in $CONCURRENCY; do
	for k in $KEYS; do
		measure_floor "$c" "$k"
		out="$(cat "$tmp/floor.json")"
		rows+=("$(jq -r --arg c "$c" --arg k "$k" \
			'"| no-op floor | – | \($k) | \($c) | \(.throughput|floor) | 1.00 | \(.latency.p99_us*10|round/10) | 1.00 | \(.errors) | \(.cpu[0].cpu_us_per_decision*100|round/100) | 1.00 | – | \(.steal * 100 | round) |"' <<<"$out")")
		echo "  c=$c keys=$k: $(jq -r '"\(.throughput|floor)/s p99 \(.latency.p99_us)µs"' <<<"$out")" >&2
	done
done
[[ "$FLOOR" == each ]] || stop "$noop_pid"

for store in $STORES; do
	redis_pid="" redis_port=""
	[[ "$store" == redis ]] && start_redis
	start_envoy_rls bin/envoy-rls "$tmp/limits.yaml"
	echo "envoy-rls on the $store store…" >&2
	for algo in $ALGORITHMS; do
		for c in $CONCURRENCY; do
			for k in $KEYS; do
				if [[ "$FLOOR" == each ]]; then
					measure_floor "$c" "$k"
				fi
				watch=("$svc_pid")
				[[ -n "$redis_pid" ]] && watch+=("$redis_pid")
				out="$(point -addr "127.0.0.1:$svc_port" -concurrency "$c" -keys "$k" -domain bench \
					-descriptor "$algo=k{n}" -pids "$(IFS=,; echo "${watch[*]}")")"
				rows+=("$(jq -r --arg store "$store" --arg algo "$algo" --arg c "$c" --arg k "$k" \
					--argjson ft "${floor_tput[$c/$k]}" --argjson fp "${floor_p99[$c/$k]}" --argjson fc "${floor_cpu[$c/$k]}" '
					def r2: (. * 100 | round) / 100;
					"| \($store) | \($algo) | \($k) | \($c) | \(.throughput|floor) | \(.throughput / $ft | r2) | \(.latency.p99_us*10|round/10) | \(.latency.p99_us / $fp | r2) | \(.errors)\(if .over_limit > 0 then " (\(.over_limit) over limit)" else "" end) | \(.cpu[0].cpu_us_per_decision | r2) | \(if $fc > 0 then (.cpu[0].cpu_us_per_decision / $fc | r2) else "–" end) | \(if (.cpu|length) > 1 then (.cpu[1].cpu_us_per_decision | r2) else "–" end) | \(.steal * 100 | round) |"' <<<"$out")")
				echo "  $algo c=$c keys=$k: $(jq -r '"\(.throughput|floor)/s p99 \(.latency.p99_us)µs errors \(.errors) over \(.over_limit)"' <<<"$out")" >&2
			done
		done
	done
	stop "$svc_pid"
	[[ -n "$redis_pid" ]] && stop "$redis_pid"
done

echo
echo "$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(go version | cut -d' ' -f3), $DURATION per point"
echo
echo "| store | algorithm | keys | callers | calls/s | × floor | p99 µs | × floor | errors | service CPU µs/decision | × floor | Redis CPU µs/decision | steal % |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"

if [[ -n "${PEER_RLS_BIN:-}" ]]; then
	echo
	echo "beside envoyproxy/ratelimit ($PEER_RLS_BIN):"
	scripts/bench-peer.sh
fi
