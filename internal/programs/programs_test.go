package programs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestRegistryWellFormed(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range All() {
		if p.Name == "" || p.Package == "" || p.Feature == "" || p.Without == "" || len(p.Check) == 0 {
			t.Errorf("incomplete entry %+v", p)
		}
		if strings.ContainsAny(p.Name, "/ ") {
			t.Errorf("%q: a name, not a path", p.Name)
		}
		if seen[p.Name] {
			t.Errorf("%s registered twice", p.Name)
		}
		seen[p.Name] = true
		if q, ok := Lookup(p.Name); !ok || q.Package != p.Package {
			t.Errorf("Lookup(%s) = %+v, %v", p.Name, q, ok)
		}
	}
	if _, ok := Lookup("sh"); ok {
		t.Error("sh is registered")
	}
	if got := Packages(); len(got) != 4 || got[0] != "e2fsprogs" || got[3] != "busybox-static" {
		t.Errorf("Packages() = %q", got)
	}
}

// dynamicSites are the Runner calls whose program name is not a string
// literal, with every name each can run: the test fails on a new one
// until it is listed here, and on a listed name the registry lacks.
var dynamicSites = map[string][]string{
	// makeEphemeral: mkfs.<ephemeral_format> for the formats
	// Ironic documents that are not written in Go (deploy/mkfs writes FAT
	// and swap).
	"deploy/partition/partition.go: runner.Run(ctx, args[0], append(args[1:], eph)...)": {
		"mkfs.ext2", "mkfs.ext3", "mkfs.ext4", "mkfs.xfs",
	},
}

// TestEveryExecutedNameRegistered walks the agent's sources (every
// non-test Go file of agent/, deploy/ and cmd/) for calls of Run on a
// blockdev.Runner (a receiver named ...Runner or ...runner, or an
// ExecRunner literal) and checks that each literal program name is
// registered, and that each non-literal one is a known dynamic site whose
// names are. It also checks the literal names deploy/partition hands its
// mkfs helper.
func TestEveryExecutedNameRegistered(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	calls := 0
	for _, dir := range []string{"agent", "deploy", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			f, err := parser.ParseFile(fset, path, src, 0)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			text := func(n ast.Node) string {
				return string(src[fset.Position(n.Pos()).Offset:fset.Position(n.End()).Offset])
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				switch fn := call.Fun.(type) {
				case *ast.SelectorExpr:
					recv := strings.ToLower(text(fn.X))
					if fn.Sel.Name != "Run" || len(call.Args) < 2 || !(strings.HasSuffix(recv, "runner") || strings.HasSuffix(recv, "runner{}")) {
						return true
					}
					calls++
					if lit, ok := call.Args[1].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						name, _ := strconv.Unquote(lit.Value)
						if _, ok := Lookup(name); !ok {
							t.Errorf("%s: runs %q, which the registry does not list", fset.Position(call.Pos()), name)
						}
						return true
					}
					site := rel + ": " + text(call)
					names, ok := dynamicSites[site]
					if !ok {
						t.Errorf("%s: runs a program named by an expression; list the site and its names in dynamicSites: %q", fset.Position(call.Pos()), site)
					}
					for _, name := range names {
						if _, ok := Lookup(name); !ok {
							t.Errorf("%s: may run %q, which the registry does not list", site, name)
						}
					}
				case *ast.Ident:
					// deploy/partition's mkfs(part, "program", args...).
					if fn.Name != "mkfs" || len(call.Args) < 2 {
						return true
					}
					if lit, ok := call.Args[1].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						name, _ := strconv.Unquote(lit.Value)
						if !contains(dynamicSites, name) {
							t.Errorf("%s: mkfs runs %q, which dynamicSites does not list", fset.Position(call.Pos()), name)
						}
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if calls == 0 {
		t.Fatal("found no Runner calls: the walk is broken")
	}
	t.Logf("%d Runner call sites", calls)
}

func contains(m map[string][]string, name string) bool {
	for _, names := range m {
		for _, n := range names {
			if n == name {
				return true
			}
		}
	}
	return false
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
