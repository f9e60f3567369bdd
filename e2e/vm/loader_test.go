package vm

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/mkfs"
)

// The loader image of the tests that only need proof that a deployed boot
// loader ran (the RAID deploys): smaller and quicker to build than
// internal/testbed/osimage's OS, which the other deploy tests boot.

// The UEFI deploy image: a GPT whose EFI system partition (fixed unique
// GUID) holds a GRUB image at a path no firmware boots by itself, so only
// the NVRAM entry the agent writes can start it; GRUB prints uefiLoaderSays
// and powers the VM off.
const (
	uefiESPGUID    = "6D5F1C2A-7E3B-4C8D-9A01-0F1E2D3C4B5A"
	uefiLoaderDir  = "ironic-vm-test"
	uefiLoaderSays = "ironic-agent VM test: the deployed boot loader ran"
)

// uefiImage builds that image (8 MiB: ESP of 4 MiB at LBA 2048, then a
// partition of random bytes) with grub-mkimage, the agent's own FAT writer
// (deploy/mkfs, which makes partition images' ESPs, so OVMF and the
// ramdisk's vfat driver read its FAT here), mtools and sgdisk, none of
// which needs root.
func uefiImage(t *testing.T) []byte {
	t.Helper()
	for _, p := range []string{"grub-mkimage", "mcopy", "mmd", "sgdisk"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s (grub-common, grub-efi-amd64-bin, mtools, gdisk; in test.sh)", p)
		}
	}
	dir := t.TempDir()
	run := runner(t)
	loader := uefiLoader(t, dir, "/EFI/"+uefiLoaderDir)
	esp := filepath.Join(dir, "esp.img")
	ef, err := os.Create(esp)
	if err != nil {
		t.Fatal(err)
	}
	if err := ef.Truncate(4 << 20); err != nil {
		t.Fatal(err)
	}
	if _, err := mkfs.WriteFAT(ef, 4<<20, mkfs.FATOptions{Label: "ESP", VolumeID: 0x4553_5031, HiddenSectors: 2048}); err != nil {
		t.Fatal(err)
	}
	if err := ef.Close(); err != nil {
		t.Fatal(err)
	}
	run("mmd", "-i", esp, "::/EFI", "::/EFI/"+uefiLoaderDir)
	run("mcopy", "-i", esp, loader, "::/EFI/"+uefiLoaderDir+"/BOOTX64.EFI")

	const size = 8 << 20
	img := make([]byte, size)
	r := rand.NewChaCha8([32]byte{'u', 'e', 'f', 'i'})
	_, _ = r.Read(img)
	p := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		t.Fatal(err)
	}
	run("sgdisk", "-Z", p)
	run("sgdisk", "-n", "1:2048:+4M", "-t", "1:ef00", "-u", "1:"+uefiESPGUID, "-n", "2:0:0", "-t", "2:8300", p)
	espBytes, err := os.ReadFile(esp)
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, p, 2048*512, espBytes)
	img, err = os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// runner returns a function that runs a host tool and fails the test with
// its output.
func runner(t *testing.T) func(name string, args ...string) {
	return func(name string, args ...string) {
		t.Helper()
		if out, err := exec.CommandContext(t.Context(), name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
		}
	}
}

// uefiLoader builds in dir a GRUB EFI binary that prints uefiLoaderSays
// and powers off, with prefix its configuration directory.
func uefiLoader(t *testing.T, dir, prefix string) string {
	t.Helper()
	cfg := filepath.Join(dir, "embed.cfg")
	if err := os.WriteFile(cfg, []byte("echo \""+uefiLoaderSays+"\"\nhalt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	loader := filepath.Join(dir, "loader.efi")
	runner(t)("grub-mkimage", "-O", "x86_64-efi", "-p", prefix, "-c", cfg, "-o", loader, "echo", "halt")
	return loader
}
