package ata_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/deploy/ata"
	"github.com/ironic-go/ironic-agent/deploy/ata/atatest"
)

func addRecorded(f *testing.F, glob string) {
	paths, err := filepath.Glob(filepath.Join("testdata", "qemu", glob))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no recorded %s: %v", glob, err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzParseIdentify feeds arbitrary bytes as IDENTIFY DEVICE data: the
// parser accepts only 512 bytes, and what it accepts yields a security
// state, erase times and a positive timeout without panicking.
func FuzzParseIdentify(f *testing.F) {
	addRecorded(f, "*.identify")
	f.Add(atatest.WithSecurity(make([]byte, ata.SectorSize), 0x3f, 0x80ff, 0xff))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := ata.ParseIdentify(b)
		if err != nil {
			return
		}
		if len(b) != ata.SectorSize {
			t.Fatalf("accepted %d bytes", len(b))
		}
		_ = id.Security().String()
		_, _, _ = id.Model(), id.Serial(), id.Firmware()
		for _, enh := range []bool{false, true} {
			if d, ok := id.EraseTime(enh); ok && d <= 0 || id.EraseTimeout(enh) <= 0 {
				t.Fatalf("erase time %v %v, timeout %v", d, ok, id.EraseTimeout(enh))
			}
		}
		if string(id.Bytes()) != string(b) {
			t.Fatal("Bytes does not give back the data")
		}
	})
}

// FuzzParseSense feeds arbitrary bytes as the sense data of an ATA
// PASS-THROUGH reply through the parser and the success rule.
func FuzzParseSense(f *testing.F) {
	addRecorded(f, "*.sense")
	for _, h := range []string{senseDescOK, senseDescAbort, senseFixedAbort, senseFixedAbortLinux61, senseFixedInvalidOpcode} {
		f.Add(unhex(f, h))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ata.ParseSense(b)
		if err == nil && s.Failed() && !s.HasATA {
			t.Fatal("failed without ATA registers")
		}
		err = ata.Check("/dev/sdz", ata.OpSecurityEraseUnit, ata.Reply{Status: 2, DriverStatus: 8, Sense: b})
		if err == nil && s.Failed() {
			t.Fatalf("%+v passed the check", s)
		}
	})
}

// FuzzCDB16 builds CDBs and data blocks from arbitrary registers and
// passwords and reads them back as libata decodes them.
func FuzzCDB16(f *testing.F) {
	f.Add(byte(ata.ProtocolPIOIn), ata.OpIdentify, byte(0), byte(1), uint32(0), byte(0), "NULL", true)
	f.Add(byte(ata.ProtocolNonData), ata.OpSecurityErasePrepare, byte(0), byte(0), uint32(0x0fffffff), byte(0xe0), "", false)
	f.Fuzz(func(t *testing.T, proto, cmd, feat, count byte, lba uint32, dev byte, password string, enhanced bool) {
		c := ata.Command{Protocol: ata.Protocol(proto & 0x0f), Command: cmd, Features: feat, Count: count, LBA: lba & 0x0fffffff, Device: dev & 0xf0}
		b := ata.CDB16(c)
		gotLBA := uint32(b[8]) | uint32(b[10])<<8 | uint32(b[12])<<16 | uint32(b[13]&0x0f)<<24
		if b[0] != 0x85 || ata.Protocol(b[1]>>1) != c.Protocol || b[1]&1 != 0 || b[2]&0x20 == 0 ||
			b[4] != feat || b[6] != count || gotLBA != c.LBA || b[13]&0xf0 != c.Device || b[14] != cmd {
			t.Fatalf("%+v -> % x", c, b)
		}
		if c.Protocol == ata.ProtocolPIOIn && b[2]&0x08 == 0 || c.Protocol == ata.ProtocolPIOOut && b[2]&0x08 != 0 {
			t.Fatalf("%+v: T_DIR wrong in % x", c, b)
		}
		pw, ok := ata.NewPassword(password)
		if ok != (len(password) <= 32) {
			t.Fatalf("NewPassword(%d bytes) = %v", len(password), ok)
		}
		if !ok {
			return
		}
		blk := ata.PasswordBlock(ata.User, pw, enhanced)
		if len(blk) != ata.SectorSize || string(bytes.TrimRight(blk[2:34], "\x00")) != strings.TrimRight(password, "\x00") || (blk[0]&2 != 0) != enhanced {
			t.Fatalf("block % x for %q", blk[:40], password)
		}
	})
}
