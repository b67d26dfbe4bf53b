package rlqs

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A stream that sends no report for SilentAfter is closed, and counted;
// one that reports within it stays.
func TestSilentStreamClosed(t *testing.T) {
	svc := newService(t, Options{ReportInterval: 200 * time.Millisecond, SilentAfter: time.Second})
	conn := serve(t, svc)
	silent, live := dial(t, conn), dial(t, conn)
	silent.report(usage{bucket: api(), allowed: 1, elapsed: time.Second})
	for range 7 {
		live.report(usage{bucket: api(), allowed: 1, elapsed: 200 * time.Millisecond})
		time.Sleep(200 * time.Millisecond)
	}
	_, err := silent.stream.Recv()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a stream silent for 1.4s of SilentAfter 1s: %v, want DEADLINE_EXCEEDED", err)
	}
	live.report(usage{bucket: api(), allowed: 1, elapsed: 200 * time.Millisecond})
	if got := svc.Stats().Silent.Load(); got != 1 {
		t.Errorf("Silent %d, want 1", got)
	}
	waitFor(t, func() bool { return svc.Stats().Streams.Load() == 1 })
}

// Evict closes the stream silent longest, once it has been silent for two
// report intervals, and none before.
func TestEvictTheLongestSilent(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	svc := newService(t, Options{ReportInterval: time.Second, SilentAfter: time.Hour, Now: clk.Now})
	conn := serve(t, svc)
	older, newer := dial(t, conn), dial(t, conn)
	older.report(usage{bucket: api(), allowed: 1, elapsed: time.Second})
	clk.Add(time.Second)
	newer.report(usage{bucket: api(), allowed: 1, elapsed: time.Second})
	clk.Add(time.Second / 2)
	if done := svc.Evict(); done != nil {
		t.Fatal("Evict closed a stream silent for 1.5 report intervals, want none")
	}
	clk.Add(time.Second)
	done := svc.Evict()
	if done == nil {
		t.Fatal("Evict closed nothing with a stream silent for 2.5 report intervals")
	}
	<-done
	if _, err := older.stream.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("the longest-silent stream, evicted: %v, want RESOURCE_EXHAUSTED", err)
	}
	if done := svc.Evict(); done != nil {
		t.Error("Evict closed the stream silent for 1.5 intervals")
	}
	newer.report(usage{bucket: api(), allowed: 1, elapsed: time.Second})
	if got := svc.Stats().Evicted.Load(); got != 1 {
		t.Errorf("Evicted %d, want 1", got)
	}
}
