package collector

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree builds a machine root in a temporary directory from a map of
// relative paths: a value starting "-> " makes a symbolic link, a value
// ending in "/" a directory, anything else a file with that content.
func tree(t testing.TB, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for rel, v := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasPrefix(v, "-> "):
			if err := os.Symlink(strings.TrimPrefix(v, "-> "), p); err != nil {
				t.Fatal(err)
			}
		case strings.HasSuffix(rel, "/"):
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		default:
			if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}
