package server

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/grpcguard"
)

// boundFlags defines the flags of what clients can make the service hold
// (package grpcguard), and of the HTTP servers' timeouts.
func boundFlags(fs *flag.FlagSet, o *Options) {
	fs.DurationVar(&o.grpcMaxConnectionIdle, "grpc-max-connection-idle", 2*time.Minute, "close a gRPC connection that has had no call for this long (the client reconnects when it needs to); 0: never")
	fs.IntVar(&o.grpcMaxMessageBytes, "grpc-max-message-bytes", grpcguard.DefaultMaxMessageBytes, "largest gRPC request read; a larger one is refused with RESOURCE_EXHAUSTED before it is read")
	fs.IntVar(&o.grpcMaxStreams, "grpc-max-streams", 1024, "most calls at once on one gRPC connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS)")
	fs.IntVar(&o.grpcMaxResets, "grpc-max-resets", 1000, "most streams a client may reset on one gRPC connection a second, in bursts of as many (the HTTP/2 rapid reset); past it the connection is sent GOAWAY (ENHANCE_YOUR_CALM) and closed; 0: no bound")
	fs.IntVar(&o.maxInFlight, "max-in-flight", 4096, "most gRPC calls in flight at once, over all connections, counted from their decoded request until answered; past it a call is refused with RESOURCE_EXHAUSTED")
	fs.IntVar(&o.maxInFlightPerConn, "max-in-flight-per-connection", 0, "most gRPC calls in flight at once on one connection, counted as -max-in-flight; past it a call is refused with RESOURCE_EXHAUSTED (0: an eighth of -max-in-flight)")
	fs.IntVar(&o.maxOpenStreams, "max-open-streams", 1024, "most streaming gRPC calls (RLQS, health Watch, reflection) open at once, over all connections, counted apart from -max-in-flight since each lasts as long as its client wants; one connection may hold 16 of them; past it a new one is refused with RESOURCE_EXHAUSTED")
	fs.IntVar(&o.grpcMaxConnections, "grpc-max-connections", 0, "most connections open at once on -grpc-addr; past it a new one is closed at once (0: three quarters of the file descriptors the process may open)")
	fs.IntVar(&o.httpMaxConnections, "http-max-connections", 0, "most connections open at once on -http-addr, counted apart from gRPC's so that health checks are still answered (0: an eighth of the file descriptors the process may open)")
	fs.DurationVar(&o.httpIdleTimeout, "http-idle-timeout", 60*time.Second, "close a keep-alive HTTP connection that has sent no request for this long")
	fs.DurationVar(&o.httpReadTimeout, "http-read-timeout", 30*time.Second, "longest an HTTP client may take to send a whole request, and to read the answer")
}

// checkBounds reports bound flags that are out of range.
func (o *Options) checkBounds() error {
	switch {
	case o.grpcMaxConnectionAge < 0:
		return errors.New("-grpc-max-connection-age must not be negative (0 turns it off)")
	case o.grpcMaxConnectionIdle < 0:
		return errors.New("-grpc-max-connection-idle must not be negative (0 turns it off)")
	case o.grpcMaxMessageBytes < grpcguard.MinMessageBytes:
		return fmt.Errorf("-grpc-max-message-bytes must be at least %d", grpcguard.MinMessageBytes)
	case o.grpcMaxStreams <= 0 || o.grpcMaxStreams > 1<<31-1:
		return errors.New("-grpc-max-streams must be positive")
	case o.maxInFlight <= 0:
		return errors.New("-max-in-flight must be positive")
	case o.maxOpenStreams <= 0:
		return errors.New("-max-open-streams must be positive")
	case o.grpcMaxResets < 0:
		return errors.New("-grpc-max-resets must not be negative (0 turns it off)")
	case o.maxInFlightPerConn < 0:
		return errors.New("-max-in-flight-per-connection must not be negative (0 is an eighth of -max-in-flight)")
	case o.httpIdleTimeout <= 0 || o.httpReadTimeout <= 0:
		return errors.New("-http-idle-timeout and -http-read-timeout must be positive")
	case o.grpcMaxConnections < 0 || o.httpMaxConnections < 0:
		return errors.New("-grpc-max-connections and -http-max-connections must not be negative (0 derives them from the file descriptor limit)")
	}
	return nil
}
