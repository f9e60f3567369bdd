package erase

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
)

// benchFile is a 64 MiB image file the guard allows explicitly, so the
// benchmarks need no root; scripts/bench-erase.sh measures loop devices
// against shred and wipefs.
func benchFile(b *testing.B) (string, *blockdev.Guard) {
	b.Helper()
	p := filepath.Join(b.TempDir(), "disk.img")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.Truncate(p, 64<<20); err != nil {
		b.Fatal(err)
	}
	return p, blockdev.NewGuard([]string{p})
}

// BenchmarkOverwrite is one random pass and one zero pass (IPA's default
// shred) over 64 MiB; SetBytes counts both passes.
func BenchmarkOverwrite(b *testing.B) {
	p, g := benchFile(b)
	e := &Eraser{Guard: g, Runner: blockdev.ExecRunner{}}
	b.SetBytes(2 * 64 << 20)
	for b.Loop() {
		if _, err := e.Overwrite(context.Background(), p, 1, true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWipeMetadata is the metadata wipe of one 64 MiB device.
func BenchmarkWipeMetadata(b *testing.B) {
	p, g := benchFile(b)
	for b.Loop() {
		if _, err := blockdev.WipeMetadata(context.Background(), g, p); err != nil {
			b.Fatal(err)
		}
	}
}
