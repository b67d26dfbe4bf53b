# Targets for developers and CI. `make test` installs the Redis server the
# store tests start, when it is missing.

GO       ?= go
FUZZTIME ?= 10s
BIN      := bin/envoy-rls

.PHONY: test bench-once run build image image-multiarch fuzz differential bench lint

# test runs every test (scripts/test.sh says how), ending with one line,
# "packages: N passed, N failed".
test:
	@GO=$(GO) bash scripts/test.sh

# bench-once runs every benchmark once, so that one that no longer runs
# fails here (CI runs it; `make bench` measures).
bench-once:
	@echo "benchmarks, once each"; out=$$($(GO) test -run '^$$' -bench . -benchtime 1x ./... 2>&1) || { echo "$$out"; exit 1; }

run:
	$(GO) run ./cmd/envoy-rls

build:
	$(GO) build -o $(BIN) ./cmd/envoy-rls

# image builds the Docker image, stamped with the commit it was built from
# (the build context has no .git for Go to read it from).
image:
	docker build --build-arg REVISION=$$(git rev-parse --short HEAD 2>/dev/null) -t envoy-rls .

# image-multiarch builds the image for linux/amd64 and linux/arm64 with
# buildx, each binary cross-compiled on the builder's platform (no
# emulation). Docker's classic image store holds one platform of an
# image, so the pair is pushed: IMAGE names where (docker login first), and
# IMAGE_OUTPUT, --push by default, may name another --output instead.
IMAGE        ?= envoy-rls
IMAGE_OUTPUT ?= --push
image-multiarch:
	docker buildx build --platform linux/amd64,linux/arm64 \
		--build-arg REVISION=$$(git rev-parse --short HEAD 2>/dev/null) \
		-t $(IMAGE) $(IMAGE_OUTPUT) .

# fuzz runs every fuzz target of the module for FUZZTIME each. The targets
# are found by their declarations (func FuzzX in a _test.go file), so that
# listing them compiles nothing; a package that does not build fails it.
# Go 1.26's fuzzing coordinator can end a run whose time is up with a bare
# "context deadline exceeded" and no failing input (go.dev/issue/75804,
# fixed in Go 1.27): a target that ends so, having written no input under
# testdata/fuzz, is run once more; a real failure writes its input and fails.
fuzz:
	@set -e; \
	out=$$(mktemp); trap 'rm -f "$$out"' EXIT; \
	grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r file; do \
		dir=$$(dirname "$$file"); \
		for target in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$file"); do \
			echo "== $$dir $$target"; \
			for attempt in 1 2; do \
				if $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) "$$dir" >"$$out" 2>&1; then cat "$$out"; break; fi; \
				cat "$$out"; \
				if [ $$attempt = 1 ] && grep -q '^    context deadline exceeded$$' "$$out" && ! grep -q 'Failing input written' "$$out"; then \
					echo "(the fuzzing coordinator's deadline race, go.dev/issue/75804: no failing input; once more)"; continue; \
				fi; \
				exit 1; \
			done; \
		done; \
	done

# differential runs envoy-rls beside envoyproxy/ratelimit (PEER_RLS_BIN, its
# binary: `go build ./src/service_cmd` in its repository) and compares their
# answers. Without PEER_RLS_BIN it says so in one line and succeeds, since a
# machine that cannot build the peer cannot run it.
differential:
	@if [ -z "$(PEER_RLS_BIN)" ] || [ ! -x "$(PEER_RLS_BIN)" ]; then \
		echo "differential test skipped: PEER_RLS_BIN does not name an envoyproxy/ratelimit binary (the README says how to build it and run this test)"; \
	else \
		PEER_RLS_BIN="$(PEER_RLS_BIN)" $(GO) test -tags differential -count=1 ./test/differential/; \
	fi

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

lint:
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt -l: not formatted:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cd dashboards && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cd deploy/test && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
