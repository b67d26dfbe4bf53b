package config

import (
	"strings"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits"
)

func candidateFile(rule string) []byte {
	return []byte("domain: a\ndescriptors:\n  - key: k\n    rate_limit: {" + rule + "}\n")
}

// TestCandidate: a candidate is checked and built as a rate limit body
// (defaults, modifiers, count_refused), beside the enforced limit, which
// it leaves as it is; /rlconfig shows it after the rule.
func TestCandidate(t *testing.T) {
	for _, tc := range []struct {
		rule string
		want limits.Limit
		line string
	}{
		{"unit: minute, requests_per_unit: 10, candidate: {unit: minute, requests_per_unit: 5}",
			limits.Limit{Algorithm: limits.SlidingWindow, Requests: 5, Period: time.Minute},
			`a.k: sliding_window 10/1m0s shadow_mode=false candidate="sliding_window 5/1m0s"`},
		{"unit: minute, requests_per_unit: 10, candidate: {unit: second, requests_per_unit: 1, algorithm: token_bucket, burst: 3}",
			limits.Limit{Algorithm: limits.TokenBucket, Requests: 1, Period: time.Second, Burst: 3},
			`a.k: sliding_window 10/1m0s shadow_mode=false candidate="token_bucket 1/1s burst=3"`},
		{"unit: minute, requests_per_unit: 10, candidate: {unit: second, requests_per_unit: 2, algorithm: token_bucket}",
			limits.Limit{Algorithm: limits.TokenBucket, Requests: 2, Period: time.Second, Burst: 2},
			`a.k: sliding_window 10/1m0s shadow_mode=false candidate="token_bucket 2/1s burst=2"`},
		{"unit: minute, requests_per_unit: 10, candidate: {unit: minute, unit_multiplier: 5, requests_per_unit: 30, count_refused: true}",
			limits.Limit{Algorithm: limits.SlidingWindow, Requests: 30, Period: 5 * time.Minute, CountRefused: true},
			`a.k: sliding_window 10/1m0s shadow_mode=false candidate="sliding_window 30/5m0s"`},
		{"unit: minute, requests_per_unit: 10, candidate: {unit: minute, requests_per_unit: 5, block_for: 10m}",
			limits.Limit{Algorithm: limits.SlidingWindow, Requests: 5, Period: time.Minute, BlockFor: 10 * time.Minute},
			`a.k: sliding_window 10/1m0s shadow_mode=false candidate="sliding_window 5/1m0s block_for=10m0s"`},
	} {
		d, err := Parse("x.yaml", candidateFile(tc.rule))
		if err != nil {
			t.Fatalf("%s: %v", tc.rule, err)
		}
		r := d.Descriptors[0].Rules[0]
		if r.Candidate == nil {
			t.Fatalf("%s: no candidate", tc.rule)
		}
		if got := r.Candidate.Limit; got != tc.want {
			t.Errorf("%s: candidate %+v, want %+v", tc.rule, got, tc.want)
		}
		if r.Limit.Requests != 10 || r.Limit.Algorithm != limits.SlidingWindow {
			t.Errorf("%s: enforced limit changed: %s", tc.rule, r.Limit)
		}
		c := &Config{Domains: map[string]*Domain{"a": d}}
		if got := strings.Join(c.Lines(), "\n"); got != tc.line {
			t.Errorf("%s: /rlconfig line\ngot  %s\nwant %s", tc.rule, got, tc.line)
		}
	}
}

// TestCandidateNone: a rule without a candidate has none, and a list may
// give each of its limits one.
func TestCandidateNone(t *testing.T) {
	d, err := Parse("x.yaml", candidateFile("unit: minute, requests_per_unit: 10"))
	if err != nil {
		t.Fatal(err)
	}
	if c := d.Descriptors[0].Rules[0].Candidate; c != nil {
		t.Errorf("candidate %v, want none", c.Limit)
	}
	list := "domain: a\ndescriptors:\n  - key: k\n    rate_limits:\n" +
		"      - {unit: second, requests_per_unit: 10, candidate: {unit: second, requests_per_unit: 8}}\n" +
		"      - {unit: hour, requests_per_unit: 1000}\n"
	if d, err = Parse("x.yaml", []byte(list)); err != nil {
		t.Fatal(err)
	}
	rules := d.Descriptors[0].Rules
	if rules[0].Candidate == nil || rules[0].Candidate.Limit.Requests != 8 || rules[1].Candidate != nil {
		t.Errorf("list candidates: %v, %v", rules[0].Candidate, rules[1].Candidate)
	}
}

// TestCandidateBad: a candidate is refused where it means nothing (an
// unlimited rule, a block rule, a concurrency limit), with what only an
// enforced limit uses, or as a limit that would not load; each error
// names the file, the line and the field.
func TestCandidateBad(t *testing.T) {
	const rule = "unit: minute, requests_per_unit: 10, "
	for _, tc := range []struct{ rule, want string }{
		{"unlimited: true, candidate: {unit: minute, requests_per_unit: 5}",
			"x.yaml:4: candidate: unlimited with a candidate (it refuses nothing, so there is nothing to try a limit against)"},
		{"unit: minute, requests_per_unit: 0, candidate: {unit: minute, requests_per_unit: 5}",
			"x.yaml:4: candidate: a block rule (requests_per_unit 0) takes no candidate: it refuses every request, whatever a candidate would do"},
		{"algorithm: concurrency, requests_per_unit: 10, candidate: {unit: minute, requests_per_unit: 5}",
			"x.yaml:4: candidate: a concurrency limit takes no candidate: its slots are given back by releases, which a candidate that refuses nothing cannot follow"},
		{rule + "candidate: {algorithm: concurrency, requests_per_unit: 5}",
			"x.yaml:4: algorithm: a candidate cannot be a concurrency limit: the slots it took would be given back only by releases, which it cannot follow"},
		{rule + "candidate: {unit: minute, requests_per_unit: 0}",
			"x.yaml:4: requests_per_unit: must be at least 1 for a candidate (0 would refuse every request, which needs no trying)"},
		{rule + "candidate: {unit: minute, requests_per_unit: 5, name: try}",
			"x.yaml:4: name: a candidate takes no name: it is counted under its rule's"},
		{rule + "candidate: {unit: minute, requests_per_unit: 5, failure_mode: deny}",
			"x.yaml:4: failure_mode: a candidate takes no failure_mode (it answers nothing, so no failure mode applies)"},
		{rule + "candidate: {unit: minute, requests_per_unit: 5, warn_at: [0.5]}",
			"x.yaml:4: warn_at: a candidate takes no warn_at (it warns no one)"},
		{rule + "candidate: {unlimited: true}",
			"x.yaml:4: unlimited: a candidate takes no unlimited (leave the candidate out instead)"},
		{rule + "candidate: {unit: minute, requests_per_unit: 5, replaces: [{name: b}]}",
			"x.yaml:4: replaces: a candidate takes no replaces: it replaces nothing"},
		{rule + "candidate: {unit: minute, requests_per_unit: 5, candidate: {unit: minute, requests_per_unit: 4}}",
			"x.yaml:4: candidate: a candidate takes no candidate of its own"},
		{rule + "candidate: {requests_per_unit: 5}", "x.yaml:4: candidate: has no unit"},
		{rule + "candidate: {unit: fortnight, requests_per_unit: 5}",
			`x.yaml:4: unit: want second, minute, hour, day, week, month or year, got "fortnight"`},
		{rule + "candidate: {unit: minute, requests_per_unit: 5, burst: 2}",
			"x.yaml:4: burst: sliding_window takes no burst (only token_bucket and leaky_bucket do)"},
		{rule + "candidate: {unit: minute, requests_per_unti: 5}",
			"x.yaml:4: requests_per_unti: unknown field in a rate limit, did you mean requests_per_unit?"},
		{rule + "candidate: 5", "x.yaml:4: candidate: want a mapping with requests_per_unit and unit, got 5"},
	} {
		_, err := Parse("x.yaml", candidateFile(tc.rule))
		checkError(t, tc.rule, err, tc.want)
	}
	// In a block mapping, the error is at the candidate's own line.
	block := "domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 10\n" +
		"      candidate:\n        unit: second\n        requests_per_unit: -1\n"
	_, err := Parse("x.yaml", []byte(block))
	checkError(t, "block", err, "x.yaml:9: requests_per_unit: must be at least 0, got -1")
	// candidate belongs in a rate limit, not in a descriptor.
	misplaced := "domain: a\ndescriptors:\n  - key: k\n    candidate: {unit: second, requests_per_unit: 1}\n"
	_, err = Parse("x.yaml", []byte(misplaced))
	checkError(t, "misplaced", err, "x.yaml:4: candidate: unknown field in a descriptor (it belongs in rate_limit)")
}
