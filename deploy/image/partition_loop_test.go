package image

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/internal/configdrivetest"
	"github.com/ironic-go/ironic-agent/deploy/partition"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
	"github.com/ironic-go/ironic-agent/ipaerror"
)

// TestMain runs the tests in a private mount namespace: their mounts and
// loop devices go with the test binary, even when it is killed.
func TestMain(m *testing.M) { looptest.Main(m.Run) }

// Partition images on loop devices over sparse files: the layout is
// compared with what IPA's own parted command line writes on a second
// loop device, the filesystems with blkid, the contents by hash.

// This test area's port range on the shared machine.
const partServerLo, partServerHi = 9400, 9500

// rootFSImage builds a raw ext4 filesystem image of size bytes holding a
// file, as a partition image is.
func rootFSImage(t *testing.T, size int64, seed uint64) []byte {
	t.Helper()
	looptest.RequireTools(t, "mkfs.ext4")
	dir := t.TempDir()
	content := filepath.Join(dir, "content")
	if err := os.MkdirAll(filepath.Join(content, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(content, "etc", "hostname"), []byte("partition-image\n"), 0o644)
	os.WriteFile(filepath.Join(content, "payload.bin"), testImage(2<<20, seed), 0o644)
	p := filepath.Join(dir, "root.img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(size)
	f.Close()
	looptest.Run(t, "mkfs.ext4", "-q", "-F", "-L", "img-root", "-d", content, p)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// blkid returns blkid's low-level probe of dev as a map (TYPE, UUID,
// LABEL, PART_ENTRY_UUID, ...), the independent oracle for what Ironic
// would be told.
func blkid(t *testing.T, dev string) map[string]string {
	t.Helper()
	looptest.RequireTools(t, "blkid")
	out := looptest.BlkidProbe(t, dev)
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

// partitionFixture is a loop disk with an image server.
type partitionFixture struct {
	dev string
	g   *blockdev.Guard
	srv *imageServer
	iso []byte
}

func newPartitionFixture(t *testing.T, size int64) *partitionFixture {
	t.Helper()
	looptest.RequireRoot(t)
	looptest.RequireTools(t, "mkfs.ext4", "blkid")
	dev := looptest.Attach(t, size, "--partscan")
	return &partitionFixture{dev: dev, g: blockdev.NewGuard([]string{dev}), srv: newImageServerOn(t, partServerLo, partServerHi), iso: configdrivetest.MakeISO(t)}
}

// deploy runs WorkOnDisk with the image written through WriteImage into
// the root partition, as the agent does.
func (f *partitionFixture) deploy(t *testing.T, name string, img []byte, layout partition.PartitionLayout, preserve bool, configdrive bool) (*partition.PartitionImageResult, error) {
	t.Helper()
	url := f.srv.put(name, img)
	info := imageInfo(name, []string{url}, sha256hex(img))
	opts := testOptions(f.dev)
	opts.Guard = f.g
	opts.TooLarge = func(v, _ int64) error { return RootTooSmall(v, layout.RootMiB) }
	cd := ""
	if configdrive {
		cd = configdrivetest.GzipBase64(t, f.iso)
	}
	return partition.WorkOnDisk(context.Background(), partition.PartitionImageOptions{
		Guard: f.g, Device: f.dev, Layout: layout, EphemeralFormat: "ext4", PreserveEphemeral: preserve, ConfigDrive: cd,
		WriteRoot: func(ctx context.Context, root string) error {
			_, err := WriteImage(ctx, info, root, opts)
			return err
		},
	})
}

func TestWorkOnDiskLoop(t *testing.T) {
	looptest.RequireRoot(t)
	looptest.RequireTools(t, "qemu-img")
	raw := rootFSImage(t, 40<<20, 7)
	qc := makeQcow2(t, raw)
	for _, tc := range []struct {
		name   string
		img    []byte
		layout partition.PartitionLayout
		roles  []string
	}{
		{"bios-msdos-raw", raw, partition.PartitionLayout{RootMiB: 64, SwapMiB: 16, EphemeralMiB: 32, BootMode: "bios"},
			[]string{partition.RoleEphemeral, partition.RoleSwap, partition.RoleConfigDrive, partition.RoleRoot}},
		{"bios-gpt-qcow2", qc, partition.PartitionLayout{RootMiB: 64, SwapMiB: 16, EphemeralMiB: 32, BootMode: "bios", DiskLabel: "gpt"},
			[]string{partition.RoleBIOSBoot, partition.RoleEphemeral, partition.RoleSwap, partition.RoleConfigDrive, partition.RoleRoot}},
		{"uefi-gpt-raw", raw, partition.PartitionLayout{RootMiB: 64, SwapMiB: 16, BootMode: "uefi"},
			[]string{partition.RoleESP, partition.RoleSwap, partition.RoleConfigDrive, partition.RoleRoot}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newPartitionFixture(t, 1<<30)
			res, err := f.deploy(t, tc.name, tc.img, tc.layout, false, true)
			if err != nil {
				t.Fatal(err)
			}
			for i, role := range tc.roles {
				want := blockdev.PartitionPath(f.dev, i+1)
				if res.Paths[role] != want {
					t.Errorf("%s: got %q, want %q (paths %v)", role, res.Paths[role], want, res.Paths)
				}
			}
			if len(res.Paths) != len(tc.roles) {
				t.Errorf("partitions %v, want roles %v", res.Paths, tc.roles)
			}
			// The root partition holds the image's bytes.
			root := res.Paths[partition.RoleRoot]
			if got, want := deviceHash(t, root, int64(len(raw))), sha256hex(raw); got != want {
				t.Errorf("root partition %s does not hold the image (sha256 %s, want %s)", root, got, want)
			}
			rb := blkid(t, root)
			if rb["TYPE"] != "ext4" || rb["LABEL"] != "img-root" || rb["UUID"] != res.RootUUID {
				t.Errorf("root: blkid %v, we said UUID %s", rb, res.RootUUID)
			}
			if sb := blkid(t, res.Paths[partition.RoleSwap]); sb["TYPE"] != "swap" || sb["LABEL"] != "swap1" {
				t.Errorf("swap: blkid %v", sb)
			}
			if p, ok := res.Paths[partition.RoleEphemeral]; ok {
				if eb := blkid(t, p); eb["TYPE"] != "ext4" || eb["LABEL"] != "ephemeral0" {
					t.Errorf("ephemeral: blkid %v", eb)
				}
			}
			configdrivetest.Check(t, res.Paths[partition.RoleConfigDrive])
			if got := deviceHash(t, res.Paths[partition.RoleConfigDrive], int64(len(f.iso))); got != sha256hex(f.iso) {
				t.Error("config drive partition does not hold the ISO")
			}
			uuids := res.UUIDs("x86_64")
			if esp, ok := res.Paths[partition.RoleESP]; ok {
				eb := blkid(t, esp)
				if eb["TYPE"] != "vfat" || eb["LABEL"] != "efi-part" || eb["UUID"] != res.ESPUUID || res.ESPUUID == "" {
					t.Errorf("ESP: blkid %v, we said UUID %q", eb, res.ESPUUID)
				}
				if eb["PART_ENTRY_TYPE"] != "c12a7328-f81f-11d2-ba4b-00a0c93ec93b" {
					t.Errorf("ESP partition type %q", eb["PART_ENTRY_TYPE"])
				}
				// deploy/mkfs's FAT32, with the partition's offset as its
				// hidden sectors: what dosfstools' checker accepts.
				if out, err := exec.Command("fsck.fat", "-n", "-v", esp).CombinedOutput(); err != nil || !bytes.Contains(out, []byte("32 bit entries")) ||
					!bytes.Contains(out, []byte(" 2048 hidden sectors")) || bytes.Contains(bytes.ToLower(out), []byte("warning")) {
					t.Errorf("fsck.fat -n %s: %v\n%s", esp, err, out)
				}
				if uuids["efi system partition uuid"] != res.ESPUUID {
					t.Errorf("uuids %v", uuids)
				}
			} else if uuids["efi system partition uuid"] != nil {
				t.Errorf("efi system partition uuid without an ESP: %v", uuids)
			}
			if uuids["root uuid"] != res.RootUUID || len(uuids["partitions"].(map[string]any)) != len(tc.roles) {
				t.Errorf("uuids %v", uuids)
			}
			if _, ok := uuids["PReP Boot partition uuid"]; ok {
				t.Errorf("PReP key on x86_64: %v", uuids)
			}
			// The partition is found again by the UUIDs Ironic sends back
			// to install_bootloader, filesystem UUID or PARTUUID.
			if p, err := blockdev.FindPartitionByUUID(f.dev, res.RootUUID); err != nil || p != root {
				t.Errorf("FindPartitionByUUID(root) = %q, %v", p, err)
			}
			if p, err := blockdev.FindPartitionByUUID(f.dev, strings.ToUpper(rb["PART_ENTRY_UUID"])); err != nil || p != root {
				t.Errorf("FindPartitionByUUID(PARTUUID %s) = %q, %v", rb["PART_ENTRY_UUID"], p, err)
			}
			// The BIOS boot partition and msdos boot flag, as parted reads them.
			pt, err := blockdev.ReadPartTable(f.dev, 512)
			if err != nil {
				t.Fatal(err)
			}
			wantKind := map[bool]string{true: "gpt", false: "dos"}[tc.layout.BootMode == "uefi" || tc.layout.DiskLabel == "gpt"]
			if pt.Kind != wantKind {
				t.Errorf("table %s, want %s", pt.Kind, wantKind)
			}
		})
	}
}

// TestWorkOnDiskPreserveEphemeral deploys, marks the ephemeral partition,
// redeploys a different image with preserve_ephemeral and checks the
// ephemeral filesystem and its data survived while root changed; a changed
// layout is refused before anything is written.
func TestWorkOnDiskPreserveEphemeral(t *testing.T) {
	f := newPartitionFixture(t, 512<<20)
	layout := partition.PartitionLayout{RootMiB: 64, SwapMiB: 16, EphemeralMiB: 32, BootMode: "bios"}
	first, second := rootFSImage(t, 40<<20, 1), rootFSImage(t, 40<<20, 2)
	res, err := f.deploy(t, "first", first, layout, false, false)
	if err != nil {
		t.Fatal(err)
	}
	eph := res.Paths[partition.RoleEphemeral]
	before := blkid(t, eph)
	// A marker in the last MiB of the ephemeral partition, past anything
	// mkfs.ext4 writes on a fresh 32 MiB filesystem.
	marker := bytes.Repeat([]byte("tenant data "), 4096/12+1)[:4096]
	looptest.WriteAt(t, eph, 31<<20, marker)

	// A different ephemeral size: the kept data would not be the
	// ephemeral filesystem; refused, nothing touched.
	changed := layout
	changed.EphemeralMiB = 48
	if _, err := f.deploy(t, "second", second, changed, true, false); err == nil || !strings.Contains(err.Error(), "layout changed") {
		t.Fatalf("changed layout with preserve_ephemeral: %v", err)
	}
	if got := deviceHash(t, res.Paths[partition.RoleRoot], int64(len(first))); got != sha256hex(first) {
		t.Fatal("the refused redeploy touched the root partition")
	}

	// A bigger swap_mb: as IPA, the old table is used as it is (Ironic
	// refuses a changed layout with preserve_ephemeral before this).
	grown := layout
	grown.SwapMiB = 32
	res2, err := f.deploy(t, "second", second, grown, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := deviceHash(t, res2.Paths[partition.RoleRoot], int64(len(second))); got != sha256hex(second) {
		t.Error("root partition does not hold the second image")
	}
	after := blkid(t, eph)
	if after["UUID"] != before["UUID"] || after["LABEL"] != "ephemeral0" {
		t.Errorf("ephemeral filesystem changed: before %v after %v", before, after)
	}
	if !bytes.Equal(looptest.ReadAt(t, eph, 31<<20, len(marker)), marker) {
		t.Error("ephemeral partition data lost")
	}
	if res2.RootUUID == res.RootUUID {
		t.Error("root UUID unchanged: the second image has its own filesystem UUID")
	}
	if res2.Paths[partition.RoleRoot] != res.Paths[partition.RoleRoot] || res2.Partitions[1].Size != 16<<20 {
		t.Errorf("preserved layout: %v %+v", res2.Paths, res2.Partitions)
	}

}

// TestWorkOnDiskImageTooBig: a root partition smaller than the image's
// virtual size is IPA's InvalidCommandParamsError, for raw and qcow2.
func TestWorkOnDiskImageTooBig(t *testing.T) {
	looptest.RequireTools(t, "qemu-img")
	f := newPartitionFixture(t, 256<<20)
	raw := rootFSImage(t, 40<<20, 3)
	for name, img := range map[string][]byte{"raw": raw, "qcow2": makeQcow2(t, raw)} {
		_, err := f.deploy(t, "big-"+name, img, partition.PartitionLayout{RootMiB: 16, BootMode: "bios"}, false, false)
		var e *ipaerror.Error
		if !errors.As(err, &e) || e.Type != "InvalidCommandParamsError" ||
			!strings.Contains(e.Details, "Root partition is too small for requested image. Image virtual size: 40 MB, Root size: 16 MB") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestWorkOnDiskTooSmallDisk: a layout larger than the disk is refused
// before the disk is touched.
func TestWorkOnDiskTooSmallDisk(t *testing.T) {
	f := newPartitionFixture(t, 64<<20)
	looptest.WriteAt(t, f.dev, 0, []byte("keep me"))
	_, err := f.deploy(t, "x", rootFSImage(t, 8<<20, 4), partition.PartitionLayout{RootMiB: 100, BootMode: "bios"}, false, false)
	if err == nil || !strings.Contains(err.Error(), "need 101 MiB but") {
		t.Fatalf("got %v", err)
	}
	if string(looptest.ReadAt(t, f.dev, 0, 7)) != "keep me" {
		t.Error("disk was touched")
	}
}

// TestWorkOnDiskGuard: a disk outside the allow list is refused.
func TestWorkOnDiskGuard(t *testing.T) {
	f := newPartitionFixture(t, 64<<20)
	other := looptest.Attach(t, 64<<20, "--partscan")
	_, err := partition.WorkOnDisk(context.Background(), partition.PartitionImageOptions{Guard: f.g, Device: other, Layout: partition.PartitionLayout{RootMiB: 8, BootMode: "bios"}})
	if !errors.Is(err, blockdev.ErrRefused) {
		t.Fatalf("got %v", err)
	}
}

// TestImageVirtualSize: what the first bytes of an image tell about its
// size on disk, without downloading it.
func TestImageVirtualSize(t *testing.T) {
	looptest.RequireTools(t, "qemu-img")
	raw := testImage(3<<20+512, 9)
	srv := newImageServerOn(t, partServerLo, partServerHi)
	for _, tc := range []struct {
		name string
		data []byte
		want int64
	}{
		{"raw", raw, int64(len(raw))},
		{"qcow2", makeQcow2(t, raw), int64(len(raw))},
		{"gzip", gzipBytes(t, raw), -1},
	} {
		info := imageInfo(tc.name, []string{srv.put(tc.name, tc.data)}, sha256hex(tc.data))
		got, err := ImageVirtualSize(context.Background(), info, testOptions(""))
		if err != nil || got != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
	_, err := ImageVirtualSize(context.Background(), imageInfo("x", []string{srv.base + "/missing"}, "00"), testOptions(""))
	var e *ipaerror.Error
	if !errors.As(err, &e) || e.Type != "ImageDownloadError" {
		t.Errorf("missing image: %v", err)
	}
}

func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// TestWorkOnDisk4Kn: the same layouts on a disk with 4096-byte logical
// sectors (MiB boundaries are whole sectors; msdos entries count 4 KiB
// sectors): the table matches parted's there too, and the image lands.
func TestWorkOnDisk4Kn(t *testing.T) {
	looptest.RequireTools(t, "blockdev", "parted")
	raw := rootFSImage(t, 40<<20, 5)
	for _, layout := range []partition.PartitionLayout{
		{RootMiB: 64, SwapMiB: 16, EphemeralMiB: 32, BootMode: "bios"},
		{RootMiB: 64, SwapMiB: 16, BootMode: "uefi"},
	} {
		t.Run(layout.BootMode, func(t *testing.T) {
			f := newPartitionFixture(t, 1<<30)
			looptest.Run(t, "losetup", "--sector-size", "4096", f.dev)
			if n := strings.TrimSpace(looptest.Run(t, "blockdev", "--getss", f.dev)); n != "4096" {
				t.Skipf("SKIPPED: loop device did not take 4096-byte sectors (%s)", n)
			}
			res, err := f.deploy(t, "4kn-"+layout.BootMode, raw, layout, false, true)
			if err != nil {
				t.Fatal(err)
			}
			if got := deviceHash(t, res.Paths[partition.RoleRoot], int64(len(raw))); got != sha256hex(raw) {
				t.Error("root partition does not hold the image")
			}
			for _, p := range res.Partitions {
				if n := looptest.Size(t, res.Paths[p.Role]); n != p.Size {
					t.Errorf("%s (%s) is %d bytes, the table says %d", res.Paths[p.Role], p.Role, n, p.Size)
				}
			}
			if rb := blkid(t, res.Paths[partition.RoleRoot]); rb["UUID"] != res.RootUUID {
				t.Errorf("root: blkid %v, we said %s", rb, res.RootUUID)
			}
			// parted reads our table with the same geometry it would write.
			out := looptest.Run(t, "parted", "-s", "-m", f.dev, "unit", "B", "print")
			for _, p := range res.Partitions {
				want := fmt.Sprintf("%d:%dB:%dB:%dB:", p.Number, p.Start, p.Start+p.Size-1, p.Size)
				if !strings.Contains(out, want) {
					t.Errorf("parted does not show %s (%s):\n%s", want, p.Role, out)
				}
			}
		})
	}
}

// A vfat or msdos ephemeral partition is written by deploy/mkfs, labelled
// as mkfs.vfat -n ephemeral0 labels it: blkid and fsck.fat -n agree.
func TestWorkOnDiskFATEphemeral(t *testing.T) {
	looptest.RequireRoot(t, "fsck.fat", "blkid")
	for _, format := range []string{"vfat", "msdos"} {
		t.Run(format, func(t *testing.T) {
			f := newPartitionFixture(t, 256<<20)
			res, err := partition.WorkOnDisk(context.Background(), partition.PartitionImageOptions{
				Guard: f.g, Device: f.dev, EphemeralFormat: format,
				Layout: partition.PartitionLayout{RootMiB: 16, SwapMiB: 8, EphemeralMiB: 64, BootMode: "bios"},
			})
			if err != nil {
				t.Fatal(err)
			}
			eph := res.Paths[partition.RoleEphemeral]
			if eb := blkid(t, eph); eb["TYPE"] != "vfat" || eb["LABEL"] != "ephemeral0" || eb["VERSION"] != "FAT16" {
				t.Errorf("ephemeral: blkid %v", eb)
			}
			if out, err := exec.Command("fsck.fat", "-n", eph).CombinedOutput(); err != nil || bytes.Contains(bytes.ToLower(out), []byte("warning")) {
				t.Errorf("fsck.fat -n %s: %v\n%s", eph, err, out)
			}
		})
	}
}
