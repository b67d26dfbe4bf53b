package dropin

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/envoy-rls/envoy-rls/pkg/limits/config"
)

// checkRuntimeDir refuses a runtime directory that holds a file
// envoyproxy/ratelimit would load and envoy-rls would not, so that no
// limit is silently left out. goruntime loads every file under
// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY, recursively,
// skipping names that start with a dot when RUNTIME_IGNOREDOTFILES is
// true; with RUNTIME_WATCH_ROOT true, also the files of
// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY whose names start with the application
// directory's and a dot. envoy-rls loads the *.yaml and *.yml files of the
// application directory (config.DirFiles), not its subdirectories, and
// never a name that starts with a dot; the kubelet's own entries (..data
// and its timestamped targets), which goruntime would load a second time
// without RUNTIME_IGNOREDOTFILES, are not reported. A directory that does
// not exist is left to the loader to report.
func checkRuntimeDir(root, sub, app string, ignoreDot, watchRoot bool) error {
	dir := filepath.Join(root, sub, app)
	files, err := config.DirFiles(dir)
	if err != nil {
		return nil // the loader reports it, with the same words as ever
	}
	loaded := map[string]bool{}
	for _, f := range files {
		loaded[f] = true
	}
	stray := func(path string) error {
		return fmt.Errorf("%s: envoyproxy/ratelimit would load this file, but envoy-rls loads only the *.yaml and *.yml files directly in %s (RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY), skipping names that start with a dot: rename it or move it out", path, dir)
	}
	skip := func(name string) bool {
		return strings.HasPrefix(name, "..") || ignoreDot && strings.HasPrefix(name, ".")
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil // unreadable there too: goruntime warns and goes on
		case path == dir:
			return nil
		case skip(d.Name()) && d.IsDir():
			return filepath.SkipDir
		case skip(d.Name()) || d.IsDir() || loaded[path]:
			return nil
		}
		if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
			return nil // a symlink to a directory or to nothing: unreadable there too
		}
		return stray(path)
	})
	if err != nil || !watchRoot {
		return err
	}
	entries, _ := os.ReadDir(filepath.Join(root, sub))
	for _, en := range entries {
		if path := filepath.Join(root, sub, en.Name()); strings.HasPrefix(en.Name(), app+".") && !skip(en.Name()) {
			if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
				return stray(path)
			}
		}
	}
	return nil
}
