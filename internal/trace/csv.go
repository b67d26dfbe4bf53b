package trace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// LineError is a CSV trace's error at one line.
type LineError struct {
	// Line counts from 1.
	Line int
	Msg  string
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// maxLine bounds a CSV line, so that a file without newlines fails with its
// line number instead of growing a buffer without end.
const maxLine = 1 << 20

// unixSeconds is a timestamp in Unix seconds, with up to nine decimals.
var unixSeconds = regexp.MustCompile(`^[0-9]{1,12}(\.[0-9]{1,9})?$`)

// ReadCSV reads a trace of lines TIMESTAMP,KEY=VALUE;KEY2=VALUE2: one request
// per line, its instant (RFC 3339, or Unix seconds with up to nine decimals)
// and the descriptor it carries. Lines must be in the order of their
// instants (equal instants are fine); blank lines and lines starting with #
// are skipped. Every error is a *LineError naming the line. Requests with
// the same descriptor text are one source; offsets count from the first
// request's instant.
func ReadCSV(r io.Reader) (Trace, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), maxLine)
	var t Trace
	index := map[string]int{}
	var last time.Time
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSuffix(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
			continue
		}
		at, desc, err := parseLine(text)
		if err != nil {
			return Trace{}, &LineError{Line: line, Msg: err.Error()}
		}
		if len(t.Requests) == 0 {
			t.Start = at
		} else if at.Before(last) {
			return Trace{}, &LineError{Line: line, Msg: fmt.Sprintf("not sorted: %s is before the previous line's %s",
				at.Format(time.RFC3339Nano), last.Format(time.RFC3339Nano))}
		}
		off := at.Sub(t.Start)
		if off == math.MaxInt64 {
			return Trace{}, &LineError{Line: line, Msg: "more than 290 years after the first request"}
		}
		last = at
		key := desc.String()
		src, ok := index[key]
		if !ok {
			src = len(t.Sources)
			index[key] = src
			t.Sources = append(t.Sources, desc)
		}
		t.Requests = append(t.Requests, Request{At: off, Source: src})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Trace{}, &LineError{Line: line + 1, Msg: fmt.Sprintf("longer than %d bytes", maxLine)}
		}
		return Trace{}, fmt.Errorf("after line %d: %w", line, err)
	}
	return t, nil
}

// parseLine reads one request line.
func parseLine(text string) (time.Time, Descriptor, error) {
	ts, rest, ok := strings.Cut(text, ",")
	if !ok {
		return time.Time{}, nil, errors.New("want TIMESTAMP,KEY=VALUE[;KEY=VALUE…]: no comma")
	}
	at, err := parseTime(ts)
	if err != nil {
		return time.Time{}, nil, err
	}
	desc, err := parseDescriptor(rest)
	return at, desc, err
}

// parseTime reads an RFC 3339 instant or Unix seconds.
func parseTime(ts string) (time.Time, error) {
	if unixSeconds.MatchString(ts) {
		sec, frac, _ := strings.Cut(ts, ".")
		s, _ := strconv.ParseInt(sec, 10, 64)
		ns, _ := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
		return time.Unix(s, ns).UTC(), nil
	}
	at, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return time.Time{}, fmt.Errorf("timestamp %q: want RFC 3339 (2026-01-01T00:00:00.5Z) or Unix seconds (1767225600.5)", ts)
	}
	return at, nil
}

// parseDescriptor reads KEY=VALUE;KEY2=VALUE2. Keys are not empty; a value
// may be, and may hold '=' (only the first one separates).
func parseDescriptor(text string) (Descriptor, error) {
	if text == "" {
		return nil, errors.New("no descriptor after the comma")
	}
	parts := strings.Split(text, ";")
	d := make(Descriptor, 0, len(parts))
	for i, p := range parts {
		k, v, ok := strings.Cut(p, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("descriptor entry %d %q: want KEY=VALUE", i+1, p)
		case k == "":
			return nil, fmt.Errorf("descriptor entry %d %q: empty key", i+1, p)
		case strings.ContainsRune(k, ','):
			return nil, fmt.Errorf("descriptor entry %d %q: a key cannot hold ','", i+1, p)
		case strings.ContainsRune(p, '\r'):
			return nil, fmt.Errorf("descriptor entry %d %q: a carriage return inside a line", i+1, p)
		}
		d = append(d, Entry{Key: k, Value: v})
	}
	return d, nil
}

// WriteCSV writes t as ReadCSV reads it, instants in RFC 3339 UTC. It fails
// on a descriptor that ReadCSV would read differently.
func WriteCSV(w io.Writer, t Trace) error {
	for _, d := range t.Sources {
		if err := checkWritable(d); err != nil {
			return err
		}
	}
	bw := bufio.NewWriter(w)
	for _, r := range t.Requests {
		if r.Source < 0 || r.Source >= len(t.Sources) {
			return fmt.Errorf("trace: request at %s names source %d of %d", r.At, r.Source, len(t.Sources))
		}
		at := t.Start.Add(r.At).UTC().Format(time.RFC3339Nano)
		if _, err := fmt.Fprintf(bw, "%s,%s\n", at, t.Sources[r.Source]); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func checkWritable(d Descriptor) error {
	if len(d) == 0 {
		return errors.New("trace: a source with no descriptor entries")
	}
	for _, e := range d {
		if e.Key == "" || strings.ContainsAny(e.Key, ",;=\r\n") || strings.ContainsAny(e.Value, ";\r\n") {
			return fmt.Errorf("trace: descriptor entry %q=%q cannot be written as CSV", e.Key, e.Value)
		}
	}
	return nil
}
