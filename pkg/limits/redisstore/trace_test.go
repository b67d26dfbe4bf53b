package redisstore

import (
	"context"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// TestPipelineSpans decides traced calls at once while each pipeline is
// held, so that they merge: each pipeline is one span, the child of one
// call's span and linked to every other call it carried, each of which
// links back to it; calls outside any trace make no span.
func TestPipelineSpans(t *testing.T) {
	srv := redistest.Start(t)
	c := newClient(t, ClientOptions{URL: srv.URL(), Timeout: testTimeout})
	var pc pipelineCounter
	c.AddHook(&pc)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background()) //nolint:errcheck // in memory
	tracer := tp.Tracer("test")
	s := New(c, Options{Flushes: 1, Tracer: tracer})
	defer s.Close()
	pc.delay.Store(int64(5 * time.Millisecond)) // let the queue fill

	const calls = 24
	callers := make(map[trace.SpanID]bool)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			ctx, span := tracer.Start(context.Background(), "call")
			mu.Lock()
			callers[span.SpanContext().SpanID()] = true
			mu.Unlock()
			res := make([]limits.Result, 1)
			s.Decide(ctx, []limits.Hit{{Key: "traced", Limit: hourly(limits.TokenBucket, 1000), Cost: 1}}, res)
			span.End()
			if res[0].Err != nil || !res[0].Allowed {
				t.Errorf("call %d: %+v, want allowed", i, res[0])
			}
		})
	}
	wg.Wait()
	pipelinesSent := pc.n.Load()
	// Untraced calls: no span.
	res := make([]limits.Result, 1)
	s.Decide(context.Background(), []limits.Hit{{Key: "untraced", Limit: hourly(limits.TokenBucket, 10), Cost: 1}}, res)

	checkPipelineSpans(t, exp.GetSpans(), callers, pipelinesSent)
}

// checkPipelineSpans checks the pipeline spans of TestPipelineSpans: each
// under a call's span and linked to the others it carried, each of which
// links back, every call reached, fewer spans than calls.
func checkPipelineSpans(t *testing.T, spans tracetest.SpanStubs, callers map[trace.SpanID]bool, pipelinesSent int64) {
	t.Helper()
	calls := len(callers)
	var pipelines, merged int
	reached := map[trace.SpanID]int{}
	backLinks := map[trace.SpanID][]trace.SpanID{} // call → pipelines it links to
	for _, sp := range spans {
		if sp.Name == "call" {
			for _, l := range sp.Links {
				backLinks[sp.SpanContext.SpanID()] = append(backLinks[sp.SpanContext.SpanID()], l.SpanContext.SpanID())
			}
		}
	}
	for _, sp := range spans {
		if sp.Name != PipelineSpanName {
			continue
		}
		pipelines++
		if sp.SpanKind != trace.SpanKindClient {
			t.Errorf("pipeline span kind %v, want client", sp.SpanKind)
		}
		if !callers[sp.Parent.SpanID()] {
			t.Errorf("pipeline span's parent %v is no call's span", sp.Parent.SpanID())
		}
		reached[sp.Parent.SpanID()]++
		carried := 1 + len(sp.Links)
		// A pipeline of nothing but what a call sends after its answer
		// (its undo, its expiries) carries no call of its own.
		if got := attr(sp, "rls.pipeline.calls"); got != int64(carried) && (got != 0 || len(sp.Links) > 0) {
			t.Errorf("pipeline of %d calls (its parent and %d links) says rls.pipeline.calls=%d", carried, len(sp.Links), got)
		}
		if len(sp.Links) > 0 {
			merged++
		}
		for _, l := range sp.Links {
			if !callers[l.SpanContext.SpanID()] {
				t.Errorf("pipeline span links %v, no call's span", l.SpanContext.SpanID())
			}
			reached[l.SpanContext.SpanID()]++
			if !contains(backLinks[l.SpanContext.SpanID()], sp.SpanContext.SpanID()) {
				t.Errorf("call %v does not link back to the pipeline that carried it", l.SpanContext.SpanID())
			}
		}
	}
	if len(reached) != calls {
		t.Errorf("%d of %d calls reach a pipeline span", len(reached), calls)
	}
	if merged == 0 || int64(pipelines) > pipelinesSent || pipelines >= calls {
		t.Errorf("%d pipeline spans (%d merged) for %d pipelines sent and %d calls: want one per pipeline, some merged", pipelines, merged, pipelinesSent, calls)
	}
}

func attr(sp tracetest.SpanStub, key string) int64 {
	for _, kv := range sp.Attributes {
		if string(kv.Key) == key {
			return kv.Value.AsInt64()
		}
	}
	return -1
}

func contains(ids []trace.SpanID, id trace.SpanID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// On a cluster, a call whose keys span two masters is split between their
// pipelines: each is a span under the call's.
func TestPipelineSpansCluster(t *testing.T) {
	c, _, others := clockCluster(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background()) //nolint:errcheck // in memory
	tracer := tp.Tracer("test")
	s := New(c, Options{Tracer: tracer})
	defer s.Close()
	a, b := keysOn(t, c, others[0], 1)[0], keysOn(t, c, others[1], 1)[0]
	ctx, span := tracer.Start(context.Background(), "call")
	res := make([]limits.Result, 2)
	s.Decide(ctx, []limits.Hit{{Key: a, Limit: hourly(limits.TokenBucket, 10), Cost: 1}, {Key: b, Limit: hourly(limits.TokenBucket, 10), Cost: 1}}, res)
	span.End()
	for i, r := range res {
		if r.Err != nil || !r.Allowed {
			t.Fatalf("hit %d: %+v, want allowed", i, r)
		}
	}
	under := 0
	for _, sp := range exp.GetSpans() {
		if sp.Name == PipelineSpanName && sp.Parent.SpanID() == span.SpanContext().SpanID() {
			under++
		}
	}
	if under < 2 {
		t.Errorf("%d pipeline spans under the call's, want one per master (2) at least", under)
	}
}
