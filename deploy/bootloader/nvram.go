package bootloader

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"

	"github.com/ironic-go/ironic-agent/internal/efivar"
	"github.com/ironic-go/ironic-agent/internal/logging"
)

// DefaultCleanNVRAMPatterns are IPA's DEFAULT_CLEAN_UEFI_NVRAM_MATCH_PATTERNS:
// entries on a hard drive partition and shim or GRUB loaders.
func DefaultCleanNVRAMPatterns() []string {
	return []string{`^HD\(`, `shim.*\.efi`, `grub.*\.efi`}
}

// CompileNVRAMPatterns compiles match patterns case-insensitively, as IPA's
// re.compile(item, flags=re.IGNORECASE). Go's RE2 syntax differs from
// Python's for look-arounds and back-references, which fail here.
func CompileNVRAMPatterns(patterns []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(patterns))
	for _, p := range patterns {
		re, err := regexp.Compile("(?i)" + p)
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %w", p, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// listedByEFIBootMgr reports whether IPA's get_boot_records sees an entry
// whose device path text is text: its regex over `efibootmgr -v` takes
// only paths that start with BBS, HD, FvFile, FvVol, PciRoot, VenMsg,
// VenHw or UsbClass.
func listedByEFIBootMgr(text string) bool {
	for _, p := range []string{"BBS(", "HD(", "FvFile(", "FvVol(", "PciRoot(", "VenMsg(", "VenHw(", "UsbClass("} {
		if strings.HasPrefix(text, p) {
			return true
		}
	}
	return false
}

// efibootmgrText renders a device path as `efibootmgr -v` (libefivar)
// prints it for the nodes boot entries usually hold: PciRoot, PcieRoot,
// Pci, MAC, Uri, FvFile, FvVol, VenHw, VenMsg, UsbClass, BBS, HD and
// File; any other node in efivar's generic Path(type,subtype,hex) form.
func efibootmgrText(p efivar.DevicePath) string {
	parts := make([]string, 0, len(p))
	for _, n := range p {
		parts = append(parts, nodeText(n))
	}
	return strings.Join(parts, "/")
}

func nodeText(n efivar.DevicePathNode) string {
	d := n.Data
	guid := func(b []byte) string {
		var g [16]byte
		copy(g[:], b)
		return efivar.GUIDString(g)
	}
	switch {
	case n.Type == 2 && n.SubType == 1 && len(d) == 8:
		hid, uid := binary.LittleEndian.Uint32(d), binary.LittleEndian.Uint32(d[4:])
		switch hid {
		case 0x0a0341d0:
			return fmt.Sprintf("PciRoot(0x%x)", uid)
		case 0x0a0841d0:
			return fmt.Sprintf("PcieRoot(0x%x)", uid)
		}
		return fmt.Sprintf("Acpi(PNP%04x,0x%x)", hid>>16, uid)
	case n.Type == 1 && n.SubType == 1 && len(d) == 2:
		return fmt.Sprintf("Pci(0x%x,0x%x)", d[1], d[0])
	case n.Type == 3 && n.SubType == 11 && len(d) == 33:
		l := 32
		if d[32] == 0 || d[32] == 1 {
			l = 6
		}
		return fmt.Sprintf("MAC(%x,%d)", d[:l], d[32])
	case n.Type == 3 && n.SubType == 24:
		return fmt.Sprintf("Uri(%s)", d)
	case n.Type == 3 && n.SubType == 15 && len(d) == 7:
		return fmt.Sprintf("UsbClass(0x%x,0x%x,0x%x,0x%x,0x%x)", binary.LittleEndian.Uint16(d), binary.LittleEndian.Uint16(d[2:]), d[4], d[5], d[6])
	case n.Type == 4 && n.SubType == 6 && len(d) == 16:
		return fmt.Sprintf("FvFile(%s)", guid(d))
	case n.Type == 4 && n.SubType == 7 && len(d) == 16:
		return fmt.Sprintf("FvVol(%s)", guid(d))
	case (n.Type == 1 && n.SubType == 4 || n.Type == 3 && n.SubType == 10) && len(d) >= 16:
		name := "VenHw"
		if n.Type == 3 {
			name = "VenMsg"
		}
		if len(d) == 16 {
			return fmt.Sprintf("%s(%s)", name, guid(d))
		}
		return fmt.Sprintf("%s(%s,%x)", name, guid(d), d[16:])
	case n.Type == 5 && n.SubType == 1 && len(d) >= 4:
		desc, _, _ := strings.Cut(string(d[4:]), "\x00")
		return fmt.Sprintf("BBS(%d,%s,0x%x)", binary.LittleEndian.Uint16(d), desc, binary.LittleEndian.Uint16(d[2:]))
	}
	return n.String()
}

// CleanNVRAM is IPA's clean_boot_records: every boot entry whose device
// path text (efibootmgrText) matches one of patterns is deleted
// (`efibootmgr -b N -B`, which also drops it from BootOrder). It returns the
// deleted entries as "Boot####".
func CleanNVRAM(ctx context.Context, log *slog.Logger, store efivar.Store, patterns []*regexp.Regexp) ([]string, error) {
	log = logging.OrDiscard(log)
	entries, err := store.BootEntries()
	if err != nil {
		return nil, err
	}
	order, err := store.BootOrder()
	if err != nil {
		return nil, err
	}
	deleted := []string{}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return deleted, err
		}
		if e.Option == nil {
			continue
		}
		text := efibootmgrText(e.Option.FilePath)
		if !listedByEFIBootMgr(text) {
			continue
		}
		i := slices.IndexFunc(patterns, func(re *regexp.Regexp) bool { return re.MatchString(text) })
		if i < 0 {
			continue
		}
		name := efivar.BootName(e.Num)
		log.Info("deleting UEFI boot entry", "entry", name, "label", e.Option.Description, "path", text, "pattern", patterns[i].String())
		if err := store.Delete(name); err != nil {
			return deleted, err
		}
		deleted = append(deleted, name)
		if j := slices.Index(order, e.Num); j >= 0 {
			order = slices.Delete(order, j, j+1)
			if err := store.SetBootOrder(order); err != nil {
				return deleted, err
			}
		}
	}
	return deleted, nil
}
