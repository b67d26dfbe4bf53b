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

// contentDigest digests what the watched files hold: the names of the
// files, which for a directory say which files it holds, and their bytes
// (or the error reading them). Unlike the fingerprint it ignores where a
// symlink points and when a file was written, so that it changes when, and
// only when, what a reader of the files gets changes.
func (w *Watcher) contentDigest() [sha256.Size]byte {
	h := sha256.New()
	for _, t := range w.targets {
		if !t.dir {
			digestFile(h, t.path)
			continue
		}
		fmt.Fprintf(h, "dir %q\n", t.path)
		files, err := config.DirFiles(t.path)
		if err != nil {
			fmt.Fprintf(h, "list: %v\n", err)
		}
		for _, f := range files {
			digestFile(h, f)
		}
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// digestFile writes one file's part of a content digest: its name and its
// length-prefixed bytes, so that no two lists of files write the same.
func digestFile(h io.Writer, name string) {
	data, err := os.ReadFile(name)
	if err != nil {
		fmt.Fprintf(h, "%q error %v\n", name, err)
		return
	}
	fmt.Fprintf(h, "%q %d\n", name, len(data))
	h.Write(data) //nolint:errcheck // a hash never fails to write
}
