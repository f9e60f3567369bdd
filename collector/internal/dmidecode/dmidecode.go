// Package dmidecode writes an SMBIOS table as the text dmidecode 3.6
// prints for `dmidecode -t bios -t processor -t memory`, and parses that
// text as Ironic Python Agent's dmi-decode collector does.
//
// IPA's dmi-decode collector runs dmidecode and splits its text into keys
// and values. To send what IPA sends without shipping dmidecode, Text
// writes the same text from the decoded table: dmidecode 3.6's wording for
// the structure types IPA keeps (0 BIOS, 4 processor, 16 memory array, 17
// memory device), and Parse is IPA's parser. Going through the text keeps
// IPA's quirks (an attribute printed empty becomes a list, a value with a
// blank line ends the block) without a second description of them.
package dmidecode

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Structure is one structure of the SMBIOS table: the formatted area
// (header included, so offsets match the specification) and its strings.
type Structure struct {
	Type      uint8
	Handle    uint16
	Formatted []byte
	Strings   []string
}

// EntryPoint is what dmidecode uses of the SMBIOS entry point: the
// version.
type EntryPoint struct {
	Major, Minor uint8
}

// dmidecodeKept reports whether IPA's parser keeps structures of type t.
func dmidecodeKept(t uint8) bool { return t == 0 || t == 4 || t == 16 || t == 17 }

// dmiWriter accumulates dmidecode's text output (dmioutput.c's pr_*).
type dmiWriter struct{ b strings.Builder }

func (w *dmiWriter) attr(name, format string, args ...any) {
	fmt.Fprintf(&w.b, "\t%s: "+format+"\n", append([]any{name}, args...)...)
}

// list starts a list attribute without a value on its line.
func (w *dmiWriter) list(name string) { fmt.Fprintf(&w.b, "\t%s:\n", name) }

func (w *dmiWriter) item(s string) { fmt.Fprintf(&w.b, "\t\t%s\n", s) }

// bitItems writes one list item per set bit of code that has a name;
// names[i] names bit first+i.
func (w *dmiWriter) bitItems(code uint64, first int, names []string) {
	for i, name := range names {
		if name != "" && code&(1<<(first+i)) != 0 {
			w.item(name)
		}
	}
}

// Version is dmidecode's SMBIOS version number (major<<8 | minor) from
// the entry point, with dmidecode's fix-ups of two common BIOS mistakes.
// Without an entry point the table is taken as SMBIOS 3.0.
func Version(ep *EntryPoint) uint16 {
	if ep == nil {
		return 0x0300
	}
	v := uint16(ep.Major)<<8 | uint16(ep.Minor)
	if ep.Major < 3 {
		switch v {
		case 0x021F, 0x0221:
			v = 0x0203
		case 0x0233:
			v = 0x0206
		}
	}
	return v
}

// Text renders the structures of the kept types as dmidecode
// does, each block ending with a blank line.
func Text(structs []Structure, ver uint16) string {
	var w dmiWriter
	for _, s := range structs {
		if !dmidecodeKept(s.Type) {
			continue
		}
		fmt.Fprintf(&w.b, "Handle 0x%04X, DMI type %d, %d bytes\n", s.Handle, s.Type, len(s.Formatted))
		switch s.Type {
		case 0:
			w.b.WriteString("BIOS Information\n")
			dmiBIOS(&w, s)
		case 4:
			w.b.WriteString("Processor Information\n")
			dmiProcessor(&w, s, ver)
		case 16:
			w.b.WriteString("Physical Memory Array\n")
			dmiMemoryArray(&w, s)
		case 17:
			w.b.WriteString("Memory Device\n")
			dmiMemoryDevice(&w, s)
		}
		w.b.WriteString("\n")
	}
	return w.b.String()
}

// UUIDWord is the first word of dmidecode's UUID line for the 16 bytes
// of a type 1 structure's UUID field: the UUID, or "Not" of "Not Present"
// and "Not Settable".
func UUIDWord(p []byte, ver uint16) string {
	allFF, all00 := true, true
	for _, b := range p {
		allFF = allFF && b == 0xFF
		all00 = all00 && b == 0x00
	}
	if allFF || all00 {
		return "Not" // "Not Present", "Not Settable"
	}
	if ver >= 0x0206 {
		return fmt.Sprintf("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			p[3], p[2], p[1], p[0], p[5], p[4], p[7], p[6], p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15])
	}
	return fmt.Sprintf("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9], p[10], p[11], p[12], p[13], p[14], p[15])
}

// dmiRaw gives the structure's fields at the offsets of the
// specification; callers check the length first, as dmidecode does.
type dmiRaw []byte

func (d dmiRaw) word(off int) uint16  { return binary.LittleEndian.Uint16(d[off:]) }
func (d dmiRaw) dword(off int) uint32 { return binary.LittleEndian.Uint32(d[off:]) }
func (d dmiRaw) qword(off int) uint64 { return binary.LittleEndian.Uint64(d[off:]) }

// dmiString is dmidecode's dmi_string: "Not Specified" for string 0,
// "<BAD INDEX>" past the string set, bytes outside printable ASCII as
// dots, and no trimming.
func dmiString(s Structure, off int) string {
	n := int(s.Formatted[off])
	if n == 0 {
		return "Not Specified"
	}
	if n > len(s.Strings) {
		return "<BAD INDEX>"
	}
	b := []byte(s.Strings[n-1])
	for i, c := range b {
		if c < 32 || c >= 127 {
			b[i] = '.'
		}
	}
	return string(b)
}

// dmiMemorySize is dmi_print_memory_size: the size in the largest unit
// with a non-zero 10-bit group, folding in the next group down. shift is 1
// when code counts kilobytes.
func dmiMemorySize(code uint64, shift int) string {
	units := [8]string{"bytes", "kB", "MB", "GB", "TB", "PB", "EB", "ZB"}
	var split [7]uint64
	for i := range 6 {
		split[i] = code >> (10 * i) & 0x3FF
	}
	split[6] = code >> 60
	i := 6
	for i > 0 && split[i] == 0 {
		i--
	}
	capacity := split[i]
	if i > 0 && split[i-1] != 0 {
		i--
		capacity = split[i] + split[i+1]<<10
	}
	return fmt.Sprintf("%d %s", capacity, units[i+shift])
}

func dmiBIOS(w *dmiWriter, s Structure) {
	d := dmiRaw(s.Formatted)
	if len(d) < 0x12 {
		return
	}
	w.attr("Vendor", "%s", dmiString(s, 0x04))
	w.attr("Version", "%s", dmiString(s, 0x05))
	w.attr("Release Date", "%s", dmiString(s, 0x08))
	// UEFI and IA-64 firmware has no real-mode segment: no address.
	if seg := d.word(0x06); seg != 0 {
		w.attr("Address", "0x%04X0", seg)
		size := (0x10000 - uint32(seg)) << 4
		if size&0x3FF != 0 {
			w.attr("Runtime Size", "%d bytes", size)
		} else {
			w.attr("Runtime Size", "%d kB", size>>10)
		}
	}
	if rom := d[0x09]; rom != 0xFF {
		w.attr("ROM Size", "%s", dmiMemorySize(uint64(rom+1)<<6, 1))
	} else {
		ext := uint16(16)
		if len(d) >= 0x1A {
			ext = d.word(0x18)
		}
		w.attr("ROM Size", "%d %s", ext&0x3FFF, [4]string{"MB", "GB", dmiOutOfSpec, dmiOutOfSpec}[ext>>14])
	}
	w.list("Characteristics")
	if chars := d.dword(0x0A); chars&(1<<3) != 0 {
		w.item("BIOS characteristics not supported")
	} else {
		w.bitItems(uint64(chars), 4, dmiBIOSCharacteristics())
	}
	if len(d) < 0x13 {
		return
	}
	w.bitItems(uint64(d[0x12]), 0, dmiBIOSCharacteristicsX1())
	if len(d) < 0x14 {
		return
	}
	w.bitItems(uint64(d[0x13]), 0, dmiBIOSCharacteristicsX2())
	if len(d) < 0x18 {
		return
	}
	if d[0x14] != 0xFF && d[0x15] != 0xFF {
		w.attr("BIOS Revision", "%d.%d", d[0x14], d[0x15])
	}
	if d[0x16] != 0xFF && d[0x17] != 0xFF {
		w.attr("Firmware Revision", "%d.%d", d[0x16], d[0x17])
	}
}

// dmiFamilyCode is the processor family, from the 16-bit field when the
// byte says "see Processor Family 2".
func dmiFamilyCode(d dmiRaw) uint16 {
	if d[0x06] == 0xFE && len(d) >= 0x2A {
		return d.word(0x28)
	}
	return uint16(d[0x06])
}

func dmiProcessorFamily(s Structure, ver uint16) string {
	d := dmiRaw(s.Formatted)
	isVendor := func(name string) bool {
		m := dmiString(s, 0x07)
		return strings.Contains(m, name) || len(m) >= len(name) && strings.EqualFold(m[:len(name)], name)
	}
	// Two codes mean different processors depending on the vendor.
	if ver == 0x0200 && d[0x06] == 0x30 && isVendor("Intel") {
		return "Pentium Pro"
	}
	code := dmiFamilyCode(d)
	if code == 0xBE {
		switch {
		case isVendor("Intel"):
			return "Core 2"
		case isVendor("AMD"):
			return "K7"
		}
		return "Core 2 or K7"
	}
	return dmiProcessorFamilyName(code)
}

// cpuidKind says how the 8-byte processor ID is laid out.
type cpuidKind int

const (
	cpuidNone cpuidKind = iota
	cpuid80386
	cpuid80486
	cpuidARMLegacy
	cpuidARMSoCID
	cpuidIntel
	cpuidAMD
	cpuidLoongArch
)

func dmiCPUIDKind(d dmiRaw) cpuidKind {
	t := dmiFamilyCode(d)
	in := func(lo, hi uint16) bool { return t >= lo && t <= hi }
	switch {
	case t == 0x05:
		return cpuid80386
	case t == 0x06:
		// Only some 80486 have CPUID; their signature word tells.
		dx := d.word(0x08)
		if dx&0x0F00 == 0x0400 && (dx&0x00F0 == 0x0040 || dx&0x00F0 >= 0x0070) && dx&0x000F >= 0x0003 {
			return cpuidIntel
		}
		return cpuid80486
	case in(0x100, 0x102), in(0x118, 0x119):
		if len(d) >= 0x28 && d.word(0x26)&(1<<9) != 0 {
			return cpuidARMSoCID
		}
		return cpuidARMLegacy
	case in(0x0B, 0x15), in(0x28, 0x2F), in(0xA1, 0xB3), t == 0xB5, in(0xB9, 0xC7), in(0xCD, 0xCF), in(0xD2, 0xDB), in(0xDD, 0xE0):
		return cpuidIntel
	case in(0x18, 0x1D), t == 0x1F, in(0x38, 0x3F), in(0x46, 0x4F), in(0x66, 0x6B), in(0x83, 0x8F), in(0xB6, 0xB7), in(0xE4, 0xEF):
		return cpuidAMD
	case in(0x258, 0x262), in(0x26C, 0x271):
		return cpuidLoongArch
	}
	return cpuidNone
}

func dmiProcessorID(w *dmiWriter, d dmiRaw) {
	p := d[0x08:0x10]
	w.attr("ID", "%02X %02X %02X %02X %02X %02X %02X %02X", p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7])
	kind := dmiCPUIDKind(d)
	eax := d.dword(0x08)
	dx := uint32(d.word(0x08))
	switch kind {
	case cpuid80386:
		w.attr("Signature", "Type %d, Family %d, Major Stepping %d, Minor Stepping %d", dx>>12, dx>>8&0xF, dx>>4&0xF, dx&0xF)
	case cpuid80486:
		w.attr("Signature", "Type %d, Family %d, Model %d, Stepping %d", dx>>12&3, dx>>8&0xF, dx>>4&0xF, dx&0xF)
	case cpuidARMLegacy:
		// All zeroes: the format was undefined before SMBIOS 3.1.
		if eax != 0 {
			w.attr("Signature", "Implementor 0x%02x, Variant 0x%x, Architecture %d, Part 0x%03x, Revision %d",
				eax>>24, eax>>20&0xF, eax>>16&0xF, eax>>4&0xFFF, eax&0xF)
		}
	case cpuidARMSoCID:
		w.attr("Signature", "JEP-106 Bank 0x%02x Manufacturer 0x%02x, SoC ID 0x%04x, SoC Revision 0x%08x",
			eax>>24&0x7F, eax>>16&0x7F, eax&0xFFFF, d.dword(0x0C))
	case cpuidIntel:
		w.attr("Signature", "Type %d, Family %d, Model %d, Stepping %d",
			eax>>12&3, eax>>20&0xFF+eax>>8&0x0F, eax>>12&0xF0+eax>>4&0x0F, eax&0xF)
	case cpuidAMD:
		family, model := eax>>8&0xF, eax>>4&0xF
		if family == 0xF {
			family += eax >> 20 & 0xFF
			model |= eax >> 12 & 0xF0
		}
		w.attr("Signature", "Family %d, Model %d, Stepping %d", family, model, eax&0xF)
	case cpuidLoongArch:
		// dmidecode 3.6 prints a stray newline here: the blank line ends
		// the block for IPA's parser, so it is kept.
		w.attr("Signature", "Processor Identity 0x%08x\n", eax)
	}
	if kind != cpuidIntel && kind != cpuidAMD {
		return
	}
	edx := d.dword(0x0C)
	if edx&0xBFEFFBFF == 0 {
		w.attr("Flags", "None")
		return
	}
	w.list("Flags")
	flags := dmiCPUIDFlags()
	w.bitItems(uint64(edx), 0, flags[:])
}

func dmiProcessor(w *dmiWriter, s Structure, ver uint16) {
	d := dmiRaw(s.Formatted)
	if len(d) < 0x1A {
		return
	}
	w.attr("Socket Designation", "%s", dmiString(s, 0x04))
	w.attr("Type", "%s", dmiLookup(dmiProcessorTypes(), 1, int(d[0x05])))
	w.attr("Family", "%s", dmiProcessorFamily(s, ver))
	w.attr("Manufacturer", "%s", dmiString(s, 0x07))
	dmiProcessorID(w, d)
	w.attr("Version", "%s", dmiString(s, 0x10))
	switch v := d[0x11]; {
	case v&0x80 != 0:
		// dmidecode divides in single precision.
		w.attr("Voltage", "%s V", strconv.FormatFloat(float64(float32(v&0x7F)/10), 'f', 1, 32))
	case v&0x07 == 0:
		w.attr("Voltage", "Unknown")
	default:
		var volts []string
		for i, name := range []string{"5.0 V", "3.3 V", "2.9 V"} {
			if v&(1<<i) != 0 {
				volts = append(volts, name)
			}
		}
		w.attr("Voltage", "%s", strings.Join(volts, " "))
	}
	for _, f := range []struct {
		name string
		off  int
	}{{"External Clock", 0x12}, {"Max Speed", 0x14}, {"Current Speed", 0x16}} {
		if mhz := d.word(f.off); mhz != 0 {
			w.attr(f.name, "%d MHz", mhz)
		} else {
			w.attr(f.name, "Unknown")
		}
	}
	if d[0x18]&(1<<6) != 0 {
		w.attr("Status", "Populated, %s", dmiProcessorStatus(d[0x18]))
	} else {
		w.attr("Status", "Unpopulated")
	}
	w.attr("Upgrade", "%s", dmiLookup(dmiProcessorUpgrades(), 1, int(d[0x19])))
	if len(d) < 0x20 {
		return
	}
	for i, level := range []string{"L1", "L2", "L3"} {
		name := level + " Cache Handle"
		switch h := d.word(0x1A + 2*i); {
		case h != 0xFFFF:
			w.attr(name, "0x%04X", h)
		case ver >= 0x0203:
			w.attr(name, "Not Provided")
		default:
			w.attr(name, "No %s Cache", level)
		}
	}
	if len(d) < 0x23 {
		return
	}
	w.attr("Serial Number", "%s", dmiString(s, 0x20))
	w.attr("Asset Tag", "%s", dmiString(s, 0x21))
	w.attr("Part Number", "%s", dmiString(s, 0x22))
	if len(d) < 0x28 {
		return
	}
	// A byte of 0xFF points to the 16-bit field of later versions.
	for _, c := range []struct {
		name      string
		off, off2 int
	}{{"Core Count", 0x23, 0x2A}, {"Core Enabled", 0x24, 0x2C}, {"Thread Count", 0x25, 0x2E}} {
		n := uint16(d[c.off])
		if n == 0 {
			continue
		}
		if n == 0xFF && len(d) >= c.off2+2 {
			n = d.word(c.off2)
		}
		w.attr(c.name, "%d", n)
	}
	if len(d) >= 0x32 && d.word(0x30) != 0 {
		w.attr("Thread Enabled", "%d", d.word(0x30))
	}
	// Bit 9 (Arm64 SoC ID) alone still prints "None", as dmidecode does.
	chars := d.word(0x26)
	if chars&0x00FC == 0 {
		w.attr("Characteristics", "None")
		return
	}
	w.list("Characteristics")
	w.bitItems(uint64(chars), 2, dmiProcessorCharacteristics())
}

func dmiErrorHandle(w *dmiWriter, h uint16) {
	switch h {
	case 0xFFFE:
		w.attr("Error Information Handle", "Not Provided")
	case 0xFFFF:
		w.attr("Error Information Handle", "No Error")
	default:
		w.attr("Error Information Handle", "0x%04X", h)
	}
}

func dmiMemoryArray(w *dmiWriter, s Structure) {
	d := dmiRaw(s.Formatted)
	if len(d) < 0x0F {
		return
	}
	w.attr("Location", "%s", dmiMemoryArrayLocation(d[0x04]))
	w.attr("Use", "%s", dmiMemoryArrayUse(d[0x05]))
	w.attr("Error Correction Type", "%s", dmiMemoryArrayECType(d[0x06]))
	switch c := d.dword(0x07); {
	case c != 0x80000000:
		w.attr("Maximum Capacity", "%s", dmiMemorySize(uint64(c), 1))
	case len(d) < 0x17:
		w.attr("Maximum Capacity", "Unknown")
	default:
		w.attr("Maximum Capacity", "%s", dmiMemorySize(d.qword(0x0F), 0))
	}
	dmiErrorHandle(w, d.word(0x0B))
	w.attr("Number Of Devices", "%d", d.word(0x0D))
}

func dmiMemorySpeed(w *dmiWriter, name string, code uint16, ext uint32) {
	switch {
	case code == 0xFFFF && ext != 0:
		w.attr(name, "%d MT/s", ext)
	case code == 0xFFFF || code == 0:
		w.attr(name, "Unknown")
	default:
		w.attr(name, "%d MT/s", code)
	}
}

// dmiBits joins the names of the set bits 1 to len(names) of code, or
// "None" when none of bits 1 to 15 is set.
func dmiBits(code uint16, names []string) string {
	if code&0xFFFE == 0 {
		return "None"
	}
	var set []string
	for i, name := range names {
		if code&(1<<(i+1)) != 0 {
			set = append(set, name)
		}
	}
	return strings.Join(set, " ")
}

func dmiManufacturerID(w *dmiWriter, name string, code uint16) {
	if code == 0 {
		w.attr(name, "Unknown")
		return
	}
	w.attr(name, "Bank %d, Hex 0x%02X", code&0x7F+1, code>>8)
}

func dmiProductID(w *dmiWriter, name string, code uint16) {
	if code == 0 {
		w.attr(name, "Unknown")
		return
	}
	w.attr(name, "0x%04X", code)
}

func dmiSize64(w *dmiWriter, name string, code uint64) {
	switch code {
	case ^uint64(0):
		w.attr(name, "Unknown")
	case 0:
		w.attr(name, "None")
	default:
		w.attr(name, "%s", dmiMemorySize(code, 0))
	}
}

func dmiVoltage(w *dmiWriter, name string, mv uint16) {
	if mv == 0 {
		w.attr(name, "Unknown")
		return
	}
	// C's %g (6 significant digits, no trailing zeros) and %.1f of a
	// single-precision quotient.
	v := float64(float32(mv) / 1000)
	if mv%100 != 0 {
		w.attr(name, "%s V", strconv.FormatFloat(v, 'g', 6, 64))
	} else {
		w.attr(name, "%s V", strconv.FormatFloat(v, 'f', 1, 64))
	}
}

// dmiMemoryRevision is the PMIC0 and RCD revision of SMBIOS 3.7 (type
// 17), decoded per DDR5 when the memory type says so.
func dmiMemoryRevision(w *dmiWriter, prefix string, code uint16, memType uint8) {
	switch {
	case code == 0xFF00:
		w.attr(prefix+" Revision Number", "Unknown")
	case memType == 0x22 || memType == 0x23:
		if code&0x8000 == 0 {
			w.attr(prefix+" Device Type", "Not Installed")
			return
		}
		w.attr(prefix+" Device Type", "%d", code>>8&0x0F)
		w.attr(prefix+" Device Revision", "%d.%d", code>>4&0x0F, code&0x0F)
	default:
		w.attr(prefix+" Revision Number", "0x%04x", code)
	}
}

func dmiMemoryDevice(w *dmiWriter, s Structure) {
	d := dmiRaw(s.Formatted)
	if len(d) < 0x15 {
		return
	}
	w.attr("Array Handle", "0x%04X", d.word(0x04))
	dmiErrorHandle(w, d.word(0x06))
	for _, f := range []struct {
		name string
		off  int
	}{{"Total Width", 0x08}, {"Data Width", 0x0A}} {
		// An empty slot may report width 0.
		if width := d.word(f.off); width == 0xFFFF || width == 0 {
			w.attr(f.name, "Unknown")
		} else {
			w.attr(f.name, "%d bits", width)
		}
	}
	size := d.word(0x0C)
	switch {
	case len(d) >= 0x20 && size == 0x7FFF:
		ext := d.dword(0x1C) & 0x7FFFFFFF
		switch {
		case ext&0x3FF != 0:
			w.attr("Size", "%d MB", ext)
		case ext&0xFFC00 != 0:
			w.attr("Size", "%d GB", ext>>10)
		default:
			w.attr("Size", "%d TB", ext>>20)
		}
	case size == 0:
		w.attr("Size", "No Module Installed")
	case size == 0xFFFF:
		w.attr("Size", "Unknown")
	default:
		kb := uint64(size & 0x7FFF)
		if size&0x8000 == 0 {
			kb <<= 10
		}
		w.attr("Size", "%s", dmiMemorySize(kb, 1))
	}
	w.attr("Form Factor", "%s", dmiMemoryFormFactor(d[0x0E]))
	switch set := d[0x0F]; set {
	case 0:
		w.attr("Set", "None")
	case 0xFF:
		w.attr("Set", "Unknown")
	default:
		w.attr("Set", "%d", set)
	}
	w.attr("Locator", "%s", dmiString(s, 0x10))
	w.attr("Bank Locator", "%s", dmiString(s, 0x11))
	w.attr("Type", "%s", dmiMemoryType(d[0x12]))
	w.attr("Type Detail", "%s", dmiBits(d.word(0x13), dmiMemoryTypeDetail()))
	// Past here an empty slot's fields mean nothing; dmidecode stops.
	if len(d) < 0x17 || size == 0 {
		return
	}
	ext := func(off int) uint32 {
		if len(d) >= 0x5C {
			return d.dword(off)
		}
		return 0
	}
	dmiMemorySpeed(w, "Speed", d.word(0x15), ext(0x54))
	if len(d) < 0x1B {
		return
	}
	w.attr("Manufacturer", "%s", dmiString(s, 0x17))
	w.attr("Serial Number", "%s", dmiString(s, 0x18))
	w.attr("Asset Tag", "%s", dmiString(s, 0x19))
	w.attr("Part Number", "%s", dmiString(s, 0x1A))
	if len(d) < 0x1C {
		return
	}
	if rank := d[0x1B] & 0x0F; rank == 0 {
		w.attr("Rank", "Unknown")
	} else {
		w.attr("Rank", "%d", rank)
	}
	if len(d) < 0x22 {
		return
	}
	dmiMemorySpeed(w, "Configured Memory Speed", d.word(0x20), ext(0x58))
	if len(d) < 0x28 {
		return
	}
	dmiVoltage(w, "Minimum Voltage", d.word(0x22))
	dmiVoltage(w, "Maximum Voltage", d.word(0x24))
	dmiVoltage(w, "Configured Voltage", d.word(0x26))
	if len(d) < 0x34 {
		return
	}
	w.attr("Memory Technology", "%s", dmiMemoryTechnology(d[0x28]))
	w.attr("Memory Operating Mode Capability", "%s", dmiBits(d.word(0x29), dmiMemoryOperatingModes()))
	w.attr("Firmware Version", "%s", dmiString(s, 0x2B))
	dmiManufacturerID(w, "Module Manufacturer ID", d.word(0x2C))
	dmiProductID(w, "Module Product ID", d.word(0x2E))
	dmiManufacturerID(w, "Memory Subsystem Controller Manufacturer ID", d.word(0x30))
	dmiProductID(w, "Memory Subsystem Controller Product ID", d.word(0x32))
	for _, f := range []struct {
		name string
		off  int
	}{{"Non-Volatile Size", 0x34}, {"Volatile Size", 0x3C}, {"Cache Size", 0x44}, {"Logical Size", 0x4C}} {
		if len(d) < f.off+8 {
			return
		}
		dmiSize64(w, f.name, d.qword(f.off))
	}
	if len(d) < 0x64 {
		return
	}
	dmiManufacturerID(w, "PMIC0 Manufacturer ID", d.word(0x5C))
	dmiMemoryRevision(w, "PMIC0", d.word(0x5E), d[0x12])
	dmiManufacturerID(w, "RCD Manufacturer ID", d.word(0x60))
	dmiMemoryRevision(w, "RCD", d.word(0x62), d[0x12])
}
