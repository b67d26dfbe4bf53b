package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/pkg/client"
)

// shutdownBound is how long Run lets requests in flight finish once ctx
// ends.
const shutdownBound = 5 * time.Second

// Run serves the application on c.Listen until ctx ends, then drains it.
// Its error is a bad users file, an address it cannot listen on, or a
// server that failed; envoy-rls being down is none (Dial never blocks,
// and the failure mode decides until it is up).
func Run(ctx context.Context, c Config, log *zap.Logger) error {
	users, err := c.Users()
	if err != nil {
		return err
	}
	rls, err := client.Dial(c.RLS, client.WithTimeout(c.Timeout), client.WithFailureMode(c.FailureMode))
	if err != nil {
		return err
	}
	defer rls.Close()
	lis, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: Handler(rls, users, log), ReadHeaderTimeout: 10 * time.Second}
	log.Info("serving", zap.String("listen", lis.Addr().String()), zap.String("rls", c.RLS),
		zap.Int("users", len(users)))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownBound)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
