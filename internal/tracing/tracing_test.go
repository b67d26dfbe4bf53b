package tracing

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/envoy-rls/envoy-rls/internal/otlptest"
)

// drops counts what OnDropped is told.
type drops struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *drops) add(reason string, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[string]int{}
	}
	d.n[reason] += n
}

func (d *drops) get(reason string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[reason]
}

// endSpans ends n root spans of tr at once.
func endSpans(tr *Tracing, n int) {
	tracer := tr.Tracer("test")
	for range n {
		_, span := tracer.Start(context.Background(), "s")
		span.End()
	}
}

// An endpoint that takes connections and never answers: the exports wait
// out their timeout, the queue fills, and every span past it is dropped,
// counted, and logged once however many are dropped. Ending a span never
// waits.
func TestQueueFullDropsAndCounts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1000")
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "4")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	t.Setenv("OTEL_BSP_EXPORT_TIMEOUT", "1000") // the exporter retries a hung one until then
	core, logs := observer.New(zap.WarnLevel)
	var d drops
	tr, err := New(context.Background(), Options{SamplingRate: 1, ServiceName: "t", OnDropped: d.add, Logger: zap.New(core), LogEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	endSpans(tr, 200)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("ending 200 spans took %v: want no wait on the endpoint", took)
	}
	if got := d.get(DroppedQueueFull); got < 200-8 {
		t.Errorf("%d spans dropped as queue_full, want at least %d of 200 past a queue of 4", got, 200-8)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = tr.Shutdown(ctx) // the spans held fail their export, or are given up
	if got := d.get(DroppedQueueFull) + d.get(DroppedExport); got != 200 {
		t.Errorf("%d spans dropped in all, want all 200", got)
	}
	if n := logs.FilterMessageSnippet("spans dropped").Len(); n != 1 {
		t.Errorf("%d log lines about drops, want 1 within the interval", n)
	}
}

// An endpoint that is down: each export fails at once, and its spans are
// counted as export_failed.
func TestExportFailedDropsAndCounts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "300")
	var d drops
	tr, err := New(context.Background(), Options{Protocol: ProtocolGRPC, SamplingRate: 1, ServiceName: "t", OnDropped: d.add})
	if err != nil {
		t.Fatal(err)
	}
	endSpans(tr, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = tr.Shutdown(ctx)
	if got := d.get(DroppedExport); got != 10 {
		t.Errorf("%d spans dropped as export_failed, want 10", got)
	}
}

// The resource names the instance; without an instance id, a random one
// (a UUID), different for each.
func TestResourceAndRandomInstance(t *testing.T) {
	r := otlptest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.HTTPEndpoint)
	ids := map[string]bool{}
	for range 2 {
		tr, err := New(context.Background(), Options{SamplingRate: 1, ServiceName: "RateLimit"})
		if err != nil {
			t.Fatal(err)
		}
		if id := tr.InstanceID(); len(id) != 36 || id[14] != '4' {
			t.Errorf("random instance id %q: want a version 4 UUID", id)
		}
		ids[tr.InstanceID()] = true
		endSpans(tr, 1)
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	spans := r.Spans()
	if len(spans) != 2 || len(ids) != 2 {
		t.Fatalf("%d spans, %d ids: want 2 of each", len(spans), len(ids))
	}
	for _, s := range spans {
		if s.Resource["service.name"] != "RateLimit" || !ids[s.Resource["service.instance.id"]] {
			t.Errorf("resource %v: want service.name RateLimit and the instance's id", s.Resource)
		}
		if _, ok := s.Resource["service.namespace"]; ok {
			t.Errorf("resource %v: want no service.namespace when none is given", s.Resource)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	for _, o := range []Options{{Protocol: "zipkin"}, {SamplingRate: 1.5}, {SamplingRate: -0.1}} {
		if _, err := New(context.Background(), o); err == nil {
			t.Errorf("%+v: got no error", o)
		}
	}
}

// TestShutdownLogsOnce: spans that an endpoint which never answers still
// holds at the exit are counted and said in one line, Shutdown's own,
// whatever was logged before: the caller logs nothing more.
func TestShutdownLogsOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String())
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "10000")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	core, logs := observer.New(zap.WarnLevel)
	var d drops
	tr, err := New(context.Background(), Options{SamplingRate: 1, ServiceName: "t", OnDropped: d.add, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	endSpans(tr, 5)
	time.Sleep(100 * time.Millisecond) // an export started, hanging
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := tr.Shutdown(ctx); err == nil {
		t.Error("Shutdown gave up on the spans and returned no error")
	}
	all := logs.All()
	if len(all) != 1 || !strings.Contains(all[0].Message, "the last spans were not all exported") || all[0].ContextMap()["spans_dropped"] != int64(5) {
		t.Errorf("logged %v, want one line of the 5 spans lost", all)
	}
	if got := d.get(DroppedExport); got != 5 {
		t.Errorf("%d spans counted as export_failed, want 5", got)
	}
}
