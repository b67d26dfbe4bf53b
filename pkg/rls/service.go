package rls

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/metrics"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// Bounds on one request. Envoy's route actions produce a handful of
// descriptors with a few entries each; anything far larger is a bug or an
// attack, refused with InvalidArgument before any work.
const (
	MaxDescriptors = 64
	MaxEntries     = config.MaxDepth
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
	// ShadowMode refuses nothing (-shadow-mode): decisions are made and
	// counted, and what they refuse is answered OK. Profile.GlobalShadow
	// says what turns OK: each OVER_LIMIT, as each limit's shadow_mode
	// does, counted as shadow_over_limit; or only the overall code. It
	// covers failure_mode deny too; failure_mode error still answers
	// UNAVAILABLE.
	ShadowMode bool

	// QuotaMode puts every descriptor in quota mode, as each limit's
	// quota_mode does (-quota-mode): a descriptor over its quota keeps its
	// OVER_LIMIT status, but the request is refused only when every
	// quota-mode descriptor of it is over.
	QuotaMode bool
	// DynamicMetadata fills every answer's dynamic_metadata with the
	// domain, the descriptors, the hits and the merged metadata of the
	// descriptors that passed (-dynamic-metadata; metadata.go).
	DynamicMetadata bool
	// Headers are the dialects every answer tells a client its limit in,
	// each added in the order listed (headers.go): IETFHeaders
	// (-response-headers), JSON429Body (-json-429-body), RatelimitHeaders
	// (-ratelimit-headers). None by default.
	Headers []HeaderDialect
	// Profile is what answering as envoyproxy/ratelimit rather than as
	// envoy-rls changes (profile.go; -ratelimit-compat, on in the
	// drop-in); the zero Profile is NativeProfile.
	Profile Profile

	// OnConfigChange, when set, is called by SetIndex after the new config
	// is in effect: a cache of decisions (overlimit.Cache.Clear) forgets
	// what the old config decided.
	OnConfigChange func()

	// Now is the service's clock, read once per answer (plan.settle) for
	// what the answer reports of a window whose length varies (its length
	// at that instant, limits.WindowLen); nil is time.Now. The stores decide on
	// their own clocks. Tests fix it.
	Now func() time.Time

	// Tracer, when set, traces the calls that arrive in a recording span
	// (the server span of package tracing): it is given the request's
	// domain, number of descriptors, overall code and deciding rule, and
	// the store call is a span of its own under it (trace.go). Nil, the
	// default, turns tracing off at the cost of one test per call.
	Tracer trace.Tracer
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
	quotaMode          bool
	dynamicMetadata    bool
	profile            Profile
	// statusShadow and overallShadow are the service-wide shadow mode as
	// the profile scopes it: each status turned OK, or only the overall
	// code (Profile.GlobalShadow). At most one is set.
	statusShadow, overallShadow bool
	headers                     []HeaderDialect
	now                         func() time.Time

	onConfigChange func()
	tracer         trace.Tracer
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
	if opts.Profile.Name == "" {
		opts.Profile.Name = NativeProfile.Name
	}
	if opts.Profile.Reset == nil {
		opts.Profile.Reset = ExactReset
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
		quotaMode:          opts.QuotaMode,
		dynamicMetadata:    opts.DynamicMetadata,
		profile:            opts.Profile,
		statusShadow:       opts.ShadowMode && opts.Profile.GlobalShadow == ShadowStatuses,
		overallShadow:      opts.ShadowMode && opts.Profile.GlobalShadow == ShadowOverallCode,
		headers:            slices.Clone(opts.Headers),
		now:                opts.Now,

		onConfigChange: opts.OnConfigChange,
		tracer:         opts.Tracer,
	}
	if s.now == nil {
		s.now = time.Now
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
