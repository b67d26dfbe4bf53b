// Package simulate is `envoy-rls simulate`: it replays a trace of
// requests (a CSV file or a seeded shape) through a limits file, deciding
// each request as the server would, and tells per rule how many requests
// were admitted and refused in each time bucket, as a table and an SVG
// chart. The decisions are the service's own (package rls) on the
// embedded store, both reading a clock that the replay sets to each
// request's timestamp (the traces are package trace's), so a trace of an hour replays in well under a
// second and decides exactly as an hour of that traffic would.
package simulate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/internal/trace"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// Series is one rule's counts, one element per bucket.
type Series struct {
	// Rule is the rule's label as the server's rls_decisions_total names
	// it: the limit's name, else its config path.
	Rule              string
	Admitted, Refused []int64
}

// Total returns the series' admitted and refused over the whole trace.
func (s Series) Total() (admitted, refused int64) {
	for i := range s.Admitted {
		admitted += s.Admitted[i]
		refused += s.Refused[i]
	}
	return admitted, refused
}

// Result is a replay's counts: per rule (sorted by label), per bucket of
// Bucket from Start.
type Result struct {
	Start   time.Time
	Bucket  time.Duration
	Buckets int
	Rules   []Series
	// Unmatched counts the requests whose descriptor no limit matched
	// (the service answers OK without counting them).
	Unmatched int64
}

// Outcomes of rls_decisions_total that refuse a request: the rest admit
// it (a shadow or quota-mode descriptor over its limit still passes, as
// the server lets it).
var refusing = []string{metrics.OutcomeOverLimit, metrics.OutcomeNeverFits, metrics.OutcomeFailedDeny}

// Run replays t through cfg's limits of domain and counts the decisions
// per rule in buckets of bucket, starting at the trace's start truncated
// to a bucket.
func Run(cfg *config.Config, domain string, t trace.Trace, bucket time.Duration) (*Result, error) {
	if bucket <= 0 {
		return nil, errors.New("the bucket must be positive")
	}
	if _, ok := cfg.Domains[domain]; !ok {
		return nil, fmt.Errorf("domain %q is not in the limits (domains: %s)", domain, domainNames(cfg))
	}
	if len(t.Requests) == 0 {
		return nil, errors.New("the trace has no requests")
	}
	r := newReplay(cfg, bucket, t.Start)
	defer r.store.Close() //nolint:errcheck // the embedded store's Close returns nil
	reqs := requests(domain, t.Sources)
	for i, q := range t.Requests {
		at := t.Start.Add(q.At)
		if err := r.decide(at, reqs[q.Source]); err != nil {
			return nil, fmt.Errorf("request %d (at %s, %s): %w", i+1, at.Format(time.RFC3339Nano), t.Sources[q.Source], err)
		}
	}
	r.flush()
	return r.result(), nil
}

// replay is one Run's service, store, clock and counts.
type replay struct {
	svc     *rls.Service
	store   *memory.Store
	metrics *metrics.Metrics
	// clock is the replay's time in microseconds since the epoch, read by
	// the store and the service alike.
	clock atomic.Int64
	// ctx is cancelled: a leaky bucket's shaping wait, which the service
	// sleeps after deciding and counting, returns at once.
	ctx context.Context

	start   time.Time
	bucket  time.Duration
	current int // the bucket the decisions since the last flush belong to
	// seen is rls_decisions_total at the last flush, by rule and outcome.
	seen  map[[2]string]float64
	rules map[string]*Series
	res   Result
}

func newReplay(cfg *config.Config, bucket time.Duration, first time.Time) *replay {
	r := &replay{metrics: metrics.New(), bucket: bucket, seen: map[[2]string]float64{}, rules: map[string]*Series{}}
	r.start = first.Truncate(bucket)
	r.clock.Store(first.UnixMicro())
	r.store = memory.New(memory.Options{Now: r.clock.Load, SweepInterval: -1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.ctx = ctx
	// rls.New fails only without a store or with a bad key prefix.
	r.svc, _ = rls.New(descriptors.NewIndex(cfg), rls.Options{
		Store:          r.store,
		StoreInProcess: true,
		Logger:         zap.NewNop(),
		Metrics:        r.metrics,
		Now:            func() time.Time { return time.UnixMicro(r.clock.Load()) },
	})
	return r
}

// requests are the request each source sends, built once: a source's
// requests differ only in their time.
func requests(domain string, sources []trace.Descriptor) []*rlsv3.RateLimitRequest {
	reqs := make([]*rlsv3.RateLimitRequest, len(sources))
	for i, src := range sources {
		d := &ratelimitv3.RateLimitDescriptor{}
		for _, e := range src {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: e.Key, Value: e.Value})
		}
		reqs[i] = &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{d}}
	}
	return reqs
}

// decide sets the clock to at, closing the buckets that time has left
// behind, and decides req.
func (r *replay) decide(at time.Time, req *rlsv3.RateLimitRequest) error {
	if b := int(at.Sub(r.start) / r.bucket); b != r.current {
		r.flush()
		r.current = b
	}
	r.clock.Store(at.UnixMicro())
	_, err := r.svc.ShouldRateLimit(r.ctx, req)
	if err != nil && status.Code(err) != codes.Canceled { // Canceled: a leaky bucket's wait, decided OK
		return errors.New(status.Convert(err).Message())
	}
	return nil
}

// flush adds the decisions counted since the last flush to the current
// bucket.
func (r *replay) flush() {
	r.res.Buckets = r.current + 1
	families, _ := r.metrics.Registry.Gather() // the registry holds only well-formed collectors
	for _, f := range families {
		if f.GetName() != "rls_decisions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var rule, outcome string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "rule":
					rule = l.GetValue()
				case "outcome":
					outcome = l.GetValue()
				}
			}
			k := [2]string{rule, outcome}
			n := int64(m.GetCounter().GetValue() - r.seen[k])
			r.seen[k] = m.GetCounter().GetValue()
			if n > 0 {
				r.count(rule, outcome, n)
			}
		}
	}
}

// count adds n decisions of outcome by rule to the current bucket.
func (r *replay) count(rule, outcome string, n int64) {
	if outcome == metrics.OutcomeNoLimit || rule == "" {
		r.res.Unmatched += n
		return
	}
	s := r.rules[rule]
	if s == nil {
		s = &Series{Rule: rule}
		r.rules[rule] = s
	}
	for len(s.Admitted) <= r.current {
		s.Admitted = append(s.Admitted, 0)
		s.Refused = append(s.Refused, 0)
	}
	if slices.Contains(refusing, outcome) {
		s.Refused[r.current] += n
	} else {
		s.Admitted[r.current] += n
	}
}

// result is the counts, every series as long as the trace.
func (r *replay) result() *Result {
	res := r.res
	res.Start, res.Bucket = r.start, r.bucket
	for _, s := range r.rules {
		res.Rules = append(res.Rules, *s)
	}
	slices.SortFunc(res.Rules, func(a, b Series) int { return strings.Compare(a.Rule, b.Rule) })
	res.Extend(res.Buckets)
	return &res
}

// Extend makes r at least buckets long, the buckets added empty: a trace
// that lasts longer than its last request (a shape's quiet end) shows
// its whole length.
func (r *Result) Extend(buckets int) {
	r.Buckets = max(r.Buckets, buckets)
	for i := range r.Rules {
		s := &r.Rules[i]
		for len(s.Admitted) < r.Buckets {
			s.Admitted = append(s.Admitted, 0)
			s.Refused = append(s.Refused, 0)
		}
	}
}

// domainNames lists cfg's domains for an error.
func domainNames(cfg *config.Config) string {
	var names []string
	for d := range cfg.Domains {
		names = append(names, d)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "none"
	}
	return fmt.Sprint(names)
}
