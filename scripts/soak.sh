#!/usr/bin/env bash
# Soak test: runs the envoy-rls binary (built with -race) on a real
# redis-server under a bounded closed-loop load for a while, and fails if its
# heap, goroutines or open file descriptors grew from the start of the run to
# its end. It prints the figures it measured.
#
#   scripts/soak.sh          # 60 s
#   scripts/soak.sh 10m      # or RLS_SOAK=10m scripts/soak.sh
#
# It needs Go and redis-server on PATH (`make test` installs Redis).
set -euo pipefail
cd "$(dirname "$0")/.."
export RLS_SOAK="${1:-${RLS_SOAK:-60s}}"
exec go test -race -count=1 -timeout 0 -v -run '^TestDistributedSoak$' ./test/integration/
