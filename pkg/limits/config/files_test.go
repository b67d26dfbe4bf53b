package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestIsLimitsFileName(t *testing.T) {
	for name, want := range map[string]bool{
		"a.yaml":            true,
		"b.yml":             true,
		"c.json":            false,
		"d.yaml.swp":        false,
		"yaml":              false,
		".hidden.yaml":      false,
		"..data":            false,
		".limits.yaml.tmp":  false,
		"..2026_11_30.1":    false,
		"with.dots.in.yaml": true,
	} {
		if got := isLimitsFileName(name); got != want {
			t.Errorf("isLimitsFileName(%q): got %v, want %v", name, got, want)
		}
	}
}

func TestDirFiles(t *testing.T) {
	dir := t.TempDir()
	mustWrite := func(name string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte("domain: x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mustSymlink := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"a.yaml", "b.yml", "c.json", "d.yaml.swp", ".hidden.yaml"} {
		mustWrite(name)
	}
	for _, name := range []string{"sub.yaml", "..2026_11_30_07_56_01.1"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustSymlink("..2026_11_30_07_56_01.1", "..data")
	mustSymlink("sub.yaml", "linkdir.yaml")
	mustSymlink("a.yaml", "link.yaml")

	got, err := DirFiles(dir)
	if err != nil {
		t.Fatalf("DirFiles: %v", err)
	}
	want := []string{"a.yaml", "b.yml", "link.yaml"}
	if names := baseNames(got); !slices.Equal(names, want) {
		t.Errorf("DirFiles: got %q, want %q", names, want)
	}

	// A dangling symlink is listed, and named by the error.
	mustSymlink("missing.yaml", "broken.yaml")
	got, err = DirFiles(dir)
	want = []string{"a.yaml", "b.yml", "broken.yaml", "link.yaml"}
	if names := baseNames(got); !slices.Equal(names, want) {
		t.Errorf("DirFiles with a dangling symlink: got %q, want %q", names, want)
	}
	wantErr := filepath.Join(dir, "broken.yaml") + ": stat: no such file or directory"
	if e, ok := errors.AsType[*Error](err); !ok || e.Error() != wantErr || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("DirFiles with a dangling symlink: got error %v, want the *Error %q wrapping fs.ErrNotExist", err, wantErr)
	}

	// A directory that cannot be read gives no files.
	got, err = DirFiles(filepath.Join(dir, "nothing-here"))
	if got != nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("DirFiles of a missing directory: got %q, %v; want none and fs.ErrNotExist", got, err)
	}
}

func baseNames(files []string) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = filepath.Base(f)
	}
	return out
}

// What a directory holds besides its limits files is listed, and carried
// by the config Load reads from it; dot names are not.
func TestNotLoaded(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.yaml":                "domain: a\n",
		"notes.txt":             "remember\n",
		"team/limits.yaml":      "domain: team\n",
		".hidden":               "x",
		"..2026_11_30.1/a.yaml": "domain: a\n",
	})
	if err := os.Symlink("nowhere", filepath.Join(dir, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "gone.txt"), filepath.Join(dir, "notes.txt"), filepath.Join(dir, "team") + "/"}
	if got := NotLoaded(dir); !slices.Equal(got, want) {
		t.Errorf("NotLoaded: got %q, want %q", got, want)
	}
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Domains) != 1 || !slices.Equal(c.NotLoaded, want) {
		t.Errorf("Load: got domains %v, not loaded %q; want a alone, and %q", c.Domains, c.NotLoaded, want)
	}
	if c, err := Load(filepath.Join(dir, "a.yaml")); err != nil || c.NotLoaded != nil {
		t.Errorf("Load of a file: got %v, not loaded %q; want none", err, c.NotLoaded)
	}
}
