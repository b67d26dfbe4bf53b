package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// Reset deletes every key under which the hits' state is kept, in one
// pipeline (a cluster client splits it by node): a bucket's or a log's
// key, and a window's counters of the window Redis's clock is in and of
// the ones either side of it (the previous one, which a sliding window
// reads, and the next, in case the estimate of the clock is behind). It
// also forgets what this store keeps of those counters (a previous
// window's final count, a TTL seen set), and, with Options.ResetChannel,
// publishes the keys in the same pipeline, so that every store that hears
// the channel forgets them too (HearResets). A hit of a domain with holds
// (Hold.Lease set) has its holds deleted too, read first in a round trip
// of their own (holdKeys): a settle after the reset then charges as a
// plain hit, and gives nothing back to the cleared state.
func (s *Store) Reset(ctx context.Context, hits []limits.Hit) error {
	now, err := s.asked(ctx)
	if err != nil {
		return err
	}
	keys, err := s.holdKeys(ctx, hits)
	if err != nil {
		return err
	}
	for i := range hits {
		h := &hits[i]
		keys = append(keys, h.Key)
		if h.Limit.BlockFor > 0 {
			keys = append(keys, lockKey(h.Key)) // lockout.go
		}
		if isWindow(h.Limit.Algorithm) {
			w := limits.WindowFrame(h.Limit, now).W
			keys = append(keys, windowKey(h.Key, w-1), windowKey(h.Key, w), windowKey(h.Key, w+1))
		}
	}
	p := s.client.Pipeline()
	dels := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		dels[i] = p.Del(ctx, k)
	}
	var announce *redis.IntCmd
	if s.resetChannel != "" {
		announce = p.Publish(ctx, s.resetChannel, encodeKeys(keys))
	}
	s.forget(keys)
	p.Exec(ctx) //nolint:errcheck // each command's error is read below
	for _, d := range dels {
		if err := d.Err(); err != nil {
			return storeError("reset", err)
		}
	}
	if announce != nil && announce.Err() != nil {
		// A Redis whose ACLs allow the keys but not the channel.
		return fmt.Errorf("redisstore: the keys are cleared, but the other instances were not told (PUBLISH %s: %w): send the reset to each of them", s.resetChannel, announce.Err())
	}
	return nil
}

// forget drops what the store keeps of keys besides Redis.
func (s *Store) forget(keys []string) {
	for _, k := range keys {
		s.prevs.drop(k)
		s.expiries.drop(s.expiries.hash(k))
	}
}

// HearResets subscribes to Options.ResetChannel: the keys that any store
// on the same Redis resets (this one too) are forgotten here, and handed
// to onReset (nil for none), so that the layers above the store can drop
// what they keep of them (the over-limit cache). Pub/sub delivers at most
// once: an announcement made while the subscription is down (it
// reconnects by itself) is not heard, and its keys are only forgotten
// here as they expire. A SUBSCRIBE that Redis refuses (a user without
// +subscribe or the channel) is logged: go-redis would wait on it
// silently, and the resets of the other instances would never be heard.
// Close ends the subscription.
func (s *Store) HearResets(onReset func(keys []string)) {
	if s.resetChannel == "" || s.hearing != nil {
		return
	}
	s.hearing = s.client.Subscribe(context.Background())
	s.heard.Go(func() {
		s.subscribed()
		for msg := range s.hearing.Channel() {
			keys, ok := decodeKeys(msg.Payload)
			if !ok || len(keys) == 0 { // the permissions probe's (inspect.go)
				continue
			}
			s.forget(keys)
			if onReset != nil {
				onReset(keys)
			}
		}
	})
}

// subscribed subscribes to the reset channel and reads Redis's answer,
// which go-redis's channel would drop: a refusal is logged. An outage is
// not (health says it), and the subscription comes back with Redis.
func (s *Store) subscribed() {
	ctx := context.Background()
	err := s.hearing.Subscribe(ctx, s.resetChannel)
	if err == nil {
		_, err = s.hearing.ReceiveTimeout(ctx, subscribeWait)
	}
	var refused redis.Error
	if errors.As(err, &refused) {
		s.log.Error("Redis refuses the subscription to the reset channel: resets made on other instances are not heard here (their over-limit caches keep refusing); add +subscribe and the channel to the user's ACL rules",
			zap.String("channel", s.resetChannel), zap.String("rule", "&"+s.resetChannel), zap.Error(err))
	}
}

// subscribeWait bounds the wait for SUBSCRIBE's answer at the start.
const subscribeWait = 5 * time.Second

// encodeKeys writes keys length-prefixed (LEN:KEY…), since a key may hold
// any byte a descriptor value does.
func encodeKeys(keys []string) string {
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(strconv.Itoa(len(k)))
		b.WriteByte(':')
		b.WriteString(k)
	}
	return b.String()
}

// decodeKeys reads what encodeKeys wrote; false for anything else.
func decodeKeys(s string) ([]string, bool) {
	var keys []string
	for s != "" {
		n, rest, ok := strings.Cut(s, ":")
		l, err := strconv.Atoi(n)
		if !ok || err != nil || l < 0 || l > len(rest) {
			return nil, false
		}
		keys = append(keys, rest[:l])
		s = rest[l:]
	}
	return keys, true
}
