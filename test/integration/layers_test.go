package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	layered "github.com/envoy-rls/envoy-rls/examples/layered/app"
	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/client"
)

// The layered example's files: the limits directory docker-compose.yml
// gives envoy-rls (both domains) and the walk-through.
const (
	layersConfig = "config/layers"
	layersDoc    = "docs/layers.md"
	// perUser is config/limits-app.yaml's per-user limit, a minute.
	perUser = 20
)

// appInstance is one instance of the example application, on a real HTTP
// server, asking its own envoy-rls.
type appInstance struct {
	url string
}

// startLayeredApp serves the example's handler, as its main does, with a client
// of the envoy-rls at rlsAddr. The client fails closed, with a deadline
// for a busy machine: a decision the service did not make is a refusal
// without rate-limit headers, which every step below would catch, never
// an allowed request that was not counted.
func startLayeredApp(t *testing.T, rlsAddr string) appInstance {
	t.Helper()
	c, err := client.Dial(rlsAddr, client.WithTimeout(callBound), client.WithFailureMode(client.FailClosed))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	srv := httptest.NewServer(layered.Handler(c, layered.DemoUsers(), zap.NewNop()))
	t.Cleanup(srv.Close)
	return appInstance{url: srv.URL}
}

// do sends GET / as user (none: no Authorization) and returns the
// response, its body read and closed.
func (a appInstance) do(user string) (*http.Response, string, error) {
	req, err := http.NewRequest(http.MethodGet, a.url+"/", nil)
	if err != nil {
		return nil, "", err
	}
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+user)
	}
	resp, err := (&http.Client{Timeout: callBound}).Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("GET / as %q: %w", user, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, string(body), err
}

// get is do, failing the test on an error.
func (a appInstance) get(t *testing.T, user string) (*http.Response, string) {
	t.Helper()
	resp, body, err := a.do(user)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// shownHeaders are the response headers the walk-through shows, in the
// order it shows them; the others (Date, Content-Length) are left out.
var shownHeaders = []string{"Www-Authenticate", "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Retry-After"}

// transcript is a response as docs/layers.md shows it: the status line,
// the headers of shownHeaders that it has, lower-cased as Envoy sends
// them on, and the body.
func transcript(resp *http.Response, body string) []string {
	lines := []string{fmt.Sprintf("HTTP/1.1 %s", resp.Status)}
	for _, h := range shownHeaders {
		if v := resp.Header.Get(h); v != "" {
			lines = append(lines, strings.ToLower(h)+": "+v)
		}
	}
	return append(lines, strings.TrimSuffix(body, "\n"))
}

// varying are the headers whose value follows the wall clock (the minute
// the test runs in): the doc's value is any number.
var varying = regexp.MustCompile(`^((?:x-ratelimit-reset|retry-after): )\d+$`)

// checkShown fails the test unless docs/layers.md shows lines, in order
// and consecutive; a varying header's number may differ.
func checkShown(t *testing.T, doc string, step string, lines []string) {
	t.Helper()
	var pattern strings.Builder
	pattern.WriteString(`(?m)`)
	for i, l := range lines {
		if i > 0 {
			pattern.WriteString(`\n`)
		}
		if m := varying.FindStringSubmatch(l); m != nil {
			pattern.WriteString(`^` + regexp.QuoteMeta(m[1]) + `\d+$`)
			continue
		}
		pattern.WriteString(`^` + regexp.QuoteMeta(l) + `$`)
	}
	if !regexp.MustCompile(pattern.String()).MatchString(doc) {
		t.Errorf("%s does not show %s as the test got it:\n%s", layersDoc, step, strings.Join(lines, "\n"))
	}
}

// awayFromMinuteEnd waits out the end of the current minute when it is
// near: the per-user limit's windows are the minutes of Redis's clock
// (this host's), and the counts below are exact within one window.
func awayFromMinuteEnd(t *testing.T, need time.Duration) {
	t.Helper()
	now := time.Now()
	if left := now.Truncate(time.Minute).Add(time.Minute).Sub(now); left < need {
		t.Logf("waiting %s for the next minute", left)
		time.Sleep(left + 100*time.Millisecond)
	}
}

// TestLayersWalkThrough replays docs/layers.md's application layer on
// the real files: two instances of the example application (its handler
// on real HTTP servers), each asking its own envoy-rls (the binary, with
// docker-compose.yml's flags and config/layers), both on one Redis. An
// unknown caller gets 401; alice is allowed perUser times, whichever
// instance serves her, then refused with 429 and Retry-After; bob is
// still allowed. The doc shows each response as the test got it.
func TestLayersWalkThrough(t *testing.T) {
	t.Parallel()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, layersDoc))
	if err != nil {
		t.Error(err) // the steps still run, and log what the doc should show
	}
	cfg := filepath.Join(root, layersConfig)
	rdb := redistest.Start(t)
	a := startLayeredApp(t, startServer(t, cfg, layersStoreFlags(rdb)...).grpcAddr)
	b := startLayeredApp(t, startServer(t, cfg, layersStoreFlags(rdb)...).grpcAddr)
	awayFromMinuteEnd(t, 10*time.Second)

	resp, body := a.get(t, "")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no Authorization: %s, want 401", resp.Status)
	}
	t.Logf("no user:\n%s", strings.Join(transcript(resp, body), "\n"))
	checkShown(t, string(doc), "the request without a user", transcript(resp, body))

	instances := []appInstance{a, b}
	for i := 1; i <= perUser+1; i++ {
		resp, body := instances[i%2].get(t, "alice")
		lines := transcript(resp, body)
		t.Logf("alice %d:\n%s", i, strings.Join(lines, "\n"))
		checkAlice(t, i, resp)
		if i == 1 || i == perUser+1 {
			checkShown(t, string(doc), fmt.Sprintf("alice's request %d", i), lines)
		}
	}
	resp, body = b.get(t, "bob")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Ratelimit-Remaining") != strconv.Itoa(perUser-1) {
		t.Errorf("bob after alice's refusal: %s, remaining %q; want 200, %d", resp.Status, resp.Header.Get("X-Ratelimit-Remaining"), perUser-1)
	}
	t.Logf("bob:\n%s", strings.Join(transcript(resp, body), "\n"))
	checkShown(t, string(doc), "bob's request", transcript(resp, body))
}

// checkAlice checks alice's request i of the walk-through: the first
// perUser allowed, counting down, the next refused with a Retry-After.
func checkAlice(t *testing.T, i int, resp *http.Response) {
	t.Helper()
	limit := fmt.Sprintf(`%d, %d;w=60;name="per-user"`, perUser, perUser)
	if got := resp.Header.Get("X-Ratelimit-Limit"); got != limit {
		t.Errorf("alice %d: x-ratelimit-limit %q, want %q", i, got, limit)
	}
	if i <= perUser {
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Ratelimit-Remaining") != strconv.Itoa(perUser-i) {
			t.Errorf("alice %d: %s, remaining %q; want 200, %d", i, resp.Status, resp.Header.Get("X-Ratelimit-Remaining"), perUser-i)
		}
		return
	}
	// A sliding window's refusal lasts until the estimate has room,
	// which can be into the next minute: at most two.
	wait, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != http.StatusTooManyRequests || err != nil || wait < 1 || wait > 120 {
		t.Errorf("alice %d: %s, Retry-After %q; want 429 and 1 to 120 seconds", i, resp.Status, resp.Header.Get("Retry-After"))
	}
}

// TestLayersShareOneLimit: the two instances of the example, each on its
// own envoy-rls over one Redis, give a user the limit once, exactly, when
// her requests come at once from both sides.
func TestLayersShareOneLimit(t *testing.T) {
	t.Parallel()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(root, layersConfig)
	rdb := redistest.Start(t)
	a := startLayeredApp(t, startServer(t, cfg, layersStoreFlags(rdb)...).grpcAddr)
	b := startLayeredApp(t, startServer(t, cfg, layersStoreFlags(rdb)...).grpcAddr)
	awayFromMinuteEnd(t, 10*time.Second)

	const each = 2 * perUser // requests per instance
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for _, inst := range []appInstance{a, b} {
		for range each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, _, err := inst.do("carol")
				if err != nil {
					t.Error(err)
					return
				}
				if resp.Header.Get("X-Ratelimit-Limit") == "" {
					t.Errorf("a %s without x-ratelimit-limit: envoy-rls did not decide it", resp.Status)
				}
				mu.Lock()
				codes[resp.StatusCode]++
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	if codes[http.StatusOK] != perUser || codes[http.StatusTooManyRequests] != 2*each-perUser {
		t.Errorf("carol's %d requests over two instances: %v, want %d allowed and the rest 429", 2*each, codes, perUser)
	}
}

// layersStoreFlags put an envoy-rls of the layered tests on rdb with the
// walk-through's -hash-values, and 2 s for each store call: the tests
// count exact decisions, and on a loaded machine a call past the default
// 50 ms would be answered by the failure mode instead.
func layersStoreFlags(rdb *redistest.Server) []string {
	return []string{"-redis-url", rdb.URL(), "-hash-values", "-store-timeout", "2s"}
}
