package collector

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ironic-go/ironic-agent/collector/internal/dmidecode"
)

// smbiosTree writes a root with the table and entry point files the
// kernel exports.
func smbiosTree(t testing.TB, entry, table []byte) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, filepath.FromSlash("sys/firmware/dmi/tables"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "DMI"), table, 0o644); err != nil {
		t.Fatal(err)
	}
	if entry != nil {
		if err := os.WriteFile(filepath.Join(dir, "smbios_entry_point"), entry, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// checksummed sets b[at] so that b sums to zero, as entry points do.
func checksummed(b []byte, at int) {
	b[at] = 0
	var sum byte
	for _, c := range b {
		sum += c
	}
	b[at] = -sum
}

// entryPoint3 is an SMBIOS 3 entry point whose table sits at offset 32,
// where a dmidecode dump file has it.
func entryPoint3(major, minor uint8, tableLen int) []byte {
	b := make([]byte, 0x18)
	copy(b, "_SM3_")
	b[6], b[7], b[8], b[0xA] = 0x18, major, minor, 1
	binary.LittleEndian.PutUint32(b[0x0C:], uint32(tableLen))
	binary.LittleEndian.PutUint64(b[0x10:], 32)
	checksummed(b, 5)
	return b
}

// entryPoint2 is an SMBIOS 2 entry point for n structures at offset 32.
func entryPoint2(major, minor uint8, tableLen, n int) []byte {
	b := make([]byte, 0x1F)
	copy(b, "_SM_")
	b[5], b[6], b[7] = 0x1F, major, minor
	copy(b[0x10:], "_DMI_")
	binary.LittleEndian.PutUint16(b[0x16:], uint16(tableLen))
	binary.LittleEndian.PutUint32(b[0x18:], 32)
	binary.LittleEndian.PutUint16(b[0x1C:], uint16(n))
	b[0x1E] = major<<4 | minor&0xF
	checksummed(b[0x10:], 5)
	checksummed(b, 4)
	return b
}

// dmidecodeOracle runs the host's dmidecode on a dump of the table and
// returns its text for types 0, 4, 16 and 17 without the preamble, and
// dmidecode's version.
func dmidecodeOracle(t testing.TB, entry, table []byte) string {
	t.Helper()
	dump := filepath.Join(t.TempDir(), "dump")
	file := append(append(bytes.Clone(entry), make([]byte, 32-len(entry))...), table...)
	if err := os.WriteFile(dump, file, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("dmidecode", "--from-dump", dump, "-t", "0", "-t", "4", "-t", "16", "-t", "17").Output()
	if err != nil {
		t.Fatalf("dmidecode --from-dump: %v", err)
	}
	text := string(out)
	if i := strings.Index(text, "Handle 0x"); i >= 0 {
		return text[i:]
	}
	return ""
}

// dmidecodeVersion is the host's dmidecode version ("3.4"), "" without one.
func dmidecodeVersion(t testing.TB) string {
	if _, err := exec.LookPath("dmidecode"); err != nil {
		return ""
	}
	out, err := exec.Command("dmidecode", "--version").Output()
	if err != nil {
		t.Fatalf("dmidecode --version: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// randomStrings is a string set with printable and unprintable bytes,
// colons and blank strings, which dmidecode filters and IPA's parser
// splits.
func randomStrings(r *rand.Rand) []string {
	alphabet := []byte("abcXYZ019 :-.,()/_\t\x01\x7f\xc3\xa9")
	strs := make([]string, r.IntN(5))
	for i := range strs {
		b := make([]byte, 1+r.IntN(12))
		for j := range b {
			b[j] = alphabet[r.IntN(len(alphabet))]
		}
		strs[i] = string(b)
	}
	return strs
}

// randomStructure builds a type 0, 4, 16 or 17 structure of random length
// and content. With old set, values that dmidecode 3.6 decodes and 3.4
// does not (new families, sockets, memory types, fields) are avoided, so
// 3.4 can judge the rest.
func randomStructure(r *rand.Rand, typ uint8, handle uint16, old bool) []byte {
	maxLen := map[uint8]int{0: 0x1A, 4: 0x32, 16: 0x17, 17: 0x64}[typ]
	length := 4 + r.IntN(maxLen-3)
	if r.IntN(4) > 0 { // mostly full-size structures
		length = maxLen - r.IntN(3)*2
	}
	if length < 4 {
		length = 4
	}
	f := make([]byte, length)
	for i := range f {
		f[i] = byte(r.Uint32())
	}
	// Mostly-valid codes so the tables are exercised, not just "OUT OF SPEC".
	small := func(off, n int) {
		if off < length {
			f[off] = byte(r.IntN(n))
		}
	}
	strs := randomStrings(r)
	for _, off := range map[uint8][]int{0: {4, 5, 8}, 4: {4, 7, 0x10, 0x20, 0x21, 0x22}, 17: {0x10, 0x11, 0x17, 0x18, 0x19, 0x1A, 0x2B}}[typ] {
		small(off, len(strs)+2)
	}
	switch typ {
	case 0:
		if r.IntN(2) == 0 && length > 0x0B {
			f[0x0A] |= 1 << 3
		} else if length > 0x0B {
			f[0x0A] &^= 1 << 3
		}
	case 4:
		small(5, 8)
		small(0x19, 0x52)
		if length > 0x18 {
			f[0x18] = f[0x18]&0x47 | byte(r.IntN(2))<<6
		}
		if length > 0x11 && r.IntN(2) == 0 {
			f[0x11] &= 0x07
		}
		fam := []uint16{0x01, 0x02, 0x05, 0x06, 0x0B, 0x16, 0x18, 0x30, 0xB3, 0xBE, 0xFE, 0x100, 0x102, 0x118, 0x260, 0x300}[r.IntN(16)]
		if length > 6 {
			f[6] = byte(fam)
		}
		if length >= 0x2A && fam >= 0x100 {
			f[6] = 0xFE
			binary.LittleEndian.PutUint16(f[0x28:], fam)
		}
		if length > 0x25 {
			for _, off := range []int{0x23, 0x24, 0x25} {
				f[off] = []byte{0, 4, 0xFF}[r.IntN(3)]
			}
		}
		if old {
			if length > 0x19 && f[0x19] > 0x3F {
				f[0x19] = 0x3F
			}
			if length >= 0x32 {
				f[0x30], f[0x31] = 0, 0
			}
			if length <= 0x10 {
				break
			}
			if code := familyCode(f); code == 0x16 || code == 0x102 || code == 0x103 || code >= 0x258 && code <= 0x271 {
				f[6], f[0x10] = 0x02, 0 // dmidecode 3.4 also guesses from the version string
			}
		}
	case 16:
		small(4, 12)
		small(5, 9)
		small(6, 9)
		if length >= 0x0B && r.IntN(3) == 0 {
			binary.LittleEndian.PutUint32(f[7:], 0x80000000)
		}
		if old && length > 4 && f[4] == 0xA4 {
			f[4] = 0xA3
		}
	case 17:
		small(0x0E, 0x12)
		small(0x12, 0x26)
		if length >= 0x0E {
			binary.LittleEndian.PutUint16(f[0x0C:], []uint16{0, 0x7FFF, 0xFFFF, 0x8200, 16384, uint16(r.Uint32())}[r.IntN(6)])
		}
		if length >= 0x0C && r.IntN(3) == 0 {
			binary.LittleEndian.PutUint16(f[0x08:], 0)
		}
		if length >= 0x28 {
			for _, off := range []int{0x22, 0x24, 0x26} {
				binary.LittleEndian.PutUint16(f[off:], []uint16{0, 1200, 1234, 1350, 1100, 500, uint16(r.Uint32())}[r.IntN(7)])
			}
		}
		if length >= 0x17 && r.IntN(3) == 0 {
			binary.LittleEndian.PutUint16(f[0x15:], 0xFFFF)
		}
		if length >= 0x5C && r.IntN(2) == 0 {
			copy(f[0x34:0x54], bytes.Repeat([]byte{0xFF}, 0x20))
		}
		if old {
			if length > 0x12 && f[0x12] == 0x24 {
				f[0x12] = 0x23
			}
			if length >= 0x64 {
				length = 0x5C + r.IntN(4)*2
				f = f[:length]
			}
		}
	}
	f[0], f[1] = typ, byte(length)
	binary.LittleEndian.PutUint16(f[2:], handle)
	for _, s := range strs {
		f = append(append(f, s...), 0)
	}
	if len(strs) == 0 {
		f = append(f, 0)
	}
	return append(f, 0)
}

// familyCode is the processor family of a type 4 structure, from the
// 16-bit field when the byte says "see Processor Family 2".
func familyCode(f []byte) uint16 {
	if f[0x06] == 0xFE && len(f) >= 0x2A {
		return binary.LittleEndian.Uint16(f[0x28:])
	}
	return uint16(f[0x06])
}

// randomTable is a table of n random structures of the kept types, with
// other types between them, and the end-of-table structure.
func randomTable(r *rand.Rand, old bool) (table []byte, n int) {
	for i := range 1 + r.IntN(6) {
		typ := []uint8{0, 4, 16, 17, 17, 1}[r.IntN(6)]
		if typ == 1 {
			table = append(table, smbiosStruct(1, uint16(i), make([]byte, 4), "x")...)
		} else {
			table = append(table, randomStructure(r, typ, uint16(0x100*int(typ)+i), old)...)
		}
		n++
	}
	return append(table, smbiosStruct(127, 0xFEFF, nil)...), n + 1
}

// TestDMIAgreesWithDmidecode renders every fixture table and a few
// hundred random ones, and compares with the host's dmidecode reading the
// same table from a dump file. dmidecode 3.4 (Debian 12) decodes fewer
// codes than 3.6, whose wording we follow: with it, the random tables
// avoid the codes only 3.6 knows.
func TestDMIAgreesWithDmidecode(t *testing.T) {
	version := dmidecodeVersion(t)
	if version == "" {
		t.Skip("dmidecode is not installed (Debian package dmidecode): no oracle for the dmi-decode text")
	}
	old := version < "3.6"
	t.Logf("oracle: dmidecode %s (3.6-only codes avoided: %v)", version, old)

	check := func(t *testing.T, entry, table []byte) {
		t.Helper()
		want := dmidecodeOracle(t, entry, table)
		structs, err := parseSMBIOSTable(table)
		if err != nil {
			t.Fatal(err)
		}
		e, err := parseSMBIOSEntryPoint(entry)
		if err != nil {
			t.Fatal(err)
		}
		got := dmidecodeText(&smbiosInfo{Structures: structs, EntryPoint: &e})
		if got != want {
			t.Fatalf("dmidecode text differs (-dmidecode +ours):\n%s", lineDiff(want, got))
		}
		// And the whole collector, through the files the kernel exports.
		dmi, err := DMIDecode(context.Background(), Options{Root: smbiosTree(t, entry, table)})
		wantDMI, wantErr := dmidecode.Parse(want)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("DMIDecode error %v, parsing dmidecode's text: %v", err, wantErr)
		}
		a, _ := json.Marshal(dmi)
		b, _ := json.Marshal(wantDMI)
		if !bytes.Equal(a, b) {
			t.Fatalf("DMIDecode = %s\nparsed from dmidecode: %s", a, b)
		}
	}

	for _, m := range fixtureMachines(t) {
		dir := filepath.Join(fixturesDir, m, "root", "sys/firmware/dmi/tables")
		table, err := os.ReadFile(filepath.Join(dir, "DMI"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		entry, err := os.ReadFile(filepath.Join(dir, "smbios_entry_point"))
		if err != nil {
			t.Fatal(err)
		}
		// The dump has the table at offset 32: rewrite the address.
		e := bytes.Clone(entry)
		if bytes.HasPrefix(e, []byte("_SM3_")) {
			binary.LittleEndian.PutUint64(e[0x10:], 32)
			checksummed(e[:e[6]], 5)
		} else {
			binary.LittleEndian.PutUint32(e[0x18:], 32)
			checksummed(e[0x10:0x1F], 5)
			checksummed(e[:e[5]], 4)
		}
		t.Run(m, func(t *testing.T) { check(t, e, table) })
	}

	// Every processor family code, in one table.
	var sweep []byte
	vendors := []string{"Intel(R) Corporation", "AuthenticAMD", "amd", "Other"}
	for code := range 0x300 {
		if old && (code == 0x16 || code == 0x102 || code == 0x103 || code >= 0x258 && code <= 0x271) {
			continue
		}
		f := make([]byte, 0x2A-4)
		f[0x06-4], f[0x07-4], f[0x18-4], f[0x26-4] = byte(code), 1, 0x41, 0xFC
		binary.LittleEndian.PutUint32(f[0x08-4:], 0x000306A9)
		binary.LittleEndian.PutUint32(f[0x0C-4:], 0xBFEBFBFF)
		if code >= 0xFE {
			f[0x06-4] = 0xFE
			binary.LittleEndian.PutUint16(f[0x28-4:], uint16(code))
		}
		sweep = append(sweep, smbiosStruct(4, uint16(code), f, vendors[code%len(vendors)])...)
	}
	sweep = append(sweep, smbiosStruct(127, 0xFEFF, nil)...)
	t.Run("families", func(t *testing.T) { check(t, entryPoint3(3, 0, len(sweep)), sweep) })
	// SMBIOS 2.0's ambiguous 0x30.
	pentiumPro := cat(smbiosStruct(4, 1, append([]byte{0, 3, 0x30, 1}, make([]byte, 0x16)...), "GenuineIntel"), smbiosStruct(127, 0xFEFF, nil))
	t.Run("2.0", func(t *testing.T) { check(t, entryPoint2(2, 0, len(pentiumPro), 2), pentiumPro) })

	r := rand.New(rand.NewPCG(12, 2026))
	for i := range 300 {
		table, n := randomTable(r, old)
		var entry []byte
		switch i % 4 {
		case 0:
			entry = entryPoint2(2, []uint8{0, 2, 3, 31, 51, 8}[r.IntN(6)], len(table), n)
		default:
			entry = entryPoint3(3, uint8(r.IntN(8)), len(table))
		}
		if !t.Run("random", func(t *testing.T) { check(t, entry, table) }) {
			t.Logf("table %d: % x", i, table)
			break
		}
	}
}

// TestDMIDecodeWithoutTable: no SMBIOS table is the empty document, as
// dmidecode finding no entry point; an unreadable one is an error.
func TestDMIDecodeWithoutTable(t *testing.T) {
	dmi, err := DMIDecode(context.Background(), Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(dmi); string(b) != `{"bios":{},"cpu":[],"memory":{"devices":[]}}` {
		t.Errorf("no table: %s", b)
	}
	root := tree(t, map[string]string{"sys/firmware/dmi/tables/DMI/": ""})
	if _, err := DMIDecode(context.Background(), Options{Root: root}); err == nil || !regexp.MustCompile(`SMBIOS table .*DMI`).MatchString(err.Error()) {
		t.Errorf("a directory for a table: %v", err)
	}
}

// FuzzDMIDecode: any table renders and parses without a panic, and the
// text never has a block IPA's parser would misread as another type.
func FuzzDMIDecode(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		table, _ := randomTable(r, false)
		f.Add(table, uint8(3), uint8(2))
	}
	f.Add(sampleSMBIOS(), uint8(2), uint8(0))
	f.Fuzz(func(t *testing.T, table []byte, major, minor uint8) {
		structs, _ := parseSMBIOSTable(table)
		text := dmidecodeText(&smbiosInfo{Structures: structs, EntryPoint: &smbiosEntryPoint{Major: major, Minor: minor}})
		dmi, err := dmidecode.Parse(text)
		if err != nil && !errors.Is(err, dmidecode.ErrNoDeviceCount) {
			t.Fatalf("parse: %v", err)
		}
		if err == nil {
			if _, err := json.Marshal(dmi); err != nil {
				t.Fatal(err)
			}
		}
	})
}
