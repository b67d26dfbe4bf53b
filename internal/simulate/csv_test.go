package simulate

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestReadCSV: both timestamp forms, comments and blank lines skipped,
// several entries in order.
func TestReadCSV(t *testing.T) {
	f, err := os.Open("testdata/trace.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	events, err := ReadCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 15 {
		t.Fatalf("got %d events, want 15", len(events))
	}
	last := events[14]
	if !last.At.Equal(t0.Add(10*time.Second)) || len(last.Entries) != 2 || last.Entries[1].Key != "path" || last.Entries[1].Value != "/x" {
		t.Errorf("last event %+v, want bob and path=/x at t0+10s", last)
	}
}

// TestReadCSVErrors: each bad line is refused with its number and what
// is wrong with it.
func TestReadCSVErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"1767225600\n", `line 1: "1767225600": want timestamp,key=value;key=value`},
		{"# c\n\nyesterday,user=a\n", `line 3: timestamp "yesterday": want RFC 3339 or seconds since the epoch`},
		{"1767225600,user\n", `line 1: entry "user": want key=value`},
		{"1767225600,user=a;\n", `line 1: entry "": want key=value`},
		{"1767225600,user=a\n1767225600,=b\n", `line 2: entry "=b": want key=value`},
		{"-5,user=a\n", `line 1: timestamp "-5": want RFC 3339 or seconds since the epoch`},
	} {
		if _, err := ReadCSV(strings.NewReader(c.in)); err == nil || err.Error() != c.want {
			t.Errorf("%q: got %v, want %q", c.in, err, c.want)
		}
	}
	f, err := os.Open("testdata/unsorted.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = ReadCSV(f)
	if want := "line 4: 2026-01-01T00:00:00.5Z comes before the line ahead of it: the trace must be sorted by time"; err == nil || err.Error() != want {
		t.Errorf("unsorted: got %v, want %q", err, want)
	}
}
