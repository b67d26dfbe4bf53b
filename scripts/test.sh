#!/usr/bin/env bash
# The steps of `make test`, each run by internal/testrun, which prints a
# line per package as it ends, names the packages still running when the
# output has been quiet for 30 s, and ends the run with its elapsed time
# and "packages: N passed, N failed". A failed step does not stop the
# later ones, so one run shows every failure; the run fails if any did.
set -uo pipefail
cd "$(dirname "$0")/.."
GO="${GO:-go}"

# Redis, and the proxies test/integration runs forward-auth behind
# (Debian's nginx and caddy packages): whichever is missing.
missing=
command -v redis-server >/dev/null && command -v redis-cli >/dev/null || missing="redis-server redis-tools"
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || missing="$missing nginx"
command -v caddy >/dev/null || missing="$missing caddy"
if [ -n "$missing" ]; then
	sudo=
	if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then sudo=sudo; fi
	# shellcheck disable=SC2086 # the list is words
	$sudo apt-get update && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y $missing || exit 1
fi

mkdir -p bin
"$GO" build -o bin/testrun ./internal/testrun || exit 1
tally=bin/test.tally
bin/testrun -tally "$tally" -begin
status=0
step() { bin/testrun -tally "$tally" "$@" || status=1; }

step -- -race -count=1 ./...
# The dashboards' test is a module of its own (dashboards/doc.go says why),
# and so are the Kubernetes tests (deploy/test/doc.go says why).
step -dir dashboards -- -race -count=1 ./...
step -dir deploy/test -- -race -count=1 ./...
# The Redis store's equivalence with the Go algorithms, built for x86-64-v3
# too, where the compiler may fuse float operations: only on a CPU that can
# run such a build.
if [ "$(uname -m)" = x86_64 ] && grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
	step -env GOAMD64=v3 -- -count=1 -run Equivalence ./pkg/limits/redisstore/
else
	echo "GOAMD64=v3 equivalence skipped: this CPU cannot run an x86-64-v3 build"
fi
# The allocation tests skip under -race (it makes sync.Pool drop items):
# run without it, in the packages that have one (a build of every test
# binary without -race would cost a minute for them).
allocs=$(grep -rl --include='*_test.go' '^func Test[A-Za-z0-9_]*Allocs' pkg cmd internal test | xargs -n1 dirname | sort -u | sed 's|^|./|')
step -- -count=1 -run Allocs $allocs

bin/testrun -tally "$tally" -summary || status=1
exit $status
