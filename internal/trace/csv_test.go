package trace

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestReadCSV(t *testing.T) {
	in := "# recorded\n" +
		"2026-01-01T00:00:00Z,user=a;path=/x\n" +
		"\n" +
		"1767225600.25,user=b\r\n" +
		"2026-01-01T00:00:00.25Z,user=a;path=/x\n" +
		"2026-01-01T01:00:00.5+01:00,user=c;q=a=b\n"
	tr, err := ReadCSV(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Start.Equal(Start) {
		t.Errorf("start %s, want %s", tr.Start, Start)
	}
	want := []Request{{0, 0}, {250 * time.Millisecond, 1}, {250 * time.Millisecond, 0}, {500 * time.Millisecond, 2}}
	if len(tr.Requests) != len(want) {
		t.Fatalf("requests %v, want %v", tr.Requests, want)
	}
	for i := range want {
		if tr.Requests[i] != want[i] {
			t.Errorf("request %d: %v, want %v", i, tr.Requests[i], want[i])
		}
	}
	if got := tr.Sources[2].String(); got != "user=c;q=a=b" {
		t.Errorf("source 2: %s", got)
	}
}

// TestReadCSVErrors checks that each bad line is named by its number.
func TestReadCSVErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"2026-01-01T00:00:01Z,a=1\n2026-01-01T00:00:00Z,a=1\n", "line 2: not sorted: 2026-01-01T00:00:00Z is before the previous line's 2026-01-01T00:00:01Z"},
		{"# c\n\nyesterday,a=1\n", `line 3: timestamp "yesterday": want RFC 3339`},
		{"2026-01-01T00:00:00Z\n", "line 1: want TIMESTAMP,KEY=VALUE[;KEY=VALUE…]: no comma"},
		{"2026-01-01T00:00:00Z,\n", "line 1: no descriptor after the comma"},
		{"2026-01-01T00:00:00Z,a=1;b\n", `line 1: descriptor entry 2 "b": want KEY=VALUE`},
		{"2026-01-01T00:00:00Z,a=1\n2026-01-01T00:00:00Z,=1\n", `line 2: descriptor entry 1 "=1": empty key`},
		{"1,a=1\n" + strings.Repeat("x", maxLine+1), "line 2: longer than"},
		{"0001-01-01T00:00:00Z,a=1\n9999-01-01T00:00:00Z,a=1\n", "line 2: more than 290 years"},
	} {
		_, err := ReadCSV(strings.NewReader(c.in))
		var le *LineError
		if !errors.As(err, &le) || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("ReadCSV(%.40q): %v, want %q…", c.in, err, c.want)
		}
	}
}

func TestCSVRoundTrip(t *testing.T) {
	c := config("onoff:1")
	c.Sources, c.Duration = 3, 10*time.Second
	tr, err := c.Generate()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteCSV(&buf, tr); err != nil {
		t.Fatal(err)
	}
	back, err := ReadCSV(&buf)
	if err != nil {
		t.Fatal(err)
	}
	sameTrace(t, tr, back)
}

// sameTrace compares two traces by what a replay sees: each request's
// instant and descriptor.
func sameTrace(t *testing.T, a, b Trace) {
	t.Helper()
	if len(a.Requests) != len(b.Requests) {
		t.Fatalf("%d requests, then %d", len(a.Requests), len(b.Requests))
	}
	for i := range a.Requests {
		ra, rb := a.Requests[i], b.Requests[i]
		if !a.Start.Add(ra.At).Equal(b.Start.Add(rb.At)) || a.Sources[ra.Source].String() != b.Sources[rb.Source].String() {
			t.Fatalf("request %d: %s %s, then %s %s", i, a.Start.Add(ra.At), a.Sources[ra.Source], b.Start.Add(rb.At), b.Sources[rb.Source])
		}
	}
}

func TestWriteCSVRefuses(t *testing.T) {
	tr := Trace{Sources: []Descriptor{{{Key: "a", Value: "x;y"}}}, Requests: []Request{{0, 0}}}
	if err := WriteCSV(&bytes.Buffer{}, tr); err == nil {
		t.Error("a value with ';': no error")
	}
}
