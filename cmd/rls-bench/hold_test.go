package main

import (
	"context"
	"testing"
)

// TestServiceHolds: with -hold, each decision is a reserve and its settle
// of the same cost, which leave the budget charged once: 5 a day admit 4
// pairs after the connection's first call (a plain hit) took one.
func TestServiceHolds(t *testing.T) {
	addr := serveLimits(t, `
domain: llm
holds: {id: request_id, settle: settle, lease: 1m}
descriptors:
  - key: api_key
    rate_limit: {algorithm: fixed_window, unit: day, requests_per_unit: 5}
`)
	c := mustFlags(t, "-addr", addr, "-domain", "llm", "-duration", "300ms", "-concurrency", "4", "-descriptor", "api_key=k", "-hold", "request_id")
	r, err := run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, r)
	if r.OK != 4 || r.ErrorCount != 0 {
		t.Errorf("OK %d, OVER_LIMIT %d of %d decisions (errors %v %s); want 4 OK", r.OK, r.OverLimit, r.Decisions, r.Errors, r.FirstError)
	}
}

func TestHoldFlags(t *testing.T) {
	for _, bad := range [][]string{
		{"-hold", "id", "-settle", ""},
		{"-hold", "id", "-settle", "id"},
	} {
		if _, err := parseFlags(bad, nil); err == nil {
			t.Errorf("parseFlags(%q): no error", bad)
		}
	}
	c := mustFlags(t, "-descriptor", "api_key=k", "-hold", "request_id")
	reqs, err := requests(c)
	if err != nil {
		t.Fatal(err)
	}
	e := withEntries(reqs[0], c.hold, "r1", c.settle).Descriptors[0].Entries
	if len(e) != 3 || e[1].Key != "request_id" || e[1].Value != "r1" || e[2].Key != "settle" || len(reqs[0].Descriptors[0].Entries) != 1 {
		t.Errorf("settle entries %v, from %v", e, reqs[0])
	}
}
