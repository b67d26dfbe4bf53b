package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

type latency struct {
	Min  float64 `json:"min_us"`
	Mean float64 `json:"mean_us"`
	P50  float64 `json:"p50_us"`
	P90  float64 `json:"p90_us"`
	P99  float64 `json:"p99_us"`
	P999 float64 `json:"p999_us"`
	Max  float64 `json:"max_us"`
}

type procCPU struct {
	PID               int     `json:"pid"`
	CPUSeconds        float64 `json:"cpu_seconds"`
	Cores             float64 `json:"cores"`
	MicrosPerDecision float64 `json:"cpu_us_per_decision"`
}

type result struct {
	Addr        string            `json:"addr"`
	Noop        bool              `json:"noop"`
	Domain      string            `json:"domain"`
	Descriptor  string            `json:"descriptor"`
	Keys        int               `json:"keys"`
	Concurrency int               `json:"concurrency"`
	Conns       int               `json:"conns"`
	Rate        float64           `json:"rate"`
	Duration    string            `json:"duration"`
	Elapsed     float64           `json:"elapsed_s"`
	GOMAXPROCS  int               `json:"gomaxprocs"`
	Calls       uint64            `json:"calls"`
	Decisions   uint64            `json:"decisions"`
	OK          uint64            `json:"ok"`
	OverLimit   uint64            `json:"over_limit"`
	Unknown     uint64            `json:"unknown"`
	ErrorCount  uint64            `json:"errors"`
	Errors      map[string]uint64 `json:"errors_by_code"`
	FirstError  string            `json:"first_error,omitempty"`
	Throughput  float64           `json:"throughput"`
	Offered     float64           `json:"offered,omitempty"`
	Latency     latency           `json:"latency"`
	CPU         []procCPU         `json:"cpu,omitempty"`
	// Steal is the share of the machine's CPU time that its hypervisor
	// gave other guests during the run (/proc/stat), 0 where unknown.
	Steal float64 `json:"steal"`
	// CPUBusy is each CPU's busy share during the run (user, system and
	// interrupts; not idle, not stolen), in the order of the CPUs' numbers.
	CPUBusy []float64 `json:"cpu_busy,omitempty"`
}

func (r *result) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func (r *result) writeText(w io.Writer) {
	target := r.Addr
	if r.Noop {
		target += " (in-process no-op)"
	}
	mode := "closed loop"
	if r.Rate > 0 {
		mode = fmt.Sprintf("open loop at %.0f/s offered", r.Rate)
	}
	fmt.Fprintf(w, "target      %s, domain %s, descriptor %s, %d key(s)\n", target, r.Domain, r.Descriptor, r.Keys)
	fmt.Fprintf(w, "load        %d callers on %d connection(s), %s, %.2fs\n", r.Concurrency, r.Conns, mode, r.Elapsed)
	fmt.Fprintf(w, "throughput  %.0f calls/s (%d calls)\n", r.Throughput, r.Calls)
	fmt.Fprintf(w, "answers     OK %d, OVER_LIMIT %d, UNKNOWN %d, errors %d\n", r.OK, r.OverLimit, r.Unknown, r.ErrorCount)
	if r.ErrorCount > 0 {
		var codes []string
		for k, v := range r.Errors {
			codes = append(codes, fmt.Sprintf("%s %d", k, v))
		}
		slices.Sort(codes)
		fmt.Fprintf(w, "errors      %s; first: %s\n", strings.Join(codes, ", "), r.FirstError)
	}
	l := r.Latency
	fmt.Fprintf(w, "latency µs  p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max %.1f  (mean %.1f)\n", l.P50, l.P90, l.P99, l.P999, l.Max, l.Mean)
	fmt.Fprintf(w, "host        %.1f%% of the CPU time stolen by the hypervisor", r.Steal*100)
	if len(r.CPUBusy) > 0 {
		busy := make([]string, len(r.CPUBusy))
		for i, b := range r.CPUBusy {
			busy[i] = fmt.Sprintf("%.0f%%", b*100)
		}
		fmt.Fprintf(w, "; CPUs busy %s", strings.Join(busy, ", "))
	}
	fmt.Fprintln(w)
	for _, p := range r.CPU {
		fmt.Fprintf(w, "cpu pid %-6d %.2f s (%.2f cores), %.2f µs per decision\n", p.PID, p.CPUSeconds, p.Cores, p.MicrosPerDecision)
	}
}
