package udev

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseUdevRecord(t *testing.T) {
	// A record as systemd 252 writes it for an ATA disk.
	data := "S:disk/by-path/pci-0000:00:1f.2-ata-3.0\n" +
		"S:disk/by-id/ata-LAB_SATA_HDD_LAB-SATA-0001\n" +
		"S:disk/by-path/pci-0000:00:1f.2-ata-3\n" +
		"W:3\nI:9071437\n" +
		"E:ID_ATA=1\n" +
		"E:ID_MODEL=LAB_SATA_HDD\n" +
		`E:ID_MODEL_ENC=LAB\x20SATA\x20HDD\x20\x20` + "\n" +
		"E:ID_SERIAL_SHORT=LAB-SATA-0001\n" +
		"E:ID_WWN=0x5000cca000000b01\n" +
		"E:EMPTY=\n" +
		"E:WITH_EQ=a=b\n" +
		"G:systemd\nQ:systemd\nV:1\n"
	rec, err := ParseRecord([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	wantProps := map[string]string{
		"ID_ATA":          "1",
		"ID_MODEL":        "LAB_SATA_HDD",
		"ID_MODEL_ENC":    `LAB\x20SATA\x20HDD\x20\x20`,
		"ID_SERIAL_SHORT": "LAB-SATA-0001",
		"ID_WWN":          "0x5000cca000000b01",
		"EMPTY":           "",
		"WITH_EQ":         "a=b",
	}
	if !reflect.DeepEqual(rec.Props, wantProps) {
		t.Errorf("props = %v, want %v", rec.Props, wantProps)
	}
	wantLinks := []string{"disk/by-path/pci-0000:00:1f.2-ata-3.0", "disk/by-id/ata-LAB_SATA_HDD_LAB-SATA-0001", "disk/by-path/pci-0000:00:1f.2-ata-3"}
	if !reflect.DeepEqual(rec.Symlinks, wantLinks) {
		t.Errorf("symlinks = %v, want %v", rec.Symlinks, wantLinks)
	}
}

func TestParseUdevRecordGarbled(t *testing.T) {
	for name, data := range map[string]string{
		"no prefix":      "ID_SERIAL=x\n",
		"no equals":      "E:ID_SERIAL\n",
		"empty key":      "E:=x\n",
		"nul byte":       "E:ID_SERIAL=a\x00b\n",
		"empty symlink":  "S:\n",
		"binary garbage": "\xff\xfe\x01\x02",
		"too large":      strings.Repeat("E:A=b\n", maxUdevRecord/6+1),
	} {
		if _, err := ParseRecord([]byte(data)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if rec, err := ParseRecord(nil); err != nil || len(rec.Props) != 0 {
		t.Errorf("empty record: %v, %v", rec, err)
	}
}

func TestStringCleanups(t *testing.T) {
	for _, c := range []struct{ fn, in, want string }{
		{"normalize", "  LAB  SATA\t HDD   ", "LAB SATA\tHDD"},
		{"normalize", "LAB-SCSI-HDD    ", "LAB-SCSI-HDD"},
		{"normalize", "   ", ""},
		{"normalize", "", ""},
		{"replace_ws", "  WD-WCC4N  1234  ", "WD-WCC4N_1234"},
		{"replace_ws", "LAB-SATA-0001       ", "LAB-SATA-0001"},
		{"replace_chars", "a/b c*d", "a_b_c_d"},
		{"replace_chars", `x\x20y`, `x\x20y`},
		{"replace_chars", "Größe", "Größe"},
		{"replace_chars", "bad\xffutf", "bad_utf"},
		{"encode", "LAB SATA HDD  ", `LAB\x20SATA\x20HDD\x20\x20`},
		{"encode", `a\b/c`, `a\x5cb\x2fc`},
		{"unhex", `LAB\x20SATA\x20HDD\x20\x20`, "LAB SATA HDD  "},
		{"unhex", `trailing\x2`, `trailing\x2`},
		{"attr", "LAB-VBLK-0001  \n", "LAB-VBLK-0001"},
		{"attr", "a b/c$d*e", "a b/c$d_e"},
	} {
		var got string
		switch c.fn {
		case "normalize":
			got = NormalizeWhitespace(c.in)
		case "replace_ws":
			got = ReplaceWhitespace(c.in)
		case "replace_chars":
			got = udevReplaceChars(c.in, "")
		case "encode":
			got = Encode(c.in)
		case "unhex":
			got = Unhexmangle(c.in)
		case "attr":
			got = udevAttrValue(c.in)
		}
		if got != c.want {
			t.Errorf("%s(%q) = %q, want %q", c.fn, c.in, got, c.want)
		}
	}
}

// FuzzParseUdevRecord: any bytes either parse into properties whose keys
// are non-empty, or give an error; never a panic. Encoding and decoding
// model strings round-trips.
func FuzzParseUdevRecord(f *testing.F) {
	f.Add([]byte("S:disk/by-path/pci-0000:00:04.0-scsi-0:0:3:0\nE:ID_SERIAL=35000c500a1b2c3d4\nE:ID_WWN=0x5000c500a1b2c3d4\nG:systemd\n"))
	f.Add([]byte("E:DM_UUID=mpath-3600a0b800012345600000000abcde000\nE:DM_SERIAL=3600a0b8\n"))
	f.Add([]byte("E:ID_MODEL_ENC=LAB\\x20SATA\\x20HDD\n"))
	f.Add([]byte(""))
	f.Add([]byte("E:=\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := ParseRecord(data)
		if err != nil {
			return
		}
		for k, v := range rec.Props {
			if k == "" {
				t.Fatalf("empty key with value %q", v)
			}
			if got := Unhexmangle(Encode(v)); got != v {
				t.Fatalf("encode/Unhexmangle round trip of %q gave %q", v, got)
			}
			_ = NormalizeWhitespace(Unhexmangle(v))
		}
	})
}
