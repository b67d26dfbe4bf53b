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
