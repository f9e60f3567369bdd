package blockdev

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// gptImage builds the first 34 sectors of a GPT disk with one partition.
func gptImage(sector int, typeGUID, partGUID [16]byte) []byte {
	b := make([]byte, 34*sector)
	b[446+4] = 0xEE
	binary.LittleEndian.PutUint32(b[446+8:], 1)
	binary.LittleEndian.PutUint32(b[446+12:], 0xffffffff)
	binary.LittleEndian.PutUint32(b[440:], 0xdeadbeef)
	b[510], b[511] = 0x55, 0xAA
	h := b[sector:]
	copy(h, gptSignature)
	binary.LittleEndian.PutUint64(h[32:], 1000)
	binary.LittleEndian.PutUint64(h[40:], 34)
	binary.LittleEndian.PutUint64(h[48:], 966)
	copy(h[56:72], []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	binary.LittleEndian.PutUint64(h[72:], 2)
	binary.LittleEndian.PutUint32(h[80:], 4)
	binary.LittleEndian.PutUint32(h[84:], 128)
	e := b[2*sector:]
	copy(e[0:16], typeGUID[:])
	copy(e[16:32], partGUID[:])
	binary.LittleEndian.PutUint64(e[32:], 2048)
	binary.LittleEndian.PutUint64(e[40:], 4095)
	for i, c := range "config-2" {
		binary.LittleEndian.PutUint16(e[56+2*i:], uint16(c))
	}
	return b
}

func TestParsePartTableGPT(t *testing.T) {
	esp := [16]byte{0x28, 0x73, 0x2a, 0xc1, 0x1f, 0xf8, 0xd2, 0x11, 0xba, 0x4b, 0x00, 0xa0, 0xc9, 0x3e, 0xc9, 0x3b}
	for _, sector := range []int{512, 4096} {
		img := gptImage(sector, esp, [16]byte{0xaa})
		tb, err := ParsePartTable(bytes.NewReader(img), img[:2*sector], sector)
		if err != nil {
			t.Fatal(err)
		}
		if tb.Kind != "gpt" || tb.MBRSignature != 0xdeadbeef || tb.DiskGUID != "04030201-0605-0807-090a-0b0c0d0e0f10" {
			t.Errorf("%d: table %+v", sector, tb)
		}
		if len(tb.Partitions) != 1 {
			t.Fatalf("%d: partitions %+v", sector, tb.Partitions)
		}
		p := tb.Partitions[0]
		if p.TypeGUID != ESPTypeGUID || p.Start != 2048*int64(sector) || p.Size != 2048*int64(sector) || p.Name != "config-2" {
			t.Errorf("%d: partition %+v", sector, p)
		}
	}
}

func TestParsePartTableMBRAndGarbage(t *testing.T) {
	b := make([]byte, 1024)
	b[446+4] = 0x83
	binary.LittleEndian.PutUint32(b[446+8:], 2048)
	binary.LittleEndian.PutUint32(b[446+12:], 100)
	b[510], b[511] = 0x55, 0xAA
	tb, _ := ParsePartTable(nil, b, 512)
	if tb.Kind != "dos" || len(tb.Partitions) != 1 || tb.Partitions[0].Start != 2048*512 {
		t.Errorf("mbr: %+v", tb)
	}
	if tb, _ := ParsePartTable(nil, make([]byte, 1024), 512); tb.Kind != "" {
		t.Errorf("zeroes: %+v", tb)
	}
}

func TestSignatures(t *testing.T) {
	iso := make([]byte, 40000)
	iso[32768] = 1
	copy(iso[32769:], "CD001")
	copy(iso[32768+40:], "config-2                        ")
	if got := ISOVolumeID(iso); got != "config-2" {
		t.Errorf("iso label %q", got)
	}
	copy(iso[32768+318:], "6f1b3a52-0c8e-4c5e-9b1d-2f0e6c1a7d44")
	if got := ISOPublisherID(iso); got != "6f1b3a52-0c8e-4c5e-9b1d-2f0e6c1a7d44" {
		t.Errorf("iso publisher %q", got)
	}
	if got := fsSignature(iso); got != "iso9660" {
		t.Errorf("iso signature %q", got)
	}
	fat := make([]byte, 512)
	copy(fat[0x47:], "CONFIG-2   ")
	copy(fat[0x52:], "FAT32   ")
	if got := FATLabel(fat); got != "CONFIG-2" {
		t.Errorf("fat label %q", got)
	}
}

// FuzzParsePartTable feeds arbitrary disk heads to the table, signature
// and label parsers: garbage is "no table", never a panic.
func FuzzParsePartTable(f *testing.F) {
	esp := [16]byte{0x28, 0x73, 0x2a, 0xc1}
	f.Add(gptImage(512, esp, [16]byte{1}), 512)
	f.Add(gptImage(4096, esp, [16]byte{1})[:8192], 4096)
	f.Add(make([]byte, 512), 512)
	f.Fuzz(func(t *testing.T, b []byte, sector int) {
		if sector != 512 && sector != 4096 {
			sector = 512
		}
		_, _ = ParsePartTable(bytes.NewReader(b), b, sector)
		_ = fsSignature(b)
		_ = ISOVolumeID(b)
		_ = ISOPublisherID(b)
		_ = FATLabel(b)
		_ = mdSuperblockAtEnd(bytes.NewReader(b), int64(len(b)))
	})
}
