package server

import (
	"testing"

	"google.golang.org/grpc/credentials/insecure"
)

// The answer flags reach the service: dynamic metadata, envoyproxy/
// ratelimit's headers under the names given, its whole-second resets.
func TestAnswerFlags(t *testing.T) {
	t.Parallel()
	s := startInProcess(t, "-dynamic-metadata", "-ratelimit-headers", "-ratelimit-header-limit", "X-Limit", "-ratelimit-compat")
	conn := grpcDial(t, s.grpcAddr, insecure.NewCredentials())
	resp, err := grpcCall(conn, "answers")
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.GetDynamicMetadata().GetFields()["domain"].GetStringValue(); d != "test" {
		t.Errorf("dynamic_metadata domain %q", d)
	}
	var limit string
	for _, h := range resp.GetResponseHeadersToAdd() {
		if h.GetKey() == "X-Limit" {
			limit = h.GetValue()
		}
	}
	if limit != "1" {
		t.Errorf("X-Limit %q, want 1 (headers %v)", limit, resp.GetResponseHeadersToAdd())
	}
	if d := resp.Statuses[0].GetDurationUntilReset().AsDuration(); d.Nanoseconds()%1e9 != 0 {
		t.Errorf("-ratelimit-compat: duration_until_reset %v, want whole seconds", d)
	}
}
