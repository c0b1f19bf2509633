// SPDX-License-Identifier: Apache-2.0
// Copyright 2026 The sluice Authors.

package registry

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// moduleRoot is two levels up from this package.
const moduleRoot = "../.."

// TestNoPackageLevelState: state lives in objects (one Runtime per
// scheduler), never in package variables. A top-level var in non-test code
// may only be an interface assertion (var _ I = ...), a sentinel error, a
// compiled regexp, scheme registration, a metric (pkg/metrics), or a
// string the linker stamps (its comment says -ldflags). Test helpers
// (test/) are exempt.
func TestNoPackageLevelState(t *testing.T) {
	registration := map[string]bool{"SchemeGroupVersion": true, "SchemeBuilder": true, "localSchemeBuilder": true, "AddToScheme": true, "Resource": true}
	eachSourceFile(t, []string{"pkg/metrics"}, func(rel string, f *ast.File) {
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					var value ast.Expr
					if i < len(vs.Values) {
						value = vs.Values[i]
					}
					doc := g.Doc.Text() + vs.Doc.Text()
					switch {
					case name.Name == "_",
						isCallTo(value, "errors", "New"), isCallTo(value, "regexp", "MustCompile"),
						registration[name.Name] && strings.HasPrefix(rel, "pkg/apis/"),
						isLiteral(value) && strings.Contains(doc, "-ldflags"):
					default:
						t.Errorf("%s: package-level var %s holds state; keep it in an object, or make it a func or a const", rel, name.Name)
					}
				}
			}
		}
	})
}

// isLiteral reports a missing or literal initializer (a linker-stamped
// string's default).
func isLiteral(e ast.Expr) bool {
	_, ok := e.(*ast.BasicLit)
	return e == nil || ok
}

func isCallTo(e ast.Expr, pkg, fn string) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg && sel.Sel.Name == fn
}

// TestPluginsImportNoPlugin: a plugin never depends on another plugin
// (directly or through anything it imports); what two plugins share lives
// in a domain package or the runtime.
func TestPluginsImportNoPlugin(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps=false", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./pkg/plugins/...")
	cmd.Dir = moduleRoot
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const plugins = "github.com/sluice-sched/sluice/pkg/plugins/"
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 5 {
		t.Fatalf("go list found %d plugin packages, want 5:\n%s", len(lines), out)
	}
	for _, line := range lines {
		fields := strings.Fields(line)
		for _, dep := range fields[1:] {
			if strings.HasPrefix(dep, plugins) {
				t.Errorf("%s depends on the plugin %s", fields[0], dep)
			}
		}
	}
}

// TestRoomHeldOnlyByTheLedger: the overflow room live claims hold is read
// by the disruption ledger alone (disruption.Ledger.Room and Held), so
// the claim engine, the planner and the production profile's filter all
// count a claim's reservation the same way; none asks the claims store.
func TestRoomHeldOnlyByTheLedger(t *testing.T) {
	calls := 0
	eachSourceFile(t, nil, func(rel string, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Reservations" && sel.Sel.Name != "ReservationsFor" {
				return true
			}
			calls++
			if rel != filepath.Join("pkg", "disruption", "room.go") {
				t.Errorf("%s calls %s: the room claims hold is the disruption ledger's to read (Ledger.Room, Ledger.Held)", rel, sel.Sel.Name)
			}
			return true
		})
	})
	if calls == 0 {
		t.Error("no call to Reservations or ReservationsFor found: the check reads nothing")
	}
}

// eachSourceFile parses every non-test, non-generated Go file of the
// module outside test/ (and outside the directories in skip, relative to
// the module root) and hands it to f with its path.
func eachSourceFile(t *testing.T, skip []string, f func(rel string, file *ast.File)) {
	t.Helper()
	err := filepath.WalkDir(moduleRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(moduleRoot, path)
		if d.IsDir() {
			switch {
			case rel == ".git", rel == "_output", rel == "bin", rel == "test", slices.Contains(skip, rel):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasPrefix(d.Name(), "zz_generated") {
			return nil
		}
		file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		f(rel, file)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
