package layout

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The convention docs/architecture.md states for what it writes in backquotes: a word with a
// slash made of path characters is a path from the repository's root (a file or a directory);
// pkg.Name and pkg.Type.Member name a Go declaration by the package's name. A file's bare name
// (`doc.go`) is not checked: without its directory it names no one file. Anything else in
// backquotes (flags, metric names, -dest keys, URLs) is left to the generated references.
var (
	docPath  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_.-]+)+/?$`)
	docIdent = regexp.MustCompile(`^([a-z][a-z0-9]*)\.([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?$`)
	inline   = regexp.MustCompile("`([^`\n]+)`")
	// fileName is a file's name without its directory (`doc.go`), which says nothing checkable.
	fileName = regexp.MustCompile(`^[A-Za-z0-9_.-]+\.(go|md|mod|sum|proto|yaml|yml|json|png|s)$`)
)

// modulePackage is one package of the module: its directory from the root and the names it
// declares at top level, with the methods and fields of each type.
type modulePackage struct {
	dir     string
	decls   map[string]bool
	members map[string]map[string]bool // type name → its methods and fields
}

// modulePackages lists the module's packages by package name (several directories may share
// one: the commands are all main).
func modulePackages(t *testing.T, root string) map[string][]*modulePackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.Name}} {{.Dir}}", mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	byName := map[string][]*modulePackage{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, dir, _ := strings.Cut(l, " ")
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		byName[name] = append(byName[name], &modulePackage{dir: filepath.ToSlash(rel)})
	}
	if len(byName) < 20 {
		t.Fatalf("go list found %d package names", len(byName))
	}
	return byName
}

// load parses p's non-test files, whatever their build constraints, once.
func (p *modulePackage) load(t *testing.T, root string) {
	t.Helper()
	if p.decls != nil {
		return
	}
	p.decls, p.members = map[string]bool{}, map[string]map[string]bool{}
	member := func(typ, name string) {
		if p.members[typ] == nil {
			p.members[typ] = map[string]bool{}
		}
		p.members[typ][name] = true
	}
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(root, p.dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					p.decls[d.Name.Name] = true
					continue
				}
				typ := d.Recv.List[0].Type
				for {
					switch x := typ.(type) {
					case *ast.StarExpr:
						typ = x.X
						continue
					case *ast.IndexExpr:
						typ = x.X
						continue
					case *ast.IndexListExpr:
						typ = x.X
						continue
					}
					break
				}
				if id, ok := typ.(*ast.Ident); ok {
					member(id.Name, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						p.decls[s.Name.Name] = true
						var fields *ast.FieldList
						switch x := s.Type.(type) {
						case *ast.StructType:
							fields = x.Fields
						case *ast.InterfaceType:
							fields = x.Methods
						}
						if fields == nil {
							continue
						}
						for _, fl := range fields.List {
							for _, n := range fl.Names {
								member(s.Name.Name, n.Name)
							}
							if len(fl.Names) == 0 { // embedded: its name is its type's
								e := fl.Type
								if st, ok := e.(*ast.StarExpr); ok {
									e = st.X
								}
								switch e := e.(type) {
								case *ast.Ident:
									member(s.Name.Name, e.Name)
								case *ast.SelectorExpr:
									member(s.Name.Name, e.Sel.Name)
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							p.decls[n.Name] = true
						}
					}
				}
			}
		}
	}
}

// docWords returns the backquoted words of the markdown file at path outside fenced code
// blocks, with their line numbers, and the rows of the table under the heading section: the
// first cell of each.
func docWords(t *testing.T, path, section string) (words []docWord, firstCells []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	fenced, inSection := false, false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if strings.HasPrefix(line, "#") {
			inSection = strings.TrimSpace(strings.TrimLeft(line, "#")) == section
		}
		for _, m := range inline.FindAllStringSubmatch(line, -1) {
			words = append(words, docWord{m[1], n})
		}
		if inSection && strings.HasPrefix(line, "| `") {
			cell, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
			for _, m := range inline.FindAllStringSubmatch(cell, -1) {
				firstCells = append(firstCells, m[1])
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return words, firstCells
}

type docWord struct {
	s    string
	line int
}

// TestArchitecturePage: every file, directory and Go declaration docs/architecture.md names in
// backquotes exists, and its package map names every package of the module. A move, a rename
// or a new package therefore fails here until the page says where things are now.
func TestArchitecturePage(t *testing.T) {
	root := repoRoot(t)
	const page = "docs/architecture.md"
	pkgs := modulePackages(t, root)
	words, mapped := docWords(t, filepath.Join(root, page), "Package map")
	paths, idents := 0, 0
	for _, w := range words {
		switch {
		case fileName.MatchString(w.s):
			continue
		case docPath.MatchString(w.s):
			paths++
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(w.s, "/")))); err != nil {
				t.Errorf("%s:%d: `%s` names a path that does not exist", page, w.line, w.s)
			}
		case docIdent.MatchString(w.s):
			idents++
			m := docIdent.FindStringSubmatch(w.s)
			name, decl, member := m[1], m[2], m[3]
			cands := pkgs[name]
			if len(cands) == 0 {
				t.Errorf("%s:%d: `%s`: no package of the module is named %s", page, w.line, w.s, name)
				continue
			}
			found := false
			for _, p := range cands {
				p.load(t, root)
				if member == "" {
					found = found || p.decls[decl]
				} else {
					found = found || p.decls[decl] && p.members[decl][member]
				}
			}
			if !found {
				t.Errorf("%s:%d: `%s`: package %s (%s) declares no such name", page, w.line, w.s, name, cands[0].dir)
			}
		}
	}
	// Guards against a convention the checks above silently stopped matching.
	if paths < 50 || idents < 50 {
		t.Errorf("%s: %d paths and %d Go names checked; the page's convention and this test disagree", page, paths, idents)
	}
	listed := map[string]bool{}
	for _, c := range mapped {
		listed[c] = true
	}
	for _, ps := range pkgs {
		for _, p := range ps {
			if !listed[p.dir] {
				t.Errorf("%s: the package map has no row for package %s", page, p.dir)
			}
		}
	}
}

// TestReadmeIsAFrontPage: the README stays a front page (STYLE 21): reference and lab notes
// belong in docs/.
func TestReadmeIsAFrontPage(t *testing.T) {
	const most = 200
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > most {
		t.Errorf("README.md has %d lines, at most %d: move reference or benchmark notes to docs/ and link them", n, most)
	}
}
