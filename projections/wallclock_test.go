package projections

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestFoldsReadNoWallClock: a fold is a pure function of the log, and time
// enters only through the events' fields. A fold that read the wall clock
// would rebuild to other state than it served, and every comparison of a
// rebuild with the live state runs within milliseconds of it, so such a
// leak passes them unless a second or an hour happens to turn in between
// (helper-110 put time.Now into a registry record: no test failed). So
// the folds' packages are read here, and a call to time.Now, time.Since,
// time.Until, ulid.Make or ulid.Now in them fails the test, outside the places listed, which
// only time the replay for the log.
func TestFoldsReadNoWallClock(t *testing.T) {
	allowed := map[string]bool{ // file:function
		"projections/runner.go:Run": true, // how long the replay took, for the log line
	}
	// By import path: the calls that read the wall clock. ulid.Make and
	// ulid.Now read it inside (helper-111).
	clock := map[string]map[string]bool{
		"time":                     {"Now": true, "Since": true, "Until": true},
		"github.com/oklog/ulid/v2": {"Make": true, "Now": true},
	}
	for _, dir := range []string{".", "../ledger", "../reputation"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("no Go files in %s", dir)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			banned := map[string]map[string]bool{} // by the name the file imports it under
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				calls, ok := clock[p]
				if !ok {
					continue
				}
				name := filepath.Base(p)
				if p == "github.com/oklog/ulid/v2" {
					name = "ulid"
				}
				if imp.Name != nil {
					name = imp.Name.Name
				}
				banned[name] = calls
			}
			if len(banned) == 0 {
				continue
			}
			pkg := filepath.Base(filepath.Dir(mustAbs(t, path)))
			for _, decl := range f.Decls {
				name := "(a declaration)" // a package-level var's initialiser, say
				if fn, ok := decl.(*ast.FuncDecl); ok {
					name = fn.Name.Name
				}
				where := pkg + "/" + filepath.Base(path) + ":" + name
				ast.Inspect(decl, func(n ast.Node) bool {
					sel, ok := n.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					if id, ok := sel.X.(*ast.Ident); ok && banned[id.Name][sel.Sel.Name] && !allowed[where] {
						t.Errorf("%s: %s.%s in %s: a fold must take its time from the event (ReceivedAt, a body's timestamp), never the wall clock",
							fset.Position(sel.Pos()), id.Name, sel.Sel.Name, name)
					}
					return true
				})
			}
		}
	}
}

func mustAbs(t *testing.T, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
