package config

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"strconv"
	"strings"

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

// syntaxError turns an error of the YAML parser into an *Error with the
// line at fault. The parser's message is a string ("yaml: line 3: ..."),
// and its line is the start of the construct it was reading (the mapping
// whose indentation is off), not always the faulty line, and often missing
// (on line 1, for a bad character, an unknown anchor). So it is only where
// the search starts: the problem is on the first line from there such
// that the file cut after it fails with the same message. The search
// parses prefixes again, but only of a file already known to be broken,
// and only a logarithmic number of them. The syntax fixtures of the tests
// pin this, so a library upgrade that changes it shows up there.
func syntaxError(data []byte, err error) *Error {
	line, msg := splitYAMLError(err.Error())
	line = problemLine(data, max(line, 1), msg)
	if tabIndents(data, line, msg) {
		return &Error{Line: line, Msg: "a tab indents this line; YAML indents with spaces", err: err}
	}
	return &Error{Line: line, Msg: "invalid YAML: " + msg, err: err}
}

// splitYAMLError splits "yaml: line 3: msg" into 3 and msg.
func splitYAMLError(s string) (int, string) {
	msg := strings.TrimPrefix(s, "yaml: ")
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

// tabIndents reports whether the problem msg on line is a tab in the
// line's indentation, which YAML forbids and editors hide: the indentation
// holds a tab, and with spaces instead the file cut after the line no
// longer fails that way. (A tab where it is allowed, inside [ ] or { },
// changes nothing.)
func tabIndents(data []byte, line int, msg string) bool {
	start := 0
	for range line - 1 {
		start = lineEnd(data, start)
	}
	end := lineEnd(data, start)
	indent := len(data[start:end]) - len(bytes.TrimLeft(data[start:end], " \t"))
	if bytes.IndexByte(data[start:start+indent], '\t') < 0 {
		return false
	}
	spaced := append(bytes.Clone(data[:start]), bytes.ReplaceAll(data[start:start+indent], []byte("\t"), []byte(" "))...)
	return yamlProblem(append(spaced, data[start+indent:end]...)) != msg
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
			_, msg := splitYAMLError(err.Error())
			return msg
		}
	}
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
