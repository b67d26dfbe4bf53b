package suggest

import "testing"

func TestNearest(t *testing.T) {
	units := []string{"second", "minute", "hour", "day", "week", "month", "year"}
	for _, tc := range []struct {
		word  string
		names []string
		want  string
	}{
		{"minutes", units, "minute"},
		{"Hours", units, "hour"},
		{"fortnight", units, ""},
		{"minute", units, ""},       // a known name is no typo
		{"Minute", units, "minute"}, // but one in the wrong case is
		{"sliding-window", []string{"fixed_window", "sliding_window", "sliding_log"}, "sliding_window"},
		{"RLS_REDIS_ULR", []string{"RLS_REDIS_TLS", "RLS_REDIS_URL"}, "RLS_REDIS_URL"}, // a swap is one edit
		{"ab", []string{"xy", "ac", "ad"}, "ac"},                                       // the first of equally near names
	} {
		if got := Nearest(tc.word, tc.names); got != tc.want {
			t.Errorf("Nearest(%q): got %q, want %q", tc.word, got, tc.want)
		}
	}
	if got, want := DidYouMean("bad", "minutes", units), "bad, did you mean minute?"; got != want {
		t.Errorf("DidYouMean: got %q, want %q", got, want)
	}
	if got := DidYouMean("bad", "fortnight", units); got != "bad" {
		t.Errorf("DidYouMean with nothing near: got %q, want bad", got)
	}
}
