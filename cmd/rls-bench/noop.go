package main

import (
	"context"
	"fmt"
	"io"
	"net"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

// noopServer answers OK at once: what a call costs with no decision in it.
type noopServer struct {
	rlsv3.UnimplementedRateLimitServiceServer
}

var okResponse = &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}

func (noopServer) ShouldRateLimit(context.Context, *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	return okResponse, nil
}

// startNoop serves the no-op RLS on addr; stop ends it.
func startNoop(addr string) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, err
	}
	srv := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(srv, noopServer{})
	go srv.Serve(ln)
	return ln.Addr().String(), srv.Stop, nil
}

// serveNoop serves the no-op RLS until ctx ends (-serve-noop).
func serveNoop(ctx context.Context, addr string, stderr io.Writer) error {
	a, stop, err := startNoop(addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "rls-bench: no-op RateLimitService on %s\n", a)
	<-ctx.Done()
	stop()
	return nil
}
