// Command layered is the application of the layered example: an HTTP
// service behind Envoy that authenticates its users and limits each of
// them through envoy-rls (domain app, config/limits-app.yaml), while
// Envoy limits each client address (domain edge). docker-compose.yml runs
// it as the app service; docs/layers.md walks through both limits.
//
//	go run ./examples/layered -listen :5678 -rls localhost:8081
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/envoy-rls/envoy-rls/examples/layered/app"
)

func main() { os.Exit(run()) }

func run() int {
	cfg, err := app.ParseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "layered:", err)
		return 2
	}
	log, err := zap.NewProduction()
	if err != nil {
		fmt.Fprintln(os.Stderr, "layered: logger:", err)
		return 1
	}
	defer log.Sync() //nolint:errcheck // stderr may not sync; nothing to do
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, cfg, log); err != nil {
		log.Error("layered", zap.Error(err))
		return 1
	}
	return 0
}
