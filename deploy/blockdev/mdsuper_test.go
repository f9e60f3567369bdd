package blockdev

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// md superblocks as mdadm writes them, for the probe and the wipe: each
// version at its documented place (md(4), mdadm's super0.c and
// super1.c), checksummed so that mdadm --examine itself recognises them.

const mdMagicLE = 0xa92b4efc

// mdSuperblockOffset is where version v of the md superblock lives on a
// device of size bytes: 0.90 in the last 64 KiB-aligned 64 KiB block
// (MD_NEW_SIZE_SECTORS), 1.0 8 KiB from the end rounded down to 4 KiB,
// 1.1 at the start, 1.2 4 KiB from the start.
func mdSuperblockOffset(v string, size int64) int64 {
	sectors := size / 512
	switch v {
	case "0.90":
		return ((sectors &^ 127) - 128) * 512
	case "1.0":
		return ((sectors - 16) &^ 7) * 512
	case "1.1":
		return 0
	}
	return 4096 // 1.2
}

// mdSuperblock builds a version v superblock for a device of size bytes.
func mdSuperblock(v string, size int64) []byte {
	le := binary.LittleEndian
	if v == "0.90" {
		b := make([]byte, 4096)
		le.PutUint32(b[0:], mdMagicLE)
		le.PutUint32(b[4:], 0)  // major
		le.PutUint32(b[8:], 90) // minor
		le.PutUint32(b[28:], 1) // level
		le.PutUint32(b[36:], 2) // nr_disks
		le.PutUint32(b[40:], 2) // raid_disks
		le.PutUint32(b[32:], uint32((size/1024)-64))
		le.PutUint32(b[20:], 0x11111111) // set_uuid0
		var sum uint64
		for i := 0; i < len(b); i += 4 {
			sum += uint64(le.Uint32(b[i:]))
		}
		le.PutUint32(b[536:], uint32(sum&0xffffffff+sum>>32)) // sb_csum, word 134
		return b
	}
	const maxDev = 2
	b := make([]byte, 256+2*maxDev)
	off := mdSuperblockOffset(v, size)
	le.PutUint32(b[0:], mdMagicLE)
	le.PutUint32(b[4:], 1) // major_version
	copy(b[16:32], bytes.Repeat([]byte{0x22}, 16))
	copy(b[32:64], "host:root")
	le.PutUint32(b[72:], 1) // level
	le.PutUint64(b[80:], uint64(size/512/2))
	le.PutUint32(b[92:], 2) // raid_disks
	dataOffset := uint64(0)
	if v != "1.0" {
		dataOffset = 2048
	}
	le.PutUint64(b[128:], dataOffset)
	le.PutUint64(b[136:], uint64(size/512/2))
	le.PutUint64(b[144:], uint64(off/512)) // super_offset
	copy(b[168:184], bytes.Repeat([]byte{0x33}, 16))
	le.PutUint64(b[200:], 1) // events
	le.PutUint64(b[208:], ^uint64(0))
	le.PutUint32(b[220:], maxDev)
	le.PutUint16(b[256:], 0)
	le.PutUint16(b[258:], 1)
	var sum uint64
	for i := 0; i+4 <= len(b); i += 4 {
		sum += uint64(le.Uint32(b[i:]))
	}
	le.PutUint32(b[216:], uint32(sum&0xffffffff+sum>>32))
	return b
}

// TestMDSuperblocksWiped puts each md version's superblock at its place
// on files of awkward sizes; Probe must see it, WipeMetadata must remove
// it, and mdadm --examine (when installed) must agree both times.
func TestMDSuperblocksWiped(t *testing.T) {
	mdadm, _ := exec.LookPath("mdadm")
	if mdadm == "" {
		t.Log("mdadm not installed: checking with Probe only")
	}
	for _, size := range []int64{64 * MiB, 64*MiB + 512*7, 300*MiB + 4096*3 + 512} {
		for _, v := range []string{"0.90", "1.0", "1.1", "1.2"} {
			path := filepath.Join(t.TempDir(), "member.img")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(size); err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(mdSuperblock(v, size), mdSuperblockOffset(v, size)); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if sig, err := Probe(path); err != nil || sig != "linux_raid_member" {
				t.Errorf("%s on %d bytes: Probe = %q, %v", v, size, sig, err)
			}
			if mdadm != "" {
				out, err := exec.Command(mdadm, "--examine", path).CombinedOutput()
				if err != nil || !bytes.Contains(out, []byte("Magic : a92b4efc")) {
					t.Fatalf("%s on %d bytes: mdadm does not see the test superblock (the test's fault): %v\n%s", v, size, err, out)
				}
			}
			if _, err := WipeMetadata(context.Background(), NewGuard([]string{path}), path); err != nil {
				t.Fatalf("wipe: %v", err)
			}
			if sig, err := Probe(path); err != nil || sig != "" {
				t.Errorf("%s on %d bytes after the wipe: Probe = %q, %v", v, size, sig, err)
			}
			if mdadm != "" {
				out, err := exec.Command(mdadm, "--examine", path).CombinedOutput()
				if err == nil || !bytes.Contains(out, []byte("No md superblock detected")) {
					t.Errorf("%s on %d bytes after the wipe: mdadm --examine: %v\n%s", v, size, err, out)
				}
			}
		}
	}
}
