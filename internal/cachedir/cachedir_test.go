package cachedir

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testMeta is a caller's meta type: the stamp beside its own fields.
type testMeta struct {
	Stamp
	Note string
}

func testCache(t *testing.T) Cache {
	return Cache{Root: filepath.Join(t.TempDir(), "things"), Meta: "meta.json", Check: []string{"a", "b"}, MaxAge: time.Hour}
}

// writeFiles is a Build that writes the checked files and counts its runs.
func writeFiles(runs *atomic.Int32, note string) Build {
	return func(ctx context.Context, tmp string) (Stamper, error) {
		runs.Add(1)
		// Long enough that concurrent callers meet on the lock.
		time.Sleep(50 * time.Millisecond)
		for _, f := range []string{"a", "b"} {
			if err := os.WriteFile(filepath.Join(tmp, f), []byte(f+" of "+note), 0o644); err != nil {
				return nil, err
			}
		}
		return &testMeta{Note: note}, nil
	}
}

func TestEnsureBuildsOnceForConcurrentCallers(t *testing.T) {
	c := testCache(t)
	var runs atomic.Int32
	const n = 8
	entries := make([]*Entry, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { entries[i], errs[i] = c.Ensure(t.Context(), "k1", "key-1", writeFiles(&runs, "one")) })
	}
	wg.Wait()
	if got := runs.Load(); got != 1 {
		t.Errorf("%d builds, want 1", got)
	}
	built := 0
	for i, e := range entries {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if e.Built {
			built++
		}
		if e.Dir != filepath.Join(c.Root, "k1") {
			t.Errorf("entry %s", e.Dir)
		}
		var m testMeta
		if err := json.Unmarshal(e.Meta, &m); err != nil || m.Key != "key-1" || m.Note != "one" || len(m.SHA256) != 2 {
			t.Errorf("meta %s (%v)", e.Meta, err)
		}
	}
	if built != 1 {
		t.Errorf("%d callers say they built the entry, want 1", built)
	}
	// No temporary directory is left.
	left, _ := filepath.Glob(filepath.Join(c.Root, "*.tmp-*"))
	if len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// The meta file's layout is the callers' from before the package: Key and
// SHA256 at the top level, the caller's fields beside them.
func TestMetaLayout(t *testing.T) {
	c := testCache(t)
	var runs atomic.Int32
	e, err := c.Ensure(t.Context(), "k", "key", writeFiles(&runs, "x"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(e.Meta, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"Key", "SHA256", "Note"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("meta %s has no %s", e.Meta, k)
		}
	}
	// Without checked files, no SHA256 (the root filesystems' meta).
	c.Check, c.Root = nil, filepath.Join(t.TempDir(), "plain")
	e, err = c.Ensure(t.Context(), "k", "key", writeFiles(&runs, "x"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(e.Meta), "SHA256") {
		t.Errorf("meta %s", e.Meta)
	}
}

func TestDamagedEntryIsRebuilt(t *testing.T) {
	for name, damage := range map[string]func(dir string){
		"changed file": func(dir string) { os.WriteFile(filepath.Join(dir, "a"), []byte("other"), 0o644) },
		"missing file": func(dir string) { os.Remove(filepath.Join(dir, "b")) },
		"no meta":      func(dir string) { os.Remove(filepath.Join(dir, "meta.json")) },
		"garbled meta": func(dir string) { os.WriteFile(filepath.Join(dir, "meta.json"), []byte("{"), 0o644) },
		"other key":    func(dir string) { os.WriteFile(filepath.Join(dir, "meta.json"), []byte(`{"Key":"key-0"}`), 0o644) },
		"killed build": func(dir string) {
			os.RemoveAll(dir)
			os.MkdirAll(dir+".tmp-123", 0o755)
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := testCache(t)
			var runs atomic.Int32
			e, err := c.Ensure(t.Context(), "k", "key-1", writeFiles(&runs, "first"))
			if err != nil {
				t.Fatal(err)
			}
			damage(e.Dir)
			if _, err := c.Load("k", "key-1"); err == nil {
				t.Fatal("Load took the damaged entry")
			}
			e, err = c.Ensure(t.Context(), "k", "key-1", writeFiles(&runs, "second"))
			if err != nil {
				t.Fatal(err)
			}
			if runs.Load() != 2 || !e.Built {
				t.Errorf("%d builds, built %v: want the entry rebuilt", runs.Load(), e.Built)
			}
			if b, _ := os.ReadFile(filepath.Join(e.Dir, "a")); string(b) != "a of second" {
				t.Errorf("a holds %q", b)
			}
			left, _ := filepath.Glob(filepath.Join(c.Root, "*.tmp-*"))
			if len(left) != 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}

func TestFailedBuildLeavesNoEntry(t *testing.T) {
	c := testCache(t)
	boom := errors.New("boom")
	_, err := c.Ensure(t.Context(), "k", "key", func(ctx context.Context, tmp string) (Stamper, error) {
		return nil, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if ents, _ := os.ReadDir(c.Root); len(ents) != 1 || ents[0].Name() != "k.lock" {
		t.Errorf("cache holds %v, want only the lock file", ents)
	}
}

func TestPrune(t *testing.T) {
	for _, markMeta := range []bool{false, true} {
		c := testCache(t)
		c.MarkMeta = markMeta
		var runs atomic.Int32
		for _, name := range []string{"old", "recent", "keep"} {
			if _, err := c.Ensure(t.Context(), name, name, writeFiles(&runs, name)); err != nil {
				t.Fatal(err)
			}
		}
		long := time.Now().Add(-2 * time.Hour)
		for _, name := range []string{"old", "keep"} {
			dir := filepath.Join(c.Root, name)
			// Both marks old: only the one Prune reads matters.
			os.Chtimes(dir, long, long)
			os.Chtimes(filepath.Join(dir, "meta.json"), long, long)
		}
		os.MkdirAll(filepath.Join(c.Root, "old.tmp-1"), 0o755)
		os.Chtimes(filepath.Join(c.Root, "old.tmp-1"), long, long)
		c.Prune("keep")
		for name, want := range map[string]bool{"old": false, "recent": true, "keep": true, "old.tmp-1": true, "old.lock": true} {
			if _, err := os.Stat(filepath.Join(c.Root, name)); (err == nil) != want {
				t.Errorf("MarkMeta %v: %s exists %v, want %v", markMeta, name, err == nil, want)
			}
		}
		// A use marks the entry recent again.
		if _, err := c.Load("keep", "keep"); err != nil {
			t.Fatal(err)
		}
		c.Prune("")
		if _, err := os.Stat(filepath.Join(c.Root, "keep")); err != nil {
			t.Errorf("MarkMeta %v: a used entry was pruned", markMeta)
		}
	}
}

func TestLockHonoursContext(t *testing.T) {
	p := filepath.Join(t.TempDir(), "l.lock")
	unlock, err := Lock(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := Lock(ctx, p); err == nil || !strings.Contains(err.Error(), "waiting for the lock") {
		t.Fatalf("second Lock: %v", err)
	}
	unlock()
	unlock2, err := Lock(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	unlock2()
}

func TestDirFromEnvironment(t *testing.T) {
	t.Setenv("IRONIC_AGENT_CACHE", "/somewhere")
	if d, err := Dir(); err != nil || d != "/somewhere" {
		t.Errorf("Dir() = %q, %v", d, err)
	}
	t.Setenv("IRONIC_AGENT_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	if d, err := Dir(); err != nil || d != "/xdg/ironic-agent" {
		t.Errorf("Dir() = %q, %v", d, err)
	}
}
