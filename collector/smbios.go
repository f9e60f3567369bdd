package collector

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// The SMBIOS decoder is our own: the kernel exports the raw table in
// /sys/firmware/dmi/tables, and the handful of fields IPA reports (types 0,
// 1, 16 and 17) are a few fixed offsets each. Both inputs are outside bytes
// and fuzzed (FuzzSMBIOSTable, FuzzSMBIOSEntryPoint).

const (
	smbiosTablePath      = "sys/firmware/dmi/tables/DMI"
	smbiosEntryPointPath = "sys/firmware/dmi/tables/smbios_entry_point"
)

// smbiosStructure is one structure of the table: the formatted area
// (header included, so offsets match the specification) and its strings.
type smbiosStructure struct {
	Type      uint8
	Handle    uint16
	Formatted []byte
	Strings   []string
}

// str returns the string whose 1-based number is stored at off, trimmed;
// "" when the field is absent, zero or out of range.
func (s smbiosStructure) str(off int) string {
	if off >= len(s.Formatted) {
		return ""
	}
	n := int(s.Formatted[off])
	if n == 0 || n > len(s.Strings) {
		return ""
	}
	return strings.TrimSpace(s.Strings[n-1])
}

// word returns the little-endian 16-bit field at off, ok=false when the
// structure is too short to hold it.
func (s smbiosStructure) word(off int) (uint16, bool) {
	if off+2 > len(s.Formatted) {
		return 0, false
	}
	return binary.LittleEndian.Uint16(s.Formatted[off:]), true
}

// dword returns the little-endian 32-bit field at off.
func (s smbiosStructure) dword(off int) (uint32, bool) {
	if off+4 > len(s.Formatted) {
		return 0, false
	}
	return binary.LittleEndian.Uint32(s.Formatted[off:]), true
}

// parseSMBIOSTable decodes the structure table. On garbled input it returns
// the structures decoded before the damage together with an error saying
// where, so callers can still use the good part.
func parseSMBIOSTable(b []byte) ([]smbiosStructure, error) {
	var out []smbiosStructure
	off := 0
	for off < len(b) {
		if len(b)-off < 4 {
			return out, fmt.Errorf("structure at offset %d: %d bytes left, header needs 4", off, len(b)-off)
		}
		typ, length := b[off], int(b[off+1])
		if length < 4 {
			return out, fmt.Errorf("structure at offset %d (type %d): length %d is below the 4-byte header", off, typ, length)
		}
		if off+length > len(b) {
			return out, fmt.Errorf("structure at offset %d (type %d): length %d runs past the table end (%d bytes)", off, typ, length, len(b))
		}
		s := smbiosStructure{
			Type:      typ,
			Handle:    binary.LittleEndian.Uint16(b[off+2:]),
			Formatted: b[off : off+length],
		}
		// The string set follows and ends with two NUL bytes; a structure
		// without strings has just the two NULs.
		rest := b[off+length:]
		end := bytes.Index(rest, []byte{0, 0})
		if end < 0 {
			return out, fmt.Errorf("structure at offset %d (type %d): string set not terminated", off, typ)
		}
		if end > 0 {
			s.Strings = strings.Split(string(rest[:end]), "\x00")
		}
		out = append(out, s)
		off += length + end + 2
		if typ == 127 { // end-of-table
			break
		}
	}
	return out, nil
}

// smbiosEntryPoint is what we use of the entry point: the version and the
// table length, which bounds the table file.
type smbiosEntryPoint struct {
	Major, Minor uint8
	TableLength  int // maximum size for SMBIOS 3
}

// parseSMBIOSEntryPoint decodes a 32-bit ("_SM_") or 64-bit ("_SM3_")
// entry point.
func parseSMBIOSEntryPoint(b []byte) (smbiosEntryPoint, error) {
	switch {
	case bytes.HasPrefix(b, []byte("_SM3_")):
		if len(b) < 0x18 {
			return smbiosEntryPoint{}, fmt.Errorf("SMBIOS 3 entry point: %d bytes, want 24", len(b))
		}
		return smbiosEntryPoint{Major: b[7], Minor: b[8], TableLength: int(binary.LittleEndian.Uint32(b[0x0c:]))}, nil
	case bytes.HasPrefix(b, []byte("_SM_")):
		if len(b) < 0x1f {
			return smbiosEntryPoint{}, fmt.Errorf("SMBIOS 2 entry point: %d bytes, want 31", len(b))
		}
		if !bytes.Equal(b[0x10:0x15], []byte("_DMI_")) {
			return smbiosEntryPoint{}, errors.New("SMBIOS 2 entry point: no _DMI_ anchor at offset 16")
		}
		return smbiosEntryPoint{Major: b[6], Minor: b[7], TableLength: int(binary.LittleEndian.Uint16(b[0x16:]))}, nil
	default:
		return smbiosEntryPoint{}, fmt.Errorf("no SMBIOS anchor (_SM_ or _SM3_) in %d bytes", len(b))
	}
}

// smbiosInfo is the decoded table.
type smbiosInfo struct {
	Structures []smbiosStructure
	// EntryPoint is nil when the entry point is missing or garbled.
	EntryPoint *smbiosEntryPoint
}

// first returns the first structure of type t.
func (si *smbiosInfo) first(t uint8) (smbiosStructure, bool) {
	for _, s := range si.Structures {
		if s.Type == t {
			return s, true
		}
	}
	return smbiosStructure{}, false
}

// smbiosTable reads and decodes the SMBIOS table once per Collect. It
// returns (nil, nil) when the machine has none (fs.ErrNotExist: many VMs
// and non-x86 boards); decoding damage is warned about once and the good
// part is returned.
func (c *collection) smbiosTable() (*smbiosInfo, error) {
	if c.smbiosDone {
		return c.smbios, c.smbiosErr
	}
	c.smbiosDone = true
	table, err := c.fs.ReadFile(smbiosTablePath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		c.smbiosErr = err
		return nil, err
	}
	var entry *smbiosEntryPoint
	if ep, err := c.fs.ReadFile(smbiosEntryPointPath); err == nil {
		if e, err := parseSMBIOSEntryPoint(ep); err != nil {
			c.warn("smbios", fmt.Errorf("%s: %w", c.fs.Path(smbiosEntryPointPath), err))
		} else {
			entry = &e
			if e.TableLength > 0 && e.TableLength < len(table) {
				table = table[:e.TableLength]
			}
		}
	}
	structs, err := parseSMBIOSTable(table)
	if err != nil {
		c.warn("smbios", fmt.Errorf("%s: %w (using the %d structures before it)", c.fs.Path(smbiosTablePath), err, len(structs)))
	}
	c.smbios = &smbiosInfo{Structures: structs, EntryPoint: entry}
	return c.smbios, nil
}

// memoryDeviceBytes sums the sizes of the SMBIOS type 17 memory devices
// that belong to system-memory arrays (type 16 with use 0x03), as lshw's
// "System Memory" node does; devices whose array is not in the table count
// too. ok is false when the table has no sized device at all.
func (si *smbiosInfo) memoryDeviceBytes() (uint64, bool) {
	var total uint64
	arrayUse := map[uint16]uint8{}
	for _, s := range si.Structures {
		if s.Type == 16 && len(s.Formatted) > 5 {
			arrayUse[s.Handle] = s.Formatted[5]
		}
	}
	for _, s := range si.Structures {
		if s.Type != 17 {
			continue
		}
		if arr, ok := s.word(0x04); ok {
			if use, known := arrayUse[arr]; known && use != 0x03 {
				continue // flash, video, cache... not RAM
			}
		}
		size, ok := s.word(0x0c)
		if !ok || size == 0 || size == 0xffff {
			continue // empty slot or unknown size
		}
		var b uint64
		switch {
		case size == 0x7fff:
			ext, ok := s.dword(0x1c)
			if !ok {
				continue
			}
			b = uint64(ext&0x7fffffff) << 20
		case size&0x8000 != 0:
			b = uint64(size&0x7fff) << 10
		default:
			b = uint64(size) << 20
		}
		total += b
	}
	return total, total > 0
}
