package kdumpsyms

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go/ast"
)

const modulePath = "github.com/kdumpsyms/kdumpsyms"

// moduleImports parses every non-test Go file of the module (testdata and
// the corpus module excluded) and returns, per package directory, the
// module packages it imports.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(p))
		if _, ok := out[dir]; !ok {
			out[dir] = nil
		}
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if path == modulePath {
				path = "."
			} else if rest, ok := strings.CutPrefix(path, modulePath+"/"); ok {
				path = rest
			} else {
				continue
			}
			if !slices.Contains(out[dir], path) {
				out[dir] = append(out[dir], path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// closure is every module package pkg imports, directly or not.
func closure(graph map[string][]string, pkg string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(p string) {
		for _, q := range graph[p] {
			if !seen[q] {
				seen[q] = true
				walk(q)
			}
		}
	}
	walk(pkg)
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// TestLayering enforces the import rules of the design: data flows one way,
// from containers through translation to decoders to the chain, and the
// contracts at the bottom import nothing of ours.
func TestLayering(t *testing.T) {
	if _, err := os.Stat("go.mod"); err != nil {
		t.Skip("not run from the module root")
	}
	graph := moduleImports(t)
	containers := []string{"elfcore", "diskdump", "memimage", "vmcore", "extract", "."}
	decoders := []string{"kallsyms", "modsyms", "bpfsyms", "btflayout", "printk", "unwind", "export", "crash", "oops", "tasks"}
	rules := []struct {
		pkgs   []string
		banned []string // nil: nothing of ours at all
		why    string
	}{
		{[]string{"memory", "symfinder", "vmcoreinfo", "internal/safeio", "internal/kdumpfmt"}, nil, "the shared contracts import nothing of ours"},
		{decoders, containers, "decoders read kernel memory, never a container"},
		{[]string{"elfcore", "diskdump", "memimage"}, append(slices.Clone(decoders), "symfinder", "internal/vtop", "vmcore"), "containers know nothing of symbols or translation"},
		{[]string{"internal/vtop"}, append(slices.Clone(decoders), "symfinder", "elfcore", "diskdump", "vmcore"), "translation knows nothing of symbols or containers"},
	}
	for _, r := range rules {
		for _, pkg := range r.pkgs {
			if _, ok := graph[pkg]; !ok {
				continue // a package still to come
			}
			for _, dep := range closure(graph, pkg) {
				if r.banned == nil || slices.Contains(r.banned, dep) {
					t.Errorf("%s imports %s: %s", pkg, dep, r.why)
				}
			}
		}
	}
	if len(graph) < 10 {
		t.Fatalf("found only %d packages: %v", len(graph), graph)
	}
}

// TestOneTarget enforces the one description of the machine: the exported
// structs of the decoders and of the translation take a memory.Target
// (embedded or as a field) instead of byte order, pointer size or page
// size fields of their own, each with its own default.
func TestOneTarget(t *testing.T) {
	if _, err := os.Stat("go.mod"); err != nil {
		t.Skip("not run from the module root")
	}
	pkgs := []string{"kallsyms", "modsyms", "bpfsyms", "btflayout", "printk", "unwind", "export", "internal/vtop", "vmcore"}
	banned := []string{"ByteOrder", "PtrSize", "PointerSize", "PageSize"}
	// What a package reports, not what it is told.
	allowed := map[string]bool{"internal/vtop.Layout.PageSize": true}
	fset := token.NewFileSet()
	seen := 0
	for _, pkg := range pkgs {
		files, err := filepath.Glob(filepath.Join(filepath.FromSlash(pkg), "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range files {
			if strings.HasSuffix(p, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				ts, ok := n.(*ast.TypeSpec)
				if !ok || !ts.Name.IsExported() {
					return true
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					return true
				}
				seen++
				for _, fl := range st.Fields.List {
					for _, name := range fl.Names {
						where := pkg + "." + ts.Name.Name + "." + name.Name
						if slices.Contains(banned, name.Name) && !allowed[where] {
							t.Errorf("%s (%s): take a memory.Target instead", where, fset.Position(name.Pos()))
						}
					}
				}
				return true
			})
		}
	}
	if seen < 10 {
		t.Fatalf("found only %d exported structs", seen)
	}
}
