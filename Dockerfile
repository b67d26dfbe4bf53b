# envoy-rls, built from this repository: a static binary on a distroless
# base, running as a non-root user. docker-compose.yml builds it; alone:
#
#   docker build -t envoy-rls . && docker run --rm -p 8080:8080 -p 8081:8081 envoy-rls
#
# or for linux/amd64 and linux/arm64 at once, `make image-multiarch` (docker
# buildx build --platform linux/amd64,linux/arm64).
#
# serves the limits baked in below on the embedded store; add
# -redis-url redis://HOST:6379 to share counters between instances. Run as
# /bin/ratelimit, it stands in for envoyproxy/ratelimit's image.

# Build stage. The go directive in go.mod is 1.26.x; the golang image sets
# GOTOOLCHAIN=local, so its Go must be at least that: golang:1.26 is the
# newest 1.26 patch release. It runs on the builder's own platform
# ($BUILDPLATFORM) whatever the image's, and Go cross-compiles for the
# target that BuildKit (Docker's builder, buildx's too) names in TARGETOS
# and TARGETARCH (the builder's own for a plain docker build): an arm64
# image is built on an amd64 machine without emulating arm64, in the time
# an amd64 build takes.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS TARGETARCH
WORKDIR /src
# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# CGO_ENABLED=0: a static binary, no libc needed at run time (and no C
# cross-compiler needed to build one for another architecture). -trimpath and
# -buildvcs=false: the same source builds the same binary on any machine
# (.dockerignore keeps .git out of the context anyway). The binary names the
# release of its source (cmd/envoy-rls/version.go) and, given
# --build-arg REVISION=$(git rev-parse --short HEAD) as `make image` passes
# it, the commit; VERSION replaces the release for a tagged build.
ARG VERSION=""
ARG REVISION=""
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -buildvcs=false \
    -ldflags="-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" \
    -o /out/envoy-rls ./cmd/envoy-rls

# Run stage: distroless static has no shell and no package manager, only CA
# certificates (for rediss://), tzdata and /etc/passwd; its nonroot user is
# uid 65532. The base is published for both architectures, and buildx takes
# the one of the target platform; nothing runs in this stage, so nothing is
# emulated.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/envoy-rls /usr/local/bin/envoy-rls
# The same binary as /bin/ratelimit, where envoyproxy/ratelimit's image has
# its own: Envoy Gateway, Istio's sample and Contour's guide run
# `command: [/bin/ratelimit]`, and under that name envoy-rls takes its
# configuration from envoyproxy/ratelimit's environment (docs/dropin.md,
# "Running as envoyproxy/ratelimit"). A copy rather than a link, since the base has
# no shell to make one. The service writes nothing to disk (limits and
# certificates are only read, counters live in Redis or in memory, logs go
# to stderr), so it runs with readOnlyRootFilesystem as any uid, Envoy
# Gateway's 65534 among them; only GRPC_UDS's socket needs a writable
# directory, which the Deployment mounts.
COPY --from=build /out/envoy-rls /bin/ratelimit
# The default -config is config/limits.yaml, relative to the working
# directory: the baked-in limits load with no flag. docker-compose.yml mounts
# ./config over another path and points -config at it, so that an edit on
# the host reloads within 2 seconds.
WORKDIR /app
COPY config/limits.yaml /app/config/limits.yaml
USER 65532:65532
# 8080: HTTP (/healthz, /json, /metrics, /rlconfig), -http-addr.
# 8081: gRPC RateLimitService v3, health and reflection, -grpc-addr.
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/envoy-rls"]
