// Package sizes holds the tests of the module's shape: no Go file outside
// the tests over maxFileLines lines, no function over maxFuncLines (a file
// or a function past them is one a reader cannot hold at once; the test
// names each, so that the one who grew it splits it by what its parts
// do), and every folder of Go files on docs/architecture.md's map
// (layout_test.go).
package sizes

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	maxFileLines = 500
	maxFuncLines = 60
)

// skipped are the folders, from the module's root, whose files are not
// the module's code: fixtures, and the modules of their own (the
// integration tests and the dashboards' generator).
var skipped = map[string]bool{
	"deploy/test": true,
	"dashboards":  true,
}

func TestSizes(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", root, err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if d.Name() == "testdata" || skipped[rel] || (rel != "." && strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		files++
		checkFile(t, path, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatalf("no Go file found under %s", root)
	}
}

// checkFile reports the file at path if it is too long, and each of its
// function declarations that is, counted from the func line to the closing
// brace.
func checkFile(t *testing.T, path, rel string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Errorf("%s: %v", rel, err)
		return
	}
	if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
		t.Errorf("%s: %d lines, want at most %d", rel, n, maxFileLines)
	}
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
		if n := end - start + 1; n > maxFuncLines {
			t.Errorf("%s:%d: func %s: %d lines, want at most %d", rel, start, funcName(fn), n, maxFuncLines)
		}
	}
}

// funcName is fn's name, with its receiver's type for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
