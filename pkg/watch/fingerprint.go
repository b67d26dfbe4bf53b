package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// relevantFiles returns the limits files of a directory: its entries named
// *.yaml or *.yml that are not directories (symlinks to files count, as in
// a ConfigMap), in name order. Subdirectories are not read, so the
// ConfigMap's `..data` and timestamped directories are skipped.
func relevantFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".yaml", ".yml":
		default:
			continue
		}
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			continue
		}
		if e.Type()&os.ModeSymlink != 0 {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				continue
			}
		}
		files = append(files, p)
	}
	return files, nil
}

// fingerprint describes the limits at path cheaply, without reading them:
// for each relevant file its name, symlink target, resolved path, size and
// modification time. Two equal fingerprints mean that, as far as a stat can
// tell, nothing changed. A missing file or unreadable directory is part of
// the fingerprint, not an error, since it too is a state to compare.
func fingerprint(path string, dir bool) string {
	var b strings.Builder
	if !dir {
		describe(&b, path)
		return b.String()
	}
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		fmt.Fprintf(&b, "dir %s: %v\n", path, err)
		return b.String()
	}
	fmt.Fprintf(&b, "dir %s\n", resolved)
	files, err := relevantFiles(path)
	if err != nil {
		fmt.Fprintf(&b, "readdir: %v\n", err)
	}
	for _, f := range files {
		describe(&b, f)
	}
	return b.String()
}

// describe appends one file's line of a fingerprint.
func describe(b *strings.Builder, name string) {
	fmt.Fprintf(b, "%q", filepath.Base(name))
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
