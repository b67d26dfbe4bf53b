package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/envoy-rls/envoy-rls/internal/accuracy"
)

// accuracyMain is `rls-bench accuracy`: it replays the seeded traces of
// package accuracy through every algorithm, on the pure Go functions or on
// the Redis at -redis-url, and writes the report's tables and charts into
// -out. It prints the run's wall time and peak memory, which the files
// leave out so that they depend on the seed only.
func accuracyMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := accuracy.Small(1)
	fs := flag.NewFlagSet("rls-bench accuracy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "seed of every trace: the same seed writes the same files")
	fs.IntVar(&c.Sources, "sources", c.Sources, "sources per trace, each sending at the trace's rate")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "length of each source's traffic (simulated time)")
	fs.Int64Var(&c.Requests, "requests", c.Requests, "threshold: requests per -period, every algorithm's limit")
	fs.DurationVar(&c.Period, "period", c.Period, "threshold's period")
	fs.IntVar(&c.Workers, "workers", 0, "sources decided in parallel (0: GOMAXPROCS); the files do not depend on it")
	redisURL := fs.String("redis-url", "", "decide on this Redis (redis://host:port) through the Redis store instead of the pure Go functions")
	hot := fs.Bool("hotkey", false, "with -redis-url: write only the hot-key mode's tables ("+accuracy.HotKeyFile+"), from their own run (accuracy.HotKeySmall with -seed)")
	out := fs.String("out", "", "directory to write the tables and charts into (required)")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if *out == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "rls-bench accuracy: -out DIR is required, and no arguments")
		return errUsage
	}
	if st, err := os.Stat(*out); err != nil || !st.IsDir() {
		return fmt.Errorf("-out %s: not a directory", *out)
	}
	if *hot {
		return hotKeyMain(ctx, c.Seed, *redisURL, *out, stdout)
	}
	if *redisURL != "" {
		d, closeRedis, err := accuracy.OpenRedis(*redisURL)
		if err != nil {
			return err
		}
		defer closeRedis()
		c.Decider, c.KeyPrefix = d, "rls-bench:accuracy:"+strconv.FormatInt(time.Now().UnixNano(), 36)+":"
	}
	start := time.Now()
	r, err := accuracy.Run(ctx, c)
	if err != nil {
		return err
	}
	if err := r.WriteFiles(*out); err != nil {
		return err
	}
	var requests int64
	for _, row := range r.Figures {
		requests += row[0].Requests
	}
	fmt.Fprintf(stdout, "%d requests in %d traces × %d algorithms, %s, peak memory %s, %d CPUs; files in %s\n",
		requests, len(r.Figures), len(r.Config.Algorithms), time.Since(start).Round(time.Millisecond), peakRSS(), runtime.GOMAXPROCS(0), *out)
	return nil
}

// peakRSS is this process's peak resident memory (VmHWM, Linux), or "?".
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// hotKeyMain is `rls-bench accuracy -hotkey`: the hot-key row's own run,
// on the Redis at url, written to dir/accuracy-hotkey.md.
func hotKeyMain(ctx context.Context, seed uint64, url, dir string, stdout io.Writer) error {
	if url == "" {
		return errors.New("-hotkey needs -redis-url: the mode is a layer over the Redis store")
	}
	start := time.Now()
	prefix := "rls-bench:accuracy:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	h, err := accuracy.RunHotKey(ctx, url, prefix, accuracy.HotKeySmall(seed))
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := h.WriteMarkdown(&b); err != nil {
		return err
	}
	path := filepath.Join(dir, accuracy.HotKeyFile)
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "hot-key row: %d calls to Redis, %s, peak memory %s; written to %s\n", h.Calls, time.Since(start).Round(time.Millisecond), peakRSS(), path)
	return nil
}
