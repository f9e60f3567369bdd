package udev

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/collector/internal/vpdtest"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseVPD80(t *testing.T) {
	s, err := parseVPD80(vpdtest.Page(0x80, []byte("LAB-SATA-0001       ")))
	if err != nil || s != "LAB-SATA-0001       " {
		t.Fatalf("got %q, %v", s, err)
	}
	// NUL padding ends the serial, as for scsi_id's C strings.
	if s, err := parseVPD80(vpdtest.Page(0x80, []byte("ABC123\x00\x00\x00\x00"))); err != nil || s != "ABC123" {
		t.Errorf("NUL-padded serial: %q, %v", s, err)
	}
	for name, page := range map[string][]byte{
		"short header": {0, 0x80, 0},
		"wrong page":   vpdtest.Page(0x83, []byte("x")),
		"truncated":    vpdtest.Page(0x80, []byte("LAB-SATA-0001"))[:10],
	} {
		if _, err := parseVPD80(page); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestSCSIIDFromVPD83(t *testing.T) {
	for _, c := range []struct {
		name, page string
		want       scsiIdent
	}{{
		// QEMU scsi-hd (lab README): vendor-specific ASCII designator with
		// the serial, then NAA IEEE Registered.
		name: "qemu scsi-hd",
		page: "0083001d 0200000d" + hex.EncodeToString([]byte("LAB-SCSI-0001")) + "01030008 5000c500a1b2c3d4",
		want: scsiIdent{Serial: "35000c500a1b2c3d4", SerialShort: "5000c500a1b2c3d4", WWN: "5000c500a1b2c3d4"},
	}, {
		// NAA IEEE Registered Extended (16 bytes) preferred over an
		// earlier NAA 5, and a target-port NAA (association 1) ignored.
		name: "naa6 extended",
		page: "0083002c 01930008 5000000000000001 01030008 5000c50012345678 01030010 600a0b800012345600000000abcdef01",
		want: scsiIdent{Serial: "3600a0b800012345600000000abcdef01", SerialShort: "600a0b800012345600000000abcdef01",
			WWN: "600a0b8000123456", WWNExt: "00000000abcdef01"},
	}, {
		// libata: T10 vendor ID "ATA     <model> <serial>" and the NAA WWN.
		name: "libata",
		page: "00830028 02010018" + hex.EncodeToString([]byte("ATA     LAB SATA HDD    ")) + "01030008 5000cca000000b01",
		want: scsiIdent{Serial: "35000cca000000b01", SerialShort: "5000cca000000b01", WWN: "5000cca000000b01"},
	}, {
		name: "eui64 only",
		page: "0083000c 01020008 0025388b91b3a8e2",
		want: scsiIdent{Serial: "20025388b91b3a8e2", SerialShort: "0025388b91b3a8e2"},
	}, {
		name: "t10 only",
		page: "00830010 0201000c" + hex.EncodeToString([]byte("VEND    X123")),
		want: scsiIdent{Serial: "1VEND    X123", SerialShort: "VEND    X123"},
	}, {
		name: "vendor specific binary",
		page: "00830008 01000004 deadbeef",
		want: scsiIdent{Serial: "0VENDOR  MODEL           deadbeef", SerialShort: "deadbeef"},
	}, {
		// EMC Symmetrix SCSI-2 layout: byte 6 is not zero.
		name: "scsi-2 layout",
		page: "00830010 6006048000000000 0000000000000001",
		want: scsiIdent{Serial: "360060480000000000000000000000001", SerialShort: "360060480000000000000000000000001"},
	}} {
		got, err := scsiIDFromVPD83(mustHex(t, c.page), "VENDOR  ", "MODEL           ")
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestSCSIIDFromVPD83Bad(t *testing.T) {
	for name, page := range map[string]string{
		"empty":              "",
		"truncated":          "0083001d 0200000d 4c41",
		"designator overrun": "00830006 01030008 5000",
		"wrong page":         "00800004 41424344",
	} {
		if _, err := scsiIDFromVPD83(mustHex(t, page), "", ""); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// Only a target-port designator: nothing scsi_id would use.
	if _, err := scsiIDFromVPD83(mustHex(t, "0083000c 01930008 5000000000000001"), "", ""); err != errNoDesignator {
		t.Errorf("target port only: err = %v, want errNoDesignator", err)
	}
}

func TestParseVPD89(t *testing.T) {
	got, err := parseVPD89(vpdtest.IdentifyPage("LAB SATA HDD", "LAB-SATA-0001", 0x5000cca000000b01))
	if err != nil {
		t.Fatal(err)
	}
	if got.Model != padTo("LAB SATA HDD", 40) || got.Serial != padTo("LAB-SATA-0001", 20) {
		t.Errorf("got %+v", got)
	}
	if _, err := parseVPD89(vpdtest.IdentifyPage("m", "s", 0)[:300]); err == nil {
		t.Error("truncated page: no error")
	}
}

// FuzzVPD80 and FuzzVPD83: arbitrary pages never panic, and what decodes
// stays inside the page.
func FuzzVPD80(f *testing.F) {
	f.Add(vpdtest.Page(0x80, []byte("LAB-SATA-0001       ")))
	f.Add([]byte{0, 0x80, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, page []byte) {
		s, err := parseVPD80(page)
		if err == nil && len(s)+4 > len(page) {
			t.Fatalf("serial of %d bytes from a %d-byte page", len(s), len(page))
		}
	})
}

func FuzzVPD83(f *testing.F) {
	for _, s := range []string{
		"0083001d 0200000d 4c41422d534353492d30303031 01030008 5000c500a1b2c3d4",
		"0083002c 01930008 5000000000000001 01030008 5000c50012345678 01030010 600a0b800012345600000000abcdef01",
		"00830010 6006048000000000 0000000000000001",
		"00830004 01030010",
	} {
		b, _ := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, page []byte) {
		id, err := scsiIDFromVPD83(page, "VENDOR  ", "MODEL           ")
		if err != nil {
			return
		}
		if len(id.Serial) > scsiMaxSerial || id.SerialShort == "" && id.Serial == "" {
			t.Fatalf("implausible ident %+v", id)
		}
		if len(id.WWN) > 16 || len(id.WWNExt) > 16 {
			t.Fatalf("WWN parts too long: %+v", id)
		}
		_, _ = parseVPD83(page)
	})
}

func FuzzVPD89(f *testing.F) {
	f.Add(vpdtest.IdentifyPage("LAB SATA HDD", "LAB-SATA-0001", 0x5000cca000000b01))
	f.Add([]byte{0, 0x89, 0x02, 0x38})
	f.Fuzz(func(t *testing.T, page []byte) {
		id, err := parseVPD89(page)
		if err == nil && (len(id.Model) > 40 || len(id.Serial) > 20) {
			t.Fatalf("bad lengths %+v", id)
		}
	})
}
