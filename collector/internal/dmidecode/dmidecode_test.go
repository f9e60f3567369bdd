package dmidecode

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestParseDMIText covers IPA's parser on the shapes dmidecode's text
// takes: an empty value becomes a list, a stray blank line ends a block,
// a memory array without its count is IPA's KeyError, and no table at all
// is the empty document.
func TestParseDMIText(t *testing.T) {
	empty, err := Parse("")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(empty); string(b) != `{"bios":{},"cpu":[],"memory":{"devices":[]}}` {
		t.Errorf("no table: %s", b)
	}
	text := "Handle 0x0000, DMI type 0, 26 bytes\nBIOS Information\n\tVendor:  \n\tVersion: a:b \n\tCharacteristics:\n\t\tPCI is supported\n\n" +
		"Handle 0x0400, DMI type 4, 48 bytes\nProcessor Information\n\tSignature: Processor Identity 0x00000001\n\n\tVersion: x\n\n" +
		"Handle 0x1100, DMI type 17, 40 bytes\nMemory Device\n\tSize: 1 GB\n\n"
	dmi, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(dmi)
	want := `{"bios":{"Handle":"Handle 0x0000, DMI type 0, 26 bytes","Vendor":[],"Version":"a:b","Characteristics":["PCI is supported"]},` +
		`"cpu":[{"Handle":"Handle 0x0400, DMI type 4, 48 bytes","Signature":"Processor Identity 0x00000001"}],` +
		`"memory":{"devices":[{"Handle":"Handle 0x1100, DMI type 17, 40 bytes","Size":"1 GB"}]}}`
	if string(b) != want {
		t.Errorf("parsed %s\nwant   %s", b, want)
	}
	_, err = Parse("Handle 0x1000, DMI type 16, 8 bytes\nPhysical Memory Array\n\n")
	if !errors.Is(err, ErrNoDeviceCount) {
		t.Errorf("short memory array: %v", err)
	}
	// Two arrays: the first one's keys, the devices summed.
	dmi, err = Parse("Handle 0x1000, DMI type 16, 23 bytes\nPhysical Memory Array\n\tUse: System Memory\n\tNumber Of Devices: 2\n\n" +
		"Handle 0x1001, DMI type 16, 23 bytes\nPhysical Memory Array\n\tUse: Flash Memory\n\tNumber Of Devices: 1\n\n")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(dmi.Memory); string(b) != `{"Use":"System Memory","Number Of Devices":3}` {
		t.Errorf("memory %s", b)
	}
}

// TestDMIMemoryRevision: the PMIC0 and RCD fields of SMBIOS 3.7, which
// dmidecode 3.4 cannot judge (dmidecode 3.6's dmi_memory_revision).
func TestDMIMemoryRevision(t *testing.T) {
	for _, c := range []struct {
		code    uint16
		memType uint8
		want    string
	}{
		{0xFF00, 0x22, "\tPMIC0 Revision Number: Unknown\n"},
		{0x8312, 0x22, "\tPMIC0 Device Type: 3\n\tPMIC0 Device Revision: 1.2\n"},
		{0x0312, 0x23, "\tPMIC0 Device Type: Not Installed\n"},
		{0x0312, 0x1A, "\tPMIC0 Revision Number: 0x0312\n"},
	} {
		var w dmiWriter
		dmiMemoryRevision(&w, "PMIC0", c.code, c.memType)
		if w.b.String() != c.want {
			t.Errorf("%#04x type %#x: %q, want %q", c.code, c.memType, w.b.String(), c.want)
		}
	}
}

// FuzzParse: any text parses without a panic into a document that
// marshals, or fails as IPA's parser fails.
func FuzzParse(f *testing.F) {
	f.Add("")
	f.Add("Handle 0x0000, DMI type 0, 26 bytes\nBIOS Information\n\tVendor:  \n\tCharacteristics:\n\t\tPCI is supported\n\n")
	f.Add("Handle 0x1000, DMI type 16, 23 bytes\nPhysical Memory Array\n\tNumber Of Devices: 2\n\n" +
		"Handle 0x1100, DMI type 17, 40 bytes\nMemory Device\n\tSize: 1 GB\n\n")
	f.Add("Handle 0x1000, DMI type 16, 8 bytes\nPhysical Memory Array\n\n")
	f.Fuzz(func(t *testing.T, text string) {
		doc, err := Parse(text)
		if err != nil {
			if !errors.Is(err, ErrUnparsable) {
				t.Fatalf("error outside ErrUnparsable: %v", err)
			}
			return
		}
		if _, err := json.Marshal(doc); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzText: any structure renders without a panic, at any version.
func FuzzText(f *testing.F) {
	f.Add(uint8(17), []byte{17, 0x28, 0, 0x11, 0, 0x10, 0xFE, 0xFF, 64, 0, 64, 0, 0, 4, 9, 0, 1, 2, 0x1A, 0x80, 0}, "DIMM 0", uint8(3), uint8(2))
	f.Add(uint8(4), make([]byte, 0x30), "CPU", uint8(2), uint8(0))
	f.Add(uint8(0), make([]byte, 0x1A), "Vendor", uint8(2), uint8(8))
	f.Fuzz(func(t *testing.T, typ uint8, formatted []byte, s string, major, minor uint8) {
		st := Structure{Type: typ, Formatted: formatted, Strings: []string{s, s}}
		if len(formatted) < 4 {
			return // the table decoder never yields a structure below its header
		}
		Text([]Structure{st}, Version(&EntryPoint{Major: major, Minor: minor}))
	})
}
