package partition

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/deploy/internal/configdrivetest"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
)

// TestMain runs the tests in a private mount namespace: their mounts and
// loop devices go with the test binary, even when it is killed.
func TestMain(m *testing.M) { looptest.Main(m.Run) }

func TestLoadConfigDrive(t *testing.T) {
	iso := configdrivetest.MakeISO(t)
	enc := configdrivetest.GzipBase64(t, iso)
	ctx := context.Background()
	got, err := LoadConfigDrive(ctx, nil, enc)
	if err != nil || !bytes.Equal(got, iso) {
		t.Fatalf("inline: %v", err)
	}
	// Line-wrapped base64 (as some tools write it) decodes the same.
	wrapped := ""
	for i := 0; i < len(enc); i += 76 {
		wrapped += enc[i:min(i+76, len(enc))] + "\n"
	}
	if got, err := LoadConfigDrive(ctx, nil, wrapped); err != nil || !bytes.Equal(got, iso) {
		t.Errorf("wrapped: %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/cd.b64":
			fmt.Fprint(w, enc)
		case "/cd.iso":
			w.Write(iso)
		default:
			http.Error(w, "no such config drive", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	if got, err := LoadConfigDrive(ctx, srv.Client(), srv.URL+"/cd.b64"); err != nil || !bytes.Equal(got, iso) {
		t.Errorf("URL base64: %v", err)
	}
	if got, err := LoadConfigDrive(ctx, srv.Client(), srv.URL+"/cd.iso"); err != nil || !bytes.Equal(got, iso) {
		t.Errorf("URL raw ISO: %v", err)
	}
	_, err = LoadConfigDrive(ctx, srv.Client(), srv.URL+"/missing")
	if err == nil || !strings.Contains(err.Error(), "HTTP status 404") || !strings.Contains(err.Error(), "no such config drive") {
		t.Errorf("404: %v", err)
	}
	if _, err := LoadConfigDrive(ctx, nil, "!!!"); err == nil || !strings.Contains(err.Error(), "not base64") {
		t.Errorf("garbage: %v", err)
	}
	if _, err := LoadConfigDrive(ctx, nil, base64.StdEncoding.EncodeToString(iso)); err == nil || !strings.Contains(err.Error(), "gzip") {
		t.Errorf("base64 without gzip: %v", err)
	}
	// The size limit (64 MiB in production) on a smaller scale.
	big := configdrivetest.GzipBase64(t, make([]byte, 2*blockdev.MiB+1))
	if _, err := loadConfigDrive(ctx, nil, big, 2*blockdev.MiB); err == nil || !strings.Contains(err.Error(), "maximum of 2 MiB") {
		t.Errorf("oversized: %v", err)
	}
}

func TestConfigDriveGPTLoop(t *testing.T) {
	looptest.RequireTools(t, "sgdisk", "blkid", "mount", "partx")
	iso := configdrivetest.MakeISO(t)
	const size = 256 << 20
	dev := looptest.Attach(t, size, "--partscan")
	// A whole-disk image smaller than the disk: its backup GPT sits at 64
	// MiB, not at the end, as after dd of a 64 MiB image.
	img := filepath.Join(t.TempDir(), "image.raw")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	looptest.Run(t, "sgdisk", "-n", "1:2048:+16M", "-t", "1:ef00", "-n", "2:0:+32M", img)
	b, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	looptest.WriteAt(t, dev, 0, b)
	looptest.Run(t, "partx", "-u", dev)
	g := blockdev.NewGuard([]string{dev})
	res, err := WriteConfigDrive(context.Background(), g, dev, iso)
	if err != nil {
		t.Fatal(err)
	}
	if res.Number != 3 || res.Reused || res.Partition != dev+"p3" {
		t.Errorf("result %+v", res)
	}
	configdrivetest.Check(t, res.Partition)
	out := looptest.Run(t, "sgdisk", "-v", dev)
	if !strings.Contains(out, "No problems found") {
		t.Errorf("sgdisk -v after config drive:\n%s", out)
	}
	// The new partition ends at the last usable sector and is >= 64 MiB.
	info := looptest.Run(t, "sgdisk", "-i", "3", dev)
	if !strings.Contains(info, "Last sector: 524254") {
		t.Errorf("partition 3 does not end at the last usable sector:\n%s", info)
	}
	// A second run reuses the partition.
	res2, err := WriteConfigDrive(context.Background(), g, dev, iso)
	if err != nil || !res2.Reused || res2.Number != 3 {
		t.Errorf("second run: %+v %v", res2, err)
	}
	if strings.Contains(looptest.Run(t, "sgdisk", "-p", dev), "\n   4 ") {
		t.Error("second run created another partition")
	}
	// get_partition_uuids on GPT reads the protective MBR's signature field.
	checkRootUUID(t, dev)
}

// checkRootUUID compares PartitionUUIDs with od, reading bytes 440-443 as
// a native 32-bit number the way IPA's hexdump call does.
func checkRootUUID(t *testing.T, dev string) {
	t.Helper()
	got, err := PartitionUUIDs(dev)
	if err != nil {
		t.Fatal(err)
	}
	want := "0x" + strings.TrimSpace(looptest.Run(t, "od", "-An", "-tx4", "-j440", "-N4", dev))
	if got["root uuid"] != want || len(got) != 1 {
		t.Errorf("PartitionUUIDs(%s) = %v, od says %s", dev, got, want)
	}
}

// writeMBR writes an MBR with signature sig and the given partitions
// (start, size in sectors, type).
func writeMBR(t *testing.T, dev string, sig uint32, parts ...[3]uint32) {
	t.Helper()
	b := make([]byte, 512)
	binary.LittleEndian.PutUint32(b[440:], sig)
	for i, p := range parts {
		e := b[446+16*i:]
		e[4] = byte(p[2])
		binary.LittleEndian.PutUint32(e[8:], p[0])
		binary.LittleEndian.PutUint32(e[12:], p[1])
	}
	b[510], b[511] = 0x55, 0xAA
	looptest.WriteAt(t, dev, 0, b)
}

func TestConfigDriveMBRLoop(t *testing.T) {
	looptest.RequireTools(t, "blkid", "mount", "partx")
	iso := configdrivetest.MakeISO(t)
	const size = 128 << 20
	dev := looptest.Attach(t, size, "--partscan")
	writeMBR(t, dev, 0x1234abcd, [3]uint32{2048, 32768, 0x83})
	looptest.Run(t, "partx", "-u", dev)
	g := blockdev.NewGuard([]string{dev})
	res, err := WriteConfigDrive(context.Background(), g, dev, iso)
	if err != nil {
		t.Fatal(err)
	}
	if res.Number != 2 || res.Partition != dev+"p2" {
		t.Errorf("result %+v", res)
	}
	configdrivetest.Check(t, res.Partition)
	tb, err := blockdev.ReadPartTable(dev, 512)
	if err != nil || tb.Kind != "dos" || len(tb.Partitions) != 2 {
		t.Fatalf("table after: %+v %v", tb, err)
	}
	p := tb.Partitions[1]
	if p.MBRType != 0x0c || p.Start != size-64<<20 || p.Size != 64<<20 {
		t.Errorf("config drive partition %+v", p)
	}
	// The disk signature survives, and is what get_partition_uuids returns.
	if got, _ := PartitionUUIDs(dev); got["root uuid"] != "0x1234abcd" {
		t.Errorf("root uuid %v", got)
	}
	checkRootUUID(t, dev)
}

func TestConfigDriveMBRFull(t *testing.T) {
	looptest.RequireTools(t, "partx")
	dev := looptest.Attach(t, 128<<20, "--partscan")
	writeMBR(t, dev, 1, [3]uint32{2048, 2048, 0x83}, [3]uint32{4096, 2048, 0x83}, [3]uint32{6144, 2048, 0x83}, [3]uint32{8192, 2048, 0x83})
	_, err := WriteConfigDrive(context.Background(), blockdev.NewGuard([]string{dev}), dev, []byte("x"))
	if err == nil || !strings.Contains(err.Error(), "already has 4 primary partitions") {
		t.Errorf("got %v", err)
	}
}

func TestConfigDriveRefusedByGuard(t *testing.T) {
	a := looptest.Attach(t, 64<<20, "--partscan")
	b := looptest.Attach(t, 64<<20, "--partscan")
	_, err := WriteConfigDrive(context.Background(), blockdev.NewGuard([]string{a}), b, []byte("x"))
	if err == nil || !strings.Contains(err.Error(), "not in the allowed devices") {
		t.Errorf("got %v", err)
	}
}

func TestConfigDriveGPT4KnLoop(t *testing.T) {
	looptest.RequireTools(t, "sgdisk", "blkid", "partx")
	iso := configdrivetest.MakeISO(t)
	dev := looptest.Attach(t, 256<<20, "--partscan")
	// Re-attach with 4096-byte logical sectors (a 4Kn disk).
	looptest.Run(t, "losetup", "--sector-size", "4096", dev)
	if n := strings.TrimSpace(looptest.Run(t, "blockdev", "--getss", dev)); n != "4096" {
		t.Skipf("SKIPPED: loop device did not take 4096-byte sectors (%s)", n)
	}
	looptest.Run(t, "sgdisk", "-n", "1:256:+16M", dev)
	res, err := WriteConfigDrive(context.Background(), blockdev.NewGuard([]string{dev}), dev, iso)
	if err != nil {
		t.Fatal(err)
	}
	// ISO9660 cannot be mounted on 4 KiB sectors: rebuilt as FAT32
	// labelled CONFIG-2 with the same files, as IPA master does.
	out := looptest.Run(t, "blkid", "-p", "-o", "export", res.Partition)
	if !res.FAT32 || !strings.Contains(out, "LABEL=CONFIG-2") || !strings.Contains(out, "TYPE=vfat") {
		t.Errorf("result %+v, blkid %s:\n%s", res, res.Partition, out)
	}
	if out, err := exec.Command("fsck.vfat", "-n", res.Partition).CombinedOutput(); err != nil {
		t.Errorf("fsck.vfat -n %s: %v\n%s", res.Partition, err, out)
	}
	src, err := os.ReadFile(res.Partition)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "part.img")
	if err := os.WriteFile(copyPath, src, 0o600); err != nil {
		t.Fatal(err)
	}
	cf, err := os.Open(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	fat, err := fat32.Read(file.New(cf, true), int64(len(src)), 0, 4096)
	if err != nil {
		t.Fatalf("read FAT32 config drive: %v", err)
	}
	mf, err := fat.OpenFile("/openstack/latest/meta_data.json", os.O_RDONLY)
	if err != nil {
		t.Fatalf("meta_data.json on FAT32: %v", err)
	}
	if b, _ := io.ReadAll(mf); string(b) != configdrivetest.MetaData {
		t.Errorf("meta_data.json = %q", b)
	}
	// A second run finds the CONFIG-2 FAT partition and reuses it.
	res2, err := WriteConfigDrive(context.Background(), blockdev.NewGuard([]string{dev}), dev, iso)
	if err != nil || !res2.Reused || res2.Number != res.Number {
		t.Errorf("second run: %+v %v", res2, err)
	}
	if v := looptest.Run(t, "sgdisk", "-v", dev); !strings.Contains(v, "No problems found") {
		t.Errorf("sgdisk -v:\n%s", v)
	}
	// Metadata wipe geometry on 4Kn: 5 x 4096 at both ends is within
	// what WipeMetadata zeroes; the disk reads as empty afterwards.
	if _, err := blockdev.WipeMetadata(context.Background(), blockdev.NewGuard([]string{dev}), dev); err != nil {
		t.Fatal(err)
	}
	if got := looptest.BlkidProbe(t, dev); got != "" {
		t.Errorf("blkid after wipe: %s", got)
	}
}
