package config

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Error is every error Load and Parse return: a problem at a place in a
// limits file. Operators fix files from the message alone, so it always
// names the file and, whenever the problem is inside the file, the line and
// the word at fault.
//
// Use errors.As to get at the fields; Unwrap exposes the underlying error
// (an *fs.PathError, for one) when there is one, so errors.Is(err,
// fs.ErrNotExist) works too.
type Error struct {
	// File is the path of the file, or of the directory, at fault.
	File string
	// Line is the 1-based line of the problem; 0 when it concerns the file
	// as a whole (it cannot be read, it is empty).
	Line int
	// Word is what the error is about: a field name as written
	// ("rate_limti", "unit"), a descriptor's composite key
	// ("api.path_/users"), a domain or metadata key; empty when there is
	// nothing to point at (a missing field, a YAML syntax error).
	Word string
	// Msg says what is wrong with Word.
	Msg string

	err error
}

// Error formats the error as FILE:LINE: WORD: MSG, leaving out "LINE:" when
// Line is 0 and "WORD: " when Word is empty, the way compilers report
// errors, so that editors can jump to the place.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	b.WriteString(":")
	if e.Line > 0 {
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteString(":")
	}
	b.WriteString(" ")
	if e.Word != "" {
		b.WriteString(e.Word)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the error this one reports, if any.
func (e *Error) Unwrap() error { return e.err }

// fileError reports an error of the file system about file.
func fileError(file string, err error) *Error {
	msg := err.Error()
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		// The path is already in File; keep "open: permission denied".
		msg = pe.Op + ": " + pe.Err.Error()
	}
	return &Error{File: file, Msg: msg, err: err}
}

// syntaxError turns an error of the YAML library into an *Error with a
// line. The library only gives a string ("yaml: line 3: ..."), and its line
// is often not the problem's: it is 1-based for scanner errors but 0-based
// for parser errors, missing when 0, missing for reader errors, and it
// points at the start of the enclosing construct (the mapping whose
// indentation is off) rather than at the faulty line. So the library's line
// is only where the search starts: the problem is on the first line from
// there such that the file cut after it fails with the same message. The
// search parses prefixes again, but only of a file already known to be
// broken, and only a logarithmic number of them. The syntax fixtures of the
// tests pin all of this, so a library upgrade that changes it shows up
// there.
func syntaxError(file string, data []byte, err error) *Error {
	line, msg := splitYAMLError(err)
	switch {
	case line > 0 && parserProblems[msg]:
		line++ // a 0-based mark
	case line > 0: // a 1-based mark
	case parserProblems[msg] || scannerProblem(msg):
		line = 1 // the library omits line 0 (0-based) and line 1 alike
	case strings.HasPrefix(msg, "unknown anchor '"):
		name := strings.TrimSuffix(strings.TrimPrefix(msg, "unknown anchor '"), "' referenced")
		line = aliasLine(data, name)
	default:
		line = badCharLine(data)
	}
	if line > 0 {
		line = problemLine(data, line, msg)
	}
	return &Error{File: file, Line: line, Msg: "invalid YAML: " + msg, err: err}
}

// splitYAMLError splits "yaml: line 3: msg" into 3 and msg.
func splitYAMLError(err error) (int, string) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, after, ok := strings.Cut(rest, ": "); ok {
			if v, err := strconv.Atoi(n); err == nil {
				return v, after
			}
		}
	}
	return 0, msg
}

// problemLine is the first line, from line from on, such that data cut
// after it fails to parse with message msg. Once the faulty line is in, the
// cut file fails as the whole one does, so a galloping search then a
// bisection find it in a logarithmic number of parses.
func problemLine(data []byte, from int, msg string) int {
	var ends []int
	for end := 0; end < len(data); {
		end = lineEnd(data, end)
		ends = append(ends, end)
	}
	n := len(ends)
	if from >= n {
		return max(n, 1)
	}
	fails := func(line int) bool { return yamlProblem(data[:ends[line-1]]) == msg }
	if fails(from) {
		return from
	}
	lo, hi := from, n // fails(hi): the whole file does
	for step := 1; lo+step < n; step *= 2 {
		if fails(lo + step) {
			hi = lo + step
			break
		}
		lo += step
	}
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; fails(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// yamlProblem is the message of the error parsing every document of data,
// or "".
func yamlProblem(data []byte) string {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return ""
			}
			_, msg := splitYAMLError(err)
			return msg
		}
	}
}

// parserProblems are the messages of go.yaml.in/yaml/v3's parser, whose
// marks are 0-based.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// scannerProblem reports whether msg comes from the scanner (whose marks
// are 1-based) rather than from the reader (which has no line at all).
func scannerProblem(msg string) bool {
	for _, p := range []string{"control characters", "invalid ", "incomplete ", "input error"} {
		if strings.HasPrefix(msg, p) {
			return false
		}
	}
	return !strings.HasPrefix(msg, "unknown anchor ")
}

// aliasLine is the line of the first alias *name in data, or 0.
func aliasLine(data []byte, name string) int {
	alias := []byte("*" + name)
	for off := 0; ; {
		i := bytes.Index(data[off:], alias)
		if i < 0 {
			return 0
		}
		end := off + i + len(alias)
		if end == len(data) || bytes.IndexByte([]byte(" \t\r\n,[]{}"), data[end]) >= 0 {
			return lineAt(data, off+i)
		}
		off = end
	}
}

// badCharLine is the line of the first character the YAML reader refuses
// (invalid UTF-8 or a control character), or 0.
func badCharLine(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && n <= 1,
			r < 0x20 && r != '\t' && r != '\n' && r != '\r',
			r > 0x7E && r < 0xA0 && r != 0x85,
			r >= 0xD800 && r <= 0xDFFF,
			r == 0xFFFE || r == 0xFFFF:
			return lineAt(data, i)
		}
		i += n
	}
	return 0
}

// lineCount is the number of lines of data, not counting the empty "line"
// after a final line break.
func lineCount(data []byte) int {
	n := 0
	for end := 0; end < len(data); n++ {
		end = lineEnd(data, end)
	}
	return max(n, 1)
}

// lineEnd is the offset just after the line that starts at offset start,
// its line break included. Line breaks are YAML's: \n, \r\n, \r, and the
// Unicode NEL, LS and PS.
func lineEnd(data []byte, start int) int {
	for i := start; i < len(data); i++ {
		switch {
		case data[i] == '\n':
			return i + 1
		case data[i] == '\r':
			if i+1 < len(data) && data[i+1] == '\n' {
				return i + 2
			}
			return i + 1
		case bytes.HasPrefix(data[i:], []byte("\u0085")):
			return i + 2
		case bytes.HasPrefix(data[i:], []byte("\u2028")),
			bytes.HasPrefix(data[i:], []byte("\u2029")):
			return i + 3
		}
	}
	return len(data)
}

// lineAt is the line of the byte at offset off.
func lineAt(data []byte, off int) int {
	line := 1
	for end := lineEnd(data, 0); end <= off && end < len(data); end = lineEnd(data, end) {
		line++
	}
	return line
}
