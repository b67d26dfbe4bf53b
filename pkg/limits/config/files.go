package config

import (
	"os"
	"path/filepath"
	"strings"
)

// isLimitsFileName reports whether a directory entry of this name is read as
// a limits file, provided it is a file: its name ends in .yaml or .yml and
// does not start with a dot. Dot names are skipped because a Kubernetes
// ConfigMap volume holds every key twice, once as a top-level symlink and
// once inside the ..data directory it points into (..data and its
// timestamped targets start with dots), and because editors keep their
// temporary copies under dot names.
func isLimitsFileName(name string) bool {
	return !strings.HasPrefix(name, ".") && (strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml"))
}

// DirFiles lists the limits files of directory dir, in name order: the
// entries isLimitsFileName accepts that are regular files once symlinks are
// followed (a ConfigMap's keys are symlinks). Subdirectories are not read.
// Load reads these files and the config watcher watches these same files,
// so that what one reads the other sees change.
//
// An entry with a limits file's name that cannot be followed, a dangling
// symlink for one, is listed all the same, and the error (an *Error) names
// the first such entry: Load refuses the directory rather than silently
// loading less, while a watcher keeps the whole list so that it notices the
// entry being repaired. When dir itself cannot be read, DirFiles returns no
// files and that error.
func DirFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fileError(dir, err)
	}
	var files []string
	var first error
	for _, e := range entries {
		if !isLimitsFileName(e.Name()) {
			continue
		}
		file := filepath.Join(dir, e.Name())
		switch {
		case e.Type().IsRegular():
		case e.Type()&os.ModeSymlink != 0:
			info, err := os.Stat(file)
			if err != nil {
				if first == nil {
					first = fileError(file, err)
				}
			} else if !info.Mode().IsRegular() {
				continue
			}
		default:
			continue // a directory, a socket, a device
		}
		files = append(files, file)
	}
	return files, first
}

// NotLoaded lists what directory dir holds besides its limits files and
// the names skipped by design (those starting with a dot): a file that is
// not *.yaml or *.yml (notes.txt), a subdirectory (team/, whose files are
// not read), anything else that is no regular file. They are the
// operator's to know of, since envoyproxy/ratelimit's runtime loads every
// file, subdirectories too. Paths in name order, a directory's ending in
// a slash; none when dir cannot be read.
func NotLoaded(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		info, err := os.Stat(path) // symlinks followed, as DirFiles does
		switch {
		case err != nil:
			// A dangling limits file is Load's error; any other, not loaded.
			if !isLimitsFileName(name) {
				out = append(out, path)
			}
		case info.IsDir():
			out = append(out, path+string(filepath.Separator))
		case !info.Mode().IsRegular() || !isLimitsFileName(name):
			out = append(out, path)
		}
	}
	return out
}
