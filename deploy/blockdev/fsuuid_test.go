package blockdev

import (
	"encoding/binary"
	"regexp"
	"testing"
)

// fsHead builds the first bytes of a device holding the given superblock
// fields, for the UUID probe.
func fsHead(kind string) []byte {
	b := make([]byte, fsProbeLen)
	u := []byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}
	switch kind {
	case "ext4":
		copy(b[0x438:], []byte{0x53, 0xef})
		copy(b[1024+0x68:], u)
	case "xfs":
		copy(b, "XFSB")
		copy(b[32:], u)
	case "btrfs":
		copy(b[0x10040:], "_BHRfS_M")
		copy(b[0x10020:], u)
	case "swap":
		copy(b[4086:], "SWAPSPACE2")
		copy(b[1036:], u)
	case "vfat32":
		copy(b[0x52:], "FAT32   ")
		binary.LittleEndian.PutUint32(b[0x43:], 0x1a2b3c4d)
	case "vfat16":
		copy(b[0x36:], "FAT16   ")
		binary.LittleEndian.PutUint32(b[0x27:], 0x00ff0001)
	case "iso":
		b[16*2048] = 1
		copy(b[16*2048+1:], "CD001")
		copy(b[16*2048+813:], "2026112117340000")
	}
	return b
}

func TestFSUUID(t *testing.T) {
	std := "12345678-9abc-def0-0123-456789abcdef"
	for _, tc := range []struct{ kind, typ, uuid string }{
		{"ext4", "ext4", std}, {"xfs", "xfs", std}, {"btrfs", "btrfs", std}, {"swap", "swap", std},
		{"vfat32", "vfat", "1A2B-3C4D"}, {"vfat16", "vfat", "00FF-0001"},
		{"iso", "iso9660", "2026-11-21-17-34-00-00"}, {"none", "", ""},
	} {
		typ, uuid := fsUUID(fsHead(tc.kind))
		if typ != tc.typ || uuid != tc.uuid {
			t.Errorf("%s: got %q %q, want %q %q", tc.kind, typ, uuid, tc.typ, tc.uuid)
		}
	}
	if typ, uuid := fsUUID(fsHead("btrfs")[:100]); typ != "" || uuid != "" {
		t.Errorf("truncated: %q %q", typ, uuid)
	}
}

func TestPartUUID(t *testing.T) {
	dos := PartTable{Kind: "dos", MBRSignature: 0x9b19d68d, Partitions: []PartEntry{{Number: 2}}}
	if got := partUUID(dos, 2); got != "9b19d68d-02" {
		t.Errorf("msdos PARTUUID %q", got)
	}
	g := PartTable{Kind: "gpt", Partitions: []PartEntry{{Number: 1, GUID: "aa-bb"}}}
	if got := partUUID(g, 1); got != "aa-bb" || partUUID(g, 3) != "" {
		t.Errorf("gpt PARTUUID %q", got)
	}
}

// FuzzFSUUID feeds arbitrary device heads to the filesystem probe: no
// panic, and a UUID always has one of blkid's shapes.
func FuzzFSUUID(f *testing.F) {
	for _, k := range []string{"ext4", "xfs", "btrfs", "swap", "vfat32", "vfat16", "iso"} {
		h := fsHead(k)
		f.Add(h[:4096], k == "btrfs" || k == "iso")
	}
	shape := regexp.MustCompile(`^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9A-F]{4}-[0-9A-F]{4}|\d{4}(-\d{2}){6})$`)
	f.Fuzz(func(t *testing.T, b []byte, far bool) {
		if far {
			// Move the bytes to where the btrfs and ISO probes look.
			big := make([]byte, fsProbeLen)
			copy(big[0x10000:], b)
			copy(big[16*2048:], b)
			b = big
		}
		typ, uuid := fsUUID(b)
		if uuid != "" && !shape.MatchString(uuid) {
			t.Fatalf("%s UUID %q has no blkid shape", typ, uuid)
		}
		if typ == "" && uuid != "" {
			t.Fatalf("UUID %q without a type", uuid)
		}
	})
}
