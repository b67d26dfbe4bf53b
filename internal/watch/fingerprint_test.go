package watch

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
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
		{"dotfile", "", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, ".a.yaml.swp"), "domain: a\n")
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := setup(t)
			path, isDir := dir, true
			if tc.file != "" {
				path, isDir = filepath.Join(dir, tc.file), false
			}
			before := fingerprintOf(path, isDir)
			tc.change(t, dir)
			after := fingerprintOf(path, isDir)
			if got := before != after; got != tc.changed {
				t.Errorf("changed: got %v, want %v\nbefore:\n%s\nafter:\n%s", got, tc.changed, before, after)
			}
		})
	}
}

// fingerprintOf is the fingerprint of a Watcher of path alone.
func fingerprintOf(path string, dir bool) string {
	return (&Watcher{targets: []target{{path: path, dir: dir}}}).fingerprint()
}

// digestOf is the content digest of a Watcher of path alone.
func digestOf(path string, dir bool) [32]byte {
	return (&Watcher{targets: []target{{path: path, dir: dir}}}).contents().digest
}

// The digest changes with what a reader of the files gets, and with
// nothing else.
func TestContentDigest(t *testing.T) {
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		file    string // "" for the directory
		change  func(t *testing.T, c *configMap)
		changed bool
	}{
		{"nothing", "", func(t *testing.T, c *configMap) {}, false},
		{"touch", "limits.yaml", func(t *testing.T, c *configMap) {
			later := time.Now().Add(time.Hour)
			must(t, os.Chtimes(filepath.Join(c.dir, c.cur, "limits.yaml"), later, later))
		}, false},
		{"swap to the same data", "", func(t *testing.T, c *configMap) { c.publish("domain: a\n") }, false},
		{"swap to the same data, file", "limits.yaml", func(t *testing.T, c *configMap) { c.publish("domain: a\n") }, false},
		{"swap", "", func(t *testing.T, c *configMap) { c.publish("domain: b\n") }, true},
		{"swap, file", "limits.yaml", func(t *testing.T, c *configMap) { c.publish("domain: b\n") }, true},
		{"same size, other bytes", "limits.yaml", func(t *testing.T, c *configMap) {
			write(t, filepath.Join(c.dir, c.cur, "limits.yaml"), "domain: z\n")
		}, true},
		{"file added", "", func(t *testing.T, c *configMap) {
			write(t, filepath.Join(c.dir, "more.yaml"), "domain: m\n")
		}, true},
		{"same bytes under another name", "", func(t *testing.T, c *configMap) {
			must(t, os.Rename(filepath.Join(c.dir, "limits.yaml"), filepath.Join(c.dir, "renamed.yaml")))
		}, true},
		{"file removed, file", "limits.yaml", func(t *testing.T, c *configMap) {
			must(t, os.Remove(filepath.Join(c.dir, "limits.yaml")))
		}, true},
		{"dotfile added", "", func(t *testing.T, c *configMap) {
			write(t, filepath.Join(c.dir, ".more.yaml"), "domain: m\n")
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConfigMap(t, "domain: a\n")
			path, isDir := c.dir, true
			if tc.file != "" {
				path, isDir = filepath.Join(c.dir, tc.file), false
			}
			before := digestOf(path, isDir)
			tc.change(t, c)
			if got := digestOf(path, isDir) != before; got != tc.changed {
				t.Errorf("changed: got %v, want %v", got, tc.changed)
			}
		})
	}
}

// The watcher sees a change to a file of a directory when, and only when,
// config.Load reads that file: the two share one rule for which files of a
// directory are limits files.
func TestSameFilesAsLoad(t *testing.T) {
	dir := t.TempDir()
	for name, domain := range map[string]string{
		"a.yaml":                         "a",
		"b.yml":                          "b",
		"c.json":                         "c",
		".hidden.yaml":                   "hidden",
		"..2026_11_30_07_56_01.1/a.yaml": "data",
		"sub.yaml/d.yaml":                "sub",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, p, "domain: "+domain+"\n")
	}
	if err := os.Symlink("..2026_11_30_07_56_01.1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	domains := func() []string {
		t.Helper()
		c, err := config.Load(dir)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		names := slices.Collect(maps.Keys(c.Domains))
		slices.Sort(names)
		return names
	}

	for _, tc := range []struct {
		file string
		read bool
	}{
		{"a.yaml", true},
		{"b.yml", true},
		{"c.json", false},
		{".hidden.yaml", false},
		{"..data/a.yaml", false},
		{"sub.yaml/d.yaml", false},
	} {
		loaded, digest := domains(), digestOf(dir, true)
		write(t, filepath.Join(dir, tc.file), "domain: changed_"+strings.NewReplacer("/", "_", ".", "_").Replace(tc.file)+"\n")
		read := !slices.Equal(domains(), loaded)
		seen := digestOf(dir, true) != digest
		if read != tc.read || seen != read {
			t.Errorf("a change to %s: read by Load %v (want %v), seen by the watcher %v", tc.file, read, tc.read, seen)
		}
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
		if got := dirsOf(path, isDir); !slices.Equal(got, want) {
			t.Errorf("dirs(%q, %v): got %q, want %q", path, isDir, got, want)
		}
	}
	c.publish("domain: b\n")
	want = []string{real, filepath.Join(real, c.cur)}
	if got := dirsOf(c.dir, true); !slices.Equal(got, want) {
		t.Errorf("after swap: got %q, want %q", got, want)
	}
}

// dirsOf is the directories a Watcher of path alone watches.
func dirsOf(path string, dir bool) []string {
	return (&Watcher{targets: []target{{path: path, dir: dir}}}).dirs()
}

func BenchmarkFingerprint(b *testing.B) {
	dir := b.TempDir()
	for _, name := range []string{"a.yaml", "b.yaml", "c.yaml", "d.yml"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("domain: x\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	w := &Watcher{targets: []target{{path: dir, dir: true}}}
	for b.Loop() {
		w.fingerprint()
	}
}
