#!/usr/bin/env bash
# Side by side: envoy-rls and envoyproxy/ratelimit (the binary PEER_RLS_BIN)
# on one redis-server, loaded by the same generator (bin/rls-bench) with the
# same limits (10^9 per second, so that nothing is refused), on loopback:
#   - the floor: a no-op RateLimitService in a process of its own;
#   - envoyproxy/ratelimit: its fixed window (INCRBY + EXPIRE per
#     descriptor; refused hits count), with its defaults;
#   - envoy-rls: fixed_window with count_refused (the same semantics, the
#     row to compare), then token_bucket, sliding_window, sliding_log and
#     leaky_bucket (its own semantics: refused hits do not count; the last
#     two at 10,000 per second, their bound, which 10,000 keys never reach);
# for each number of callers, the services one after the other, each point
# BENCH_ROUNDS times in turn. It prints a Markdown table: throughput and p99
# (and their ratios to the floor), Redis's CPU per decision and the
# service's, from /proc/PID/stat, the share of the CPU time the hypervisor
# stole during the point (a shared host's noise), each CPU's busy share (a
# point whose CPUs all had time to spare was bound by how long its calls
# waited, not by what they cost), and then envoy-rls's ratios to
# envoyproxy/ratelimit, point by point; with BENCH_ROUNDS above 1, both
# tables again as the range of each cell over the rounds.
#
#   PEER_RLS_BIN=/path/to/ratelimit scripts/bench-peer.sh
#   PEER_RLS_BIN=… BENCH_DURATION=2s BENCH_ALGORITHMS=fixed_window scripts/bench-peer.sh   # a quick check
#   PEER_RLS_BIN=… BENCH_PIN=1 scripts/bench-peer.sh   # the generator on a core of its own
#
# BENCH_DURATION (5s), BENCH_CONCURRENCY ("16 64"), BENCH_KEYS (10000),
# BENCH_ROUNDS (1), BENCH_PIN (unset: everything shares both cores; set:
# the generator on CPU 0, as Envoy on hosts of its own, and Redis, the
# services and the no-op on CPU 1) and BENCH_ALGORITHMS (envoy-rls's rows: "fixed_window
# token_bucket sliding_window sliding_log leaky_bucket"; fixed_window is
# count_refused) narrow it down or repeat it. Needs Go, jq and redis-server; everything it starts is
# stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

PEER="${PEER_RLS_BIN:-}"
[[ -n "$PEER" && -x "$PEER" ]] || { echo "bench-peer.sh: PEER_RLS_BIN must name the envoyproxy/ratelimit binary" >&2; exit 1; }
DURATION="${BENCH_DURATION:-5s}"
CONCURRENCY="${BENCH_CONCURRENCY:-16 64}"
KEYS="${BENCH_KEYS:-10000}"
ROUNDS="${BENCH_ROUNDS:-1}"
ALGORITHMS="${BENCH_ALGORITHMS:-fixed_window token_bucket sliding_window sliding_log leaky_bucket}"

NAME=bench-peer.sh
# shellcheck source=scripts/procs.sh
source scripts/procs.sh
need go jq redis-server
build

bench_limits "$tmp/envoy-rls.yaml"
mkdir -p "$tmp/runtime/ratelimit/config"
cat >"$tmp/runtime/ratelimit/config/bench.yaml" <<'YAML'
domain: bench
descriptors:
  - key: fixed_window
    rate_limit:
      unit: second
      requests_per_unit: 1000000000
YAML

start_redis

noop_port="$(free_port)"
"${on_svc[@]}" bin/rls-bench -serve-noop "127.0.0.1:$noop_port" 2>/dev/null &
noop_pid=$!
pids+=("$noop_pid")
wait_port "$noop_port" "$noop_pid"

# point C K ALGO PID…: one rls-bench run against svc_port (the no-op's port
# for the floor); its JSON goes to stdout.
point() {
	local c="$1" k="$2" algo="$3" port="$4"
	shift 4
	"${on_gen[@]}" bin/rls-bench -json -duration "$DURATION" -addr "127.0.0.1:$port" -concurrency "$c" -keys "$k" -domain bench \
		-descriptor "$algo=k{n}" -pids "$(IFS=,; echo "$*")"
}

# record SEQ SERVICE ALGO C K JSON FLOORJSON [PEERJSON]: one point, for the
# tables (SEQ orders the services within a round).
record() {
	jq -c --argjson seq "$1" --arg svc "$2" --arg algo "$3" --argjson c "$4" --argjson k "$5" --argjson f "$7" --argjson p "${8:-null}" '
		{seq: $seq, svc: $svc, algo: $algo, c: $c, k: $k, tput: .throughput, tputx: (.throughput / $f.throughput),
		 p99: .latency.p99_us, p99x: (.latency.p99_us / $f.latency.p99_us), errors: .errors, over: .over_limit,
		 redis: (if (.cpu|length) > 1 then .cpu[1].cpu_us_per_decision else null end),
		 cpu: .cpu[0].cpu_us_per_decision, steal: (.steal * 100), busy: [.cpu_busy[]? * 100],
		 vs: (if $p == null then null else {redis: (.cpu[1].cpu_us_per_decision / $p.cpu[1].cpu_us_per_decision),
		      tput: (.throughput / $p.throughput), p99: (.latency.p99_us / $p.latency.p99_us)} end)}' <<<"$6" >>"$tmp/points.jsonl"
}

# tables [ranges]: the points recorded, as the two tables, a row per point;
# with ranges, a row per point of a round, each cell the range of its values
# over the rounds (low–high).
tables() {
	local group='map([.])'
	[[ "${1:-}" == ranges ]] && group='group_by([.c, .k, .seq])'
	local defs='
		def span(f; fmt): [.[] | f | select(. != null)] as $v
			| if ($v | length) == 0 then "–" else ($v | min | fmt) as $a | ($v | max | fmt) as $b
			| if $a == $b then "\($a)" else "\($a)–\($b)" end end;
		def i: round; def r1: . * 10 | round / 10; def r2: . * 100 | round / 100;'
	echo "| service | algorithm | keys | callers | calls/s | × floor | p99 µs | × floor | errors | Redis CPU µs/decision | service CPU µs/decision | steal % | CPUs busy % |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"
	jq -s -r "$defs"' '"$group"'[] | . as $g | $g[0] |
		"| \(.svc) | \(.algo) | \(.k) | \(.c) | \($g | span(.tput; i)) | \($g | span(.tputx; r2)) | \($g | span(.p99; i)) | \($g | span(.p99x; r2)) | \($g | span(.errors; i))\(if ($g | map(.over) | max) > 0 then " (\($g | span(.over; i)) over limit)" else "" end) | \($g | span(.redis; r1)) | \($g | span(.cpu; i)) | \($g | span(.steal; i)) | \([range(0; $g[0].busy | length) as $j | $g | span(.busy[$j]; i)] | join(" / ")) |"' "$tmp/points.jsonl"
	echo
	echo "envoy-rls against envoyproxy/ratelimit in the same round:"
	echo
	echo "| envoy-rls algorithm | keys | callers | Redis CPU per decision | throughput | p99 |"
	echo "|---|---:|---:|---:|---:|---:|"
	jq -s -r "$defs"' map(select(.vs != null)) | '"$group"'[] | . as $g | $g[0] |
		"| \(.algo) | \(.k) | \(.c) | \($g | span(.vs.redis; r2)) | \($g | span(.vs.tput; r2)) | \($g | span(.vs.p99; r2)) |"' "$tmp/points.jsonl"
}

for round in $(seq "$ROUNDS"); do
	for c in $CONCURRENCY; do
		for k in $KEYS; do
			echo "round $round, $c callers, $k keys…" >&2
			floor="$(point "$c" "$k" fixed_window "$noop_port" "$noop_pid")"
			record 0 "no-op floor" – "$c" "$k" "$floor" "$floor"

			start_peer "$PEER"
			peer="$(point "$c" "$k" fixed_window "$svc_port" "$svc_pid" "$redis_pid")"
			stop "$svc_pid"
			record 1 "envoyproxy/ratelimit" "fixed_window (refused count)" "$c" "$k" "$peer" "$floor"
			echo "  envoyproxy/ratelimit: $(jq -r '"\(.throughput|floor)/s p99 \(.latency.p99_us)µs Redis \(.cpu[1].cpu_us_per_decision)µs"' <<<"$peer")" >&2

			start_envoy_rls bin/envoy-rls "$tmp/envoy-rls.yaml"
			seq=2
			for algo in $ALGORITHMS; do
				out="$(point "$c" "$k" "$algo" "$svc_port" "$svc_pid" "$redis_pid")"
				label="$algo"
				[[ "$algo" == fixed_window ]] && label="fixed_window count_refused"
				record "$seq" envoy-rls "$label" "$c" "$k" "$out" "$floor" "$peer"
				seq=$((seq + 1))
				echo "  envoy-rls $algo: $(jq -r '"\(.throughput|floor)/s p99 \(.latency.p99_us)µs Redis \(.cpu[1].cpu_us_per_decision)µs"' <<<"$out")" >&2
			done
			stop "$svc_pid"
		done
	done
done

echo
echo "$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(go version | cut -d' ' -f3), $(redis-server --version | cut -d' ' -f3), $DURATION per point, $ROUNDS round(s)${BENCH_PIN:+, the generator on CPU 0 and the rest on CPU 1 (BENCH_PIN)}"
echo
tables
if ((ROUNDS > 1)); then
	# The ranges over the rounds, point by point: what BENCHMARKS.md cites.
	echo
	echo "Ranges over the $ROUNDS rounds (low–high):"
	echo
	tables ranges
fi
