package mkfs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
)

// TestMain runs the tests in a private mount namespace: their mounts and
// loop devices go with the test binary, even when it is killed.
func TestMain(m *testing.M) { looptest.Main(m.Run) }

func sparse(t *testing.T, name string, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// blkid returns blkid's low-level probe of path as KEY=value pairs.
func blkid(t *testing.T, path string) map[string]string {
	t.Helper()
	out, err := exec.Command("blkid", "-p", "-o", "export", path).Output()
	if err != nil {
		t.Fatalf("blkid -p %s: %v", path, err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

// TestSwapMatchesMkswap writes swap headers and has util-linux's mkswap
// write the same (size, page size, UUID, label) on a file of zeros: the
// files must be equal byte for byte.
func TestSwapMatchesMkswap(t *testing.T) {
	looptest.RequireTools(t, "mkswap", "blkid")
	uuid := [16]byte{0x5e, 0x2a, 0x11, 0x07, 0x9c, 0x3d, 0x4b, 0x8e, 0xa1, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}
	const uuidText = "5e2a1107-9c3d-4b8e-a122-334455667788"
	for _, c := range []struct {
		size     int64
		pageSize int
		label    string
	}{
		{64 << 10, 4096, "swap1"},
		{16<<20 + 3<<10, 4096, "swap1"}, // not a whole number of pages
		{8 << 20, 4096, ""},
		{8 << 20, 4096, "fifteen-bytes-1"},
		{4 << 20, 65536, "swap1"},
	} {
		name := fmt.Sprintf("%d-%d-%q", c.size, c.pageSize, c.label)
		t.Run(name, func(t *testing.T) {
			want := sparse(t, "mkswap.img", c.size)
			args := []string{"-U", uuidText, "-p", fmt.Sprint(c.pageSize)}
			if c.label != "" {
				args = append(args, "-L", c.label)
			}
			if out, err := exec.Command("mkswap", append(args, want)...).CombinedOutput(); err != nil {
				t.Fatalf("mkswap: %v: %s", err, out)
			}
			got := sparse(t, "go.img", c.size)
			f, err := os.OpenFile(got, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			err = WriteSwap(f, c.size, c.pageSize, uuid, c.label)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			a, _ := os.ReadFile(want)
			b, _ := os.ReadFile(got)
			if !bytes.Equal(a, b) {
				for i := range a {
					if a[i] != b[i] {
						t.Fatalf("first difference at byte %d: mkswap %02x, ours %02x", i, a[i], b[i])
					}
				}
			}
			if c.pageSize == os.Getpagesize() {
				id := blkid(t, got)
				if id["TYPE"] != "swap" || id["UUID"] != uuidText || id["LABEL"] != c.label || id["VERSION"] != "1" {
					t.Errorf("blkid: %v", id)
				}
			}
		})
	}
	if _, err := SwapHeader(9*4096, 4096, uuid, ""); err == nil {
		t.Error("9 pages accepted")
	}
	if _, err := SwapHeader(1<<20, 4096, uuid, "sixteen-bytes-no"); err == nil {
		t.Error("a 16-byte label accepted")
	}
}

// TestFATChecksAndMatchesMkfsFat formats files of several sizes and
// sector sizes: Debian's fsck.fat -n finds nothing to fix, blkid reads the
// type, label and volume ID, and the FAT type is the one mkfs.fat picks
// for the same size.
func TestFATChecksAndMatchesMkfsFat(t *testing.T) {
	looptest.RequireTools(t, "fsck.fat", "blkid", "mkfs.fat")
	for _, c := range []struct {
		size       int64
		sectorSize int
		label      string
		bits       int
	}{
		{1 << 20, 512, "ephemeral0", 12},
		{20 << 20, 512, "ephemeral0", 16},
		{200 << 20, 512, "", 16},
		{511 << 20, 512, "efi-part", 16},
		{550 << 20, 512, "efi-part", 32}, // the ESP of a partition image
		{9 << 30, 512, "ephemeral0", 32},
		{550 << 20, 4096, "efi-part", 32},
		{20 << 20, 4096, "ephemeral0", 16},
	} {
		t.Run(fmt.Sprintf("%d-%d", c.size, c.sectorSize), func(t *testing.T) {
			img := sparse(t, "fat.img", c.size)
			f, err := os.OpenFile(img, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			o := FATOptions{SectorSize: c.sectorSize, Label: c.label, VolumeID: 0x1234abcd, HiddenSectors: 2048, Created: time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC)}
			l, err := WriteFAT(f, c.size, o)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			if l.Bits != c.bits {
				t.Errorf("FAT%d, want FAT%d (%+v)", l.Bits, c.bits, l)
			}
			out, err := exec.Command("fsck.fat", "-n", "-v", img).CombinedOutput()
			if err != nil || bytes.Contains(bytes.ToLower(out), []byte("warning")) || bytes.Contains(out, []byte("differ")) {
				t.Errorf("fsck.fat -n: %v\n%s", err, out)
			}
			id := blkid(t, img)
			if id["TYPE"] != "vfat" || id["VERSION"] != fmt.Sprintf("FAT%d", c.bits) || id["UUID"] != "1234-ABCD" || id["LABEL"] != c.label {
				t.Errorf("blkid: %v", id)
			}
			// mtools writes into it (no vfat mount needed), and the result
			// still checks clean.
			if _, err := exec.LookPath("mcopy"); err == nil {
				src := filepath.Join(t.TempDir(), "payload")
				if err := os.WriteFile(src, bytes.Repeat([]byte("grubx64.efi "), 30000), 0o644); err != nil {
					t.Fatal(err)
				}
				for _, cmd := range [][]string{{"mmd", "-i", img, "::/EFI"}, {"mcopy", "-i", img, src, "::/EFI/BOOTX64.EFI"}} {
					if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
						t.Fatalf("%s: %v: %s", cmd, err, out)
					}
				}
				files := 2 // the directory and the file, and the label's entry
				if c.label != "" {
					files++
				}
				if out, err := exec.Command("fsck.fat", "-n", img).CombinedOutput(); err != nil || !bytes.Contains(out, fmt.Appendf(nil, " %d files", files)) {
					t.Errorf("fsck.fat -n after mcopy: %v\n%s", err, out)
				}
			}
			if c.sectorSize != 512 {
				return
			}
			ref := sparse(t, "mkfs.img", c.size)
			args := []string{"-n", "x", ref}
			if out, err := exec.Command("mkfs.fat", args...).CombinedOutput(); err != nil {
				t.Fatalf("mkfs.fat: %v: %s", err, out)
			}
			if v := blkid(t, ref)["VERSION"]; v != id["VERSION"] {
				t.Errorf("mkfs.fat makes %s of %d bytes, we make %s", v, c.size, id["VERSION"])
			}
		})
	}
}

// Swap and FAT on a file the guard allows: what WorkOnDisk calls, old
// contents wiped first.
func TestSwapAndFATOnDevice(t *testing.T) {
	looptest.RequireTools(t, "blkid")
	ctx := context.Background()
	for _, c := range []struct {
		typ, label string
		make       func(context.Context, *blockdev.Guard, string, string) error
	}{{"swap", "swap1", Swap}, {"vfat", "efi-part", FAT}} {
		img := sparse(t, c.typ+".img", 600<<20)
		// An old ISO9660 signature at 32 KiB must not survive.
		f, _ := os.OpenFile(img, os.O_RDWR, 0)
		_, _ = f.WriteAt([]byte("\x01CD001\x01"), 32<<10)
		f.Close()
		if err := c.make(ctx, blockdev.NewGuard([]string{img}), img, c.label); err != nil {
			t.Fatal(err)
		}
		if id := blkid(t, img); id["TYPE"] != c.typ || id["LABEL"] != c.label || id["UUID"] == "" {
			t.Errorf("%s: blkid %v", c.typ, id)
		}
		if err := c.make(ctx, blockdev.NewGuard(nil), img, c.label); err == nil {
			t.Errorf("%s: formatted a device the guard does not allow", c.typ)
		}
	}
}
