package rls

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

// ExplainedSlot is some of a concurrency limit's slots held: how many
// expire at one instant, and when.
type ExplainedSlot struct {
	Count int64 `json:"count"`
	// Expires is the instant their lease ends; ExpiresIn the wait until
	// then, from the store's instant.
	Expires          time.Time `json:"expires"`
	ExpiresIn        string    `json:"expires_in"`
	ExpiresInSeconds float64   `json:"expires_in_seconds"`
}

// explainSlots adds to ex's concurrency limits the slots their keys hold,
// read from the store (limits.SlotReader) after the peek: the state a
// concurrency limit's remaining and reset come from. A failed read is the
// limit's state error.
func (s *Service) explainSlots(ctx context.Context, ex *Explanation, d *planned) {
	if d.node == nil || len(ex.Limits) != len(d.node.Descriptor.Rules) {
		return
	}
	for i, r := range d.node.Descriptor.Rules {
		l := &ex.Limits[i]
		j := slices.Index(d.rules, r)
		if j < 0 || r.Limit.Algorithm != limits.Concurrency || l.State == nil || l.State.Error != "" {
			continue
		}
		slots, now, err := limits.Slots(ctx, s.store, d.hits[j])
		if err != nil {
			l.State.Error = err.Error()
			continue
		}
		for _, e := range slots {
			in := time.Duration(e.At-now) * time.Microsecond
			l.Slots = append(l.Slots, ExplainedSlot{
				Count: e.Cost, Expires: time.UnixMicro(e.At).UTC(),
				ExpiresIn: in.String(), ExpiresInSeconds: in.Seconds(),
			})
		}
	}
}

// writeSlots renders a concurrency limit's slots held, if any.
func writeSlots(b *strings.Builder, l ExplainedLimit) {
	if len(l.Slots) == 0 {
		return
	}
	held := int64(0)
	parts := make([]string, len(l.Slots))
	for i, sl := range l.Slots {
		held += sl.Count
		parts[i] = fmt.Sprintf("%d expiring in %s (%s)", sl.Count, sl.ExpiresIn, sl.Expires.Format(time.RFC3339Nano))
	}
	fmt.Fprintf(b, "      slots: %d held, oldest first: %s\n", held, strings.Join(parts, ", "))
}
