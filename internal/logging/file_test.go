package logging

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRotatingFile: lines go to the file until the next would pass the
// limit, then the file becomes .1 and a new one starts; the newest line
// is always in the file, and an existing file is appended to.
func TestRotatingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "agent.log")
	if err := os.WriteFile(p, []byte("from before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := OpenRotating(p, 64)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		fmt.Fprintf(r, "line %02d of the agent's log\n", i) // 27 bytes: two to a file
	}
	if err := r.Close(); err != nil || r.Err() != nil {
		t.Fatal(err, r.Err())
	}
	cur, _ := os.ReadFile(p)
	old, _ := os.ReadFile(p + ".1")
	if string(cur) != "line 09 of the agent's log\n" {
		t.Errorf("agent.log holds %q", cur)
	}
	if string(old) != "line 07 of the agent's log\nline 08 of the agent's log\n" {
		t.Errorf("agent.log.1 holds %q", old)
	}
	r, err = OpenRotating(p, 1000)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(r, "after a restart\n")
	r.Close()
	if cur, _ := os.ReadFile(p); !strings.HasSuffix(string(cur), "line 09 of the agent's log\nafter a restart\n") {
		t.Errorf("reopened: %q", cur)
	}
	// A line longer than the limit is written whole into a file of its own.
	r, _ = OpenRotating(p, 10)
	fmt.Fprintf(r, "a line longer than ten bytes\n")
	r.Close()
	if cur, _ := os.ReadFile(p); string(cur) != "a line longer than ten bytes\n" {
		t.Errorf("long line: %q", cur)
	}
	if _, err := OpenRotating(p, 0); err == nil {
		t.Error("a limit of 0 was taken")
	}
	if _, err := OpenRotating(filepath.Join(t.TempDir(), "no", "dir"), 10); err == nil {
		t.Error("a file in a missing directory opened")
	}
}
