package edge

import (
	"maps"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	headertometadatav3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_to_metadata/v3"
	ratelimitfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/envoy-rls/envoy-rls/internal/lint"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

const envoyLoginYAMLPath = "config/envoy-login.yaml"

// loginChargeFormat is the charge's hits_addend: the failed logins the
// header_to_metadata filter read from the app's x-login-failed response
// header. Envoy formats a hits_addend with the request's headers and the
// stream's info, never the response's headers, so the header must come
// through the stream's dynamic metadata.
const loginChargeFormat = "%DYNAMIC_METADATA(envoy-rls.login:failed)%"

// lockouts are the limits of config/limits.yaml with a block_for: the one
// that config/envoy-login.yaml (alone) and config/envoy.yaml's /login
// route (beside the others) reach.
var lockouts = map[string]bool{"login-lockout": true}

// loadLogin parses config/envoy-login.yaml into a Bootstrap, strictly,
// and returns its /login route's RateLimitPerRoute.
func loadLogin(t *testing.T) (*bootstrapv3.Bootstrap, *ratelimitfilterv3.RateLimitPerRoute) {
	t.Helper()
	js, _ := yamlToJSON(t, readRepoFile(t, envoyLoginYAMLPath))
	b := &bootstrapv3.Bootstrap{}
	if err := protojson.Unmarshal(js, b); err != nil {
		t.Fatalf("%s into Bootstrap: %v", envoyLoginYAMLPath, err)
	}
	hcm := &hcmv3.HttpConnectionManager{}
	if err := b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}
	for _, r := range hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes() {
		if r.GetMatch().GetPath() != "/login" {
			continue
		}
		per := &ratelimitfilterv3.RateLimitPerRoute{}
		if err := r.GetTypedPerFilterConfig()[rateLimitFilter].UnmarshalTo(per); err != nil {
			t.Fatalf("/login's %s: %v", rateLimitFilter, err)
		}
		return b, per
	}
	t.Fatalf("%s: no /login route", envoyLoginYAMLPath)
	return nil, nil
}

// TestLoginLockout: config/envoy-login.yaml is a valid Bootstrap (every
// typed config inside it too) whose /login route checks
// [login=failed, remote_address] with a peek on the request and charges
// it after the response by the app's x-login-failed header, and `envoy-rls
// lint` finds it reaching exactly config/limits.yaml's lockout, a limit
// with block_for.
func TestLoginLockout(t *testing.T) {
	b, per := loadLogin(t)
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("Bootstrap.ValidateAll: %v", err)
	}
	resolveAnys(t, b.ProtoReflect(), "bootstrap", map[string]int{})
	rl := per.GetRateLimits()
	if len(rl) != 2 {
		t.Fatalf("/login: %d rate_limits, want the check and the charge", len(rl))
	}
	check, charge := rl[0], rl[1]
	if check.GetApplyOnStreamDone() || check.GetHitsAddend().GetNumber() == nil || check.GetHitsAddend().GetNumber().GetValue() != 0 {
		t.Errorf("the check: %v, want a peek (hits_addend 0) on the request", check)
	}
	if !charge.GetApplyOnStreamDone() || charge.GetHitsAddend().GetFormat() != loginChargeFormat {
		t.Errorf("the charge: %v, want hits_addend from x-login-failed when the stream is done", charge)
	}
	if a, c := shapeOf(check), shapeOf(charge); a != c || a != "login=failed remote_address" {
		t.Errorf("the check sends %q and the charge %q: both must be [login=failed, remote_address], one key", a, c)
	}
	c, _ := loadLimits(t)
	if got := strings.Join(lintUnreachable(t, b, c), " "); strings.Contains(got, "login_failed") {
		t.Errorf("lint: the lockout is unreachable: %s", got)
	}
	if ix := lockoutsOf(t); !maps.Equal(ix, lockouts) {
		t.Errorf("lockouts in %s: %v, want %v", limitsYAMLPath, ix, lockouts)
	}
}

// lintUnreachable lints b against c as `envoy-rls lint` does, fails the
// test on any finding but an unreachable limit, and returns those.
func lintUnreachable(t *testing.T, b *bootstrapv3.Bootstrap, c *config.Config) []string {
	t.Helper()
	var unreachable []string
	for _, f := range lint.Check(b, c) {
		if f.Kind == lint.Unreachable {
			unreachable = append(unreachable, f.Limit)
			continue
		}
		t.Errorf("lint: %s", f)
	}
	return unreachable
}

// shapeOf renders a rate_limits entry's actions as the test reads them.
func shapeOf(r *routev3.RateLimit) string {
	var parts []string
	for _, a := range r.GetActions() {
		switch {
		case a.GetGenericKey() != nil:
			parts = append(parts, a.GetGenericKey().GetDescriptorKey()+"="+a.GetGenericKey().GetDescriptorValue())
		case a.GetRemoteAddress() != nil:
			parts = append(parts, "remote_address")
		default:
			parts = append(parts, "?")
		}
	}
	return strings.Join(parts, " ")
}

// lockoutsOf names the limits of config/limits.yaml with a block_for.
func lockoutsOf(t *testing.T) map[string]bool {
	c, _ := loadLimits(t)
	out := map[string]bool{}
	for _, d := range c.Domains {
		var walk func(ds []*config.Descriptor)
		walk = func(ds []*config.Descriptor) {
			for _, n := range ds {
				for _, r := range n.Rules {
					if r.Limit.BlockFor > 0 {
						out[r.Name] = true
					}
				}
				walk(n.Descriptors)
			}
		}
		walk(d.Descriptors)
	}
	return out
}

// checkLoginMetadata checks that b's HTTP filters put the app's
// x-login-failed response header where loginChargeFormat reads it: a
// header_to_metadata filter ahead of the rate limit filter, whose response
// rule sets envoy-rls.login's failed to the header as a number (a number
// or a numeric string is what Envoy takes as a hits_addend) and takes the
// header off the response.
func checkLoginMetadata(t *testing.T, name string, b *bootstrapv3.Bootstrap) {
	t.Helper()
	hcm := &hcmv3.HttpConnectionManager{}
	if err := b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var h2m *headertometadatav3.Config
	for _, f := range hcm.GetHttpFilters() {
		switch f.GetName() {
		case "envoy.filters.http.header_to_metadata":
			h2m = &headertometadatav3.Config{}
			if err := f.GetTypedConfig().UnmarshalTo(h2m); err != nil {
				t.Fatalf("%s: header_to_metadata: %v", name, err)
			}
		case rateLimitFilter:
			if h2m == nil {
				t.Fatalf("%s: no header_to_metadata filter ahead of %s to carry x-login-failed", name, rateLimitFilter)
			}
		}
	}
	for _, r := range h2m.GetResponseRules() {
		kv := r.GetOnHeaderPresent()
		if r.GetHeader() != "x-login-failed" {
			continue
		}
		if got := "%DYNAMIC_METADATA(" + kv.GetMetadataNamespace() + ":" + kv.GetKey() + ")%"; got != loginChargeFormat ||
			kv.GetType() != headertometadatav3.Config_NUMBER || !r.GetRemove() {
			t.Errorf("%s: x-login-failed goes to %s as %v (remove %v); want %s, a NUMBER, removed", name, got, kv.GetType(), r.GetRemove(), loginChargeFormat)
		}
		return
	}
	t.Errorf("%s: no response rule reads x-login-failed", name)
}

// Both examples that charge failed logins carry the header as the charge
// reads it.
func TestLoginChargeReadsTheResponse(t *testing.T) {
	b, _ := loadLogin(t)
	checkLoginMetadata(t, envoyLoginYAMLPath, b)
	checkLoginMetadata(t, envoyYAMLPath, loadEdge(t).bootstrap)
	js, _ := yamlToJSON(t, readRepoFile(t, envoyYAMLPath))
	if !strings.Contains(string(js), loginChargeFormat) {
		t.Errorf("%s: the /login route does not charge %s", envoyYAMLPath, loginChargeFormat)
	}
}
