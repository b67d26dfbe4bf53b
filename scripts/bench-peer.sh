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
# waited, not by what they cost), the load average before the point, and
# then envoy-rls's ratios to envoyproxy/ratelimit, point by point (service
# and Redis CPU together, Redis's alone, throughput, p99); with BENCH_ROUNDS above 1, both
# tables again as the range of each cell over the rounds.
#
#   PEER_RLS_BIN=/path/to/ratelimit scripts/bench-peer.sh
#   PEER_RLS_BIN=… BENCH_DURATION=2s BENCH_ALGORITHMS=fixed_window scripts/bench-peer.sh   # a quick check
#   PEER_RLS_BIN=… BENCH_PIN=1 scripts/bench-peer.sh   # the generator on a core of its own
#   RLS_BIN=/tmp/envoy-rls-old PEER_RLS_BIN=… scripts/bench-peer.sh   # another build of envoy-rls
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

DURATION="${BENCH_DURATION:-5s}"
CONCURRENCY="${BENCH_CONCURRENCY:-16 64}"
KEYS="${BENCH_KEYS:-10000}"
ROUNDS="${BENCH_ROUNDS:-1}"
ALGORITHMS="${BENCH_ALGORITHMS:-fixed_window token_bucket sliding_window sliding_log leaky_bucket}"

NAME=bench-peer.sh
# shellcheck source=scripts/procs.sh
source scripts/procs.sh
need_peer
need go jq redis-server
build

bench_limits "$tmp/envoy-rls.yaml"
peer_limits
start_redis
start_noop

# point C K ALGO PID…: one rls-bench run against svc_port (the no-op's port
# for the floor); its JSON goes to stdout.
point() {
	local c="$1" k="$2" algo="$3" port="$4"
	shift 4
	"${on_gen[@]}" bin/rls-bench -json -duration "$DURATION" -addr "127.0.0.1:$port" -concurrency "$c" -keys "$k" -domain bench \
		-descriptor "$algo=k{n}" -pids "$(IFS=,; echo "$*")"
}

# record SEQ SERVICE ALGO C K JSON FLOORJSON [PEERJSON]: one point, for the
# tables (SEQ orders the services within a round), with the load average
# read before it (load, set by side_by_side: a machine shared with other
# work shows there).
record() {
	jq -c --argjson load "$load" --argjson seq "$1" --arg svc "$2" --arg algo "$3" --argjson c "$4" --argjson k "$5" --argjson f "$7" --argjson p "${8:-null}" '
		{load: $load, seq: $seq, svc: $svc, algo: $algo, c: $c, k: $k, tput: .throughput, tputx: (.throughput / $f.throughput),
		 p99: .latency.p99_us, p99x: (.latency.p99_us / $f.latency.p99_us), errors: .errors, over: .over_limit,
		 redis: (if (.cpu|length) > 1 then .cpu[1].cpu_us_per_decision else null end),
		 cpu: .cpu[0].cpu_us_per_decision, steal: (.steal * 100), busy: [.cpu_busy[]? * 100],
		 vs: (if $p == null then null else {redis: (.cpu[1].cpu_us_per_decision / $p.cpu[1].cpu_us_per_decision),
		      both: ((.cpu[0].cpu_us_per_decision + .cpu[1].cpu_us_per_decision) / ($p.cpu[0].cpu_us_per_decision + $p.cpu[1].cpu_us_per_decision)),
		      tput: (.throughput / $p.throughput), p99: (.latency.p99_us / $p.latency.p99_us)} end)}' <<<"$6" >>"$tmp/points.jsonl"
}

# tables [ranges]: the points recorded, as the two tables, a row per point;
# with ranges, a row per point of a round, each cell the range of its values
# over the rounds (low–high).
tables() {
	two_tables "${1:-}" '[.c, .k, .seq]' \
		"| service | algorithm | keys | callers | load | calls/s | × floor | p99 µs | × floor | errors | Redis CPU µs/decision | service CPU µs/decision | steal % | CPUs busy % |
|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|" \
		'"| \(.svc) | \(.algo) | \(.k) | \(.c) | \($g | span(.load; r2)) | \($g | span(.tput; i)) | \($g | span(.tputx; r2)) | \($g | span(.p99; i)) | \($g | span(.p99x; r2)) | \($g | span(.errors; i))\(if ($g | map(.over) | max) > 0 then " (\($g | span(.over; i)) over limit)" else "" end) | \($g | span(.redis; r1)) | \($g | span(.cpu; i)) | \($g | span(.steal; i)) | \([range(0; $g[0].busy | length) as $j | $g | span(.busy[$j]; i)] | join(" / ")) |"' \
		"| envoy-rls algorithm | keys | callers | service + Redis CPU per decision | Redis CPU per decision | throughput | p99 |
|---|---:|---:|---:|---:|---:|---:|" \
		'"| \(.algo) | \(.k) | \(.c) | \($g | span(.vs.both; r2)) | \($g | span(.vs.redis; r2)) | \($g | span(.vs.tput; r2)) | \($g | span(.vs.p99; r2)) |"'
}

# summary JSON: a point's line of progress.
summary() {
	jq -r '"\(.throughput|floor)/s p99 \(.latency.p99_us)µs Redis \(.cpu[1].cpu_us_per_decision)µs"' <<<"$1"
}

side_by_side "$ROUNDS" "$CONCURRENCY" "$KEYS" "$ALGORITHMS" "$PEER_RLS_BIN" "${RLS_BIN:-bin/envoy-rls}"

echo
echo "$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(go version | cut -d' ' -f3), $(redis-server --version | cut -d' ' -f3), $DURATION per point, $ROUNDS round(s)${BENCH_PIN:+, the generator on CPU 0 and the rest on CPU 1 (BENCH_PIN)}"
echo
print_tables "$ROUNDS"
