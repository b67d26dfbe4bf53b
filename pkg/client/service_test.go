package client_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/envoy-rls/envoy-rls/internal/redistest"
	"github.com/envoy-rls/envoy-rls/pkg/client"
	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
	"github.com/envoy-rls/envoy-rls/pkg/limits"
	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
	"github.com/envoy-rls/envoy-rls/pkg/limits/memory"
	"github.com/envoy-rls/envoy-rls/pkg/limits/redisstore"
	"github.com/envoy-rls/envoy-rls/pkg/rls"
)

// testLimits are the limits every test's service serves: a per-user
// limit of the application layer, a second one to count two descriptors,
// and holds, whose over-long id the service refuses as invalid.
const testLimits = `
domain: app
holds: {id: request_id, settle: settle, lease: 1m}
descriptors:
  - key: user
    rate_limit: {name: per-user, unit: hour, requests_per_unit: 3}
  - key: route
    rate_limit: {name: per-route, unit: hour, requests_per_unit: 1000000}
`

// maxWait bounds the wait of a refusal by per-user: a sliding window
// that refuses waits into the next window, up to two of its hours.
const maxWait = 2 * time.Hour

// user is the descriptor of one user's request.
func user(name string) client.Descriptor { return client.Descriptor{{Key: "user", Value: name}} }

// newService is the real rls.Service over store, with testLimits.
func newService(t testing.TB, store limits.Store, opts rls.Options) *rls.Service {
	t.Helper()
	svc, err := buildService(store, opts)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// buildService is newService for the examples, which have no testing.TB.
func buildService(store limits.Store, opts rls.Options) (*rls.Service, error) {
	d, err := config.Parse("limits.yaml", []byte(testLimits))
	if err != nil {
		return nil, err
	}
	opts.Store = store
	return rls.New(descriptors.NewIndex(&config.Config{Domains: map[string]*config.Domain{d.Name: d}}), opts)
}

// memoryService is a service on the embedded store, as -store memory runs.
func memoryService(t testing.TB) *rls.Service {
	t.Helper()
	store := memory.New(memory.Options{})
	t.Cleanup(func() { store.Close() })
	return newService(t, store, rls.Options{StoreInProcess: true})
}

// redisService is a service on the Redis at url; storeTimeout bounds its
// store calls and its Redis client's.
func redisService(t testing.TB, url string, storeTimeout time.Duration) *rls.Service {
	t.Helper()
	return newService(t, redisStore(t, url, storeTimeout), rls.Options{StoreTimeout: storeTimeout})
}

// redisStore is a Redis store on the Redis at url, closed at the test's end.
func redisStore(t testing.TB, url string, timeout time.Duration) limits.Store {
	t.Helper()
	rc, err := redisstore.NewClient(redisstore.ClientOptions{URL: url, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	store := redisstore.New(rc, redisstore.Options{})
	t.Cleanup(func() { store.Close(); rc.Close() })
	return store
}

// serve runs svc on a gRPC server on a free loopback port, with TLS when
// cfg is not nil, until the test ends, and returns its address.
func serve(t testing.TB, svc rlsv3.RateLimitServiceServer, cfg *tls.Config) string {
	t.Helper()
	addr, stop, err := listen(svc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return addr
}

// listen is serve for the examples: it returns the function that stops
// the server.
func listen(svc rlsv3.RateLimitServiceServer, cfg *tls.Config) (addr string, stop func(), err error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	var opts []grpc.ServerOption
	if cfg != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	gs := grpc.NewServer(opts...)
	rlsv3.RegisterRateLimitServiceServer(gs, svc)
	go gs.Serve(lis) //nolint:errcheck // ends with Stop
	return lis.Addr().String(), gs.Stop, nil
}

// dial is Dial that fails the test on an error and closes the client at
// its end.
func dial(t testing.TB, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.Dial(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// check is Check with a generous bound of its own, failing the test on an
// error.
func check(t testing.TB, c *client.Client, hits uint32, ds ...client.Descriptor) client.Decision {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := c.Check(ctx, "app", hits, ds...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// serverTLS is a server's TLS config of a certificate ca issued; with
// clientCerts it requires a client certificate ca signed.
func serverTLS(t testing.TB, ca *redistest.CA, clientCerts bool) *tls.Config {
	t.Helper()
	cert, key := ca.Issue(t, "envoy-rls")
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{redistest.KeyPair(t, cert, key)}}
	if clientCerts {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = ca.Pool()
	}
	return cfg
}

// closedAddr is a loopback address nothing listens on: a port taken and
// given back.
func closedAddr(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// silentAddr is a loopback listener that takes connections and never says
// a word, until the test ends: a service that hangs.
func silentAddr(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := lis.Accept()
			if err != nil {
				break
			}
			held = append(held, c)
		}
		for _, c := range held {
			c.Close()
		}
	}()
	t.Cleanup(func() { lis.Close(); <-done })
	return lis.Addr().String()
}

// failingService is a service on r, stopped, whose limits answer
// UNAVAILABLE when their store fails (failure_mode error).
func failingService(t testing.TB, r *redistest.Server) *rls.Service {
	t.Helper()
	store := redisStore(t, r.URL(), 50*time.Millisecond)
	r.Stop()
	return newService(t, store, rls.Options{StoreTimeout: 50 * time.Millisecond, FailureMode: config.FailError})
}
