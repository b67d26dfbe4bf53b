package sizes

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLayoutNamesEveryPackage keeps docs/architecture.md's Layout table a
// map a newcomer can trust: every folder of the module that holds Go files
// has a row of its own, or is named, as `name`, in its parent's row (a
// package's test helper beside it, as internal/xds's xdstest).
func TestLayoutNamesEveryPackage(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := layoutRows(string(doc))
	if len(rows) == 0 {
		t.Fatal("docs/architecture.md has no Layout table")
	}
	for _, dir := range goFolders(t, root) {
		if _, ok := rows[dir]; ok {
			continue
		}
		parent, base := filepath.ToSlash(filepath.Dir(dir)), filepath.Base(dir)
		if row, ok := rows[parent]; ok && strings.Contains(row, "`"+base+"`") {
			continue
		}
		t.Errorf("%s holds Go files and has no row in docs/architecture.md's Layout table (nor is it named as `%s` in its parent's)", dir, base)
	}
}

// layoutRow is a row of the Layout table: | `folder` | what it holds |.
var layoutRow = regexp.MustCompile("(?m)^\\| `([^`]+)` \\| (.*)\\|$")

// layoutRows are the Layout table's rows, by folder.
func layoutRows(doc string) map[string]string {
	_, table, ok := strings.Cut(doc, "\n## Layout\n")
	if !ok {
		return nil
	}
	if end := strings.Index(table, "\n## "); end >= 0 {
		table = table[:end]
	}
	rows := make(map[string]string)
	for _, m := range layoutRow.FindAllStringSubmatch(table, -1) {
		rows[m[1]] = m[2]
	}
	return rows
}

// goFolders are the module's folders that hold Go files, from its root,
// the modules of their own included (they have rows too), testdata and
// hidden folders left out.
func goFolders(t *testing.T, root string) []string {
	t.Helper()
	seen := make(map[string]bool)
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" || (path != root && strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		if rel = filepath.ToSlash(rel); rel != "." && !seen[rel] {
			seen[rel] = true
			dirs = append(dirs, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}
