package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
)

// grpcTLSConfig is the gRPC server's TLS from -grpc-tls-cert, -grpc-tls-key
// and -grpc-tls-client-ca. The files are read now, so that a bad file fails
// the start, and again whenever they change: a renewed certificate or a
// rotated client CA reaches new connections without a restart.
func grpcTLSConfig(o *options, log *zap.Logger) (*tls.Config, error) {
	kp := newKeyPair(o.grpcTLSCert, o.grpcTLSKey, log)
	if err := kp.load(); err != nil {
		return nil, fmt.Errorf("-grpc-tls-cert, -grpc-tls-key: %w", err)
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return kp.get(), nil },
	}
	if o.grpcTLSClientCA == "" {
		return cfg, nil
	}
	cas := newCAs(o.grpcTLSClientCA, log)
	if err := cas.load(); err != nil {
		return nil, fmt.Errorf("-grpc-tls-client-ca: %w", err)
	}
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	cfg.ClientCAs = cas.get()
	// Each handshake gets the CAs of the moment.
	base := cfg
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := base.Clone()
			c.ClientCAs = cas.get()
			return c, nil
		},
	}, nil
}

// newKeyPair is a certificate and its key, read again when they change.
func newKeyPair(certFile, keyFile string, log *zap.Logger) *reloading[*tls.Certificate] {
	return &reloading[*tls.Certificate]{
		files: []string{certFile, keyFile}, what: "gRPC TLS certificate", log: log, every: time.Second,
		read: func() (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(certFile, keyFile)
			return &c, err
		},
	}
}

// newCAs is a PEM bundle of CAs, read again when it changes.
func newCAs(path string, log *zap.Logger) *reloading[*x509.CertPool] {
	return &reloading[*x509.CertPool]{
		files: []string{path}, what: "gRPC TLS client CA", log: log, every: time.Second,
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
// bundle), read again when one of them changes, looking at most once every
// `every`, so that a renewal (cert-manager, a rotated Secret) reaches new
// connections without a restart. Files that do not load, half written or
// mismatched, are logged and the last good value stays in use until the
// files change again. It is safe for concurrent use.
type reloading[T any] struct {
	files []string
	what  string // for the log
	read  func() (T, error)
	log   *zap.Logger
	every time.Duration

	mu      sync.Mutex
	val     T
	stamp   string    // the files' sizes and modification times at the last load
	checked time.Time // the last look at the files
}

// get returns the value, read again first if the files have changed.
func (r *reloading[T]) get() T {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= r.every {
		r.checked = now
		if st, err := r.fileStamp(); err == nil && st != r.stamp {
			if err := r.loadLocked(); err != nil {
				r.log.Warn(r.what+" not reloaded, keeping the last good one", zap.Error(err))
			} else {
				r.log.Info(r.what+" reloaded", zap.Strings("files", r.files))
			}
		}
	}
	return r.val
}

// load reads the files.
func (r *reloading[T]) load() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checked = time.Now()
	return r.loadLocked()
}

func (r *reloading[T]) loadLocked() error {
	st, err := r.fileStamp()
	if err != nil {
		return err
	}
	v, err := r.read()
	if err != nil {
		return err
	}
	r.val, r.stamp = v, st
	return nil
}

// fileStamp identifies the current contents of the files well enough to
// notice a rewrite: sizes and modification times, through symlinks (a
// Kubernetes Secret volume swaps a symlink).
func (r *reloading[T]) fileStamp() (string, error) {
	var stamp string
	for _, f := range r.files {
		fi, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		if fi.IsDir() {
			return "", errors.New(f + " is a directory")
		}
		stamp += fmt.Sprintf("%d@%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return stamp, nil
}
