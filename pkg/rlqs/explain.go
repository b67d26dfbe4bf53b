package rlqs

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/rlqs/internal/share"
)

// Outcomes of an explained bucket: what the service does with its id.
const (
	// OutcomeUnknownDomain: no limits for the domain; answered ALLOW_ALL
	// with the no-match TTL.
	OutcomeUnknownDomain = "unknown_domain"
	// OutcomeNoMatch: no walk of the tree consumes every entry; ALLOW_ALL
	// with the no-match TTL.
	OutcomeNoMatch = "no_match"
	// OutcomeNoLimit: the walk ends on a node without a limit; ALLOW_ALL
	// with the no-match TTL.
	OutcomeNoLimit = "no_limit"
	// OutcomeUnlimited: an unlimited rule; ALLOW_ALL.
	OutcomeUnlimited = "unlimited"
	// OutcomeDeny: a rule of zero requests; DENY_ALL.
	OutcomeDeny = "deny"
	// OutcomeShadow: a shadow-mode limit; ALLOW_ALL, and, when it has a
	// rate, divided all the same so that the metrics show what it would
	// have assigned.
	OutcomeShadow = "shadow"
	// OutcomeDivided: the limit is divided among the bucket's clients,
	// each answered with its share as a token bucket.
	OutcomeDivided = "divided"
)

// Bucket is what Explain tells of one bucket id: how it matches the
// limits, the limit's rate and, when the rate is divided, every live client
// of the bucket with its demand, its max-min fair share and the token
// bucket that share makes.
type Bucket struct {
	Domain      string `json:"domain"`
	DomainKnown bool   `json:"domain_known"`
	// Entries are the id's entries, in the order the walk consumed them
	// when it consumed them all, as given otherwise.
	Entries []descriptors.Entry `json:"entries"`
	// Node is where the walk ended (descriptors.Node.Path), and Line the
	// descriptor's line; empty when no walk consumed every entry.
	Node    string `json:"node,omitempty"`
	Line    int    `json:"line,omitempty"`
	Outcome string `json:"outcome"`
	// Strategy is what each client is sent: token_bucket, ALLOW_ALL or
	// DENY_ALL (a client whose share rounds to nothing is sent DENY_ALL:
	// see its TokenBucket); TTLSeconds is the assignment's TTL.
	Strategy   string       `json:"strategy"`
	TTLSeconds int64        `json:"ttl_seconds"`
	Rules      []BucketRule `json:"rules,omitempty"`
	// RatePerSecond is the rate divided: the tightest rule's.
	RatePerSecond float64 `json:"rate_per_second,omitempty"`
	// Key names the counter the bucket is divided under, its parts
	// (domain, place in the tree, the values of bare keys) joined by " | ";
	// every Envoy whose id has the same key shares one limit. StoreKey is
	// where a shared store keeps its demands.
	Key      string `json:"key,omitempty"`
	StoreKey string `json:"store_key,omitempty"`
	// Store is "embedded" (the demands of this process's streams only) or
	// "shared" (every instance's, in Redis).
	Store string `json:"store"`
	// Clients are the bucket's live clients, each an Envoy's stream, in
	// id order.
	Clients []BucketClient `json:"clients"`
	// TotalPerSecond sums the shares, at most the rate;
	// TokenBucketsPerSecond sums the rates of the token buckets they make,
	// which round down.
	TotalPerSecond        float64 `json:"total_per_second"`
	TokenBucketsPerSecond float64 `json:"token_buckets_per_second"`
	// StoreError is set when the shared store could not be read: the
	// shares are then this instance's last known part of the limit among
	// its own clients, as the service divides without the store.
	StoreError string `json:"store_error,omitempty"`
}

// BucketRule is one rule at the node the id matched.
type BucketRule struct {
	Name          string  `json:"name,omitempty"`
	Unlimited     bool    `json:"unlimited,omitempty"`
	Requests      int64   `json:"requests,omitempty"`
	PeriodSeconds float64 `json:"period_seconds,omitempty"`
	Line          int     `json:"line,omitempty"`
}

// BucketClient is one client of a bucket.
type BucketClient struct {
	// ID is the client's stream, as the store holds it: the envoy-rls
	// instance it is connected to, a dash, its number there; or, for the
	// streams of one client identity (Options.ClientOf), a dash and the
	// identity.
	ID       string `json:"id"`
	Instance string `json:"instance"`
	// Here is set when its stream is on the instance that explains.
	Here bool `json:"here"`
	// DemandPerSecond is what it reported (allowed and denied per second);
	// nil when unknown (a first report, which counts as an equal share).
	DemandPerSecond *float64 `json:"demand_per_second"`
	SharePerSecond  float64  `json:"share_per_second"`
	// TokenBucket is the token bucket the share makes; nil when the share
	// is nothing, which is answered DENY_ALL.
	TokenBucket *TokenBucket `json:"token_bucket,omitempty"`
	// AssignedPerSecond is the rate of the token bucket this instance last
	// sent the client (a share that moved within the hysteresis band is
	// not sent again); set for the clients here that have had one.
	AssignedPerSecond *float64 `json:"assigned_per_second,omitempty"`
}

// TokenBucket is share.Bucket with its interval in seconds.
type TokenBucket struct {
	MaxTokens           uint32  `json:"max_tokens"`
	TokensPerFill       uint32  `json:"tokens_per_fill"`
	FillIntervalSeconds int64   `json:"fill_interval_seconds"`
	RatePerSecond       float64 `json:"rate_per_second"`
}

// demandReader is a DemandStore whose demands can be read without
// recording one: what Explain asks of the store.
type demandReader interface {
	Demands(ctx context.Context, bucket string) (map[string]Demand, error)
}

// storeKeyer is a store that names where it keeps a bucket.
type storeKeyer interface {
	Key(bucket string) string
}

// Explain tells what the service does with the bucket id entries of
// domain, as a report of it would be answered now, without recording
// anything: the match, the limit, and the division among the bucket's
// live clients, read from this instance's streams and, with a shared
// store, from every instance's. It errs only when the shared store cannot
// be read and this instance holds no part of the limit to fall back on;
// the Bucket then says what it could.
func (s *Service) Explain(ctx context.Context, domain string, entries []descriptors.Entry) (Bucket, error) {
	ix := s.index()
	b := Bucket{Domain: domain, DomainKnown: ix.Known(domain), Entries: entries, Store: "embedded", Clients: []BucketClient{}}
	if s.store != DemandStore(s.local) {
		b.Store = "shared"
	}
	end, _, path, ordered := ix.MatchSet(domain, entries, nil, nil)
	noMatch := func(outcome string) (Bucket, error) {
		b.Outcome, b.Strategy, b.TTLSeconds = outcome, "ALLOW_ALL", seconds(s.opts.NoMatchTTL)
		return b, nil
	}
	if end == nil {
		if !b.DomainKnown {
			return noMatch(OutcomeUnknownDomain)
		}
		return noMatch(OutcomeNoMatch)
	}
	b.Entries, b.Node, b.Line = ordered, end.Path, end.Descriptor.Line
	if len(end.Descriptor.Rules) == 0 {
		return noMatch(OutcomeNoLimit)
	}
	now := s.opts.Now()
	for _, r := range end.Descriptor.Rules {
		br := BucketRule{Name: r.Name, Unlimited: r.Unlimited, Line: r.Line}
		if !r.Unlimited {
			br.Requests, br.PeriodSeconds = r.Limit.Requests, periodSeconds(r.Limit, now)
		}
		b.Rules = append(b.Rules, br)
	}
	b.TTLSeconds = seconds(share.TTL(s.opts.AssignmentTTL, s.opts.ReportInterval))
	rate, k := limitRate(end, now)
	switch k {
	case allowAll:
		b.Outcome, b.Strategy = OutcomeUnlimited, "ALLOW_ALL"
		if end.Descriptor.ShadowMode {
			b.Outcome = OutcomeShadow
		}
		return b, nil
	case denyAll:
		b.Outcome, b.Strategy = OutcomeDeny, "DENY_ALL"
		return b, nil
	case shadowed:
		b.Outcome, b.Strategy = OutcomeShadow, "ALLOW_ALL"
	default:
		b.Outcome, b.Strategy = OutcomeDivided, "token_bucket"
	}
	key := bucketKey(domain, end, path, ordered)
	b.RatePerSecond, b.Key = rate, strings.ReplaceAll(key, "\x00", " | ")
	if sk, ok := s.store.(storeKeyer); ok {
		b.StoreKey = sk.Key(key)
	}
	err := s.explainShares(ctx, &b, key, domain+"."+end.Path, rate)
	return b, err
}

// explainShares fills in b's clients: the demands of the bucket key, the
// division of rate among them as divide makes it, and what this instance
// last assigned its own clients of rule.
func (s *Service) explainShares(ctx context.Context, b *Bucket, key, rule string, rate float64) error {
	local, _ := s.local.Demands(ctx, key)
	demands, limit := local, rate
	if s.store != DemandStore(s.local) {
		r, ok := s.store.(demandReader)
		var all map[string]share.Demand
		err := errors.New("the demand store cannot be read")
		if ok {
			all, err = r.Demands(ctx, key)
		}
		if err != nil {
			b.StoreError = err.Error()
			// What divide uses with the store out of reach: this
			// instance's part of the limit at the last good read, the
			// whole of it before any.
			s.mu.Lock()
			e, known := s.divs[key]
			f := 1.0
			if known {
				f = e.part
			}
			s.mu.Unlock()
			if !known && len(local) == 0 {
				return err
			}
			limit = rate * f
		} else {
			demands = all
		}
	}
	div := share.NewDivision(demands)
	assigned := s.rules.assignedTo(rule, key)
	for id, d := range demands {
		c := BucketClient{ID: id, SharePerSecond: div.Share(limit, s.opts.Floor, id, d)}
		c.Instance, _, _ = strings.Cut(id, "-") // the instance is hex: its dash is the first
		c.Here = c.Instance == s.instance
		if d.Known {
			v := d.Rate
			c.DemandPerSecond = &v
		}
		if tb, ok := s.opts.Shape.Tokens(c.SharePerSecond); ok {
			r := float64(tb.TokensPerFill) / tb.FillInterval.Seconds()
			c.TokenBucket = &TokenBucket{MaxTokens: tb.MaxTokens, TokensPerFill: tb.TokensPerFill,
				FillIntervalSeconds: int64(tb.FillInterval / time.Second), RatePerSecond: r}
			b.TokenBucketsPerSecond += r
		}
		if v, ok := assigned[id]; ok {
			c.AssignedPerSecond = &v
		}
		b.TotalPerSecond += c.SharePerSecond
		b.Clients = append(b.Clients, c)
	}
	sort.Slice(b.Clients, func(i, j int) bool { return b.Clients[i].ID < b.Clients[j].ID })
	return nil
}

// Demands returns the live demands of bucket, without recording one or
// dropping the expired.
func (m *Memory) Demands(_ context.Context, bucket string) (map[string]share.Demand, error) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]share.Demand, len(m.buckets[bucket]))
	for _, e := range m.buckets[bucket] {
		if now.Before(e.expires) {
			out[e.client] = e.demand
		}
	}
	return out, nil
}

// assignedTo returns, per client, the rate this instance last assigned of
// the bucket key of rule.
func (r *ruleTotals) assignedTo(rule, key string) map[string]float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]float64{}
	suffix := "\x00" + key
	for id, v := range r.assigned[rule] {
		if client, ok := strings.CutSuffix(id, suffix); ok {
			out[client] = v
		}
	}
	return out
}

func seconds(d time.Duration) int64 { return int64(d / time.Second) }
