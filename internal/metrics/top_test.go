package metrics

import (
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/topk"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
)

// TestDecidedFeedsTop: the decision record feeds the board of refusals
// with the descriptors a limit refused, and with nothing else.
func TestDecidedFeedsTop(t *testing.T) {
	m := New()
	b := topk.NewBoard(topk.BoardOptions{})
	m.EnableTop(b)
	e := []descriptors.Entry{{Key: "remote_address", Value: "10.0.0.1"}}
	for _, o := range []string{OutcomeOK, OutcomeOverLimit, OutcomeNeverFits, OutcomeShadowOver, OutcomeFailedDeny, OutcomeOverLimit} {
		m.Decided(&Decision{Domain: "edge", Rule: "per_ip", Outcome: o, Entries: e})
	}
	r := b.Report(time.Now(), 10)
	if len(r.Rules) != 1 || r.Rules[0].Refused != 3 || r.Rules[0].Top[0].Descriptor != "remote_address=10.0.0.1" {
		t.Fatalf("got %+v, want per_ip refusing 10.0.0.1 3 times (over_limit twice, never_fits once)", r.Rules)
	}
}
