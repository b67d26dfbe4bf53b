// Package rls is Envoy's RateLimitService v3 over the limits of a loaded
// config and a store: it validates a request, matches each descriptor to its
// limit, decides all of them in one store call and answers one status per
// descriptor, in order.
package rls

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/metrics"
)

// Bounds on one request. Envoy's route actions produce a handful of
// descriptors with a few entries each; anything far larger is a bug or an
// attack, refused with InvalidArgument before any work.
const (
	MaxDescriptors = 64
	MaxEntries     = 32
)

// Options configure a Service.
type Options struct {
	// Store decides the hits. Required.
	Store limits.Store
	// StoreTimeout bounds one store call; the request's own deadline, if
	// sooner, wins. Zero means 50 ms.
	StoreTimeout time.Duration
	// StoreInProcess says that the store decides in process, never waiting
	// on I/O (the embedded store): its calls need no bound, and a timer per
	// call would cost more than the decision.
	StoreInProcess bool
	// FailureMode applies to limits that do not set their own.
	FailureMode config.FailureMode
	// MaxDelay bounds every leaky bucket wait (-max-delay); zero means
	// config.DefaultMaxDelay.
	MaxDelay time.Duration
	// Local decides the descriptors whose failure mode is `local` while
	// Store fails: this instance's embedded store. Nil makes `local` act as
	// `allow`.
	Local   limits.Store
	Logger  *zap.Logger
	Metrics *metrics.Metrics

	// KeyPrefix starts every store key (-redis-key-prefix); empty means
	// descriptors.KeyPrefix.
	KeyPrefix string
	// HashValues keys counters by the SHA-256 of each descriptor value
	// instead of the value (-hash-values), so that neither the store nor a
	// log line holds what a caller sent.
	HashValues bool
	// RefuseNegativeHits answers InvalidArgument to a request with a
	// descriptor marked is_negative_hits (-negative-hits=false): a caller
	// that is not trusted must not refund its own hits.
	RefuseNegativeHits bool
	// ShadowMode turns every OVER_LIMIT into OK, as each limit's
	// shadow_mode does (-shadow-mode): decisions are made and counted as
	// shadow_over_limit, nothing is refused. It covers failure_mode deny
	// too; failure_mode error still answers UNAVAILABLE.
	ShadowMode bool

	// ResponseHeaders adds the IETF RateLimit-Policy and RateLimit headers
	// (and Retry-After on OVER_LIMIT) to every answer's
	// response_headers_to_add (-response-headers); see headers.go.
	ResponseHeaders bool
	// JSON429Body gives an OVER_LIMIT answer a small JSON raw_body and a
	// content-type: application/json header (-json-429-body).
	JSON429Body bool

	// OnConfigChange, when set, is called by SetIndex after the new config
	// is in effect: a cache of decisions (overlimit.Cache.Clear) forgets
	// what the old config decided.
	OnConfigChange func()
}

// Service implements RateLimitService. It is safe for concurrent use; the
// config is swapped atomically with SetIndex.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer

	store        limits.Store
	local        limits.Store
	maxDelay     time.Duration
	storeTimeout time.Duration
	deadlines    *storeDeadlines // bound store calls by storeTimeout (deadline.go)
	inProcess    bool
	failureMode  config.FailureMode
	log          *zap.Logger
	metrics      *metrics.Metrics
	index        atomic.Pointer[descriptors.Index]

	keyPrefix          string
	hashValues         bool
	refuseNegativeHits bool
	shadowMode         bool

	// Headers of the service's own (headers.go).
	responseHeaders bool
	json429Body     bool

	onConfigChange func()
}

var _ rlsv3.RateLimitServiceServer = (*Service)(nil)

// New returns a Service that answers with ix.
func New(ix *descriptors.Index, opts Options) (*Service, error) {
	if opts.Store == nil {
		return nil, errors.New("rls: a store is required")
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = config.DefaultMaxDelay
	}
	if opts.StoreTimeout <= 0 {
		opts.StoreTimeout = 50 * time.Millisecond
	}
	if opts.FailureMode == config.FailureModeDefault {
		opts.FailureMode = config.FailAllow
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.KeyPrefix != "" {
		if err := descriptors.CheckKeyPrefix(opts.KeyPrefix); err != nil {
			return nil, fmt.Errorf("rls: %w", err)
		}
	}
	s := &Service{
		store:        opts.Store,
		local:        opts.Local,
		maxDelay:     opts.MaxDelay,
		storeTimeout: opts.StoreTimeout,
		deadlines:    newStoreDeadlines(opts.StoreTimeout),
		inProcess:    opts.StoreInProcess,
		failureMode:  opts.FailureMode,
		log:          opts.Logger,
		metrics:      opts.Metrics,

		keyPrefix:          opts.KeyPrefix,
		hashValues:         opts.HashValues,
		refuseNegativeHits: opts.RefuseNegativeHits,
		shadowMode:         opts.ShadowMode,

		responseHeaders: opts.ResponseHeaders,
		json429Body:     opts.JSON429Body,

		onConfigChange: opts.OnConfigChange,
	}
	s.index.Store(ix)
	return s, nil
}

// SetIndex swaps the config in effect; requests in flight finish with the
// one they started with. Options.OnConfigChange runs after the swap.
func (s *Service) SetIndex(ix *descriptors.Index) {
	s.index.Store(ix)
	if s.onConfigChange != nil {
		s.onConfigChange()
	}
}

// Index returns the config in effect.
func (s *Service) Index() *descriptors.Index { return s.index.Load() }

// item is the plan for one request descriptor.
type item struct {
	domainLabel string
	node        *descriptors.Node
	// rules are the limits that apply, all of which must allow: one from
	// rate_limit or an override, several from rate_limits. Empty: none.
	rules     []*config.Rule
	unlimited bool
	cost      int64
	// first is the index of the item's first hit in the store batch; its
	// hits are hits[first : first+len(rules)].
	first int
	// keyEntries are the entries its counter keys name: the request's, with
	// the pattern for a value that a share_threshold wildcard took.
	keyEntries []descriptors.Entry
	// report is the index in rules of the limit the status reports.
	report int
}

// ShouldRateLimit decides every descriptor of req.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	start := time.Now()
	resp, err := s.decide(ctx, req)
	code := "invalid"
	switch {
	case err == nil && resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT:
		code = "over_limit"
	case err == nil:
		code = "ok"
	case status.Code(err) == codes.Unavailable:
		code = "unavailable"
	}
	s.metrics.Request(code, time.Since(start))
	return resp, err
}

// delayMargin is kept between a leaky bucket's wait and the request's
// deadline, for the answer to travel back.
const delayMargin = 2 * time.Millisecond

func (s *Service) decide(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if err := validate(req); err != nil {
		return nil, err
	}
	if s.refuseNegativeHits {
		for i, d := range req.Descriptors {
			if d.GetIsNegativeHits() {
				return nil, status.Errorf(codes.InvalidArgument, "descriptor %d: is_negative_hits is not accepted (-negative-hits=false)", i)
			}
		}
	}
	ix := s.index.Load()
	domain := req.GetDomain()
	sc := scratchPool.Get().(*scratch)
	defer sc.put()
	items := sc.itemsOf(len(req.Descriptors))
	entries, path, hits := sc.entries[:0], sc.path[:0], sc.hits[:0]
	defer func() { sc.entries, sc.path, sc.hits = entries, path, hits }()
	var replaced map[string]bool

	for i, d := range req.Descriptors {
		// Every descriptor's entries stay in entries, one after another: a
		// later append may move the array, but a slice taken before still
		// reads the same entries.
		lo := len(entries)
		for _, e := range d.Entries {
			entries = append(entries, descriptors.Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		it := &items[i]
		node, known, p := ix.Match(domain, entries[lo:], path[:0])
		path = p
		if !known {
			it.domainLabel = metrics.UnknownDomain
			continue
		}
		it.domainLabel = domain
		it.node = node
		// Counter keys name what the walk matched: a share_threshold
		// wildcard shares one counter for all the values it matches.
		it.keyEntries = entries[lo:]
		if node != nil {
			it.rules = node.Descriptor.Rules
			it.keyEntries = sharedEntries(it.keyEntries, path)
		}
		if o := d.GetLimit(); o != nil {
			var matched *config.Rule
			if len(it.rules) > 0 {
				matched = it.rules[0]
			}
			r, err := overrideRule(matched, o)
			if err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "descriptor %d: %v", i, err)
			}
			it.rules = []*config.Rule{r}
		}
		if len(it.rules) == 1 && it.rules[0].Unlimited {
			it.unlimited = true
		}
		for _, r := range it.rules {
			for _, name := range r.Replaces {
				if replaced == nil {
					replaced = make(map[string]bool)
				}
				replaced[name] = true
			}
		}
		it.cost = cost(req, d)
	}
	// A limit that another matched limit replaces does not apply.
	if replaced != nil {
		for i := range items {
			items[i].rules = withoutReplaced(items[i].rules, replaced)
		}
	}

	// A leaky bucket's wait never outlives the request's deadline, nor
	// -max-delay (a descriptor limit override can slow a bucket down far
	// beyond what its file allows).
	maxDelay := s.maxDelay
	if dl, ok := ctx.Deadline(); ok {
		maxDelay = min(maxDelay, max(time.Until(dl)-delayMargin, time.Microsecond))
	}
	for i := range items {
		it := &items[i]
		if it.unlimited || len(it.rules) == 0 {
			continue
		}
		it.first = len(hits)
		for j, r := range it.rules {
			key, tag := s.storeKey(domain, it.keyEntries, r.Limit, listIndex(it, r, j))
			hits = append(hits, limits.Hit{
				Key:      key,
				Tag:      tag,
				Limit:    r.Limit,
				Cost:     it.cost,
				MaxDelay: maxDelay,
				Joint:    j < len(it.rules)-1,
			})
		}
	}

	results := sc.resultsOf(len(hits))
	if len(hits) > 0 {
		t0 := time.Now()
		// An in-process store needs no bound, and a request whose own
		// deadline comes before -store-timeout no context of its own
		// (Envoy's usual 20 ms against 50 ms). Any other call shares a
		// bound with the calls that start about when it does.
		if dl, ok := ctx.Deadline(); s.inProcess || ok && dl.Sub(t0) <= s.storeTimeout {
			s.store.Decide(ctx, hits, results)
		} else {
			s.store.Decide(s.deadlines.context(t0), hits, results)
		}
		s.metrics.StoreCall(time.Since(t0))
		if err := s.fallBack(ctx, items, hits, results); err != nil {
			return nil, err
		}
	}
	resp, delay := s.respond(domain, items, results)
	s.addHeaders(resp) // -response-headers, -json-429-body (headers.go)
	if delay > 0 {
		// A leaky bucket shapes: the answer goes out at the request's turn.
		// The store refused any turn beyond the deadline; a store call that
		// was slower than expected shortens the wait rather than letting the
		// call time out.
		if dl, ok := ctx.Deadline(); ok {
			delay = min(delay, time.Until(dl)-delayMargin)
		}
		if err := sleep(ctx, delay); err != nil {
			return nil, status.FromContextError(err).Err()
		}
	}
	return resp, nil
}

// scratch holds the slices one decision needs, reused across requests (a
// sync.Pool) so that the decision path allocates only the key strings and
// the response. Nothing in it outlives the request: the store must not keep
// hits or results after Decide returns.
type scratch struct {
	items   []item
	entries []descriptors.Entry
	path    []*descriptors.Node
	hits    []limits.Hit
	results []limits.Result
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxPooled bounds the slices kept for reuse (in elements), so that one huge
// request does not pin its memory.
const maxPooled = 4 * MaxDescriptors

func (sc *scratch) itemsOf(n int) []item {
	if cap(sc.items) < n {
		sc.items = make([]item, n)
	}
	sc.items = sc.items[:n]
	clear(sc.items)
	return sc.items
}

func (sc *scratch) resultsOf(n int) []limits.Result {
	if cap(sc.results) < n {
		sc.results = make([]limits.Result, n)
	}
	sc.results = sc.results[:n]
	clear(sc.results)
	return sc.results
}

// put drops what the slices point to (keys, rules, config nodes, errors)
// and returns sc to the pool.
func (sc *scratch) put() {
	clear(sc.items)
	clear(sc.entries[:cap(sc.entries)])
	clear(sc.path[:cap(sc.path)])
	clear(sc.hits[:cap(sc.hits)])
	clear(sc.results)
	if cap(sc.items) > maxPooled || cap(sc.entries) > maxPooled || cap(sc.path) > maxPooled ||
		cap(sc.hits) > maxPooled || cap(sc.results) > maxPooled {
		return
	}
	scratchPool.Put(sc)
}

// storeKey names the counter of limit l, the index-th of its descriptor's
// limits, for entries (after sharedEntries), and returns its hash tag's hash
// (limits.Hit.Tag). Explain names keys with it too.
func (s *Service) storeKey(domain string, entries []descriptors.Entry, l limits.Limit, index int) (string, uint64) {
	return descriptors.KeyTag(descriptors.KeyInput{Domain: domain, Entries: entries, Limit: l, Index: index,
		Prefix: s.keyPrefix, HashValues: s.hashValues})
}

// listIndex is r's place in its descriptor's rate_limits list, which its
// key names: the place in the file, not in it.rules, from which replaced
// limits are gone (else a limit would change counters, or share a replaced
// sibling's, with the other descriptors of a request). j, r's place in
// it.rules, for an override.
func listIndex(it *item, r *config.Rule, j int) int {
	if it.node != nil {
		for i, fr := range it.node.Descriptor.Rules {
			if fr == r {
				return i
			}
		}
	}
	return j
}

func withoutReplaced(rules []*config.Rule, replaced map[string]bool) []*config.Rule {
	for i, r := range rules {
		if r.Name != "" && replaced[r.Name] {
			kept := append([]*config.Rule(nil), rules[:i]...)
			for _, r := range rules[i+1:] {
				if r.Name == "" || !replaced[r.Name] {
					kept = append(kept, r)
				}
			}
			return kept
		}
	}
	return rules
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// respond builds the statuses, and returns how long a leaky bucket asks the
// answer to wait: nothing when the request is refused anyway.
func (s *Service) respond(domain string, items []item, results []limits.Result) (*rlsv3.RateLimitResponse, time.Duration) {
	resp := &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses:    make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(items)),
	}
	var quotaViolations []any
	var delay time.Duration
	for i := range items {
		it := &items[i]
		st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
		resp.Statuses[i] = st
		switch {
		case it.unlimited:
			s.metrics.Decision(it.domainLabel, ruleLabel(it), metrics.OutcomeUnlimited)
			continue
		case len(it.rules) == 0:
			s.metrics.Decision(it.domainLabel, ruleLabel(it), metrics.OutcomeNoLimit)
			continue
		}
		group := results[it.first : it.first+len(it.rules)]
		if err := groupError(group); err != nil {
			s.onStoreError(domain, it, st, err)
			if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
				resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
			}
			continue
		}
		allowed := true
		for _, r := range group {
			allowed = allowed && r.Allowed
		}
		it.report = reported(group, allowed)
		res := group[it.report]
		st.CurrentLimit = currentLimit(it.rules[it.report])
		st.LimitRemaining = clampUint32(res.Remaining)
		st.DurationUntilReset = durationpb.New(resetOf(res))
		outcome := metrics.OutcomeOK
		if allowed {
			for _, r := range group {
				delay = max(delay, r.Delay)
			}
		} else {
			var shadow, quota bool
			if it.node != nil {
				shadow, quota = it.node.Descriptor.ShadowMode, it.node.Descriptor.QuotaMode
			}
			switch {
			case shadow || s.shadowMode:
				outcome = metrics.OutcomeShadowOver
			case quota:
				outcome = metrics.OutcomeQuotaOver
				quotaViolations = append(quotaViolations, float64(i))
			default:
				outcome = metrics.OutcomeOverLimit
				if it.cost > it.rules[it.report].Limit.MaxCost() {
					outcome = metrics.OutcomeNeverFits
				}
				st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
				resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
			}
		}
		s.metrics.Decision(it.domainLabel, ruleLabel(it), outcome)
	}
	if quotaViolations != nil {
		md, err := structpb.NewStruct(map[string]any{
			"domain":              domain,
			"quotaModeEnabled":    true,
			"quotaModeViolations": quotaViolations,
		})
		if err == nil {
			resp.DynamicMetadata = md
		}
	}
	if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
		delay = 0
	}
	return resp, delay
}

// reported picks the limit a descriptor's status shows: on a refusal the
// refusing limit with the longest wait, otherwise the one with the least
// remaining (the first, on ties).
func reported(group []limits.Result, allowed bool) int {
	best := 0
	for j, r := range group {
		b := group[best]
		switch {
		case allowed && r.Remaining < b.Remaining:
			best = j
		case !allowed && !r.Allowed && (b.Allowed || resetOf(r) > resetOf(b)):
			best = j
		}
	}
	return best
}

// resetOf is the wait a status reports: RetryAfter on a refusal, ResetAfter
// on an allowed hit and on one that can never fit (whose RetryAfter is zero).
func resetOf(r limits.Result) time.Duration {
	if r.Allowed || r.RetryAfter == 0 {
		return r.ResetAfter
	}
	return r.RetryAfter
}

func groupError(group []limits.Result) error {
	for _, r := range group {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// failureMode is the mode of a descriptor whose store call failed: with
// several limits, the strictest of theirs (error, then deny, then local,
// then allow).
func (s *Service) failureModeOf(it *item) (config.FailureMode, *config.Rule) {
	mode, rule := config.FailAllow, it.rules[0]
	for _, r := range it.rules {
		m := r.FailureMode
		if m == config.FailureModeDefault {
			m = s.failureMode
		}
		if failureRank[m] > failureRank[mode] {
			mode, rule = m, r
		}
	}
	return mode, rule
}

// failureRank orders the failure modes from the most lenient to the
// strictest; it is read on every failed descriptor during an outage, so it
// is built once.
var failureRank = [...]int{config.FailAllow: 0, config.FailLocal: 1, config.FailDeny: 2, config.FailError: 3}

// fallBack applies the failure modes that do not answer from the status
// alone: `error` fails the whole call with UNAVAILABLE, so that Envoy's own
// failure_mode_deny decides; `local` decides the descriptor again on the
// embedded store of this instance (per instance, so approximate).
func (s *Service) fallBack(ctx context.Context, items []item, hits []limits.Hit, results []limits.Result) error {
	var local []int // the items to decide locally
	for i := range items {
		it := &items[i]
		if it.unlimited || len(it.rules) == 0 {
			continue
		}
		err := groupError(results[it.first : it.first+len(it.rules)])
		if err == nil {
			continue
		}
		switch mode, _ := s.failureModeOf(it); mode {
		case config.FailError:
			s.metrics.StoreError(errorKind(err))
			s.log.Warn("store call failed: answering UNAVAILABLE (failure_mode error)", zap.String("rule", ruleLabel(it)), zap.Error(err))
			return status.Errorf(codes.Unavailable, "rate limit store unavailable: %v", err)
		case config.FailLocal:
			local = append(local, i)
		}
	}
	if len(local) == 0 || s.local == nil {
		return nil
	}
	var lhits []limits.Hit
	for _, i := range local {
		it := &items[i]
		lhits = append(lhits, hits[it.first:it.first+len(it.rules)]...)
	}
	lres := make([]limits.Result, len(lhits))
	s.local.Decide(ctx, lhits, lres)
	k := 0
	for _, i := range local {
		it := &items[i]
		s.metrics.StoreError(errorKind(results[it.first].Err))
		s.metrics.LocalFallback()
		copy(results[it.first:it.first+len(it.rules)], lres[k:k+len(it.rules)])
		k += len(it.rules)
	}
	return nil
}

func errorKind(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, limits.ErrUnavailable):
		return "unavailable"
	}
	return "error"
}

// onStoreError answers a descriptor whose store call failed by its limit's
// failure mode.
func (s *Service) onStoreError(domain string, it *item, st *rlsv3.RateLimitResponse_DescriptorStatus, err error) {
	mode, rule := s.failureModeOf(it)
	st.CurrentLimit = currentLimit(rule)
	s.metrics.StoreError(errorKind(err))
	s.log.Warn("store call failed", zap.String("domain", domain), zap.String("rule", ruleLabel(it)),
		zap.String("failure_mode", mode.String()), zap.Error(err))
	if mode == config.FailDeny && !s.shadowMode {
		st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		s.metrics.Decision(it.domainLabel, ruleLabel(it), metrics.OutcomeFailedDeny)
		return
	}
	// Failing open: nothing is known of the quota, so report it whole rather
	// than a remaining of 0 that would make clients back off.
	st.LimitRemaining = clampUint32(rule.Limit.Capacity())
	outcome := metrics.OutcomeFailedAllow
	if mode == config.FailDeny {
		outcome = metrics.OutcomeShadowOver // -shadow-mode: refused in a dry run only
	}
	s.metrics.Decision(it.domainLabel, ruleLabel(it), outcome)
}

func ruleLabel(it *item) string {
	var r *config.Rule
	if it.report < len(it.rules) {
		r = it.rules[it.report]
	}
	switch {
	case r != nil && r.Name != "":
		return r.Name
	case it.node != nil:
		return it.node.Path
	case r != nil:
		return "override"
	}
	return ""
}

// sharedEntries returns entries with the value of every share_threshold
// wildcard level replaced by its pattern. It returns entries itself, without
// copying, when no level shares.
func sharedEntries(entries []descriptors.Entry, path []*descriptors.Node) []descriptors.Entry {
	var out []descriptors.Entry
	for i, n := range path {
		if n.Wildcard && n.Descriptor.ShareThreshold {
			if out == nil {
				out = append([]descriptors.Entry(nil), entries...)
			}
			out[i].Value = n.Descriptor.Value
		}
	}
	if out == nil {
		return entries
	}
	return out
}

// cost is c of semantics.md: the request's hits_addend (0 means 1), unless
// the descriptor sets its own (where 0 is a peek); negative when the
// descriptor asks for a refund.
func cost(req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) int64 {
	c := int64(req.GetHitsAddend())
	if c == 0 {
		c = 1
	}
	if h := d.GetHitsAddend(); h != nil {
		// Anything above what any limit can hold is refused the same way;
		// clamping keeps the arithmetic far from overflow.
		c = int64(min(h.GetValue(), uint64(limits.MaxRequests)+1))
	}
	if d.GetIsNegativeHits() {
		c = -c
	}
	return c
}

// overrideRule applies Envoy's descriptor limit override: its rate and
// period, with the algorithm, burst, name and failure mode of the matched
// rule, or the defaults.
func overrideRule(matched *config.Rule, o *ratelimitv3.RateLimitDescriptor_RateLimitOverride) (*config.Rule, error) {
	unit, ok := overrideUnits[o.GetUnit()]
	if !ok {
		return nil, fmt.Errorf("limit override has unit %s", o.GetUnit())
	}
	mult := int64(1)
	if m := o.GetUnitMultiplier(); m != nil && m.GetValue() > 0 {
		mult = int64(m.GetValue())
	}
	r := &config.Rule{Unit: unit, UnitMultiplier: mult}
	if matched != nil {
		r.Name = matched.Name
		r.Limit.Algorithm = matched.Limit.Algorithm
		r.FailureMode = matched.FailureMode
		r.Replaces = matched.Replaces
		if matched.Limit.Burst != matched.Limit.Requests {
			r.Limit.Burst = matched.Limit.Burst
		}
	}
	r.Limit.Requests = int64(o.GetRequestsPerUnit())
	r.Limit.Period = unit.Duration() * time.Duration(mult)
	if err := r.Limit.Validate(); err != nil {
		return nil, fmt.Errorf("limit override: %w", err)
	}
	return r, nil
}

var overrideUnits = map[typev3.RateLimitUnit]config.Unit{
	typev3.RateLimitUnit_SECOND: config.Second,
	typev3.RateLimitUnit_MINUTE: config.Minute,
	typev3.RateLimitUnit_HOUR:   config.Hour,
	typev3.RateLimitUnit_DAY:    config.Day,
	typev3.RateLimitUnit_MONTH:  config.Month,
	typev3.RateLimitUnit_YEAR:   config.Year,
}

var responseUnits = [...]rlsv3.RateLimitResponse_RateLimit_Unit{
	config.UnitUnknown: rlsv3.RateLimitResponse_RateLimit_UNKNOWN,
	config.Second:      rlsv3.RateLimitResponse_RateLimit_SECOND,
	config.Minute:      rlsv3.RateLimitResponse_RateLimit_MINUTE,
	config.Hour:        rlsv3.RateLimitResponse_RateLimit_HOUR,
	config.Day:         rlsv3.RateLimitResponse_RateLimit_DAY,
	config.Week:        rlsv3.RateLimitResponse_RateLimit_WEEK,
	config.Month:       rlsv3.RateLimitResponse_RateLimit_MONTH,
	config.Year:        rlsv3.RateLimitResponse_RateLimit_YEAR,
}

// currentLimit reports a rule to Envoy. A period of k units is reported as
// requests_per_unit per unit with unit_multiplier k, the field recent Envoy
// APIs carry; older Envoys that ignore it read N per unit.
func currentLimit(r *config.Rule) *rlsv3.RateLimitResponse_RateLimit {
	cl := &rlsv3.RateLimitResponse_RateLimit{
		Name:            r.Name,
		RequestsPerUnit: clampUint32(r.Limit.Requests),
	}
	if int(r.Unit) < len(responseUnits) {
		cl.Unit = responseUnits[r.Unit]
	}
	if r.UnitMultiplier > 1 {
		cl.UnitMultiplier = wrapperspb.UInt32(uint32(min(r.UnitMultiplier, 1<<32-1)))
	}
	return cl
}

func clampUint32(v int64) uint32 {
	switch {
	case v < 0:
		return 0
	case v > 1<<32-1:
		return 1<<32 - 1
	}
	return uint32(v)
}

// validate refuses what no config can answer: an empty domain, no
// descriptors, an empty descriptor, sizes beyond the bounds.
func validate(req *rlsv3.RateLimitRequest) error {
	switch {
	case req.GetDomain() == "":
		return status.Error(codes.InvalidArgument, "rate limit domain must not be empty")
	case len(req.GetDescriptors()) == 0:
		return status.Error(codes.InvalidArgument, "rate limit descriptor list must not be empty")
	case len(req.GetDescriptors()) > MaxDescriptors:
		return status.Errorf(codes.InvalidArgument, "%d descriptors, above the maximum of %d", len(req.GetDescriptors()), MaxDescriptors)
	}
	for i, d := range req.GetDescriptors() {
		switch n := len(d.GetEntries()); {
		case n == 0:
			return status.Errorf(codes.InvalidArgument, "descriptor %d has no entries", i)
		case n > MaxEntries:
			return status.Errorf(codes.InvalidArgument, "descriptor %d has %d entries, above the maximum of %d", i, n, MaxEntries)
		}
	}
	return nil
}
