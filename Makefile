# Targets for developers and CI. `make test` installs the Redis server the
# store tests start, when it is missing.

GO       ?= go
FUZZTIME ?= 10s
BIN      := bin/envoy-rls

.PHONY: test run build fuzz bench lint

test:
	@if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then \
		sudo=; if [ "$$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then sudo=sudo; fi; \
		$$sudo apt-get update && \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server redis-tools; \
	fi
	$(GO) test -race -count=1 ./...
	GOAMD64=v3 $(GO) test -count=1 -run 'Equivalence' ./pkg/limits/redisstore/
	@# The allocation tests skip under -race (it makes sync.Pool drop items): run them without it.
	$(GO) test -count=1 -run 'Allocs' ./...
	@# Every benchmark once, so that one that no longer runs fails here.
	@echo "benchmarks, once each"; out=$$($(GO) test -run '^$$' -bench . -benchtime 1x ./... 2>&1) || { echo "$$out"; exit 1; }

run:
	$(GO) run ./cmd/envoy-rls

build:
	$(GO) build -o $(BIN) ./cmd/envoy-rls

# fuzz runs every fuzz target of every package for FUZZTIME; a package that
# does not build fails it.
fuzz:
	@set -e; pkgs=$$($(GO) list ./...); \
	for pkg in $$pkgs; do \
		targets=$$($(GO) test -list 'Fuzz.*' $$pkg); \
		for target in $$(echo "$$targets" | grep '^Fuzz' || true); do \
			echo "== $$pkg $$target"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

lint:
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt -l: not formatted:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
