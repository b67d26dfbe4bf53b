package watch

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// files returns the files of a directory target, the very ones config.Load
// reads: a dangling symlink among them is listed too (its error is in the
// fingerprint and the digest, not here), and a directory that cannot be
// read lists none.
func (t target) files() []string {
	files, _ := config.DirFiles(t.path)
	return files
}

// fingerprint describes the watched files cheaply, without reading them:
// for each file its name, symlink target, resolved path, size and
// modification time. Two equal fingerprints mean that, as far as a stat
// can tell, nothing changed; two different ones that the contents may
// have. A missing file or unreadable directory is part of the fingerprint,
// not an error, since it too is a state to compare.
func (w *Watcher) fingerprint() string {
	var b strings.Builder
	for _, t := range w.targets {
		t.fingerprint(&b)
	}
	return b.String()
}

func (t target) fingerprint(b *strings.Builder) {
	if !t.dir {
		describe(b, t.path)
		return
	}
	resolved, err := filepath.EvalSymlinks(t.path)
	if err != nil {
		fmt.Fprintf(b, "dir %s: %v\n", t.path, err)
		return
	}
	fmt.Fprintf(b, "dir %s\n", resolved)
	files, err := config.DirFiles(t.path)
	if err != nil {
		fmt.Fprintf(b, "list: %v\n", err)
	}
	for _, f := range files {
		describe(b, f)
	}
}

// describe appends one file's line of a fingerprint.
func describe(b *strings.Builder, name string) {
	fmt.Fprintf(b, "%q", name)
	if target, err := os.Readlink(name); err == nil {
		fmt.Fprintf(b, " -> %q", target)
	}
	if resolved, err := filepath.EvalSymlinks(name); err == nil {
		fmt.Fprintf(b, " = %q", resolved)
	}
	fi, err := os.Stat(name)
	if err != nil {
		fmt.Fprintf(b, " %v\n", err)
		return
	}
	fmt.Fprintf(b, " %d %d\n", fi.Size(), fi.ModTime().UnixNano())
}

// contents is what the watched files held at one look.
type contents struct {
	// digest digests the names of the files, which for a directory say
	// which files it holds, and their bytes (or the error reading them).
	// Unlike the fingerprint it ignores where a symlink points and when a
	// file was written, so that it changes when, and only when, what a
	// reader of the files gets changes.
	digest [sha256.Size]byte
	// files is each file's part, by the name it is read under, so that
	// two looks can tell which files changed and how (inPlace).
	files map[string]fileContents
}

// fileContents is one file's part of contents.
type fileContents struct {
	sum [sha256.Size]byte // of the bytes, or of the error reading them
	// info is the file's own, taken from the handle the bytes were read
	// from, so that it describes the very file read: nil if it could not
	// be opened.
	info os.FileInfo
	// resolved is the path the name resolves to, where fsnotify reports
	// the writes that change these bytes; empty if it does not resolve.
	resolved string
}

// contents reads the watched files.
func (w *Watcher) contents() contents {
	c := contents{files: make(map[string]fileContents)}
	h := sha256.New()
	for _, t := range w.targets {
		if !t.dir {
			c.add(h, t.path)
			continue
		}
		fmt.Fprintf(h, "dir %q\n", t.path)
		files, err := config.DirFiles(t.path)
		if err != nil {
			fmt.Fprintf(h, "list: %v\n", err)
		}
		for _, f := range files {
			c.add(h, f)
		}
	}
	h.Sum(c.digest[:0])
	return c
}

// add reads one file into c, and writes its part of the digest to h: its
// name and its length-prefixed bytes, so that no two lists of files write
// the same.
func (c *contents) add(h io.Writer, name string) {
	fc := fileContents{}
	if r, err := filepath.EvalSymlinks(name); err == nil {
		fc.resolved = r
	}
	data, info, err := readFile(name)
	fc.info = info
	if err != nil {
		fmt.Fprintf(h, "%q error %v\n", name, err)
		fc.sum = sha256.Sum256([]byte(err.Error()))
	} else {
		fmt.Fprintf(h, "%q %d\n", name, len(data))
		h.Write(data) //nolint:errcheck // a hash never fails to write
		fc.sum = sha256.Sum256(data)
	}
	c.files[name] = fc
}

// readFile reads a file and stats the handle it read from.
func readFile(name string) ([]byte, os.FileInfo, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(f)
	return data, info, err
}

// inPlace tells whether the change from the contents prev to cur may be a
// write in place, and so possibly a write still under way: a file whose
// bytes changed while it stayed the same file (a rewrite, an append), a
// file that was not there before (created, then written), or a file that
// fsnotify reported written, its resolved path in written. What else can
// change, a file replaced by another one whole (renamed over it, or swapped
// in by a ConfigMap's `..data` symlink) or a file removed, is complete the
// moment it is seen.
func inPlace(prev, cur contents, written map[string]bool) bool {
	for name, c := range cur.files {
		if c.resolved != "" && written[c.resolved] {
			return true
		}
		p, ok := prev.files[name]
		switch {
		case !ok:
			return true
		case p.sum == c.sum:
		case p.info != nil && c.info != nil && os.SameFile(p.info, c.info):
			return true
		}
	}
	return false
}
