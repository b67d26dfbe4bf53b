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
// and -grpc-tls-client-ca. The certificate is read now, so that a bad file
// fails the start, and again whenever its files change.
func grpcTLSConfig(o *options, log *zap.Logger) (*tls.Config, error) {
	kp := &keyPair{certFile: o.grpcTLSCert, keyFile: o.grpcTLSKey, log: log, every: time.Second}
	if err := kp.load(); err != nil {
		return nil, fmt.Errorf("-grpc-tls-cert, -grpc-tls-key: %w", err)
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: kp.get,
	}
	if o.grpcTLSClientCA != "" {
		pem, err := os.ReadFile(o.grpcTLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("-grpc-tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-grpc-tls-client-ca: no PEM certificate in %s", o.grpcTLSClientCA)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// keyPair serves a certificate and key from their files, and reads them
// again when either file changes (looking at most once every `every`), so
// that a renewed certificate (cert-manager, a rotated Secret) reaches new
// connections without a restart. A pair that does not load, half written
// or mismatched, is logged and the last good one stays in use until the
// files change again. It is safe for concurrent use.
type keyPair struct {
	certFile, keyFile string
	log               *zap.Logger
	every             time.Duration

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string    // the files' sizes and modification times at the last load
	checked time.Time // the last look at the files
}

// get is tls.Config.GetCertificate.
func (k *keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if now := time.Now(); now.Sub(k.checked) >= k.every {
		k.checked = now
		if st, err := k.fileStamp(); err == nil && st != k.stamp {
			if err := k.loadLocked(); err != nil {
				k.log.Warn("gRPC TLS certificate not reloaded, keeping the last good one", zap.Error(err))
			} else {
				k.log.Info("gRPC TLS certificate reloaded", zap.String("cert", k.certFile))
			}
		}
	}
	return k.cert, nil
}

// load reads the pair.
func (k *keyPair) load() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.checked = time.Now()
	return k.loadLocked()
}

func (k *keyPair) loadLocked() error {
	st, err := k.fileStamp()
	if err != nil {
		return err
	}
	c, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		return err
	}
	k.cert, k.stamp = &c, st
	return nil
}

// fileStamp identifies the current contents of both files well enough to
// notice a rewrite: sizes and modification times, through symlinks (a
// Kubernetes Secret volume swaps a symlink).
func (k *keyPair) fileStamp() (string, error) {
	var stamp string
	for _, f := range []string{k.certFile, k.keyFile} {
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
