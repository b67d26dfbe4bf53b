#!/usr/bin/env bash
# The figures of BENCHMARKS.md's "RLQS: a fleet dividing one limit": three
# simulated Envoys (internal/rlqstest) on two envoy-rls processes sharing
# one redis-server, one limit of 100 a second, Envoy's real 5 s report
# interval; E3 joins at 32 s, E2 leaves at 63 s, the run ends at
# 90 s (TestRLQSFleetFigure). It writes, under the directory given (default
# a temporary one), fleet.csv (one row a second: what each Envoy's token
# bucket allowed, and what it was assigned), fleet.mmd (a Mermaid chart of
# it) and fleet.txt (convergence and overshoot), and prints the last two.
#
#   scripts/rlqs-fleet.sh                 # about 100 s
#   scripts/rlqs-fleet.sh out/            # keep the files in out/
#   RLQS_FLEET_INTERVAL=1s scripts/rlqs-fleet.sh   # the same at 1 s reports, 18 s
#
# It needs Go and redis-server on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-$(mktemp -d)}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)" # go test runs in the package's directory
export RLQS_FLEET_CSV="$dir/fleet.csv"
go test -race -count=1 -timeout 10m -v -run '^TestRLQSFleetFigure$' ./test/integration/
echo
cat "$dir/fleet.txt"
echo
cat "$dir/fleet.mmd"
echo "files in $dir"
