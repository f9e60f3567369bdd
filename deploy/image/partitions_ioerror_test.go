package image

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// ValidatePartitioning's read of a failing disk names the device, the
// offset and the errno (a directory stands in for the failing disk).
func TestValidatePartitioningReadError(t *testing.T) {
	dir := t.TempDir()
	err := ValidatePartitioning(dir)
	if err == nil || !strings.Contains(err.Error(), "reading the partition table of "+dir) ||
		!strings.Contains(err.Error(), "at offset 0") || !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("ValidatePartitioning of a directory: %v", err)
	}
}
