package ramdisk

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/internal/cachedir"
)

// defaultFlavour is the cache the build and the VM tests share, and the
// default kernel flavour, for tests that take Debian's real packages.
func defaultFlavour(t *testing.T) (string, KernelFlavour) {
	t.Helper()
	cache, err := cachedir.Dir()
	if err != nil {
		t.Fatal(err)
	}
	f, err := LookupKernelFlavour("")
	if err != nil {
		t.Fatal(err)
	}
	return cache, f
}

// fetchBootChain fetches the default flavour's signed boot chain, or
// skips the test when Debian's archive cannot be reached.
func fetchBootChain(t *testing.T) *BootChain {
	t.Helper()
	cache, f := defaultFlavour(t)
	bc, err := FetchBootChain(context.Background(), cache, f)
	if err != nil {
		t.Skipf("SKIPPED: needs Debian's shim-signed and grub-efi-amd64-signed (a mirror, or the cache): %v", err)
	}
	return bc
}

// needMtools skips without the host programs the ESP and ISO are made
// with.
func needMtools(t *testing.T, more ...string) {
	t.Helper()
	for _, p := range append([]string{"mformat", "mmd", "mcopy", "mtype"}, more...) {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s (mtools, xorriso and grub-pc-bin are in test.sh): %v", p, err)
		}
	}
}

// TestESP builds the ESP from Debian's signed packages twice at
// different times: the same bytes, shim as the removable media loader,
// GRUB beside it, and the configuration where GRUB's prefix reads it.
func TestESP(t *testing.T) {
	needMtools(t)
	bc := fetchBootChain(t)
	dir := t.TempDir()
	epoch := time.Unix(1700000000, 0)
	a, b := filepath.Join(dir, "a.esp"), filepath.Join(dir, "b.esp")
	if err := ESP(context.Background(), bc, a, epoch); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // a FAT date has two-second steps
	if err := ESP(context.Background(), bc, b, epoch); err != nil {
		t.Fatal(err)
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if !bytes.Equal(da, db) {
		t.Error("two ESPs of the same chain and date differ")
	}
	for dst, src := range map[string]string{ESPShimPath: bc.Shim, ESPGrubPath: bc.Grub} {
		out, err := exec.Command("mtype", "-i", a, "::"+dst).Output()
		if err != nil {
			t.Fatalf("mtype %s: %v", dst, err)
		}
		want, _ := os.ReadFile(src)
		if !bytes.Equal(out, want) {
			t.Errorf("%s in the ESP is not %s", dst, src)
		}
	}
	cfg, err := exec.Command("mtype", "-i", a, "::"+GrubConfigPath).Output()
	if err != nil || !strings.Contains(string(cfg), "for cfg in /"+GrubConfigPath+" ") {
		t.Errorf("%s: %v\n%s", GrubConfigPath, err, cfg)
	}
	// The prefix the signed GRUB was built with, which GrubConfigPath
	// follows.
	grub, _ := os.ReadFile(bc.Grub)
	if !bytes.Contains(grub, []byte("/"+filepath.Dir(GrubConfigPath)+"\x00")) {
		t.Errorf("%s holds no prefix /%s: the configuration path has moved", bc.Grub, filepath.Dir(GrubConfigPath))
	}
	t.Logf("ESP: %d bytes", len(da))
}

// TestSecureBootISO makes the ISO with the ESP as its UEFI El Torito
// image and grub-mkrescue's BIOS image, and the configuration where the
// signed GRUB reads it on the CD.
func TestSecureBootISO(t *testing.T) {
	needMtools(t, "xorriso", "grub-mkrescue", "faketime")
	if _, err := os.Stat(grubBIOSDir); err != nil {
		t.Skipf("SKIPPED: needs grub-pc-bin: %v", err)
	}
	bc := fetchBootChain(t)
	dir := t.TempDir()
	epoch := time.Unix(1700000000, 0)
	esp := filepath.Join(dir, ESPName)
	if err := ESP(context.Background(), bc, esp, epoch); err != nil {
		t.Fatal(err)
	}
	kernel, initrd := filepath.Join(dir, "k"), filepath.Join(dir, "i")
	for _, p := range []string{kernel, initrd} {
		if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	iso := filepath.Join(dir, ISOName)
	if err := SecureBootISO(context.Background(), kernel, initrd, "ipa-api-url=http://x", esp, iso, epoch); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("xorriso", "-indev", iso, "-report_el_torito", "plain",
		"-osirrox", "on", "-extract", "/"+GrubConfigPath, filepath.Join(dir, "grub.cfg")).CombinedOutput()
	if err != nil {
		t.Fatalf("xorriso: %v\n%s", err, out)
	}
	report := string(out)
	for _, want := range []string{"El Torito boot img :   1  BIOS", "El Torito boot img :   2  UEFI", "El Torito img path :   2  /" + espISOPath} {
		if !strings.Contains(report, want) {
			t.Errorf("no %q in the El Torito report:\n%s", want, report)
		}
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "grub.cfg"))
	if err != nil || !strings.Contains(string(cfg), "linux /boot/"+KernelName) || !strings.Contains(string(cfg), "ipa-api-url=http://x") {
		t.Errorf("/%s on the ISO: %v\n%s", GrubConfigPath, err, cfg)
	}
	if err := SecureBootISO(context.Background(), kernel, initrd, "", "", iso, epoch); err == nil {
		t.Error("an ISO without an ESP was made")
	}
}
