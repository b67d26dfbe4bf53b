package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// worker is one caller's tallies; merged at the end.
type worker struct {
	h        *hdrhistogram.Histogram
	ok       uint64
	over     uint64
	unknown  uint64
	errs     map[string]uint64
	firstErr error
}

// requests builds one request per key index, so that the callers only pick.
func requests(c *settings) ([]*rlsv3.RateLimitRequest, error) {
	tmpl, err := parseTemplate(c.template)
	if err != nil {
		return nil, err
	}
	reqs := make([]*rlsv3.RateLimitRequest, c.keys)
	for n := range reqs {
		num := strconv.Itoa(n)
		d := &ratelimitv3.RateLimitDescriptor{}
		for _, e := range tmpl {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{
				Key:   strings.ReplaceAll(e.key, "{n}", num),
				Value: strings.ReplaceAll(e.value, "{n}", num),
			})
		}
		reqs[n] = &rlsv3.RateLimitRequest{Domain: c.domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{d}, HitsAddend: uint32(c.hits)}
	}
	return reqs, nil
}

// run loads the service cfg names and measures it.
func run(ctx context.Context, c *settings) (*result, error) {
	addr := c.addr
	if c.noop {
		a, stop, err := startNoop("127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer stop()
		addr = a
	}
	reqs, err := requests(c)
	if err != nil {
		return nil, err
	}
	clients, closeClients, err := connect(ctx, c, addr, reqs[0])
	defer closeClients()
	if err != nil {
		return nil, err
	}
	cpu0, err := sampleCPU(c.pids)
	if err != nil {
		return nil, err
	}
	host0, _ := hostTicks() // not every system has /proc/stat
	start := time.Now()
	workers := load(ctx, c, clients, reqs, start)
	elapsed := time.Since(start)
	cpu1, err := sampleCPU(c.pids)
	if err != nil {
		return nil, err
	}
	host1, _ := hostTicks()
	r := summarize(c, addr, workers, elapsed)
	r.Steal, r.CPUBusy = hostShares(host0, host1)
	for i, pid := range c.pids {
		p := procCPU{PID: pid, CPUSeconds: (cpu1[i] - cpu0[i]).Seconds()}
		if r.Decisions > 0 {
			p.MicrosPerDecision = p.CPUSeconds * 1e6 / float64(r.Decisions)
		}
		p.Cores = p.CPUSeconds / elapsed.Seconds()
		r.CPU = append(r.CPU, p)
	}
	return r, ctx.Err()
}

// connect opens c.conns connections to addr and makes a first call on
// each, before the clock starts: one call per connection, not counted (it
// may take a hit of key 0). A call that reached the server and failed
// (failure mode error with Redis down) is what a run may be there to
// measure: only a connection that never came up stops the run. The
// function returned closes the connections, whatever the error.
func connect(ctx context.Context, c *settings, addr string, first *rlsv3.RateLimitRequest) ([]rlsv3.RateLimitServiceClient, func(), error) {
	var conns []*grpc.ClientConn
	closeAll := func() {
		for _, cc := range conns {
			cc.Close()
		}
	}
	clients := make([]rlsv3.RateLimitServiceClient, c.conns)
	for i := range clients {
		cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, closeAll, err
		}
		conns = append(conns, cc)
		clients[i] = rlsv3.NewRateLimitServiceClient(cc)
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = clients[i].ShouldRateLimit(wctx, first, grpc.WaitForReady(true))
		cancel()
		if err != nil && cc.GetState() != connectivity.Ready {
			return nil, closeAll, fmt.Errorf("first call to %s: %w", addr, err)
		}
	}
	return clients, closeAll, nil
}

// load runs c.concurrency callers from start for c.duration, spread over
// the clients, and returns their tallies.
func load(ctx context.Context, c *settings, clients []rlsv3.RateLimitServiceClient, reqs []*rlsv3.RateLimitRequest, start time.Time) []*worker {
	l := &loadRun{c: c, reqs: reqs, start: start, deadline: start.Add(c.duration)}
	if c.rate > 0 {
		l.interval = time.Duration(float64(time.Second) / c.rate)
		if l.interval <= 0 {
			l.interval = 1
		}
	}
	workers := make([]*worker, c.concurrency)
	var wg sync.WaitGroup
	for i := range workers {
		w := &worker{h: newLatencies(), errs: map[string]uint64{}}
		workers[i] = w
		client := clients[i%len(clients)]
		rng := rand.New(rand.NewPCG(uint64(i)+1, uint64(start.UnixNano())))
		wg.Go(func() { l.call(ctx, w, client, rng) })
	}
	wg.Wait()
	return workers
}

// loadRun is what the callers of one load share.
type loadRun struct {
	c               *settings
	reqs            []*rlsv3.RateLimitRequest
	start, deadline time.Time
	// interval is the open loop's spacing of calls (0: closed loop), and
	// next the index of the next call due.
	interval time.Duration
	next     atomic.Int64
	// ids numbers the holds of -hold.
	ids atomic.Uint64
}

// call is one caller: it calls until the deadline, each call when it is
// due in an open loop, else as soon as the last is answered, and tallies
// the answers in w.
func (l *loadRun) call(ctx context.Context, w *worker, client rlsv3.RateLimitServiceClient, rng *rand.Rand) {
	for ctx.Err() == nil {
		var sent time.Time
		if l.interval > 0 {
			due := l.start.Add(time.Duration(l.next.Add(1)-1) * l.interval)
			if !due.Before(l.deadline) {
				return
			}
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
			sent = due
		} else {
			sent = time.Now()
			if !sent.Before(l.deadline) {
				return
			}
		}
		req := l.reqs[0]
		if len(l.reqs) > 1 {
			req = l.reqs[rng.IntN(len(l.reqs))]
		}
		cctx, cancel := context.WithTimeout(ctx, l.c.timeout)
		var resp *rlsv3.RateLimitResponse
		var err error
		if l.c.hold != "" {
			resp, err = l.holdPair(cctx, client, req)
		} else {
			resp, err = client.ShouldRateLimit(cctx, req)
		}
		cancel()
		recordLatency(w.h, time.Since(sent))
		switch {
		case err != nil:
			w.errs[status.Code(err).String()]++
			if w.firstErr == nil {
				w.firstErr = err
			}
		case resp.GetOverallCode() == rlsv3.RateLimitResponse_OK:
			w.ok++
		case resp.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT:
			w.over++
		default:
			w.unknown++
		}
	}
}

// summarize merges the workers' tallies into the run's result.
func summarize(c *settings, addr string, workers []*worker, elapsed time.Duration) *result {
	r := &result{
		Addr: addr, Noop: c.noop, Concurrency: c.concurrency, Conns: c.conns,
		Rate: c.rate, Keys: c.keys, Descriptor: c.template, Domain: c.domain,
		Duration: c.duration.String(), Elapsed: elapsed.Seconds(),
		Errors: map[string]uint64{}, GOMAXPROCS: runtime.GOMAXPROCS(0),
	}
	h := newLatencies()
	for _, w := range workers {
		h.Merge(w.h)
		r.OK += w.ok
		r.OverLimit += w.over
		r.Unknown += w.unknown
		for k, v := range w.errs {
			r.Errors[k] += v
			r.ErrorCount += v
		}
		if r.FirstError == "" && w.firstErr != nil {
			r.FirstError = w.firstErr.Error()
		}
	}
	r.Calls = uint64(h.TotalCount())
	r.Decisions = r.OK + r.OverLimit + r.Unknown
	r.Throughput = float64(r.Calls) / elapsed.Seconds()
	if c.rate > 0 {
		r.Offered = c.rate
	}
	r.Latency = latency{
		Min: us(h.Min()), Mean: h.Mean() / 1e3, P50: us(h.ValueAtPercentile(50)), P90: us(h.ValueAtPercentile(90)),
		P99: us(h.ValueAtPercentile(99)), P999: us(h.ValueAtPercentile(99.9)), Max: us(h.Max()),
	}
	return r
}

func us(ns int64) float64 { return float64(ns) / 1e3 }

// maxLatency is the longest latency a histogram tells apart; a longer one
// (an open loop far behind its schedule) counts as this.
const maxLatency = time.Hour

// newLatencies is a histogram of latencies in nanoseconds, from 1 ns to
// maxLatency, of two significant digits: a percentile is reported within
// 1/128 (0.8%) of the true value, with 36 KB of counters and no
// allocation per record. It is not safe for concurrent use: each caller
// has its own, merged at the end.
func newLatencies() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(maxLatency), 2)
}

// recordLatency counts d in h, within h's range.
func recordLatency(h *hdrhistogram.Histogram, d time.Duration) {
	h.RecordValue(int64(min(max(d, 0), maxLatency))) //nolint:errcheck // in range: it cannot fail
}
