#!/usr/bin/env bash
# Side by side with a load generator that is not the project's own: ghz
# (github.com/bojand/ghz, on PATH or GHZ_BIN) against envoy-rls and
# envoyproxy/ratelimit (the binary PEER_RLS_BIN) on one redis-server, with
# the limits of scripts/bench-peer.sh (10^9 a second, nothing refused,
# 10,000 keys picked at random by ghz's template), and the no-op
# RateLimitService of rls-bench for the floor. ghz calls with the proto
# (a FileDescriptorSet of Envoy's rls.proto written from the Go types the
# project builds with: envoyproxy/ratelimit serves no reflection). For each
# number of workers (over GHZ_CONNS connections), each service one after
# the other: throughput, p99, the CPU per decision of the service and of
# Redis (utime+stime from /proc/PID/stat around the run), the Redis
# commands, bytes (in and out) and reads (syscalls: what pipelining saves)
# per decision (INFO stats around the run), the load average before the point; then
# envoy-rls's ratios to envoyproxy/ratelimit, point by point.
#
#   PEER_RLS_BIN=/path/to/ratelimit scripts/bench-ghz.sh
#   PEER_RLS_BIN=… GHZ_DURATION=3s GHZ_WORKERS=64 scripts/bench-ghz.sh   # a quick check
#   PEER_RLS_BIN=… GHZ_ROUNDS=3 scripts/bench-ghz.sh                      # three rounds, each point's range
#   PEER_RLS_BIN=… GHZ_COMMANDS=1 scripts/bench-ghz.sh                     # and each point's Redis commands, by name
#   RLS_BIN=/tmp/envoy-rls-old PEER_RLS_BIN=… scripts/bench-ghz.sh        # another build of envoy-rls
#
# GHZ_DURATION (8s), GHZ_WORKERS ("16 64"), GHZ_CONNS (4), GHZ_ROUNDS (1),
# GHZ_ALGORITHMS (envoy-rls's rows: "fixed_window token_bucket";
# fixed_window counts refused hits, envoyproxy/ratelimit's semantics).
# Needs Go, jq, ghz, redis-server and redis-cli; everything it starts is
# stopped on exit. The generator shares the cores with the services: the
# ratios of one round, both services under the same load, are what to read.
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=bench-ghz.sh
# shellcheck source=scripts/procs.sh
source scripts/procs.sh
need_peer
need go jq redis-server redis-cli
GHZ="${GHZ_BIN:-$(command -v ghz || echo "$(go env GOPATH)/bin/ghz")}"
[[ -x "$GHZ" ]] || { echo "bench-ghz.sh: ghz is required (go install github.com/bojand/ghz/cmd/ghz@latest, or GHZ_BIN)" >&2; exit 1; }
DURATION="${GHZ_DURATION:-8s}" WORKERS="${GHZ_WORKERS:-16 64}" CONNS="${GHZ_CONNS:-4}" ROUNDS="${GHZ_ROUNDS:-1}"
ALGORITHMS="${GHZ_ALGORITHMS:-fixed_window token_bucket}"
build
BIN="${RLS_BIN:-bin/envoy-rls}"

# The proto ghz calls with: rls.proto and what it imports, as the Go types
# the project is built with describe them.
mkdir -p "$tmp/protoset"
cat >"$tmp/protoset/main.go" <<'GO'
package main

import (
	"os"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

func main() {
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	var add func(protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		for i := 0; i < fd.Imports().Len(); i++ {
			dep, err := protoregistry.GlobalFiles.FindFileByPath(fd.Imports().Get(i).Path())
			if err != nil {
				os.Stderr.WriteString(err.Error() + "\n")
				os.Exit(1)
			}
			add(dep)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	add(rlsv3.File_envoy_service_ratelimit_v3_rls_proto)
	b, err := proto.Marshal(set)
	if err == nil {
		err = os.WriteFile(os.Args[1], b, 0o644)
	}
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
}
GO
go run "$tmp/protoset/main.go" "$tmp/rls.protoset"

bench_limits "$tmp/envoy-rls.yaml"
peer_limits
start_redis
start_noop

# ticks PID: the CPU time PID has used, in clock ticks (utime+stime).
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# redis_counts: Redis's commands processed, bytes in, bytes out and reads
# (its read syscalls: a pipeline's decisions share one) so far.
redis_counts() {
	redis-cli -p "$redis_port" info stats | tr -d '\r' |
		awk -F: '/^total_commands_processed:/ {c=$2} /^total_net_input_bytes:/ {i=$2} /^total_net_output_bytes:/ {o=$2}
			/^total_reads_processed:/ {r=$2} END {print c, i, o, r}'
}

# point C K ALGO PORT PID [REDISPID]: one ghz run of C workers against
# PORT with ALGO's descriptor over K keys; prints one JSON line with ghz's
# figures and the CPU, commands and bytes around it.
point() {
	local c="$1" k="$2" algo="$3" port="$4" pid="$5" rpid="${6:-}"
	local t0 r0 t1 r1 c0 c1 out
	redis-cli -p "$redis_port" config resetstat >/dev/null
	c0="$(redis_counts)"
	t0="$(ticks "$pid")" r0="$( [[ -n "$rpid" ]] && ticks "$rpid" || echo 0)"
	out="$("$GHZ" --insecure --protoset "$tmp/rls.protoset" --call envoy.service.ratelimit.v3.RateLimitService.ShouldRateLimit \
		-c "$c" --connections "$CONNS" -z "$DURATION" -O json \
		-d "{\"domain\":\"bench\",\"descriptors\":[{\"entries\":[{\"key\":\"$algo\",\"value\":\"k{{randomInt 0 $k}}\"}]}]}" \
		"127.0.0.1:$port")"
	t1="$(ticks "$pid")" r1="$( [[ -n "$rpid" ]] && ticks "$rpid" || echo 0)"
	c1="$(redis_counts)"
	if [[ -n "${GHZ_COMMANDS:-}" ]]; then
		echo "  Redis commands, $algo, $c workers:" >&2
		redis-cli -p "$redis_port" info commandstats | tr -d '\r' | grep '^cmdstat_' | sed 's/,rejected_calls.*//; s/^/    /' >&2
	fi
	jq -c --argjson load "$load" --argjson hz "$(getconf CLK_TCK)" --argjson svc "$((t1 - t0))" --argjson redis "$((r1 - r0))" \
		--arg c0 "$c0" --arg c1 "$c1" '
		($c0 | split(" ") | map(tonumber)) as $a | ($c1 | split(" ") | map(tonumber)) as $b |
		(.statusCodeDistribution.OK // 0) as $ok |
		{load: $load, count: .count, ok: $ok, rps: .rps,
		 p99: ([.latencyDistribution[]? | select(.percentage == 99) | .latency / 1000] | first // null),
		 cpu: ($svc * 1e6 / $hz / $ok), redis: ($redis * 1e6 / $hz / $ok),
		 cmds: (($b[0] - $a[0]) / $ok), in: (($b[1] - $a[1]) / $ok), out: (($b[2] - $a[2]) / $ok),
		 reads: (($b[3] - $a[3]) / $ok)}' <<<"$out"
}

# record SEQ SERVICE ALGO C K JSON FLOORJSON [PEERJSON]: one point, for the
# tables.
record() {
	jq -c --argjson seq "$1" --arg svc "$2" --arg algo "$3" --argjson c "$4" --argjson f "$7" --argjson p "${8:-null}" '
		. + {seq: $seq, svc: $svc, algo: $algo, c: $c, tputx: (.rps / $f.rps),
		 vs: (if $p == null then null else {both: ((.cpu + .redis) / ($p.cpu + $p.redis)), cpu: (.cpu / $p.cpu),
		      redis: (.redis / $p.redis), tput: (.rps / $p.rps), p99: (.p99 / $p.p99)} end)}' <<<"$6" >>"$tmp/points.jsonl"
}

# tables [ranges]: the points recorded, as the two tables, a row per point;
# with ranges, each cell the range of its values over the rounds.
tables() {
	two_tables "${1:-}" '[.c, .seq]' \
		"| service | algorithm | workers | load | calls/s | × floor | p99 µs | non-OK | service CPU µs/decision | Redis CPU µs/decision | Redis commands/decision | Redis bytes in/out per decision | Redis reads/decision |
|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" \
		'"| \(.svc) | \(.algo) | \(.c) | \($g | span(.load; r2)) | \($g | span(.rps; i)) | \($g | span(.tputx; r2)) | \($g | span(.p99; i)) | \($g | span(.count - .ok; i)) | \($g | span(.cpu; r1)) | \($g | span(.redis; r1)) | \($g | span(.cmds; r2)) | \($g | span(.in; i)) / \($g | span(.out; i)) | \($g | span(.reads; r2)) |"' \
		"| envoy-rls algorithm | workers | service + Redis CPU per decision | service CPU | Redis CPU | throughput | p99 |
|---|---:|---:|---:|---:|---:|---:|" \
		'"| \(.algo) | \(.c) | \($g | span(.vs.both; r2)) | \($g | span(.vs.cpu; r2)) | \($g | span(.vs.redis; r2)) | \($g | span(.vs.tput; r2)) | \($g | span(.vs.p99; r2)) |"'
}

# summary JSON: a point's line of progress.
summary() { jq -c 'del(.count, .ok)' <<<"$1"; }

side_by_side "$ROUNDS" "$WORKERS" 10000 "$ALGORITHMS" "$PEER_RLS_BIN" "$BIN"

echo
echo "$(nproc) CPUs, $("$GHZ" --version 2>&1 | head -1), $(go version | cut -d' ' -f3), $(redis-server --version | cut -d' ' -f3), $DURATION per point, $CONNS connections, $ROUNDS round(s), load average before each point in the table"
echo
print_tables "$ROUNDS"
