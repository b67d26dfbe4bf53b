// Command rls-bench is a load generator for Envoy's RateLimitService v3: it
// calls ShouldRateLimit on -addr over gRPC, from -concurrency callers on
// -conns connections, for -duration, and reports throughput, latency
// percentiles (from a log-linear histogram, within 0.8%), OK/OVER_LIMIT/error
// counts, the share of the machine's CPU time its hypervisor stole (a shared
// host's noise, from /proc/stat), each CPU's busy share (whether the run was
// bound by a CPU at all) and, with -pids, the CPU time the named processes
// spent per decision. -cpuprofile writes its own CPU profile: what the
// generator costs a call.
//
//	rls-bench -noop                                   # the gRPC floor of this machine
//	rls-bench -addr 127.0.0.1:8081 -keys 10000 -concurrency 64 -pids $(pgrep -x envoy-rls)
//	rls-bench -rate 20000 -duration 5s                # open loop at 20,000 calls/s
//	rls-bench -serve-noop 127.0.0.1:9000              # only serve the no-op RLS (for scripts/bench.sh)
//	rls-bench accuracy -seed 1 -out docs              # the accuracy report's tables and charts (docs/accuracy.md)
//
// Closed loop (-rate 0): each caller sends its next call when the last one
// answers. Open loop (-rate R): calls are due at start + k/R, and a call's
// latency runs from when it was due, not when a free caller sent it, so a
// stall shows in the percentiles instead of hiding (coordinated omission).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := realMain(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "rls-bench:", err)
		}
		os.Exit(2)
	}
}

var errUsage = errors.New("usage")

func realMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "accuracy" {
		return accuracyMain(ctx, args[1:], stdout, stderr)
	}
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if cfg.serveNoop != "" {
		return serveNoop(ctx, cfg.serveNoop, stderr)
	}
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	res, err := run(ctx, cfg)
	if err != nil {
		return err
	}
	if cfg.json {
		return res.writeJSON(stdout)
	}
	res.writeText(stdout)
	return nil
}
