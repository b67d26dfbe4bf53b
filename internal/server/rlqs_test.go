package server

import (
	"context"
	"fmt"
	"testing"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc/credentials/insecure"
)

// -rlqs-max-buckets-per-stream and -rlqs-max-buckets reach the RLQS
// service: a stream's buckets past its bound are answered with the
// limit's whole rate (1 an hour: one token an hour) and counted by bound;
// a bound that is not positive is refused at the start.
func TestRLQSBucketBoundFlags(t *testing.T) {
	s := startInProcess(t, "-rlqs-max-buckets-per-stream", "2", "-rlqs-max-buckets", "3")
	conn := grpcDial(t, s.grpcAddr, insecure.NewCredentials())
	ctx, cancel := context.WithTimeout(context.Background(), callBound)
	defer cancel()
	report := func(from, to int) []*rlqspb.RateLimitQuotaResponse_BucketAction {
		t.Helper()
		st, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
		if err != nil {
			t.Fatal(err)
		}
		msg := &rlqspb.RateLimitQuotaUsageReports{Domain: "test"}
		for i := from; i < to; i++ {
			msg.BucketQuotaUsages = append(msg.BucketQuotaUsages, &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
				BucketId: &rlqspb.BucketId{Bucket: map[string]string{"k": fmt.Sprint("v", i)}}, NumRequestsAllowed: 1})
		}
		if err := st.Send(msg); err != nil {
			t.Fatal(err)
		}
		resp, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetBucketAction()
	}
	for i, a := range report(0, 4) {
		tb := a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
		if tb.GetTokensPerFill().GetValue() != 1 || tb.GetFillInterval().GetSeconds() != 3600 {
			t.Errorf("bucket %d of 4: %v, want one token an hour", i, a)
		}
	}
	report(10, 12) // a second stream: one more bucket fits the instance's 3
	if got := metric(t, s.httpAddr, `rls_rlqs_buckets_over_bound_total{bound="stream"}`); got != "2" {
		t.Errorf("over the stream's bound: %q, want 2", got)
	}
	if got := metric(t, s.httpAddr, `rls_rlqs_buckets_over_bound_total{bound="instance"}`); got != "1" {
		t.Errorf("over the instance's bound: %q, want 1", got)
	}
	for _, f := range []string{"-rlqs-max-buckets-per-stream", "-rlqs-max-buckets"} {
		if _, err := parseFlags([]string{f, "0"}, env(nil)); err == nil {
			t.Errorf("%s 0: no error", f)
		}
	}
}
