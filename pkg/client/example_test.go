package client_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/client"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// startExample runs an envoy-rls service in process on a loopback port,
// with a limit of 3 an hour per user in domain "app" (testLimits), and
// returns its address and what stops it. An application dials the address
// of its envoy-rls instead.
func startExample() (addr string, stop func()) {
	store := memory.New(memory.Options{})
	svc, err := buildService(store, rls.Options{StoreInProcess: true})
	if err != nil {
		log.Fatal(err)
	}
	addr, stopServer, err := listen(svc, nil)
	if err != nil {
		log.Fatal(err)
	}
	return addr, func() { stopServer(); store.Close() }
}

// A Check per request of the user, after authentication: the fourth
// within the hour is refused.
func Example() {
	addr, stop := startExample()
	defer stop()

	c, err := client.Dial(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for range 4 {
		d, err := c.Check(context.Background(), "app", 0, client.Descriptor{{Key: "user", Value: "ann"}})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(d.Allowed, d.Code, d.Response.GetStatuses()[0].GetLimitRemaining())
	}
	// Output:
	// true OK 2
	// true OK 1
	// true OK 0
	// false OVER_LIMIT 0
}

// The middleware limits each user of an HTTP handler; a refusal is a 429.
func ExampleHTTPMiddleware() {
	addr, stop := startExample()
	defer stop()
	c, err := client.Dial(addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	perUser := func(r *http.Request) []client.Descriptor {
		return []client.Descriptor{{{Key: "user", Value: r.Header.Get("X-User")}}}
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello\n") })
	srv := httptest.NewServer(client.HTTPMiddleware(c, "app", perUser)(hello))
	defer srv.Close()

	for range 4 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("X-User", "ann")
		resp, err := srv.Client().Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d remaining=%s %s", resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"), body)
	}
	// Output:
	// 200 remaining=2 hello
	// 200 remaining=1 hello
	// 200 remaining=0 hello
	// 429 remaining=0 rate limited
}

// A service that cannot answer within the timeout is no error: the
// failure mode decides, and Unavailable says why.
func ExampleWithFailureMode() {
	c, err := client.Dial("127.0.0.1:1", client.WithTimeout(100*time.Millisecond), client.WithFailureMode(client.FailClosed))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	d, err := c.Check(context.Background(), "app", 0, client.Descriptor{{Key: "user", Value: "ann"}})
	fmt.Println(d.Allowed, d.Unavailable != nil, err)
	// Output:
	// false true <nil>
}
