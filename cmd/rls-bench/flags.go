package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

const maxDuration = 10 * time.Minute

type settings struct {
	addr        string
	concurrency int
	conns       int
	duration    time.Duration
	rate        float64
	domain      string
	template    string
	keys        int
	hits        uint
	timeout     time.Duration
	noop        bool
	serveNoop   string
	pids        []int
	json        bool
	cpuProfile  string
	allowRemote bool
	// hold and settle are the keys of a holds domain's id and settle
	// entries: with hold set, each decision is a reserve and its settle.
	hold, settle string
}

func parseFlags(args []string, stderr io.Writer) (*settings, error) {
	c := &settings{}
	fs := flag.NewFlagSet("rls-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var pids string
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8081", "address of the RateLimitService v3 (gRPC, plaintext)")
	fs.IntVar(&c.concurrency, "concurrency", 16, "concurrent callers")
	fs.IntVar(&c.conns, "conns", 1, "gRPC connections the callers share")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long to send (at most 10m)")
	fs.Float64Var(&c.rate, "rate", 0, "0: closed loop; > 0: open loop, calls per second offered (latency from the intended send time)")
	fs.StringVar(&c.domain, "domain", "edge", "domain of every request")
	fs.StringVar(&c.template, "descriptor", "api_key=k{n}", "the descriptor's entries, key=value[,key=value…]; {n} is replaced by the key index")
	fs.IntVar(&c.keys, "keys", 1, "distinct values of {n}, chosen uniformly (1: one hot key)")
	fs.UintVar(&c.hits, "hits", 0, "hits_addend of every request (0: Envoy's default, 1)")
	fs.DurationVar(&c.timeout, "timeout", time.Second, "deadline of each call")
	fs.BoolVar(&c.noop, "noop", false, "load an in-process no-op RLS (answers OK at once) on 127.0.0.1:0 instead of -addr: the gRPC floor")
	fs.StringVar(&c.serveNoop, "serve-noop", "", "only serve the no-op RLS on this address until interrupted (a floor in a process of its own)")
	fs.StringVar(&pids, "pids", "", "comma-separated process ids whose CPU time (utime+stime, /proc/PID/stat) to report, total and per decision")
	fs.BoolVar(&c.json, "json", false, "print the result as JSON")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write rls-bench's own CPU profile of the run to this file (what the generator costs a call)")
	fs.StringVar(&c.hold, "hold", "", "a holds domain's id key: each decision is then a reserve under a new id and, if admitted, its settle (two calls)")
	fs.StringVar(&c.settle, "settle", "settle", "a holds domain's settle key, sent with -hold's id on the settle call")
	fs.BoolVar(&c.allowRemote, "allow-remote", false, "allow an -addr or -serve-noop that is not a loopback address")
	if err := fs.Parse(args); err != nil {
		return nil, errUsage
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	var err error
	if c.pids, err = parsePIDs(pids); err != nil {
		return nil, err
	}
	if err := c.checkLoopback(); err != nil {
		return nil, err
	}
	return c, nil
}

// check refuses settings out of their bounds and a descriptor template
// that does not parse.
func (c *settings) check() error {
	switch {
	case c.concurrency < 1:
		return errors.New("-concurrency must be at least 1")
	case c.conns < 1:
		return errors.New("-conns must be at least 1")
	case c.duration <= 0:
		return errors.New("-duration must be positive")
	case c.duration > maxDuration:
		return fmt.Errorf("-duration %s is above the bound of %s", c.duration, maxDuration)
	case c.rate < 0:
		return errors.New("-rate must be 0 (closed loop) or positive")
	case c.keys < 1 || c.keys > 10_000_000:
		return errors.New("-keys must be in [1, 10000000]")
	case c.timeout <= 0:
		return errors.New("-timeout must be positive")
	case c.hits > 1<<32-1:
		return errors.New("-hits must fit in 32 bits")
	case c.hold != "" && (c.settle == "" || c.settle == c.hold):
		return errors.New("-settle must be set and differ from -hold")
	}
	_, err := parseTemplate(c.template)
	return err
}

// parsePIDs reads -pids, comma-separated process ids; empty items are
// skipped.
func parsePIDs(list string) ([]int, error) {
	var pids []int
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-pids: %q is not a process id", p)
		}
		pids = append(pids, n)
	}
	return pids, nil
}

// checkLoopback refuses, unless -allow-remote, an address to call or
// serve on that is not a loopback address: the one -serve-noop serves on,
// else -addr unless -noop serves in-process.
func (c *settings) checkLoopback() error {
	if c.allowRemote {
		return nil
	}
	check := c.addr
	if c.serveNoop != "" {
		check = c.serveNoop
	} else if c.noop {
		check = ""
	}
	if check == "" {
		return nil
	}
	return requireLoopback(check)
}

// requireLoopback refuses an address whose host is not (or does not resolve
// only to) a loopback address.
func requireLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if host == "" {
		return fmt.Errorf("address %q listens on or dials every interface: give 127.0.0.1 (or -allow-remote)", addr)
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else if ips, err = net.LookupIP(host); err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return fmt.Errorf("address %q is not a loopback address: pass -allow-remote to load a remote service", addr)
		}
	}
	return nil
}

type entryTemplate struct{ key, value string }

// parseTemplate reads key=value[,key=value…].
func parseTemplate(s string) ([]entryTemplate, error) {
	var out []entryTemplate
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("-descriptor: %q is not key=value", part)
		}
		out = append(out, entryTemplate{k, v})
	}
	return out, nil
}
