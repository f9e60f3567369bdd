package erase

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ironic-go/ironic-agent/deploy/blockdev"
	"github.com/ironic-go/ironic-agent/internal/testbed/looptest"
	"github.com/ironic-go/ironic-agent/inventory"
)

// TestMain runs the tests in a private mount namespace: their mounts and
// loop devices go with the test binary, even when it is killed.
func TestMain(m *testing.M) { looptest.Main(m.Run) }

// buildDisk makes a GPT disk on a fresh loop device with an ext4, a vfat
// and an "LVM" partition (a PV label written by hand: LABELONE in sector
// 1 and the LVM2 type), and returns the device and its partitions.
func buildDisk(t *testing.T, size int64) (string, []string) {
	t.Helper()
	looptest.RequireTools(t, "sgdisk", "mkfs.ext4", "mkfs.vfat", "blkid", "partx")
	dev := looptest.Attach(t, size, "--partscan")
	looptest.Run(t, "sgdisk", "-n", "1:2048:+16M", "-n", "2:0:+16M", "-t", "2:ef00", "-n", "3:0:+8M", "-t", "3:8e00", dev)
	looptest.Run(t, "partx", "-u", dev)
	parts := []string{dev + "p1", dev + "p2", dev + "p3"}
	for _, p := range parts {
		looptest.WaitFor(t, p)
	}
	looptest.Run(t, "mkfs.ext4", "-q", "-F", parts[0])
	looptest.Run(t, "mkfs.vfat", parts[1])
	looptest.WriteAt(t, parts[2], 512, lvmLabel())
	return dev, parts
}

// lvmLabel is an LVM2 physical-volume label header (label_header of
// lib/label/label.h): "LABELONE", sector number 1, crc, offset 32,
// "LVM2 001".
func lvmLabel() []byte {
	b := make([]byte, 512)
	copy(b[0:8], "LABELONE")
	binary.LittleEndian.PutUint64(b[8:16], 1)
	binary.LittleEndian.PutUint32(b[20:24], 32)
	copy(b[24:32], "LVM2 001")
	return b
}

func TestEraseDevicesMetadataLoop(t *testing.T) {
	dev, parts := buildDisk(t, 128<<20)
	for _, p := range parts[:2] {
		if looptest.BlkidProbe(t, p) == "" {
			t.Fatalf("setup: blkid finds nothing on %s", p)
		}
	}
	e := &Eraser{Guard: blockdev.NewGuard([]string{dev}), Runner: blockdev.ExecRunner{}}
	res, err := e.EraseDevicesMetadata(context.Background(), []inventory.Disk{{Name: dev, Size: 128 << 20}}, DefaultEraseOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range append([]string{dev}, parts...) {
		if res[d].Method != MethodMetadata {
			t.Errorf("%s: %+v", d, res[d])
		}
	}
	// The kernel re-read the now empty table: the partitions are gone.
	if _, err := os.Stat(parts[0]); err == nil {
		t.Errorf("%s still exists after the wipe", parts[0])
	}
	if got := looptest.BlkidProbe(t, dev); got != "" {
		t.Errorf("blkid still finds on %s: %s", dev, got)
	}
	if out, err := exec.Command("wipefs", "-n", "--no-act", dev).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("wipefs -n %s: %v %s", dev, err, out)
	}
	out, _ := exec.Command("sgdisk", "-p", dev).CombinedOutput()
	if !strings.Contains(string(out), "Creating new GPT entries") && !strings.Contains(string(out), "not present") {
		t.Errorf("sgdisk still sees a table:\n%s", out)
	}
	// The data regions of the old partitions, re-exposed by offset: no
	// ext4, FAT or LVM signature left where they were.
	p1, p2, p3 := int64(2048*512), int64((2048+16*2048)*512), int64((2048+32*2048)*512)
	if b := looptest.ReadAt(t, dev, p1+0x438, 2); !bytes.Equal(b, []byte{0, 0}) {
		t.Errorf("ext4 magic left: %x", b)
	}
	if b := looptest.ReadAt(t, dev, p2+510, 2); !bytes.Equal(b, []byte{0, 0}) {
		t.Errorf("FAT boot signature left: %x", b)
	}
	if b := looptest.ReadAt(t, dev, p3+512, 8); bytes.Equal(b, []byte("LABELONE")) {
		t.Error("LVM label left")
	}
	// Backup GPT header in the last sector is gone too.
	if b := looptest.ReadAt(t, dev, 128<<20-512, 8); bytes.Equal(b, []byte("EFI PART")) {
		t.Error("backup GPT header left")
	}
}

func TestEraseMetadataSkipsRAIDMemberAndReadOnly(t *testing.T) {
	looptest.RequireTools(t, "sgdisk", "partx")
	raid := looptest.Attach(t, 64<<20, "--partscan")
	// An md 1.2 superblock: magic at 4 KiB.
	looptest.WriteAt(t, raid, 4096, append(append([]byte{}, mdMagic...), 1, 0, 0, 0))
	ro := looptest.Attach(t, 64<<20, "--partscan")
	looptest.Run(t, "sgdisk", "-n", "1:2048:+8M", ro)
	looptest.Run(t, "blockdev", "--setro", ro)
	t.Cleanup(func() { _ = exec.Command("blockdev", "--setrw", ro).Run() })
	e := &Eraser{Guard: blockdev.NewGuard([]string{raid, ro}), Runner: blockdev.ExecRunner{}}
	res, err := e.EraseDevicesMetadata(context.Background(), []inventory.Disk{{Name: raid}, {Name: ro}}, DefaultEraseOptions())
	if err != nil {
		t.Fatal(err)
	}
	if res[raid].Method != MethodSkippedRAIDMember || res[ro].Method != MethodSkippedReadOnly {
		t.Errorf("results %+v", res)
	}
	if b := looptest.ReadAt(t, raid, 4096, 4); !bytes.Equal(b, mdMagic) {
		t.Error("RAID member was touched")
	}
	// Full erase: a read-only disk fails unless the node permits skipping.
	o := DefaultEraseOptions()
	_, err = e.EraseBlockDevice(context.Background(), ro, o)
	if err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("read-only without skip: %v", err)
	}
	o.SkipReadOnly = true
	if r, err := e.EraseBlockDevice(context.Background(), ro, o); err != nil || r.Method != MethodSkippedReadOnly {
		t.Errorf("read-only with skip: %+v %v", r, err)
	}
}

func TestSafetyCheckSharedFilesystems(t *testing.T) {
	looptest.RequireTools(t, "sgdisk")
	gpfs := looptest.Attach(t, 64<<20, "--partscan")
	looptest.Run(t, "sgdisk", "-n", "1:2048:+8M", "-t", "1:37AFFC90-EF7D-4E96-91C3-2D7AE055B174", gpfs)
	vmfs := looptest.Attach(t, 64<<20, "--partscan")
	// MBR with one partition of type 0xfb.
	mbr := make([]byte, 512)
	mbr[446+4] = 0xfb
	binary.LittleEndian.PutUint32(mbr[446+8:], 2048)
	binary.LittleEndian.PutUint32(mbr[446+12:], 8192)
	mbr[510], mbr[511] = 0x55, 0xAA
	looptest.WriteAt(t, vmfs, 0, mbr)
	gfs2 := looptest.Attach(t, 64<<20, "--partscan")
	looptest.WriteAt(t, gfs2, 65536, []byte{0x01, 0x16, 0x19, 0x70, 0, 0, 0, 1})
	e := &Eraser{Guard: blockdev.NewGuard([]string{gpfs, vmfs, gfs2}), Runner: blockdev.ExecRunner{}}
	for dev, what := range map[string]string{gpfs: "GPFS", vmfs: "VMFS Partition (MBR)", gfs2: "Global File System 2"} {
		var pe *ProtectedDeviceError
		_, err := e.EraseDevicesMetadata(context.Background(), []inventory.Disk{{Name: dev}}, DefaultEraseOptions())
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), what) {
			t.Errorf("%s: %v, want a refusal naming %s", dev, err, what)
		}
		_, err = e.EraseDevices(context.Background(), []inventory.Disk{{Name: dev}}, DefaultEraseOptions())
		if !errors.As(err, &pe) {
			t.Errorf("erase_devices %s: %v", dev, err)
		}
	}
	o := DefaultEraseOptions()
	o.WipeSpecialFilesystems = false
	if _, err := e.EraseDevicesMetadata(context.Background(), []inventory.Disk{{Name: gfs2}}, o); err != nil {
		t.Errorf("with wipe_special_filesystems=false: %v", err)
	}
	// The agent's guard_special_filesystems=false turns the check off
	// for every node.
	o = DefaultEraseOptions()
	o.GuardSpecialFilesystems = false
	if _, err := e.EraseDevicesExpress(context.Background(), []inventory.Disk{{Name: gpfs}}, o); err != nil {
		t.Errorf("with guard_special_filesystems=false: %v", err)
	}
}

func TestEraseDevicesOverwriteLoop(t *testing.T) {
	const size = 32 << 20
	dev := looptest.Attach(t, size, "--partscan")
	pattern := bytes.Repeat([]byte("tenant data! "), size/13+1)[:size]
	looptest.WriteAt(t, dev, 0, pattern)
	var passes []int
	e := &Eraser{Guard: blockdev.NewGuard([]string{dev}), Runner: blockdev.ExecRunner{},
		Progress: func(d string, pass, total int, done, all int64) {
			if done == all {
				passes = append(passes, pass)
			}
		}}
	o := DefaultEraseOptions()
	o.Iterations = 2
	// A loop device refuses SG_IO: ATA secure erase is "not supported" and
	// the overwrite runs.
	res, err := e.EraseDevices(context.Background(), []inventory.Disk{{Name: dev, Size: size}}, o)
	if err != nil {
		t.Fatal(err)
	}
	if r := res[dev]; r.Method != MethodOverwrite || r.Detail != "2 random pass(es) + zero pass" || r.Bytes != 3*size {
		t.Errorf("result %+v", r)
	}
	if len(passes) != 3 {
		t.Errorf("progress saw passes %v", passes)
	}
	if got := looptest.ReadAt(t, dev, 0, size); !bytes.Equal(got, make([]byte, size)) {
		t.Error("device is not all zeroes after the zero pass")
	}
	// Without zeroize the last pass is random: no zero run of a sector
	// and nothing of the old data.
	looptest.WriteAt(t, dev, 0, pattern)
	res, err = e.EraseDevices(context.Background(), []inventory.Disk{{Name: dev, Size: size}}, EraseOptions{Iterations: 1, Concurrency: 1, EnableATASecureErase: true})
	if err != nil {
		t.Fatal(err)
	}
	got := looptest.ReadAt(t, dev, 0, size)
	if bytes.Contains(got, []byte("tenant data!")) || bytes.Contains(got, make([]byte, 512)) {
		t.Errorf("random pass left old data or zero sectors (%+v)", res[dev])
	}
}

// A loop device accepts discard (hole punching in the backing file) and
// not secure discard, and it also offloads WRITE ZEROES: express erase
// must discard it and wipe the metadata, never zero it in full.
func TestEraseDevicesExpressLoop(t *testing.T) {
	const size = 64 << 20
	dev, parts := buildDisk(t, size)
	looptest.WriteAt(t, parts[0], 4<<20, bytes.Repeat([]byte{0xA5}, 8<<20))
	if n := sysQueueInt(t, dev, "discard_max_bytes"); n == 0 {
		t.Skipf("%s offers no discard on this kernel", dev)
	}
	before := backingAllocated(t, dev)
	e := &Eraser{Guard: blockdev.NewGuard([]string{dev}), Runner: blockdev.ExecRunner{}}
	res, err := e.EraseDevicesExpress(context.Background(), []inventory.Disk{{Name: dev, Size: size}}, DefaultEraseOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("express results: %+v", res)
	for _, d := range append([]string{dev}, parts...) {
		if r := res[d]; r.Method != MethodDiscardMetadata || r.Detail != "" {
			t.Errorf("%s: result %+v, want %q", d, r, MethodDiscardMetadata)
		}
	}
	// Discard punched holes: every byte reads as zero and the backing
	// file holds only what the disk's own metadata wipe wrote (rounded to
	// file system blocks). BLKZEROOUT would have left the file allocated
	// (the kernel issues it with NOUNMAP: fallocate ZERO_RANGE).
	if got := looptest.ReadAt(t, dev, 0, size); !bytes.Equal(got, make([]byte, size)) {
		t.Error("device not all zeroes after discard")
	}
	after := backingAllocated(t, dev)
	t.Logf("backing file allocation: %d KiB before, %d KiB after; the disk's metadata wipe wrote %d KiB", before>>10, after>>10, res[dev].Bytes>>10)
	if after > res[dev].Bytes+64<<10 {
		t.Errorf("backing file still has %d KiB allocated after express erase: not discarded", after>>10)
	}
	if looptest.BlkidProbe(t, dev) != "" {
		t.Error("blkid still finds a signature")
	}
}

// sysQueueInt reads one queue attribute of a whole-disk device.
func sysQueueInt(t *testing.T, dev, attr string) int64 {
	t.Helper()
	n, err := blockdev.ReadSysInt(filepath.Join("/sys/block", filepath.Base(dev), "queue", attr))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// backingAllocated is how many bytes of a loop device's backing file are
// allocated on its file system.
func backingAllocated(t *testing.T, dev string) int64 {
	t.Helper()
	backing, err := os.ReadFile("/sys/block/" + filepath.Base(dev) + "/loop/backing_file")
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(strings.TrimSpace(string(backing)), &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// mdMagic is the md RAID superblock magic, little endian (0xa92b4efc).
var mdMagic = []byte{0xfc, 0x4e, 0x2b, 0xa9}
