package watch

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestFingerprint(t *testing.T) {
	old := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	// setup lays out a directory with two limits files, a non-limits file
	// and a symlinked one, all with a fixed mtime.
	setup := func(t *testing.T) string {
		t.Helper()
		dir := t.TempDir()
		for name, content := range map[string]string{
			"a.yaml":          "domain: a\n",
			"b.yml":           "domain: b\n",
			"notes.txt":       "notes\n",
			"data/c.yaml":     "domain: c\n",
			"data/other.yaml": "domain: o\n",
		} {
			p := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, p, content)
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(filepath.Join("data", "c.yaml"), filepath.Join(dir, "c.yaml")); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		name    string
		file    string // "" for the directory
		change  func(t *testing.T, dir string)
		changed bool
	}{
		{"nothing", "", func(t *testing.T, dir string) {}, false},
		{"nothing, file", "a.yaml", func(t *testing.T, dir string) {}, false},
		{"size", "", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "a.yaml"), "domain: aa\n")
			must(t, os.Chtimes(filepath.Join(dir, "a.yaml"), old, old))
		}, true},
		{"mtime", "", func(t *testing.T, dir string) {
			must(t, os.Chtimes(filepath.Join(dir, "b.yml"), old, old.Add(time.Second)))
		}, true},
		{"mtime, file", "a.yaml", func(t *testing.T, dir string) {
			must(t, os.Chtimes(filepath.Join(dir, "a.yaml"), old, old.Add(time.Nanosecond)))
		}, true},
		{"file added", "", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "d.yaml"), "")
		}, true},
		{"file removed", "", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, "b.yml")))
		}, true},
		{"file removed, file", "a.yaml", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, "a.yaml")))
		}, true},
		{"symlink retargeted", "", func(t *testing.T, dir string) {
			// Same size and mtime: only the target tells.
			write(t, filepath.Join(dir, "data", "c2.yaml"), "domain: d\n")
			must(t, os.Chtimes(filepath.Join(dir, "data", "c2.yaml"), old, old))
			must(t, os.Remove(filepath.Join(dir, "c.yaml")))
			must(t, os.Symlink(filepath.Join("data", "c2.yaml"), filepath.Join(dir, "c.yaml")))
		}, true},
		{"symlink retargeted, file", "c.yaml", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "data", "c2.yaml"), "domain: d\n")
			must(t, os.Chtimes(filepath.Join(dir, "data", "c2.yaml"), old, old))
			must(t, os.Remove(filepath.Join(dir, "c.yaml")))
			must(t, os.Symlink(filepath.Join("data", "c2.yaml"), filepath.Join(dir, "c.yaml")))
		}, true},
		{"other file", "", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "notes.txt"), "more notes\n")
		}, false},
		{"other file, file", "a.yaml", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "b.yml"), "domain: bb\n")
		}, false},
		{"subdirectory not read", "", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "data", "other.yaml"), "domain: oo\n")
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := setup(t)
			path, isDir := dir, true
			if tc.file != "" {
				path, isDir = filepath.Join(dir, tc.file), false
			}
			before := fingerprint(path, isDir)
			tc.change(t, dir)
			after := fingerprint(path, isDir)
			if got := before != after; got != tc.changed {
				t.Errorf("changed: got %v, want %v\nbefore:\n%s\nafter:\n%s", got, tc.changed, before, after)
			}
		})
	}
}

func TestRelevantFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.yaml", "b.yml", "c.txt", "d.yaml.swp", ".hidden.yaml"} {
		write(t, filepath.Join(dir, name), "")
	}
	for _, name := range []string{"sub.yaml", "..2026_11_30_07_56_01.1"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("..2026_11_30_07_56_01.1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub.yaml", filepath.Join(dir, "linkdir.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.yaml", filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	got, err := relevantFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i] = filepath.Base(got[i])
	}
	want := []string{".hidden.yaml", "a.yaml", "b.yml", "link.yaml"}
	if !slices.Equal(got, want) {
		t.Errorf("relevantFiles: got %q, want %q", got, want)
	}
}

func TestDirs(t *testing.T) {
	c := newConfigMap(t, "domain: a\n")
	real, err := filepath.EvalSymlinks(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{real, filepath.Join(real, c.cur)}
	for _, isDir := range []bool{false, true} {
		path := c.dir
		if !isDir {
			path = filepath.Join(c.dir, "limits.yaml")
		}
		if got := dirs(path, isDir); !slices.Equal(got, want) {
			t.Errorf("dirs(%q, %v): got %q, want %q", path, isDir, got, want)
		}
	}
	c.publish("domain: b\n")
	want = []string{real, filepath.Join(real, c.cur)}
	if got := dirs(c.dir, true); !slices.Equal(got, want) {
		t.Errorf("after swap: got %q, want %q", got, want)
	}
}

func BenchmarkFingerprint(b *testing.B) {
	dir := b.TempDir()
	for _, name := range []string{"a.yaml", "b.yaml", "c.yaml", "d.yml"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("domain: x\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		fingerprint(dir, true)
	}
}
