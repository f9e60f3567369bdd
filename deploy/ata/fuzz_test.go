package ata_test

import (
	"os"
	"path/filepath"
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
