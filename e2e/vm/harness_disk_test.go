package vm

import (
	"bytes"
	"os"
	"testing"
)

// Disk images of a VM, written and read back by the test.

// pattern fills n bytes with b.
func pattern(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if off < 0 {
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		off += st.Size()
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func readAt(t *testing.T, path string, off int64, n int) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if off < 0 {
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		off += st.Size()
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}
