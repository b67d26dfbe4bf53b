package rls

import (
	"fmt"
	"strings"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// What a hold does, ExplainedHold.Does.
const (
	HoldReserve         = "reserve"           // an id without settle: the cost is held under the id
	HoldSettle          = "settle"            // an id and settle: the hold ends, this call's cost charged instead
	HoldSettleWithoutID = "settle_without_id" // settle without an id: a plain charge
	HoldNone            = "none"              // neither: a plain hit, or a peek
)

// ExplainedHold is what a descriptor of a domain with holds does with
// them: the domain's keys, whose entries are taken out of the descriptor
// before the walk (ExplainedEntry.Hold marks them), and what the
// descriptor's entries of them make of a request.
type ExplainedHold struct {
	IDKey     string `json:"id_key"`
	SettleKey string `json:"settle_key"`
	Lease     string `json:"lease"`
	// ID is the descriptor's id entry's value, and Settle whether it has
	// a settle entry.
	ID     string `json:"id,omitempty"`
	Settle bool   `json:"settle,omitempty"`
	// Does is HoldReserve, HoldSettle, HoldSettleWithoutID or HoldNone.
	Does string `json:"does"`
}

// explainHold marks the entries of es that h's keys take out (those of
// a domain with holds) and returns what they do; nil without holds.
func explainHold(h *config.Holds, entries []descriptors.Entry, es []ExplainedEntry) *ExplainedHold {
	if h == nil {
		return nil
	}
	var hold limits.Hold
	for i, e := range entries {
		switch {
		case e.Key == h.ID:
			es[i].Hold = "id"
		case e.Key == h.Settle:
			es[i].Hold = "settle"
		}
		holdEntry(h, &hold, e.Key, e.Value)
	}
	ex := &ExplainedHold{IDKey: h.ID, SettleKey: h.Settle, Lease: h.Lease.String(), ID: hold.ID, Settle: hold.Settle}
	switch {
	case hold.ID != "" && hold.Settle:
		ex.Does = HoldSettle
	case hold.ID != "":
		ex.Does = HoldReserve
	case hold.Settle:
		ex.Does = HoldSettleWithoutID
	default:
		ex.Does = HoldNone
	}
	return ex
}

// writeHold writes the hold line of the text explanation.
func writeHold(b *strings.Builder, h *ExplainedHold) {
	if h == nil {
		return
	}
	fmt.Fprintf(b, "hold:       ")
	switch h.Does {
	case HoldReserve:
		fmt.Fprintf(b, "reserve: a request's cost is held under id %q until its settle, at most %s", h.ID, h.Lease)
	case HoldSettle:
		fmt.Fprintf(b, "settle: ends id %q's hold and charges this call's cost in its place (a plain charge when none is held); never delayed", h.ID)
	case HoldSettleWithoutID:
		fmt.Fprintf(b, "settle without a %s entry: a plain charge", h.IDKey)
	default:
		fmt.Fprintf(b, "none: no %s entry, a plain hit", h.IDKey)
	}
	fmt.Fprintf(b, " (holds: id %s, settle %s, lease %s; their entries are not walked)\n", h.IDKey, h.SettleKey, h.Lease)
}

// entryText is one entry of the descriptor line: key=value, marked when
// a hold takes it out.
func entryText(e ExplainedEntry) string {
	if e.Hold != "" {
		return e.Key + "=" + e.Value + " (hold " + e.Hold + ")"
	}
	return e.Key + "=" + e.Value
}
