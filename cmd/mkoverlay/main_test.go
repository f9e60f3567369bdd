package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/internal/ramdisk/initramfs"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/kmod/kmodtest"
)

// TestAllowUnsignedModules: an unsigned module is refused naming the flag
// that lets it in, and -allow-unsigned-modules packs it.
func TestAllowUnsignedModules(t *testing.T) {
	const release = "6.12.99-test-amd64"
	dir := t.TempDir()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	w := initramfs.NewWriter(zw)
	if err := w.Bytes("lib/modules/"+release+"/kernel/drivers/scsi/sd_mod.ko", 0o644, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, "ironic-agent.initramfs")
	ko := filepath.Join(dir, "acme_nic.ko")
	if err := os.WriteFile(base, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ko, kmodtest.Module("vermagic="+release+" SMP mod_unload "), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "site.initramfs")
	args := []string{"-base", base, "-out", out, "-module", ko}
	err := run(args)
	if err == nil || !strings.Contains(err.Error(), "module /lib/modules/"+release+"/updates/acme_nic.ko ") || !strings.Contains(err.Error(), "-allow-unsigned-modules") {
		t.Fatalf("an unsigned module: %v, want an error naming it and -allow-unsigned-modules", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatalf("%s written after the refusal", out)
	}
	if err := run(append(args, "-allow-unsigned-modules")); err != nil {
		t.Fatalf("with -allow-unsigned-modules: %v", err)
	}
	if _, err := os.Stat(out); err != nil {
		t.Fatal(err)
	}
}
