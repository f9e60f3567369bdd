package qemu

import (
	"os"
	"testing"
)

// SkipUnlessRoot skips a test that boots a virtual machine unless it runs
// as root. QEMU under TCG would start as any user, but the VM tests are
// the suite's slowest tier and most of them also need taps, namespaces or
// loop devices: `go test ./...` as a normal user stays a quick unit run
// that boots nothing, and ./test.sh (root) runs them all.
func SkipUnlessRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: boots a virtual machine: VM tests run as root (./test.sh, or go test as root)")
	}
}
