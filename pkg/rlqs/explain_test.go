package rlqs

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs/redisdemand"
)

func pathID(path string) []descriptors.Entry { return []descriptors.Entry{{Key: "path", Value: path}} }

// checkDivision checks that b lists as many clients as want has demands,
// with the demands they reported (-1: unknown), in any order, and shares
// that sum to no more than the limit, each with a token bucket of at most
// its share.
func checkDivision(t *testing.T, b Bucket, want ...float64) {
	t.Helper()
	if b.Outcome != OutcomeDivided || b.RatePerSecond != 100 || b.Strategy != "token_bucket" {
		t.Fatalf("outcome %s at %v/s, strategy %s; want divided at 100/s as token_bucket", b.Outcome, b.RatePerSecond, b.Strategy)
	}
	var got []float64
	sum, tbs := 0.0, 0.0
	for _, c := range b.Clients {
		d := -1.0
		if c.DemandPerSecond != nil {
			d = *c.DemandPerSecond
		}
		got = append(got, d)
		if c.TokenBucket == nil || c.TokenBucket.RatePerSecond > c.SharePerSecond+1e-9 {
			t.Errorf("client %s: token bucket %+v for a share of %v", c.ID, c.TokenBucket, c.SharePerSecond)
		}
		sum += c.SharePerSecond
		if c.TokenBucket != nil {
			tbs += c.TokenBucket.RatePerSecond
		}
	}
	sort.Float64s(got)
	sort.Float64s(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("demands %v, want %v", got, want)
	}
	if sum > b.RatePerSecond+1e-9 || math.Abs(sum-b.TotalPerSecond) > 1e-9 || math.Abs(tbs-b.TokenBucketsPerSecond) > 1e-9 {
		t.Fatalf("shares sum to %v (told %v), token buckets %v (told %v), limit %v", sum, b.TotalPerSecond, tbs, b.TokenBucketsPerSecond, b.RatePerSecond)
	}
}

// The clients connected to the instance, the demands they reported and
// their shares, as the instance divides the limit; and what it last sent.
func TestExplainEmbedded(t *testing.T) {
	svc := newService(t, Options{ReportInterval: 5 * time.Second})
	conn := serve(t, svc)
	small, big, first := dial(t, conn), dial(t, conn), dial(t, conn)
	small.report(usage{bucket: api(), allowed: 50, elapsed: 5 * time.Second})
	big.report(usage{bucket: api(), allowed: 400, denied: 100, elapsed: 5 * time.Second})
	first.report(usage{bucket: api(), allowed: 1})
	ctx := context.Background()
	b, err := svc.Explain(ctx, "edge", pathID("/api"))
	if err != nil {
		t.Fatal(err)
	}
	checkDivision(t, b, 10, 100, -1)
	if b.Store != "embedded" || b.Node != "path_/api" || !strings.Contains(b.Key, "path_/api") {
		t.Fatalf("store %s, node %s, key %q", b.Store, b.Node, b.Key)
	}
	for _, c := range b.Clients {
		if !c.Here || c.Instance != svc.instance || c.AssignedPerSecond == nil {
			t.Errorf("client %+v: want here, on %s, with what it was last sent", c, svc.instance)
		}
	}
	// Explaining records nothing: the demands are as they were.
	again, _ := svc.Explain(ctx, "edge", pathID("/api"))
	if len(again.Clients) != 3 || svc.Stats().Reports.Load() != 3 {
		t.Fatalf("a second explain found %d clients, %d reports", len(again.Clients), svc.Stats().Reports.Load())
	}
	var text bytes.Buffer
	if err := b.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"matched:    edge.path_/api", "clients:    3 live", "unknown", "of a limit of 100/s"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}

	// A client that leaves is gone from the explanation at once.
	first.leave()
	waitFor(t, func() bool { b, _ := svc.Explain(ctx, "edge", pathID("/api")); return len(b.Clients) == 2 })
}

// With Redis, every instance's clients, read by a third service that has
// none of its own (as `envoy-rls explain -redis-url` reads them), and by
// each instance, which knows its own.
func TestExplainShared(t *testing.T) {
	srv := redistest.Start(t)
	client := func() *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	// a reads the division at every report (its reports here come faster
	// than its refresh period), so that its part of the limit is known
	// from b's client on.
	a := newService(t, Options{ReportInterval: 5 * time.Second, Refresh: time.Nanosecond, Store: redisdemand.New(client(), "t:")})
	b := newService(t, Options{ReportInterval: 5 * time.Second, Store: redisdemand.New(client(), "t:")})
	reader := newService(t, Options{ReportInterval: 5 * time.Second, Store: redisdemand.New(client(), "t:")})
	ea, eb := dial(t, serve(t, a)), dial(t, serve(t, b))
	ea.report(usage{bucket: api(), allowed: 20, elapsed: 2 * time.Second})
	eb.report(usage{bucket: api(), allowed: 300, elapsed: time.Second})
	ctx := context.Background()
	for name, svc := range map[string]*Service{"reader": reader, "a": a, "b": b} {
		got, err := svc.Explain(ctx, "edge", pathID("/api"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Store != "shared" || !strings.HasPrefix(got.StoreKey, "t:rlqs:{") {
			t.Fatalf("%s: store %s at %q", name, got.Store, got.StoreKey)
		}
		checkDivision(t, got, 10, 300)
		here := 0
		for _, c := range got.Clients {
			if c.Here {
				here++
				if c.Instance != svc.instance || c.AssignedPerSecond == nil {
					t.Errorf("%s: client %+v here, without what it was sent", name, c)
				}
			}
			if c.SharePerSecond != map[bool]float64{true: 10, false: 90}[*c.DemandPerSecond == 10] {
				t.Errorf("%s: client %s demanding %v has a share of %v; want 10 and 90", name, c.ID, *c.DemandPerSecond, c.SharePerSecond)
			}
		}
		if want := map[string]int{"reader": 0, "a": 1, "b": 1}[name]; here != want {
			t.Errorf("%s: %d clients here, want %d", name, here, want)
		}
	}

	// Redis gone: an instance tells its own clients' shares of its last
	// known part of the limit, and why; the reader, with neither, fails.
	ea.report(usage{bucket: api(), allowed: 20, elapsed: 2 * time.Second}) // a holds its part
	srv.Stop()
	got, err := a.Explain(ctx, "edge", pathID("/api"))
	if err != nil || got.StoreError == "" || len(got.Clients) != 1 || got.Clients[0].SharePerSecond != 10 {
		t.Fatalf("a with Redis down: %v, %+v", err, got)
	}
	if _, err := reader.Explain(ctx, "edge", pathID("/api")); err == nil {
		t.Fatal("the reader explained a division with Redis down and no part of the limit")
	}
}

// Ids no limit divides say so, and what Envoy is sent.
func TestExplainUndivided(t *testing.T) {
	svc := newService(t, Options{ReportInterval: 5 * time.Second})
	ctx := context.Background()
	for _, tc := range []struct {
		domain   string
		id       []descriptors.Entry
		outcome  string
		strategy string
		node     string
	}{
		{"nowhere", pathID("/api"), OutcomeUnknownDomain, "ALLOW_ALL", ""},
		{"edge", pathID("/nope"), OutcomeNoMatch, "ALLOW_ALL", ""},
		{"edge", pathID("/login"), OutcomeNoLimit, "ALLOW_ALL", "path_/login"},
		{"edge", pathID("/free"), OutcomeUnlimited, "ALLOW_ALL", "path_/free"},
		{"edge", pathID("/closed"), OutcomeDeny, "DENY_ALL", "path_/closed"},
		{"edge", nil, OutcomeNoMatch, "ALLOW_ALL", ""},
	} {
		b, err := svc.Explain(ctx, tc.domain, tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if b.Outcome != tc.outcome || b.Strategy != tc.strategy || b.Node != tc.node || len(b.Clients) != 0 {
			t.Errorf("%s %v: outcome %s, strategy %s, node %q, %d clients; want %s, %s, %q", tc.domain, tc.id, b.Outcome, b.Strategy, b.Node, len(b.Clients), tc.outcome, tc.strategy, tc.node)
		}
		var text bytes.Buffer
		_ = b.WriteText(&text)
		if !strings.Contains(text.String(), tc.strategy) {
			t.Errorf("%s %v: the text does not say %s:\n%s", tc.domain, tc.id, tc.strategy, text.String())
		}
	}
	// A shadow-mode limit is answered ALLOW_ALL, and divided all the same:
	// its clients are listed with what they would have had.
	e := dial(t, serve(t, svc))
	e.report(usage{bucket: map[string]string{"path": "/shadow"}, allowed: 20, elapsed: time.Second})
	b, _ := svc.Explain(ctx, "edge", pathID("/shadow"))
	if b.Outcome != OutcomeShadow || b.Strategy != "ALLOW_ALL" || b.RatePerSecond != 5 || len(b.Clients) != 1 || b.Clients[0].SharePerSecond != 5 {
		t.Fatalf("shadow: %+v", b)
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{time.Second: "1s", 10 * time.Second: "10s", time.Hour: "1h", 90 * time.Second: "1m30s", 24 * time.Hour: "24h", 20 * time.Minute: "20m"} {
		if got := shortDuration(d); got != want {
			t.Errorf("%v: %q, want %q", d, got, want)
		}
	}
}
