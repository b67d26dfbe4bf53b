package rlqs

import (
	"cmp"
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs/internal/share"
)

// client is the state of one stream: one Envoy, one domain. Only the
// stream's goroutine touches it.
type client struct {
	id      string
	buckets map[string]*bucket // by bucket key, at most Options.MaxStreamBuckets
	swept   time.Time          // when buckets were last searched for forgotten ones
	group   *group             // nil when the stream is a client of its own (group.go)
}

// bucket is what one client was last told about one bucket.
type bucket struct {
	share     float64   // requests per second last assigned, before rounding
	idleSince time.Time // the last report of requests
	seen      time.Time // the last report
	divided   bool      // the bucket's demand is in the stores
	dropped   bool      // no longer the client's (abandoned earlier in a report)
	rule      string    // the metrics' label: domain and place in the tree
}

// Stats are the service's counts, read by the metrics: the streams and
// buckets open now, and totals since the start.
type Stats struct {
	Streams, Buckets                           atomic.Int64
	Reports, NoMatch, StoreFailures            atomic.Int64
	TokenBuckets, AllowAll, DenyAll, Abandoned atomic.Int64
	// Silent and Evicted are the streams closed for want of reports:
	// after SilentAfter, or by Evict.
	Silent, Evicted atomic.Int64
	// Unreported counts the buckets dropped because their stream had not
	// reported them for IdleAfter; OverStream and OverAll the reports of a
	// bucket answered undivided because its stream, or the instance, held
	// as many buckets as it may.
	Unreported, OverStream, OverAll atomic.Int64
}

// Stats returns the service's live counts.
func (s *Service) Stats() *Stats { return &s.stats }

func (s *Service) answer(ctx context.Context, c *client, msg *rlqspb.RateLimitQuotaUsageReports, now time.Time) *rlqspb.RateLimitQuotaResponse {
	s.stats.Reports.Add(1)
	s.sweep(ctx, c, now)
	ix := s.index()
	usages := msg.GetBucketQuotaUsages()
	items := make([]item, len(usages))
	var path []*descriptors.Node
	var entries, ordered []descriptors.Entry
	for i, u := range usages {
		entries = entries[:0]
		for k, v := range u.GetBucketId().GetBucket() {
			entries = append(entries, descriptors.Entry{Key: k, Value: v})
		}
		end, _, p, o := ix.MatchSet(msg.GetDomain(), entries, path[:0], ordered[:0])
		path, ordered = p, o
		items[i] = item{u: u}
		if end != nil && len(end.Descriptor.Rules) > 0 {
			items[i].key = bucketKey(msg.GetDomain(), end, path, ordered)
			items[i].rate, items[i].kind = limitRate(end, now)
			items[i].b = s.hold(c, items[i].key, msg.GetDomain(), end, now)
			s.caveats.note(s.opts.Logger, ix, msg.GetDomain(), end)
		}
	}
	rec := s.record(ctx, c, items, now)
	resp := &rlqspb.RateLimitQuotaResponse{BucketAction: make([]*rlqspb.RateLimitQuotaResponse_BucketAction, len(items))}
	for i, it := range items {
		action := s.act(ctx, c, it, rec, now)
		action.BucketId = it.u.GetBucketId()
		resp.BucketAction[i] = action
	}
	return resp
}

// item is one bucket of a report, matched.
type item struct {
	u    *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage
	key  string // empty when no limit matches
	rate float64
	kind kind
	b    *bucket // the client's; nil when no limit matches or over a bound
}

func (it item) divides() bool {
	return it.b != nil && (it.kind == divided || it.kind == shadowed)
}

// hold returns c's bucket of key, made if it is new; nil when c holds
// Options.MaxStreamBuckets buckets already, or the instance
// Options.MaxBuckets, so that neither one stream reporting ever new bucket
// ids nor many streams can grow the memory without bound. A bucket not
// held is answered undivided (act), and held at a later report once there
// is room.
func (s *Service) hold(c *client, key, domain string, end *descriptors.Node, now time.Time) *bucket {
	if b := c.buckets[key]; b != nil {
		b.seen = now
		return b
	}
	if len(c.buckets) >= s.opts.MaxStreamBuckets {
		s.stats.OverStream.Add(1)
		return nil
	}
	if s.stats.Buckets.Add(1) > int64(s.opts.MaxBuckets) {
		s.stats.Buckets.Add(-1)
		s.stats.OverAll.Add(1)
		return nil
	}
	b := &bucket{idleSince: now, seen: now, rule: domain + "." + end.Path}
	c.buckets[key] = b
	return b
}

// sweep drops, at most once a report interval, the buckets c has not
// reported for IdleAfter: Envoy reports every bucket it holds at every
// interval, so such a bucket is one it no longer holds (an abandon
// action, a restart of its filter), and only a sweep would ever drop it.
func (s *Service) sweep(ctx context.Context, c *client, now time.Time) {
	if now.Sub(c.swept) < s.opts.ReportInterval {
		return
	}
	c.swept = now
	for key, b := range c.buckets {
		if now.Sub(b.seen) >= s.opts.IdleAfter {
			s.drop(ctx, c, key, b)
			s.stats.Unreported.Add(1)
		}
	}
}

func (it item) demand() share.Demand {
	return share.Measure(it.u.GetNumRequestsAllowed(), it.u.GetNumRequestsDenied(), it.u.GetTimeElapsed().AsDuration())
}

// recorded are the divided buckets of one report: the client's demand of
// each, and the division it is divided by (or the store's error at the
// write).
type recorded struct {
	at      map[string]int // bucket key: index in demands and divs
	demands []share.Demand
	divs    []divisionOf
	err     error
	client  string    // the client divided: the stream, or its group
	parts   []float64 // of a group's share, the stream's; nil: all of it
}

// record notes the client's demand of every divided bucket of a report, in
// one write to each store, and gets each bucket's division: read afresh
// only for the buckets whose division is due.
func (s *Service) record(ctx context.Context, c *client, items []item, now time.Time) *recorded {
	r := &recorded{at: make(map[string]int), client: c.divided()}
	var keys []string
	var wants []want
	for _, it := range items {
		if !it.divides() {
			continue
		}
		if _, dup := r.at[it.key]; !dup {
			r.at[it.key] = len(keys)
			keys = append(keys, it.key)
			r.demands = append(r.demands, it.demand())
			wants = append(wants, want{key: it.key, client: r.client, rate: it.rate, joined: !it.b.divided})
		}
	}
	if len(keys) == 0 {
		return r
	}
	if c.group != nil {
		r.parts, r.err = c.group.record(ctx, s, c, keys, r.demands)
	} else {
		r.err = s.recordAll(ctx, c.id, keys, r.demands)
	}
	r.divs = s.divisions(ctx, wants, now)
	return r
}

// act decides one bucket of one report. A bucket over a bound (it.b nil)
// is answered as if its Envoy were alone: the limit's whole rate, or its
// blanket rule, kept nowhere. That is the middle of the three answers an
// operator could want there: DENY_ALL would refuse an honest Envoy's new
// buckets (and let whoever fills a stream's bound shut out the rest of
// that Envoy's clients), and ALLOW_ALL, like sending no action and
// leaving Envoy at its no_assignment_behavior, would let a bucket past
// the bound escape its limit; the whole limit holds each such bucket to
// its rate on each Envoy, at most the limit once more per Envoy over the
// bound.
func (s *Service) act(ctx context.Context, c *client, it item, rec *recorded, now time.Time) *rlqspb.RateLimitQuotaResponse_BucketAction {
	key, u, b := it.key, it.u, it.b
	if key == "" {
		s.stats.NoMatch.Add(1)
		s.stats.AllowAll.Add(1)
		return blanket(typepb.RateLimitStrategy_ALLOW_ALL, s.opts.NoMatchTTL)
	}
	switch {
	case b == nil:
	case b.dropped:
		// Another bucket id of the report with the same key was abandoned.
		s.stats.Abandoned.Add(1)
		return abandon()
	case share.Requests(u.GetNumRequestsAllowed(), u.GetNumRequestsDenied()) > 0:
		b.idleSince = now
	case now.Sub(b.idleSince) >= s.opts.IdleAfter:
		s.drop(ctx, c, key, b)
		s.stats.Abandoned.Add(1)
		return abandon()
	}
	ttl := share.TTL(s.opts.AssignmentTTL, s.opts.ReportInterval)
	rate, kind := it.rate, it.kind
	switch kind {
	case allowAll:
		s.stats.AllowAll.Add(1)
		return blanket(typepb.RateLimitStrategy_ALLOW_ALL, ttl)
	case denyAll:
		s.stats.DenyAll.Add(1)
		return blanket(typepb.RateLimitStrategy_DENY_ALL, ttl)
	}
	var tb share.Bucket
	var ok bool
	if b != nil {
		tb, ok = s.bucketFor(c.id, key, b, rate, rec)
	} else {
		tb, ok = s.opts.Shape.Tokens(rate)
	}
	switch {
	case kind == shadowed:
		// What it would have assigned is in the per-rule metrics.
		s.stats.AllowAll.Add(1)
		return blanket(typepb.RateLimitStrategy_ALLOW_ALL, ttl)
	case !ok:
		s.stats.DenyAll.Add(1)
		return blanket(typepb.RateLimitStrategy_DENY_ALL, ttl)
	}
	s.stats.TokenBuckets.Add(1)
	return assign(&typepb.RateLimitStrategy{Strategy: &typepb.RateLimitStrategy_TokenBucket{TokenBucket: &typepb.TokenBucket{
		MaxTokens:     tb.MaxTokens,
		TokensPerFill: wrapperspb.UInt32(tb.TokensPerFill),
		FillInterval:  fillInterval(tb.FillInterval),
	}}}, ttl)
}

// fillInterval is a bucket's whole-second fill interval as Envoy is sent
// it: the seconds, and the same number again in nanoseconds. Envoy fills
// at whole seconds (it truncates the nanoseconds away), but some of its
// versions tell whether a new assignment is the bucket they hold by
// max_tokens, tokens_per_fill and the fill interval's nanoseconds alone:
// two buckets differing only in their seconds (3 tokens every 1 s, 3
// every 2 s) would be taken as one, and a share that halved would go on
// being enforced at the old rate. Repeating the seconds in the
// nanoseconds makes every distinct bucket differ where those versions
// look.
func fillInterval(d time.Duration) *durationpb.Duration {
	secs := int64(d / time.Second)
	return &durationpb.Duration{Seconds: secs, Nanos: int32(secs % 1_000_000_000)}
}

// bucketFor divides rate for client id's bucket b and notes the token
// bucket that enforces its share in the per-rule totals; ok is false when
// the share is nothing.
func (s *Service) bucketFor(id, key string, b *bucket, rate float64, rec *recorded) (_ share.Bucket, ok bool) {
	next := s.divide(key, rate, rec)
	b.divided = true
	b.share = share.Steady(b.share, next, s.opts.Band)
	tb, ok := s.opts.Shape.Tokens(b.share)
	if ok {
		s.rules.set(b.rule, id, key, float64(tb.TokensPerFill)/tb.FillInterval.Seconds(), rate)
	}
	return tb, ok
}

// divide returns this client's share of rate (of its group's share, its
// part): max-min fair over every live
// client of the bucket in the shared store as last read, with this
// client's own demand as it reports it now; or, with the store out of
// reach, over this instance's own clients within the part of the limit
// this instance held at the last good read.
func (s *Service) divide(key string, rate float64, rec *recorded) float64 {
	i := rec.at[key]
	d := rec.divs[i]
	if err := cmp.Or(rec.err, d.err); err != nil {
		s.stats.StoreFailures.Add(1)
		s.mu.Lock()
		now := s.opts.Now()
		if now.Sub(s.failedLog) >= s.opts.ReportInterval {
			s.failedLog = now
			s.opts.Logger.Warn("rlqs: demand store unreachable, dividing this instance's last known part of each limit among its own clients", zap.Error(err))
		}
		s.mu.Unlock()
	}
	v := d.snap.Share(rate*d.part, s.opts.Floor, rec.client, rec.demands[i])
	if rec.parts != nil {
		v *= rec.parts[i]
	}
	return v
}

// close gives back every share of a stream that ended.
func (s *Service) close(c *client) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for key, b := range c.buckets {
		s.drop(ctx, c, key, b)
	}
}

func (s *Service) drop(ctx context.Context, c *client, key string, b *bucket) {
	delete(c.buckets, key)
	b.dropped = true
	s.stats.Buckets.Add(-1)
	if !b.divided {
		return
	}
	s.rules.drop(b.rule, c.id, key)
	if c.group != nil {
		c.group.leave(ctx, s, c, key)
	} else {
		s.forget(ctx, key, c.id)
	}
	// After the store forgot: the next read does not find the entry.
	s.release(key)
}

type kind int

const (
	divided kind = iota
	allowAll
	denyAll
	shadowed // divided for the metrics, answered ALLOW_ALL
)

// limitRate is the rate (requests per second) of the limits at end: the
// tightest of its rules. An unlimited rule allows all; a rule of zero
// requests denies all, except on a shadow-mode descriptor, which allows all
// and is divided only for the metrics.
func limitRate(end *descriptors.Node, now time.Time) (float64, kind) {
	rate, k := rulesRate(end, now)
	switch {
	case !end.Descriptor.ShadowMode:
		return rate, k
	case k == divided:
		return rate, shadowed
	}
	return 0, allowAll
}

func rulesRate(end *descriptors.Node, now time.Time) (float64, kind) {
	rate := -1.0
	for _, r := range end.Descriptor.Rules {
		if r.Unlimited {
			return 0, allowAll
		}
		if unenforced(r) {
			continue
		}
		if r.Limit.Requests == 0 {
			return 0, denyAll
		}
		v := float64(r.Limit.Requests) / periodSeconds(r.Limit, now)
		if rate < 0 || v < rate {
			rate = v
		}
	}
	if rate < 0 {
		// Every rule is one RLQS does not enforce (concurrency.go).
		return 0, allowAll
	}
	return rate, divided
}

// bucketKey names the counter a bucket is divided under: the domain, the
// rule's place in the tree, and the values of the bare keys on the way
// (one counter per distinct value, as for RLS); exact and wildcard values
// are in the place already.
func bucketKey(domain string, end *descriptors.Node, path []*descriptors.Node, ordered []descriptors.Entry) string {
	var b strings.Builder
	b.WriteString(domain)
	b.WriteByte(0)
	b.WriteString(end.Path)
	for i, n := range path {
		if n.Descriptor.Value == "" {
			b.WriteByte(0)
			b.WriteString(ordered[i].Value)
		}
	}
	return b.String()
}

func abandon() *rlqspb.RateLimitQuotaResponse_BucketAction {
	return &rlqspb.RateLimitQuotaResponse_BucketAction{BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction_{
		AbandonAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction{}}}
}

func blanket(r typepb.RateLimitStrategy_BlanketRule, ttl time.Duration) *rlqspb.RateLimitQuotaResponse_BucketAction {
	return assign(&typepb.RateLimitStrategy{Strategy: &typepb.RateLimitStrategy_BlanketRule_{BlanketRule: r}}, ttl)
}

func assign(st *typepb.RateLimitStrategy, ttl time.Duration) *rlqspb.RateLimitQuotaResponse_BucketAction {
	return &rlqspb.RateLimitQuotaResponse_BucketAction{BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
		QuotaAssignmentAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
			AssignmentTimeToLive: durationpb.New(ttl),
			RateLimitStrategy:    st,
		}}}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }
