//go:build linux

package rdinit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInitLog: the init's log file keeps the lines in order from the
// first, and once full says so in one line and takes no more, while
// every write still succeeds (the console must get each line).
func TestInitLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "ironic-agent", "init.log")
	w, err := openInitLog(path)
	if err != nil {
		t.Fatal(err)
	}
	c := w.(*cappedWriter)
	c.left = 20
	for _, line := range []string{"first line\n", "second\n", "third, past the cap\n", "fourth\n"} {
		if n, err := w.Write([]byte(line)); n != len(line) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", line, n, err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 3 || lines[0] != "first line" || lines[1] != "second" || !strings.HasPrefix(lines[2], "init log file full") {
		t.Errorf("the file holds %q", b)
	}
	if _, err := openInitLog(filepath.Join(path, "not-a-dir", "x")); err == nil {
		t.Error("no error for a log file below a file")
	}
}
