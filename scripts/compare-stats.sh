#!/usr/bin/env bash
# Compares envoy-rls's envoyproxy/ratelimit families with envoyproxy/ratelimit's
# own: both run as Envoy Gateway runs ratelimit (file mode, USE_PROMETHEUS=true,
# Envoy Gateway's statsd mapper as PROMETHEUS_MAPPER_YAML), each on a
# redis-server of its own, get the same gRPC requests, and their
# ratelimit_service_* series are compared one by one, once as Envoy Gateway
# deploys it and once with LOCAL_CACHE_SIZE_IN_BYTES and SHADOW_MODE (the
# local cache's and the global shadow mode's stats). Then both push their
# stats to a statsd of their own, as USE_STATSD=true (over TCP) and as
# USE_DOG_STATSD=true (over UDP, with EXTRA_TAGS and a mogrifier) push
# them, and the counters received are compared by name, tags and count. A
# difference fails, unless it is one of the known ones the test lists with
# its reason.
#
#   PEER_RLS_BIN=/path/to/ratelimit scripts/compare-stats.sh
#   PEER_RLS_BIN=... EG_STATSD_MAPPER=statsd_conf.yaml scripts/compare-stats.sh
#
# PEER_RLS_BIN is envoyproxy/ratelimit's binary (`go build ./src/service_cmd`
# in its repository). EG_STATSD_MAPPER is Envoy Gateway's mapper
# (internal/infrastructure/kubernetes/ratelimit/statsd_conf.yaml in its
# repository); without it the test words the built-in mapper as Envoy
# Gateway does. Needs Go and redis-server on PATH. Not run in CI, which
# cannot build the peer.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${PEER_RLS_BIN:?must name the envoyproxy/ratelimit binary}"
export PEER_RLS_BIN
exec go test -tags differential -count=1 -v -run '^TestDropIn(LocalCache)?Stats(d)?AsEnvoyproxyRatelimit$' ./test/differential/
