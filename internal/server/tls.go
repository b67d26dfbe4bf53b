package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/internal/watch"
)

// grpcTLS is the gRPC server's TLS from -grpc-tls-cert, -grpc-tls-key and
// -grpc-tls-client-ca, with the watchers that read the files again when
// their contents change: a renewed certificate or a rotated client CA
// reaches new connections without a restart. The files are watched as the
// limits are (package watch), so that a Kubernetes Secret's symlink swap,
// an in-place rewrite and a rename over the file are all seen, and a touch
// reloads nothing.
type grpcTLS struct {
	config  *tls.Config
	watches []watched
}

// watched is a watcher and what to do when its files change.
type watched struct {
	w        *watch.Watcher
	onChange func()
}

// newGRPCTLS reads the TLS files, so that a bad file fails the start, and
// starts watching them. Call run to reload on changes, and close when done.
func newGRPCTLS(o *Options, log *zap.Logger) (*grpcTLS, error) {
	g := &grpcTLS{}
	kp := newKeyPair(o.grpcTLSCert, o.grpcTLSKey, log)
	if err := watchAndLoad(g, kp, log); err != nil {
		g.close()
		return nil, fmt.Errorf("-grpc-tls-cert, -grpc-tls-key: %w", err)
	}
	g.config = &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return kp.get(), nil },
	}
	if o.grpcTLSClientCA == "" {
		return g, nil
	}
	cas := newCAs(o.grpcTLSClientCA, log)
	if err := watchAndLoad(g, cas, log); err != nil {
		g.close()
		return nil, fmt.Errorf("-grpc-tls-client-ca: %w", err)
	}
	// Each handshake gets the CAs of the moment.
	base := g.config.Clone()
	base.ClientAuth = tls.RequireAndVerifyClientCert
	if san := o.grpcTLSClientSAN; san != "" {
		base.VerifyPeerCertificate = requireSAN(san)
	}
	g.config = &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := base.Clone()
			c.ClientCAs = cas.get()
			return c, nil
		},
	}
	return g, nil
}

// requireSAN accepts a verified client certificate only if it names san (a
// DNS name, or an IP address, as crypto/x509 matches a host name), as
// envoyproxy/ratelimit's GRPC_CLIENT_TLS_SAN does: the client CA may sign
// certificates for more clients than may call.
func requireSAN(san string) func([][]byte, [][]*x509.Certificate) error {
	return func(_ [][]byte, chains [][]*x509.Certificate) error {
		if len(chains) == 0 || len(chains[0]) == 0 {
			return errors.New("no verified client certificate")
		}
		if err := chains[0][0].VerifyHostname(san); err != nil {
			return fmt.Errorf("client certificate does not name %q (-grpc-tls-client-san)", san)
		}
		return nil
	}
}

// watchAndLoad starts watching r's files for g, then reads them: in that
// order, so that a change made while they are read is seen. Files that
// cannot be watched are logged and left unwatched: the service still
// serves what it read now.
func watchAndLoad[T any](g *grpcTLS, r *reloading[T], log *zap.Logger) error {
	w, err := watch.New(log, watch.Options{}, r.files...)
	if err != nil {
		log.Warn(r.what+" reload is off: its files cannot be watched", zap.Error(err))
	} else {
		g.watches = append(g.watches, watched{w: w, onChange: r.reload})
	}
	return r.load()
}

// run reloads the files whenever they change, until ctx is done, on
// goroutines that wg counts.
func (g *grpcTLS) run(ctx context.Context, wg *sync.WaitGroup) {
	for _, ws := range g.watches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws.w.Run(ctx, ws.onChange)
		}()
	}
}

// close stops the watches; after run, it is harmless.
func (g *grpcTLS) close() {
	for _, ws := range g.watches {
		ws.w.Close() //nolint:errcheck // nothing to do about a watch that fails to close
	}
}

// newKeyPair is a certificate and its key.
func newKeyPair(certFile, keyFile string, log *zap.Logger) *reloading[tls.Certificate] {
	return &reloading[tls.Certificate]{
		files: []string{certFile, keyFile}, what: "gRPC TLS certificate", log: log,
		read: func() (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(certFile, keyFile)
			return &c, err
		},
	}
}

// newCAs is a PEM bundle of CAs.
func newCAs(path string, log *zap.Logger) *reloading[x509.CertPool] {
	return &reloading[x509.CertPool]{
		files: []string{path}, what: "gRPC TLS client CA", log: log,
		read: func() (*x509.CertPool, error) { return readCAs(path) },
	}
}

// readCAs reads a PEM file of CA certificates.
func readCAs(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate in %s", path)
	}
	return pool, nil
}

// reloading is a value read from files (a certificate and its key, a CA
// bundle) that reload reads again. Files that do not load, half written or
// mismatched, are logged and the last good value stays in use until the
// files change again. get is one atomic load, as it runs on every TLS
// handshake; it is safe for concurrent use with reload.
type reloading[T any] struct {
	files []string
	what  string // for the log
	read  func() (*T, error)
	log   *zap.Logger

	val atomic.Pointer[T]
}

// get returns the value last read.
func (r *reloading[T]) get() *T { return r.val.Load() }

// load reads the files, and keeps the value when they load.
func (r *reloading[T]) load() error {
	v, err := r.read()
	if err != nil {
		return err
	}
	r.val.Store(v)
	return nil
}

// reload is load for a watcher: it logs instead of returning the error.
func (r *reloading[T]) reload() {
	if err := r.load(); err != nil {
		r.log.Warn(r.what+" not reloaded, keeping the last good one", zap.Strings("files", r.files), zap.Error(err))
		return
	}
	r.log.Info(r.what+" reloaded", zap.Strings("files", r.files))
}
