package simulate

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/descriptors"
)

// ReadCSV reads a trace of lines `timestamp,key=value;key2=value2`: the
// timestamp RFC 3339 or seconds since the epoch (decimals allowed), the
// descriptor's entries in order. Blank lines and lines starting with #
// are skipped. The lines must be in time order; an error names the line.
func ReadCSV(r io.Reader) ([]Event, error) {
	var events []Event
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		e, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if len(events) > 0 && e.At.Before(events[len(events)-1].At) {
			return nil, fmt.Errorf("line %d: %s comes before the line ahead of it: the trace must be sorted by time", n, e.At.Format(time.RFC3339Nano))
		}
		events = append(events, e)
	}
	return events, sc.Err()
}

func parseLine(line string) (Event, error) {
	ts, desc, ok := strings.Cut(line, ",")
	if !ok {
		return Event{}, fmt.Errorf("%q: want timestamp,key=value;key=value", line)
	}
	at, err := parseTime(strings.TrimSpace(ts))
	if err != nil {
		return Event{}, err
	}
	e := Event{At: at}
	for _, kv := range strings.Split(desc, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return Event{}, fmt.Errorf("entry %q: want key=value", kv)
		}
		e.Entries = append(e.Entries, descriptors.Entry{Key: k, Value: v})
	}
	return e, nil
}

func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 {
		return time.Time{}, fmt.Errorf("timestamp %q: want RFC 3339 or seconds since the epoch", s)
	}
	return time.UnixMicro(int64(f * 1e6)).UTC(), nil
}
