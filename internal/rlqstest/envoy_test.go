package rlqstest

import (
	"net"
	"sync"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// recorder is a real RateLimitQuotaService on loopback: it records every
// report, answers each with reply (if set), and ends a stream on demand.
type recorder struct {
	rlqspb.UnimplementedRateLimitQuotaServiceServer
	reports chan *rlqspb.RateLimitQuotaUsageReports
	mu      sync.Mutex
	streams int
	reply   func(*rlqspb.RateLimitQuotaUsageReports) *rlqspb.RateLimitQuotaResponse
	end     chan struct{} // closing it ends the current streams
}

var _ rlqspb.RateLimitQuotaServiceServer = (*recorder)(nil)

func (r *recorder) StreamRateLimitQuotas(s rlqspb.RateLimitQuotaService_StreamRateLimitQuotasServer) error {
	r.mu.Lock()
	r.streams++
	end := r.end
	r.mu.Unlock()
	got := make(chan *rlqspb.RateLimitQuotaUsageReports)
	go func() {
		defer close(got)
		for {
			m, err := s.Recv()
			if err != nil {
				return
			}
			got <- m
		}
	}()
	for {
		select {
		case <-end:
			return nil
		case m, ok := <-got:
			if !ok {
				return nil
			}
			r.reports <- m
			r.mu.Lock()
			reply := r.reply
			r.mu.Unlock()
			if reply == nil {
				continue
			}
			if resp := reply(m); resp != nil {
				if err := s.Send(resp); err != nil {
					return err
				}
			}
		}
	}
}

// endStreams ends the streams open now; later ones stay open.
func (r *recorder) endStreams() {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.end)
	r.end = make(chan struct{})
}

func startRecorder(t *testing.T) (*recorder, *grpc.ClientConn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{reports: make(chan *rlqspb.RateLimitQuotaUsageReports, 100), end: make(chan struct{})}
	srv := grpc.NewServer()
	rlqspb.RegisterRateLimitQuotaServiceServer(srv, rec)
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
	})
	return rec, conn
}

func (r *recorder) next(t *testing.T) *rlqspb.RateLimitQuotaUsageReports {
	t.Helper()
	select {
	case m := <-r.reports:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no report within 5 s")
		return nil
	}
}

func TestEnvoyReportsFirstAtOnceThenEveryInterval(t *testing.T) {
	rec, conn := startRecorder(t)
	e := New(conn, Options{Domain: "edge", ReportInterval: 300 * time.Millisecond})
	defer e.Close()
	start := time.Now()
	e.Allow(id)
	first := rec.next(t)
	if time.Since(start) > 250*time.Millisecond {
		t.Errorf("first report after %v, want before the first interval", time.Since(start))
	}
	u := first.GetBucketQuotaUsages()
	if first.GetDomain() != "edge" || len(u) != 1 || u[0].GetNumRequestsAllowed() != 1 || u[0].GetTimeElapsed() == nil || u[0].GetTimeElapsed().AsDuration() != 0 {
		t.Fatalf("first report %v, want domain edge, 1 allowed, time_elapsed 0 s", first)
	}
	other := map[string]string{"name": "other"}
	e.Allow(id)
	e.Allow(id)
	e.Allow(other)
	if m := rec.next(t); len(m.GetBucketQuotaUsages()) != 1 {
		t.Fatalf("second bucket's first report %v, want it alone", m)
	}
	m := rec.next(t)
	if len(m.GetBucketQuotaUsages()) != 2 || m.GetDomain() != "edge" {
		t.Fatalf("periodic report %v, want both buckets in domain edge", m)
	}
	var allowed uint64
	for _, u := range m.GetBucketQuotaUsages() {
		allowed += u.GetNumRequestsAllowed()
	}
	if allowed != 2 {
		t.Fatalf("periodic report counts %d allowed, want 2 (the first ones went in the first reports)", allowed)
	}
	if s := e.Stats(); s.Allowed != 4 || s.Streams != 1 {
		t.Fatalf("stats %+v, want 4 allowed on 1 stream", s)
	}
}

func TestEnvoyEnforcesAssignmentsAndDropsUnknown(t *testing.T) {
	rec, conn := startRecorder(t)
	rec.reply = func(m *rlqspb.RateLimitQuotaUsageReports) *rlqspb.RateLimitQuotaResponse {
		r := assign(m.GetBucketQuotaUsages()[0].GetBucketId().GetBucket(), blanket(typev3.RateLimitStrategy_DENY_ALL), time.Minute)
		r.BucketAction = append(r.BucketAction, assign(map[string]string{"never": "sent"},
			blanket(typev3.RateLimitStrategy_DENY_ALL), time.Minute).BucketAction...)
		return r
	}
	e := New(conn, Options{Domain: "edge", ReportInterval: time.Hour})
	defer e.Close()
	if !e.Allow(id) {
		t.Fatal("first request denied, want allowed (no assignment yet)")
	}
	rec.next(t)
	deadline := time.Now().Add(5 * time.Second)
	for e.Stats().Responses == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if e.Allow(id) {
		t.Fatal("request after DENY_ALL allowed")
	}
	if s := e.Stats(); s.Denied != 1 || s.Dropped != 1 {
		t.Fatalf("stats %+v, want 1 denied and 1 action dropped (the unreported bucket)", s)
	}
}

func TestEnvoyReconnectsWhenStreamEnds(t *testing.T) {
	rec, conn := startRecorder(t)
	e := New(conn, Options{Domain: "edge", ReportInterval: 200 * time.Millisecond})
	defer e.Close()
	e.Allow(id)
	rec.next(t)
	rec.endStreams()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		rec.next(t)
		if e.Stats().Streams >= 2 {
			break
		}
	}
	rec.mu.Lock()
	n := rec.streams
	rec.mu.Unlock()
	if s := e.Stats(); s.Streams < 2 || n < 2 {
		t.Fatalf("after the server ended the stream: client opened %d, server saw %d, want 2 or more", s.Streams, n)
	}
	if m := rec.next(t); len(m.GetBucketQuotaUsages()) != 1 {
		t.Fatalf("report on the new stream %v, want the bucket", m)
	}
}
