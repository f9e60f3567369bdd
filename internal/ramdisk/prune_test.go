package ramdisk

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
)

func TestPruneCache(t *testing.T) {
	root := t.TempDir()
	old := time.Now().Add(-72 * time.Hour)
	for _, name := range []string{"old", "keep", "fresh", "old.tmp-1"} {
		if err := os.Mkdir(filepath.Join(root, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if name != "fresh" {
			if err := os.Chtimes(filepath.Join(root, name), old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(root, "old.lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(root, "old.lock"), old, old); err != nil {
		t.Fatal(err)
	}
	cachedir.Cache{Root: root, MaxAge: 48 * time.Hour}.Prune("keep")
	ents, _ := os.ReadDir(root)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	want := "[fresh keep old.lock old.tmp-1]"
	if fmt.Sprint(left) != want {
		t.Errorf("left %v, want %s: the unused entry goes, the kept one, a fresh one, lock files and builds under way stay", left, want)
	}
}
