# Sourced by the benchmark scripts: the processes they start, on loopback,
# and stopping them all on exit. The sourcing script sets NAME (for its
# messages) before sourcing; it gets $tmp, a directory removed on exit, and
# pids, the processes to stop.

tmp="$(mktemp -d)"
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# need TOOL…: exits unless every TOOL is on PATH.
need() {
	local tool
	for tool in "$@"; do
		command -v "$tool" >/dev/null || { echo "$NAME: $tool is required" >&2; exit 1; }
	done
}

# stop PID: ends one process this script started.
stop() {
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	local p keep=()
	for p in "${pids[@]}"; do [[ "$p" == "$1" ]] || keep+=("$p"); done
	pids=("${keep[@]}")
}

# free_port: a loopback TCP port nothing listens on.
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
}

# wait_port PORT PID: until something listens on PORT (10 s), or PID died.
wait_port() {
	local i
	for i in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		kill -0 "$2" 2>/dev/null || { echo "$NAME: process $2 exited before listening on $1" >&2; return 1; }
		sleep 0.1
	done
	echo "$NAME: nothing listens on $1 after 10 s" >&2
	return 1
}

# BENCH_PIN=1 gives the load generator a core of its own, as Envoy has in
# production: on_gen (taskset -c 0) prefixes the generator, on_svc (taskset
# -c 1) what it loads: Redis, the services and the no-op. Unset, everything
# shares every core.
on_gen=() on_svc=()
if [[ -n "${BENCH_PIN:-}" ]]; then
	need taskset
	on_gen=(taskset -c 0) on_svc=(taskset -c 1)
fi

# start_redis: a redis-server without persistence on a free loopback port;
# sets redis_port and redis_pid.
start_redis() {
	redis_port="$(free_port)"
	"${on_svc[@]}" redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --logfile "$tmp/redis.log" &
	redis_pid=$!
	pids+=("$redis_pid")
	wait_port "$redis_port" "$redis_pid"
}

# build: bin/envoy-rls and bin/rls-bench from this tree.
build() {
	echo "building bin/envoy-rls and bin/rls-bench…" >&2
	mkdir -p bin
	go build -o bin/envoy-rls ./cmd/envoy-rls
	go build -o bin/rls-bench ./cmd/rls-bench
}

# bench_limits FILE [COUNT_REFUSED]: envoy-rls's limits of the benchmarks:
# one descriptor per algorithm, 10^9 a second so that nothing is refused;
# the sliding log and the leaky bucket at 10,000 a second, their bound,
# which 10,000 keys never reach (a hot key goes past it). fixed_window
# counts refused hits (envoyproxy/ratelimit's semantics, the side-by-side
# row) unless COUNT_REFUSED is false.
bench_limits() {
	cat >"$1" <<YAML
domain: bench
descriptors:
  - key: fixed_window
    rate_limit: {name: fw, algorithm: fixed_window, count_refused: ${2:-true}, unit: second, requests_per_unit: 1000000000}
  - key: token_bucket
    rate_limit: {name: tb, algorithm: token_bucket, unit: second, requests_per_unit: 1000000000, burst: 1000000000}
  - key: sliding_window
    rate_limit: {name: sw, algorithm: sliding_window, unit: second, requests_per_unit: 1000000000}
  - key: sliding_log
    rate_limit: {name: sl, algorithm: sliding_log, unit: second, requests_per_unit: 10000}
  - key: leaky_bucket
    rate_limit: {name: lb, algorithm: leaky_bucket, unit: second, requests_per_unit: 10000, burst: 100}
YAML
}

# start_envoy_rls BIN LIMITS [FLAG…]: envoy-rls (the binary BIN) with the
# limits file LIMITS and the flags, on the Redis at redis_port (the
# embedded store where that is empty), on free gRPC and HTTP ports, its
# debug server on svc_debug_addr (none if empty), with the NAME=VALUE words
# of svc_env in its environment; sets svc_pid, svc_port and svc_http_port.
svc_env=() svc_debug_addr=""
start_envoy_rls() {
	local bin="$1" limits="$2" store=()
	shift 2
	[[ -n "${redis_port:-}" ]] && store=(-redis-url "redis://127.0.0.1:$redis_port")
	svc_port="$(free_port)" svc_http_port="$(free_port)"
	env "${svc_env[@]}" "${on_svc[@]}" "$bin" -config "$limits" -grpc-addr "127.0.0.1:$svc_port" -http-addr "127.0.0.1:$svc_http_port" \
		-debug-addr "$svc_debug_addr" -log-level error "${store[@]}" "$@" 2>"$tmp/svc.log" &
	svc_pid=$!
	pids+=("$svc_pid")
	wait_port "$svc_port" "$svc_pid" || { cat "$tmp/svc.log" >&2; exit 1; }
}

# start_peer BIN [NAME=VALUE…]: envoyproxy/ratelimit (the binary BIN) with
# its defaults over TCP, on the Redis at redis_port, its limits under
# $tmp/runtime/ratelimit/config, with the environment given, on a free gRPC
# port; sets svc_pid and svc_port.
start_peer() {
	local bin="$1"
	shift
	svc_port="$(free_port)"
	env USE_STATSD=false LOG_LEVEL=warn REDIS_SOCKET_TYPE=tcp REDIS_URL="127.0.0.1:$redis_port" \
		RUNTIME_ROOT="$tmp/runtime" RUNTIME_SUBDIRECTORY=ratelimit RUNTIME_WATCH_ROOT=false \
		PORT="$(free_port)" GRPC_PORT="$svc_port" DEBUG_PORT="$(free_port)" "$@" "${on_svc[@]}" "$bin" >"$tmp/svc.log" 2>&1 &
	svc_pid=$!
	pids+=("$svc_pid")
	wait_port "$svc_port" "$svc_pid" || { cat "$tmp/svc.log" >&2; exit 1; }
}

# peer_limits: envoyproxy/ratelimit's limits of the side-by-side runs, the
# row to compare with envoy-rls's fixed_window count_refused (10^9 a
# second), under $tmp/runtime where start_peer reads them.
peer_limits() {
	mkdir -p "$tmp/runtime/ratelimit/config"
	cat >"$tmp/runtime/ratelimit/config/bench.yaml" <<'YAML'
domain: bench
descriptors:
  - key: fixed_window
    rate_limit:
      unit: second
      requests_per_unit: 1000000000
YAML
}

# start_noop: the floor, rls-bench's no-op RateLimitService in a process of
# its own (bin/rls-bench, from build), on a free port; sets noop_port and
# noop_pid.
start_noop() {
	noop_port="$(free_port)"
	"${on_svc[@]}" bin/rls-bench -serve-noop "127.0.0.1:$noop_port" 2>/dev/null &
	noop_pid=$!
	pids+=("$noop_pid")
	wait_port "$noop_port" "$noop_pid"
}

# span_defs: jq definitions of the side-by-side tables: span(f; fmt), the
# range (low–high) of f over a group of points, and the formats i, r1 and
# r2 (rounded to units, tenths and hundredths).
span_defs='
	def span(f; fmt): [.[] | f | select(. != null)] as $v
		| if ($v | length) == 0 then "–" else ($v | min | fmt) as $a | ($v | max | fmt) as $b
		| if $a == $b then "\($a)" else "\($a)–\($b)" end end;
	def i: round; def r1: . * 10 | round / 10; def r2: . * 100 | round / 100;'

# side_by_side ROUNDS "CALLERS…" "KEYS…" "ALGORITHMS…" PEERBIN RLSBIN: the
# rounds of a side-by-side script: for each number of callers and of keys,
# the no-op floor, envoyproxy/ratelimit's fixed window (PEERBIN) and each
# of envoy-rls's ALGORITHMS (RLSBIN), one after the other on the Redis of
# start_redis, each point taken by the script's own functions:
#   point C K ALGO PORT PID [REDISPID]   prints the point's JSON;
#   record SEQ SERVICE ALGO C K JSON FLOORJSON [PEERJSON]   keeps it;
#   summary JSON   a line of progress.
# load holds the load average read before each point, for record.
side_by_side() {
	local rounds="$1" callers="$2" keys="$3" algorithms="$4" peer_bin="$5" rls_bin="$6"
	local round c k floor peer out algo label seq
	for round in $(seq "$rounds"); do
		for c in $callers; do
			for k in $keys; do
				echo "round $round, $c callers, $k keys…" >&2
				load="$(cut -d' ' -f1 /proc/loadavg)"
				floor="$(point "$c" "$k" fixed_window "$noop_port" "$noop_pid")"
				record 0 "no-op floor" – "$c" "$k" "$floor" "$floor"

				start_peer "$peer_bin"
				load="$(cut -d' ' -f1 /proc/loadavg)"
				peer="$(point "$c" "$k" fixed_window "$svc_port" "$svc_pid" "$redis_pid")"
				stop "$svc_pid"
				record 1 "envoyproxy/ratelimit" "fixed_window (refused count)" "$c" "$k" "$peer" "$floor"
				echo "  envoyproxy/ratelimit: $(summary "$peer")" >&2

				start_envoy_rls "$rls_bin" "$tmp/envoy-rls.yaml"
				seq=2
				for algo in $algorithms; do
					load="$(cut -d' ' -f1 /proc/loadavg)"
					out="$(point "$c" "$k" "$algo" "$svc_port" "$svc_pid" "$redis_pid")"
					label="$algo"
					[[ "$algo" == fixed_window ]] && label="fixed_window count_refused"
					record "$seq" envoy-rls "$label" "$c" "$k" "$out" "$floor" "$peer"
					seq=$((seq + 1))
					echo "  envoy-rls $algo: $(summary "$out")" >&2
				done
				stop "$svc_pid"
			done
		done
	done
}

# need_peer: exits unless PEER_RLS_BIN names the envoyproxy/ratelimit
# binary.
need_peer() {
	[[ -n "${PEER_RLS_BIN:-}" && -x "$PEER_RLS_BIN" ]] || { echo "$NAME: PEER_RLS_BIN must name the envoyproxy/ratelimit binary" >&2; exit 1; }
}

# print_tables ROUNDS: the script's tables (its function tables), then,
# over more than one round, the range of each cell over the rounds: what
# BENCHMARKS.md cites.
print_tables() {
	tables
	if (($1 > 1)); then
		echo
		echo "Ranges over the $1 rounds (low–high):"
		echo
		tables ranges
	fi
}

# two_tables MODE GROUPBY HEAD1 ROW1 HEAD2 ROW2: the two tables of a
# side-by-side script from $tmp/points.jsonl: every point (HEAD1, each row
# the jq string ROW1 of a group $g of points) and envoy-rls's ratios to
# envoyproxy/ratelimit (HEAD2, ROW2, over the points that have them). With
# MODE "ranges", a group is the points of one place in a round (GROUPBY, a
# jq array of fields) over the rounds, and each cell their range; else a
# group is one point.
two_tables() {
	local group='map([.])'
	[[ "$1" == ranges ]] && group="group_by($2)"
	echo "$3"
	jq -s -r "$span_defs $group"'[] | . as $g | $g[0] | '"$4" "$tmp/points.jsonl"
	echo
	echo "envoy-rls against envoyproxy/ratelimit in the same round:"
	echo
	echo "$5"
	jq -s -r "$span_defs"' map(select(.vs != null)) | '"$group"'[] | . as $g | $g[0] | '"$6" "$tmp/points.jsonl"
}
