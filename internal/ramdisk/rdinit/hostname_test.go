package rdinit

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSetFallbackHostname(t *testing.T) {
	for _, c := range []struct{ before, after string }{
		{"(none)\n", FallbackHostname}, {"", FallbackHostname}, {"node-7\n", "node-7\n"},
	} {
		p := filepath.Join(t.TempDir(), "hostname")
		if err := os.WriteFile(p, []byte(c.before), 0o644); err != nil {
			t.Fatal(err)
		}
		set, err := setFallbackHostname(p)
		b, _ := os.ReadFile(p)
		if err != nil || string(b) != c.after || set != (c.after != c.before) {
			t.Errorf("%q: set %v, error %v, file %q; want %q", c.before, set, err, b, c.after)
		}
	}
	if _, err := setFallbackHostname(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing file: no error")
	}
}
