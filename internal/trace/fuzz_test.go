package trace

import (
	"bytes"
	"errors"
	"testing"
)

// csvSeeds are FuzzReadCSV's first inputs: good lines of every timestamp
// form, a comment, a blank line, an unsorted pair, bad lines.
var csvSeeds = []string{
	"2026-01-01T00:00:00Z,user=a;path=/x\n1767225600.25,user=b\n",
	"# c\n\n1,a=\n1,a==;b=,\r\n",
	"2026-01-01T00:00:01Z,a=1\n2026-01-01T00:00:00Z,a=1\n",
	"2026-01-01T00:00:00+14:00,a=1\n2025-12-31T10:00:00.000000001Z,a=1\n",
	"x\n,\n1,\n1,=\n1,a\n",
}

// FuzzReadCSV checks that ReadCSV never panics, that every error it returns
// names a line (apart from a reader's own failure, which a bytes.Reader never
// has), and that what it accepts writes back and reads again the same.
func FuzzReadCSV(f *testing.F) {
	for _, seed := range csvSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := ReadCSV(bytes.NewReader(data))
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) || le.Line < 1 {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		var buf bytes.Buffer
		if err := WriteCSV(&buf, tr); err != nil {
			// Keys with ',' are refused on reading; every accepted
			// descriptor must write.
			t.Fatalf("accepted trace does not write: %v", err)
		}
		back, err := ReadCSV(&buf)
		if err != nil {
			t.Fatalf("written trace does not read: %v\n%s", err, buf.Bytes())
		}
		sameTrace(t, tr, back)
	})
}
