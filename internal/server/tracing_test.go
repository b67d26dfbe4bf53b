package server

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/envoy-rls/envoy-rls/internal/otlptest"
	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits/redisstore"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// spanBound is how long a test waits for a span to reach its receiver:
// the batch goes out within OTEL_BSP_SCHEDULE_DELAY (set short here).
const spanBound = 10 * time.Second

// callSpanName is the server span's name: the gRPC method.
const callSpanName = "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

// tracedCall sends ShouldRateLimit for k=value with md as its gRPC
// metadata.
func tracedCall(t *testing.T, addr, value string, md ...string) *rlsv3.RateLimitResponse {
	t.Helper()
	conn := grpcDial(t, addr, insecure.NewCredentials())
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), md...), callBound)
	defer cancel()
	resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{
		Domain:      "test",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: value}}}},
	})
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

// traceOf waits for the three spans of one call in trace traceID (the
// call's, the store call's, the Redis pipeline's) and checks how they
// hang together: the call's under parentID, the store's under the call's,
// the pipeline's under the store's. It returns the call's span.
func traceOf(t *testing.T, r *otlptest.Receiver, traceID, parentID string) otlptest.Span {
	t.Helper()
	spans, err := r.Await(spanBound, func(spans []otlptest.Span) bool {
		n := 0
		for _, s := range spans {
			if s.TraceID == traceID {
				n++
			}
		}
		return n >= 3
	})
	if err != nil {
		t.Fatalf("trace %s: %v: %+v", traceID, err, spans)
	}
	byName := map[string]otlptest.Span{}
	for _, s := range spans {
		if s.TraceID == traceID {
			byName[s.Name] = s
		}
	}
	call, store, pipe := byName[callSpanName], byName[rls.StoreSpanName], byName[redisstore.PipelineSpanName]
	for _, c := range []struct {
		what         string
		span         otlptest.Span
		parent, want string
	}{
		{"the call's span", call, parentID, "the span sent"},
		{"the store call's span", store, call.SpanID, "the call's span"},
		{"the pipeline's span", pipe, store.SpanID, "the store call's span"},
	} {
		if c.span.SpanID == "" || c.span.ParentSpanID != c.parent {
			t.Errorf("%s: %+v, want the child of %s (%s)", c.what, c.span, c.want, c.parent)
		}
	}
	return call
}

// checkCallSpan checks what the call's span says: the request's domain
// and size, the answer's code and rule, and the resource; never the
// descriptor's value.
func checkCallSpan(t *testing.T, s otlptest.Span, code, value string, resource map[string]string) {
	t.Helper()
	want := map[string]string{"rls.domain": "test", "rls.descriptors": "1", "rls.overall_code": code, "rls.rule": "one",
		"rpc.system": "grpc", "rpc.service": "envoy.service.ratelimit.v3.RateLimitService", "rpc.method": "ShouldRateLimit", "rpc.grpc.status_code": "0"}
	for k, v := range want {
		if s.Attrs[k] != v {
			t.Errorf("call span's %s: got %q, want %q", k, s.Attrs[k], v)
		}
	}
	for k, v := range s.Attrs {
		if strings.Contains(v, value) {
			t.Errorf("call span's %s=%q holds the descriptor's value", k, v)
		}
	}
	if s.Kind.String() != "SPAN_KIND_SERVER" {
		t.Errorf("call span's kind: %v, want server", s.Kind)
	}
	for k, v := range resource {
		if s.Resource[k] != v {
			t.Errorf("resource's %s: got %q, want %q", k, s.Resource[k], v)
		}
	}
}

// TestTracingPropagated calls a server on Redis, traced over OTLP/HTTP
// and then OTLP/gRPC, with a W3C traceparent, then B3 as Envoy's Zipkin
// tracer sends it (its x-b3-* headers) and in its single header: each
// call's span continues the trace sent, the store call's and the
// pipeline's hang under it, and the attributes say what was decided.
func TestTracingPropagated(t *testing.T) {
	srv := redistest.Start(t)
	r := otlptest.Start(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	for i, proto := range []string{"http", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			// Trace ids of this protocol's own: the receiver is shared.
			id := func(hex string) string { return fmt.Sprintf("%02x", i+1) + hex[2:] }
			endpoint := r.HTTPEndpoint
			if proto == "grpc" {
				endpoint = "http://" + r.GRPCAddr
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			s := startInProcess(t, "-redis-url", srv.URL(), "-tracing", "-tracing-protocol", proto,
				"-tracing-service-name", "rls-test", "-tracing-service-namespace", "edge", "-tracing-service-instance-id", "pod-1")
			resource := map[string]string{"service.name": "rls-test", "service.namespace": "edge", "service.instance.id": "pod-1"}
			value := "secret-" + proto

			traceID, parent := id("4bf92f3577b34da6a3ce929d0e0e4736"), "00f067aa0ba902b7"
			tracedCall(t, s.grpcAddr, value, "traceparent", "00-"+traceID+"-"+parent+"-01", "baggage", "tenant=acme")
			call := traceOf(t, r, traceID, parent)
			checkCallSpan(t, call, "OK", value, resource)
			if call.Via != proto {
				t.Errorf("span received over %s, want %s", call.Via, proto)
			}

			b3Trace, b3Parent := id("80f198ee56343ba864fe8b2a57d3eff7"), "e457b5a2e4d86bd1"
			tracedCall(t, s.grpcAddr, value, "x-b3-traceid", b3Trace, "x-b3-spanid", b3Parent,
				"x-b3-parentspanid", "05e3ac9a4f6e3b90", "x-b3-sampled", "1")
			checkCallSpan(t, traceOf(t, r, b3Trace, b3Parent), "OVER_LIMIT", value, resource)

			singleTrace, singleParent := id("a3ce929d0e0e47364bf92f3577b34da6"), "b7ad6b7169203331"
			tracedCall(t, s.grpcAddr, value+"-single", "b3", singleTrace+"-"+singleParent+"-1")
			checkCallSpan(t, traceOf(t, r, singleTrace, singleParent), "OK", value, resource)
		})
	}
}

// traceToNowhere points the OTLP exporter at an address where nothing
// listens, with short timeouts and batches.
func traceToNowhere(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+down)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "200")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
}

// TestTracingEndpointDown traces to an OTLP endpoint where nothing
// listens: every call is decided as without tracing, and the spans are
// dropped and counted in rls_trace_spans_dropped_total.
func TestTracingEndpointDown(t *testing.T) {
	traceToNowhere(t)
	s := startInProcess(t, "-tracing")
	for i := range 20 {
		value := fmt.Sprint("v", i)
		for j, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
			tp := fmt.Sprintf("00-%032x-%016x-01", i+1, 2*i+j+1)
			if got := tracedCall(t, s.grpcAddr, value, "traceparent", tp).GetOverallCode(); got != want {
				t.Fatalf("call %d of %s: %v, want %v", j, value, got, want)
			}
		}
	}
	const series = `rls_trace_spans_dropped_total{reason="export_failed"}`
	deadline := time.Now().Add(spanBound)
	for {
		line := metricLine(t, s, series) // cluster_test.go
		if v, err := strconv.ParseFloat(strings.TrimPrefix(line, series+" "), 64); err == nil && v > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no span counted as dropped within %v: %q", spanBound, line)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A malformed tracing flag stops the start with one line naming it and
// what was wanted.
func TestTracingFlagsRefused(t *testing.T) {
	for _, c := range []struct{ args []string }{
		{[]string{"-tracing-protocol", "zipkin"}},
		{[]string{"-tracing-sampling-rate", "1.5"}},
		{[]string{"-tracing-sampling-rate", "half"}},
	} {
		_, err := parseFlags(c.args, env(nil))
		if err == nil || !strings.Contains(err.Error(), c.args[0]) || !strings.Contains(err.Error(), "want") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: got %v, want one line naming %s and what it wants", c.args, err, c.args[0])
		}
	}
}

// TestTracingExportFailureLoggedOnce: an OTLP endpoint that is down fails
// export after export, over either protocol, and the log says so once
// within the minute (docs/operations.md), not once per export nor twice
// per failure.
func TestTracingExportFailureLoggedOnce(t *testing.T) {
	for _, protocol := range []string{"http", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			traceToNowhere(t)
			log, logs := observed()
			s := startInProcessLogging(t, log, "-tracing", "-tracing-protocol", protocol)
			for i := range 10 {
				tracedCall(t, s.grpcAddr, fmt.Sprint("v", i))
				time.Sleep(50 * time.Millisecond) // an export, and its failure, each time
			}
			time.Sleep(500 * time.Millisecond)
			w := warnings(logs)
			if len(w) != 1 || !strings.Contains(w[0].Message, "spans dropped") {
				var lines []string
				for _, e := range w {
					lines = append(lines, fmt.Sprintf("%s %q %v", e.Time.Format("15:04:05.000"), e.Message, e.ContextMap()))
				}
				t.Errorf("%d warnings, want the one about dropped spans:\n%s", len(w), strings.Join(lines, "\n"))
			}
		})
	}
}
