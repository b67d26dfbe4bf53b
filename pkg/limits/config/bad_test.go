package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// badConfigs maps every file (or directory) under testdata/bad to the exact
// error Load returns for it.
var badConfigs = map[string]string{
	// Unknown fields.
	"unknown_field_root.yaml":       "testdata/bad/unknown_field_root.yaml:2: descriptor: unknown field at the top level, did you mean descriptors?",
	"unknown_field_descriptor.yaml": "testdata/bad/unknown_field_descriptor.yaml:4: rate_limti: unknown field in a descriptor, did you mean rate_limit?",
	"unknown_field_rate_limit.yaml": "testdata/bad/unknown_field_rate_limit.yaml:6: requests_per_unti: unknown field in a rate limit, did you mean requests_per_unit?",
	"unknown_field_misplaced.yaml":  "testdata/bad/unknown_field_misplaced.yaml:4: unit: unknown field in a descriptor (it belongs in rate_limit)",
	"unknown_field_replaces.yaml":   "testdata/bad/unknown_field_replaces.yaml:8: nmae: unknown field in a replaces entry, did you mean name?",

	// Duplicates.
	"duplicate_domain":            "testdata/bad/duplicate_domain/b.yml:2: api: duplicate domain, first in testdata/bad/duplicate_domain/a.yaml:1",
	"duplicate_descriptor.yaml":   "testdata/bad/duplicate_descriptor.yaml:11: api.path_/users.method_GET: duplicate descriptor, first at line 6",
	"duplicate_field.yaml":        "testdata/bad/duplicate_field.yaml:7: unit: duplicate field, first at line 5",
	"duplicate_metadata_key.yaml": "testdata/bad/duplicate_metadata_key.yaml:6: team: duplicate field, first at line 5",

	// Missing or empty.
	"no_domain.yaml":    "testdata/bad/no_domain.yaml:1: no domain",
	"empty_domain.yaml": "testdata/bad/empty_domain.yaml:1: domain: empty",
	"empty_file.yaml":   "testdata/bad/empty_file.yaml: no domain (the file is empty)",
	"empty_dir":         "testdata/bad/empty_dir: no limits files (*.yaml or *.yml) in the directory",
	"no_key.yaml":       "testdata/bad/no_key.yaml:3: descriptor has no key",
	"empty_key.yaml":    "testdata/bad/empty_key.yaml:3: key: empty",
	"no_unit.yaml":      "testdata/bad/no_unit.yaml:5: rate_limit: has no unit",
	"no_requests.yaml":  "testdata/bad/no_requests.yaml:5: rate_limit: has no requests_per_unit",

	// Values.
	"bad_unit.yaml":                   "testdata/bad/bad_unit.yaml:5: unit: want second, minute, hour, day, week, month or year, got \"fortnight\"",
	"unknown_algorithm.yaml":          "testdata/bad/unknown_algorithm.yaml:5: algorithm: want sliding_window, fixed_window, token_bucket, sliding_log, leaky_bucket or concurrency, got \"gcra\"",
	"unknown_failure_mode.yaml":       "testdata/bad/unknown_failure_mode.yaml:7: failure_mode: want allow, deny, local or error, got \"ignore\"",
	"block_burst.yaml":                "testdata/bad/block_burst.yaml:8: burst: a block rule (requests_per_unit 0, every request refused) takes no burst",
	"requests_negative.yaml":          "testdata/bad/requests_negative.yaml:6: requests_per_unit: must be at least 0, got -5",
	"requests_not_int.yaml":           "testdata/bad/requests_not_int.yaml:6: requests_per_unit: want an integer, got \"ten\"",
	"requests_quoted.yaml":            "testdata/bad/requests_quoted.yaml:6: requests_per_unit: want an integer, got \"10\"",
	"requests_float.yaml":             "testdata/bad/requests_float.yaml:6: requests_per_unit: want an integer, got 10.5",
	"requests_too_many.yaml":          "testdata/bad/requests_too_many.yaml:6: requests_per_unit: must be at most 4294967296, got 4294967297",
	"requests_out_of_range.yaml":      "testdata/bad/requests_out_of_range.yaml:6: requests_per_unit: 99999999999999999999 is out of range",
	"unit_multiplier_zero.yaml":       "testdata/bad/unit_multiplier_zero.yaml:6: unit_multiplier: must be at least 1, got 0",
	"period_too_long.yaml":            "testdata/bad/period_too_long.yaml:6: unit_multiplier: 101 years is longer than the maximum period of 10 years",
	"burst_on_window.yaml":            "testdata/bad/burst_on_window.yaml:7: burst: sliding_window takes no burst (only token_bucket and leaky_bucket do)",
	"burst_on_sliding_log.yaml":       "testdata/bad/burst_on_sliding_log.yaml:8: burst: sliding_log takes no burst (only token_bucket and leaky_bucket do)",
	"sliding_log_too_many.yaml":       "testdata/bad/sliding_log_too_many.yaml:7: requests_per_unit: 20000 is above 10000, the most a sliding_log keeps (one entry per hit): use sliding_window",
	"leaky_bucket_max_delay.yaml":     "testdata/bad/leaky_bucket_max_delay.yaml:9: burst: a leaky_bucket of 10 per second with burst 20 may delay a request 2s, above -max-delay 1s",
	"burst_zero_token_bucket.yaml":    "testdata/bad/burst_zero_token_bucket.yaml:8: burst: must be at least 1 for a token_bucket, got 0",
	"burst_negative.yaml":             "testdata/bad/burst_negative.yaml:8: burst: must be at least 0, got -1",
	"bool_quoted.yaml":                "testdata/bad/bool_quoted.yaml:4: shadow_mode: want true or false, got \"true\"",
	"bool_word.yaml":                  "testdata/bad/bool_word.yaml:4: detailed_metric: want true or false, got \"maybe\"",
	"replaces_empty_name.yaml":        "testdata/bad/replaces_empty_name.yaml:8: replaces: entry without a name",
	"replaces_itself.yaml":            "testdata/bad/replaces_itself.yaml:10: replaces: cannot replace the limit's own name \"users\"",
	"unlimited_with_unit.yaml":        "testdata/bad/unlimited_with_unit.yaml:6: unit: unlimited with a unit",
	"unlimited_with_algorithm.yaml":   "testdata/bad/unlimited_with_algorithm.yaml:5: algorithm: unlimited with an algorithm",
	"rate_limit_and_rate_limits.yaml": "testdata/bad/rate_limit_and_rate_limits.yaml:5: rate_limits: cannot be used together with rate_limit (line 4)",
	"rate_limits_empty.yaml":          "testdata/bad/rate_limits_empty.yaml:4: rate_limits: empty list",
	"rate_limits_bad_body.yaml":       "testdata/bad/rate_limits_bad_body.yaml:8: requests_per_unit: want an integer, got \"lots\"",
	"rate_limits_unlimited.yaml":      "testdata/bad/rate_limits_unlimited.yaml:7: unlimited: not allowed in a rate_limits list; to make the descriptor unlimited, use rate_limit: {unlimited: true} instead of the list",
	"rate_limits_duplicate.yaml":      "testdata/bad/rate_limits_duplicate.yaml:12: rate_limits: duplicate limit sliding_window 100/1m0s, first at line 5 (the limits of a list must differ in algorithm, requests_per_unit, period or burst)",

	// Holds.
	"holds_unknown_field.yaml":  "testdata/bad/holds_unknown_field.yaml:5: leas: unknown field in holds, did you mean lease?",
	"holds_no_id.yaml":          "testdata/bad/holds_no_id.yaml:2: holds: has no id",
	"holds_no_settle.yaml":      "testdata/bad/holds_no_settle.yaml:2: holds: has no settle",
	"holds_empty_id.yaml":       "testdata/bad/holds_empty_id.yaml:3: id: empty",
	"holds_same_keys.yaml":      "testdata/bad/holds_same_keys.yaml:4: settle: the same key as id (line 3); the settle needs an entry of its own",
	"holds_lease_negative.yaml": "testdata/bad/holds_lease_negative.yaml:5: lease: must be positive, got -1m",
	"holds_lease_too_long.yaml": "testdata/bad/holds_lease_too_long.yaml:5: lease: must be within (0, 24h0m0s], got 25h0m0s",
	"holds_lease_number.yaml":   "testdata/bad/holds_lease_number.yaml:5: lease: want a duration such as 15m or 90s, got 600",
	"holds_not_mapping.yaml":    "testdata/bad/holds_not_mapping.yaml:2: holds: want a mapping with id and settle, got \"request_id\"",
	"holds_id_matched.yaml":     "testdata/bad/holds_id_matched.yaml:11: key: \"request_id\" is the holds id key (line 3): its entries are taken out of every descriptor before the match, so no descriptor can match on it",
	"holds_settle_matched.yaml": "testdata/bad/holds_settle_matched.yaml:3: key: \"settle\" is the holds settle key (line 8): its entries are taken out of every descriptor before the match, so no descriptor can match on it",

	// Wrong kinds of node.
	"kind_root.yaml":            "testdata/bad/kind_root.yaml:1: want a mapping with domain and descriptors, got a list",
	"kind_descriptors.yaml":     "testdata/bad/kind_descriptors.yaml:2: descriptors: want a list of descriptors, got \"x\"",
	"kind_descriptor_item.yaml": "testdata/bad/kind_descriptor_item.yaml:3: descriptors: want a descriptor (a mapping with a key), got \"user\"",
	"kind_rate_limit.yaml":      "testdata/bad/kind_rate_limit.yaml:4: rate_limit: want a mapping with requests_per_unit and unit, got 10",
	"merge_not_mapping.yaml":    "testdata/bad/merge_not_mapping.yaml:5: <<: want a mapping or a list of mappings to merge, got 5",

	// Not supported yet.

	// YAML.
	"two_documents.yaml":            "testdata/bad/two_documents.yaml:3: a second YAML document (the first is at line 1); a file holds one domain",
	"alias_cycle.yaml":              "testdata/bad/alias_cycle.yaml:3: invalid YAML: anchor 'all' value contains itself",
	"syntax_first_line.yaml":        "testdata/bad/syntax_first_line.yaml:1: invalid YAML: mapping values are not allowed in this context",
	"syntax_mapping_values.yaml":    "testdata/bad/syntax_mapping_values.yaml:4: invalid YAML: mapping values are not allowed in this context",
	"syntax_indentation.yaml":       "testdata/bad/syntax_indentation.yaml:6: invalid YAML: did not find expected key",
	"syntax_expected_key.yaml":      "testdata/bad/syntax_expected_key.yaml:3: invalid YAML: did not find expected key",
	"syntax_unclosed_flow.yaml":     "testdata/bad/syntax_unclosed_flow.yaml:4: invalid YAML: did not find expected ',' or '}'",
	"syntax_unclosed_quote.yaml":    "testdata/bad/syntax_unclosed_quote.yaml:3: invalid YAML: found unexpected end of stream",
	"syntax_tab.yaml":               "testdata/bad/syntax_tab.yaml:4: a tab indents this line; YAML indents with spaces",
	"syntax_unknown_anchor.yaml":    "testdata/bad/syntax_unknown_anchor.yaml:4: invalid YAML: unknown anchor 'limit' referenced",
	"syntax_control_character.yaml": "testdata/bad/syntax_control_character.yaml:3: invalid YAML: control characters are not allowed",
}

func TestLoadBad(t *testing.T) {
	entries, err := os.ReadDir("testdata/bad")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			want, ok := badConfigs[name]
			if !ok {
				t.Fatalf("testdata/bad/%s has no expected error in badConfigs", name)
			}
			_, err := Load(filepath.Join("testdata/bad", name))
			checkError(t, "Load", err, want)
		})
	}
	for name := range badConfigs {
		if !seen[name] {
			t.Errorf("badConfigs[%q]: no such fixture in testdata/bad", name)
		}
	}
}

// Parse reports the errors Load does, with the file name it is given.
func TestParseBad(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
	}{
		{"empty", "", "x.yaml: no domain (the file is empty)"},
		{"only a document marker", "---\n", "x.yaml: no domain (the file is empty)"},
		{"null", "~\n", "x.yaml: no domain (the file is empty)"},
		{"scalar root", "api\n", `x.yaml:1: want a mapping with domain and descriptors, got "api"`},
		{"domain a list", "domain: [a]\n", "x.yaml:1: domain: want a string, got a list"},
		{"key a mapping", "domain: a\ndescriptors:\n  - key: {a: b}\n", "x.yaml:3: key: want a string, got a mapping"},
		{"non-scalar field name", "domain: a\n[x]: y\n", "x.yaml:2: want a field name, got a list"},
		{"replaces not a list", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, replaces: x}\n", `x.yaml:4: replaces: want a list of {name: …}, got "x"`},
		{"replaces of strings", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, replaces: [x]}\n", `x.yaml:4: replaces: want {name: …}, got "x"`},
		{"unlimited with burst", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, burst: 1}\n", "x.yaml:4: burst: unlimited with a burst"},
		{"unlimited with failure mode", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, failure_mode: deny}\n", "x.yaml:4: failure_mode: unlimited with a failure_mode"},
		{"unlimited with count_refused", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, count_refused: false}\n", "x.yaml:4: count_refused: unlimited with count_refused"},
		{"unlimited not a bool", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: 1}\n", "x.yaml:4: unlimited: want true or false, got 1"},
		{"rate_limit null", "domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n", "x.yaml:4: rate_limit: want a mapping with requests_per_unit and unit, got null"},
		{"rate_limits not a list", "domain: a\ndescriptors:\n  - key: k\n    rate_limits: {unit: second}\n", "x.yaml:4: rate_limits: want a list of rate limits, got a mapping"},
		{"metadata a list", "domain: a\ndescriptors:\n  - key: k\n    metadata: [a]\n", "x.yaml:4: metadata: want a mapping, got a list"},
		{"unit with a typo", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: minutes, requests_per_unit: 1}\n", "x.yaml:4: unit: want second, minute, hour, day, week, month or year, got \"minutes\", did you mean minute?"},
		{"algorithm with a typo", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {algorithm: sliding-window, unit: second, requests_per_unit: 1}\n", "x.yaml:4: algorithm: want sliding_window, fixed_window, token_bucket, sliding_log, leaky_bucket or concurrency, got \"sliding-window\", did you mean sliding_window?"},
		{"failure mode with a typo", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {failure_mode: Deny, unit: second, requests_per_unit: 1}\n", "x.yaml:4: failure_mode: want allow, deny, local or error, got \"Deny\", did you mean deny?"},
		{"burst on fixed window", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {algorithm: fixed_window, unit: second, requests_per_unit: 1, burst: 2}\n", "x.yaml:4: burst: fixed_window takes no burst (only token_bucket and leaky_bucket do)"},
		{"burst too big", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {algorithm: token_bucket, unit: second, requests_per_unit: 1, burst: 4294967297}\n", "x.yaml:4: burst: must be at most 4294967296, got 4294967297"},
		{"burst takes too long to refill", "domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      algorithm: token_bucket\n      unit: day\n      requests_per_unit: 1\n      burst: 4294967296\n", "x.yaml:8: burst: 4294967296 takes longer than 87600h0m0s to refill at 1 per 24h0m0s"},
		{"sliding_log in a list above the bound", "domain: a\ndescriptors:\n  - key: k\n    rate_limits:\n      - {unit: second, requests_per_unit: 20000}\n      - {algorithm: sliding_log, unit: minute, requests_per_unit: 10001}\n", "x.yaml:6: requests_per_unit: 10001 is above 10000, the most a sliding_log keeps (one entry per hit): use sliding_window"},
		{"unlimited alone in a list", "domain: a\ndescriptors:\n  - key: k\n    rate_limits: [{unlimited: true}]\n", "x.yaml:4: unlimited: not allowed in a rate_limits list; to make the descriptor unlimited, use rate_limit: {unlimited: true} instead of the list"},
		{"unlimited with a unit in a list", "domain: a\ndescriptors:\n  - key: k\n    rate_limits:\n      - unit: second\n        unlimited: true\n", "x.yaml:6: unlimited: not allowed in a rate_limits list; to make the descriptor unlimited, use rate_limit: {unlimited: true} instead of the list"},
		{"duplicate limit with a defaulted burst", "domain: a\ndescriptors:\n  - key: k\n    rate_limits:\n      - {algorithm: token_bucket, unit: second, requests_per_unit: 10, burst: 10}\n      - {algorithm: token_bucket, unit: second, requests_per_unit: 10, count_refused: true}\n", "x.yaml:6: rate_limits: duplicate limit token_bucket 10/1s burst=10, first at line 5 (the limits of a list must differ in algorithm, requests_per_unit, period or burst)"},
		{"duplicate limit through an alias", "domain: a\ndescriptors:\n  - key: k\n    rate_limits:\n      - &l {unit: second, requests_per_unit: 10}\n      - {unit: hour, requests_per_unit: 100}\n      - *l\n", "x.yaml:7: rate_limits: duplicate limit sliding_window 10/1s, first at line 5 (the limits of a list must differ in algorithm, requests_per_unit, period or burst)"},
		{"holds null", "domain: a\nholds:\n", "x.yaml:2: holds: want a mapping with id and settle, got null"},
		{"holds a list", "domain: a\nholds: [rid, done]\n", "x.yaml:2: holds: want a mapping with id and settle, got a list"},
		{"holds id a mapping", "domain: a\nholds: {id: {a: b}, settle: done}\n", "x.yaml:2: id: want a string, got a mapping"},
		{"holds empty settle", "domain: a\nholds: {id: rid, settle: ''}\n", "x.yaml:2: settle: empty"},
		{"holds zero lease", "domain: a\nholds: {id: rid, settle: done, lease: 0s}\n", "x.yaml:2: lease: must be positive, got 0s"},
		{"holds lease a word", "domain: a\nholds: {id: rid, settle: done, lease: forever}\n", `x.yaml:2: lease: want a duration such as 15m or 90s, got "forever"`},
		{"holds lease just too long", "domain: a\nholds: {id: rid, settle: done, lease: 86400001ms}\n", "x.yaml:2: lease: must be within (0, 24h0m0s], got 24h0m0.001s"},
		{"holds in a descriptor", "domain: a\ndescriptors:\n  - key: k\n    holds: {id: rid, settle: done}\n", "x.yaml:4: holds: unknown field in a descriptor"},
		{"holds id matched with a value", "domain: a\nholds: {id: rid, settle: done}\ndescriptors:\n  - key: rid\n    value: r1\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
			`x.yaml:4: key: "rid" is the holds id key (line 2): its entries are taken out of every descriptor before the match, so no descriptor can match on it`},
		{"holds settle matched below", "domain: a\nholds: {id: rid, settle: done}\ndescriptors:\n  - key: k\n    descriptors:\n      - key: done\n        rate_limit: {unit: second, requests_per_unit: 1}\n",
			`x.yaml:6: key: "done" is the holds settle key (line 2): its entries are taken out of every descriptor before the match, so no descriptor can match on it`},
		{"leaky bucket too slow in a list", "domain: a\ndescriptors:\n  - key: k\n    rate_limits:\n      - {unit: second, requests_per_unit: 10}\n      - {algorithm: leaky_bucket, unit: minute, unit_multiplier: 2, requests_per_unit: 3, burst: 1}\n", "x.yaml:6: burst: a leaky_bucket of 3 per 2 minutes with burst 1 may delay a request 40s, above -max-delay 1s"},
		{"typo at the root", "domian: a\n", "x.yaml:1: domian: unknown field at the top level, did you mean domain?"},
		{"descriptor field at the root", "domain: a\nkey: b\n", "x.yaml:2: key: unknown field at the top level (it belongs in a descriptor)"},
		{"duplicate wildcard", "domain: a\ndescriptors:\n  - {key: k, value: 'a*'}\n  - {key: k, value: 'a*'}\n", "x.yaml:4: a.k_a*: duplicate descriptor, first at line 3"},
		{"merge list of scalars", "domain: a\n<<: [x]\n", `x.yaml:2: <<: want a mapping or a list of mappings to merge, got "x"`},
		{"tab before a list item", "domain: a\ndescriptors:\n\t- key: k\n", "x.yaml:3: a tab indents this line; YAML indents with spaces"},
		{"tab before a value", "domain:\n\ta\n", "x.yaml:2: a tab indents this line; YAML indents with spaces"},
		{"tab deeper down", "domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n\t  requests_per_unit: 1\n", "x.yaml:6: a tab indents this line; YAML indents with spaces"},
		{"tab inside braces is not the problem", "domain: {a: b,\n\tc: d: e}\n", "x.yaml:2: invalid YAML: did not find expected ',' or '}'"},
		{"duplicate in a merged mapping", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {<<: {unit: second, unit: minute}, requests_per_unit: 1}\n", "x.yaml:4: unit: duplicate field, first at line 4"},
		{"typo in a merged mapping", "domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      <<: {unti: second}\n      requests_per_unit: 1\n", "x.yaml:5: unti: unknown field in a rate limit, did you mean unit?"},
		{"merge in a merged mapping", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {<<: [{<<: 5}], unit: second, requests_per_unit: 1}\n", "x.yaml:4: <<: want a mapping or a list of mappings to merge, got 5"},
		{"null field name", "domain: a\n~: b\n", "x.yaml:2: want a field name, got null"},
		{"unknown anchor as a field name", "domain: a\n*x: b\n", "x.yaml:2: invalid YAML: unknown anchor 'x' referenced"},
		{"duplicate in nested metadata", "domain: a\ndescriptors:\n  - key: k\n    metadata:\n      a:\n        b: 1\n        b: 2\n", "x.yaml:7: b: duplicate field, first at line 6"},
		{"metadata that contains itself", "domain: a\ndescriptors:\n  - key: k\n    metadata: &m {a: *m}\n", "x.yaml:4: invalid YAML: anchor 'm' value contains itself"},
		{"metadata a string", "domain: a\ndescriptors:\n  - key: k\n    metadata: x\n", `x.yaml:4: metadata: want a mapping, got "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(tc.data))
			checkError(t, "Parse", err, tc.want)
		})
	}
}

// checkError checks that err, returned by call, is an *Error that reads
// want.
func checkError(t *testing.T, call string, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got no error, want %q", call, want)
	}
	if got := err.Error(); got != want {
		t.Errorf("%s:\ngot  %s\nwant %s", call, got, want)
	}
	if _, ok := errors.AsType[*Error](err); !ok {
		t.Errorf("%s: got error of type %T, want *Error", call, err)
	}
}
