package blockdev

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// A read that fails (here a directory: EISDIR from the kernel; on a disk,
// EIO from a bad sector) says which device, where and why, with the errno
// still matchable.
func TestReadErrorsNameDeviceOffsetErrno(t *testing.T) {
	dir := t.TempDir()
	for name, f := range map[string]func() error{
		"ReadPartTable": func() error { _, err := ReadPartTable(dir, 512); return err },
		"Probe":         func() error { _, err := Probe(dir); return err },
		"ReadFSHead":    func() error { _, err := ReadFSHead(dir); return err },
	} {
		err := f()
		if err == nil {
			t.Errorf("%s of a directory: no error", name)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, dir) || !strings.Contains(msg, "at offset 0") || !errors.Is(err, syscall.EISDIR) {
			t.Errorf("%s: %q: want the device, \"at offset 0\" and EISDIR", name, msg)
		}
		if strings.Count(msg, dir) > 2 {
			t.Errorf("%s: %q names the device too often", name, msg)
		}
	}
}
