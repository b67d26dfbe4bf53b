package rls

import (
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
)

const blockLimits = `
domain: edge
descriptors:
  - key: blocked
    rate_limit: {name: closed, unit: minute, requests_per_unit: 0}
  - key: open
    rate_limit: {name: open, unit: minute, requests_per_unit: 5}
`

// A block rule (requests_per_unit 0, envoyproxy/ratelimit's) refuses every
// request, a peek and a large cost too, with remaining 0 and, for its
// reset, a whole period natively and, in the drop-in's profile, what
// envoyproxy/ratelimit answers: the seconds to the end of its window.
func TestBlockRule(t *testing.T) {
	for _, tc := range []struct {
		name    string
		profile Profile
		reset   func(time.Duration) bool
	}{
		{"native", NativeProfile, func(d time.Duration) bool { return d == time.Minute }},
		{"drop-in", RatelimitProfile, func(d time.Duration) bool { return d > 0 && d <= time.Minute && d%time.Second == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.profile.Limits.Apply(config.DefaultOptions())
			d, err := o.Parse("limits.yaml", []byte(blockLimits))
			if err != nil {
				t.Fatal(err)
			}
			store := memory.New(memory.Options{SweepInterval: -1})
			t.Cleanup(func() { store.Close() })
			svc, err := New(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}), Options{Store: store, Profile: tc.profile})
			if err != nil {
				t.Fatal(err)
			}
			peek, big := desc("blocked", "p"), desc("blocked", "b")
			peek.HitsAddend = wrapperspb.UInt64(0)
			big.HitsAddend = wrapperspb.UInt64(1000)
			for i := range 3 {
				resp := mdCall(t, svc, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
					desc("blocked", "x"), peek, big, desc("open", "x"),
				}})
				if resp.OverallCode != over {
					t.Errorf("call %d: overall %v, want OVER_LIMIT", i, resp.OverallCode)
				}
				for j, st := range resp.Statuses[:3] {
					reset := st.GetDurationUntilReset().AsDuration()
					if st.Code != over || st.LimitRemaining != 0 || !tc.reset(reset) ||
						st.CurrentLimit.GetName() != "closed" || st.CurrentLimit.GetRequestsPerUnit() != 0 {
						t.Errorf("call %d, descriptor %d: got %v, want OVER_LIMIT, closed 0 per minute, remaining 0, reset in the minute", i, j, st)
					}
				}
				if st := resp.Statuses[3]; st.Code != ok || st.LimitRemaining != uint32(4-i) {
					t.Errorf("call %d: the open limit: got %v, want OK, remaining %d", i, st, 4-i)
				}
			}
		})
	}
}
