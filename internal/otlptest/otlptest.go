// Package otlptest runs a real OTLP trace receiver for tests, in the test's
// process, on loopback ports: the collector's gRPC TraceService and its
// HTTP /v1/traces endpoint (protobuf bodies), both from the OpenTelemetry
// protocol's own module. Every span either receives is kept, flattened
// into a Span, for the test to read.
package otlptest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one span received, its ids in lower-case hex, its attributes
// and its resource's as strings.
type Span struct {
	Name                          string
	Kind                          tracepb.Span_SpanKind
	TraceID, SpanID, ParentSpanID string
	Attrs, Resource               map[string]string
	// Links are the span contexts it links to, as "traceid/spanid".
	Links []string
	// Error reports a status of error.
	Error bool
	// Via is "grpc" or "http": which endpoint received it.
	Via string
}

// Receiver is a running OTLP receiver.
type Receiver struct {
	coltracepb.UnimplementedTraceServiceServer

	// GRPCAddr is the gRPC TraceService's host:port; HTTPEndpoint the
	// HTTP endpoint's base URL (http://host:port), to which exporters
	// add /v1/traces.
	GRPCAddr, HTTPEndpoint string

	mu      sync.Mutex
	spans   []Span
	arrived chan struct{} // closed and replaced at each export
}

// Start runs a receiver until the test ends.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{arrived: make(chan struct{})}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, r)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.serveHTTP)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go gs.Serve(gl) //nolint:errcheck // ends with Stop
	go hs.Serve(hl) //nolint:errcheck // ends with Close
	t.Cleanup(func() {
		gs.Stop()
		hs.Close()
	})
	r.GRPCAddr, r.HTTPEndpoint = gl.Addr().String(), "http://"+hl.Addr().String()
	return r
}

// Export is the gRPC TraceService's method.
func (r *Receiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.keep(req, "grpc")
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// serveHTTP is POST /v1/traces: a protobuf ExportTraceServiceRequest,
// gzipped or not, answered with a protobuf response.
func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	msg := &coltracepb.ExportTraceServiceRequest{}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "want application/x-protobuf, not "+ct, http.StatusUnsupportedMediaType)
		return
	}
	if err := proto.Unmarshal(b, msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.keep(msg, "http")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = io.Copy(w, bytes.NewReader(out))
}

// keep flattens and keeps every span of req.
func (r *Receiver) keep(req *coltracepb.ExportTraceServiceRequest, via string) {
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{Name: s.GetName(), Kind: s.GetKind(), TraceID: hex.EncodeToString(s.GetTraceId()),
					SpanID: hex.EncodeToString(s.GetSpanId()), ParentSpanID: hex.EncodeToString(s.GetParentSpanId()),
					Attrs: attrs(s.GetAttributes()), Resource: res, Via: via,
					Error: s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR}
				for _, l := range s.GetLinks() {
					sp.Links = append(sp.Links, hex.EncodeToString(l.GetTraceId())+"/"+hex.EncodeToString(l.GetSpanId()))
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, got...)
	close(r.arrived)
	r.arrived = make(chan struct{})
}

// attrs renders attributes as strings.
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = strconv.FormatInt(v.GetIntValue(), 10)
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = strconv.FormatBool(v.GetBoolValue())
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = strconv.FormatFloat(v.GetDoubleValue(), 'g', -1, 64)
		default:
			m[kv.GetKey()] = v.GetStringValue()
		}
	}
	return m
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// ErrTimeout is Await's error when the spans did not come in time.
var ErrTimeout = errors.New("otlptest: the spans did not arrive in time")

// Await waits until done is true of the spans received, for at most bound,
// and returns them.
func (r *Receiver) Await(bound time.Duration, done func([]Span) bool) ([]Span, error) {
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		spans, arrived := append([]Span(nil), r.spans...), r.arrived
		r.mu.Unlock()
		if done(spans) {
			return spans, nil
		}
		select {
		case <-arrived:
		case <-deadline.C:
			return spans, fmt.Errorf("%w (%d received)", ErrTimeout, len(spans))
		}
	}
}

// Named returns the spans named name.
func Named(spans []Span, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}
