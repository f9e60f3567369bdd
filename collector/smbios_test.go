package collector

import (
	"context"
	"encoding/binary"
	"testing"
)

// smbiosStruct encodes one structure: header, formatted fields after the
// header, then the string set.
func smbiosStruct(typ uint8, handle uint16, fields []byte, strs ...string) []byte {
	b := []byte{typ, byte(4 + len(fields)), 0, 0}
	binary.LittleEndian.PutUint16(b[2:], handle)
	b = append(b, fields...)
	for _, s := range strs {
		b = append(b, s...)
		b = append(b, 0)
	}
	if len(strs) == 0 {
		b = append(b, 0)
	}
	return append(b, 0)
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// memDevice is a type 17 structure (SMBIOS 2.7 layout, 0x22 bytes) in the
// array with handle arr, with size word sz and extended size ext.
func memDevice(handle, arr, sz uint16, ext uint32) []byte {
	f := make([]byte, 0x22-4)
	binary.LittleEndian.PutUint16(f[0x04-4:], arr)
	binary.LittleEndian.PutUint16(f[0x0c-4:], sz)
	binary.LittleEndian.PutUint32(f[0x1c-4:], ext)
	return smbiosStruct(17, handle, f)
}

// sampleSMBIOS is a server-like table: BIOS, system with SKU, a RAM array
// with 16 GiB + 512 KiB-granular + 64 GiB extended + empty + unknown
// devices, and a flash array whose device must not count.
func sampleSMBIOS() []byte {
	bios := smbiosStruct(0, 0, cat([]byte{1, 2, 0, 0xf0, 3, 0xff}, make([]byte, 12)),
		"Dell Inc.", "2.19.1", "06/11/2023")
	sys := smbiosStruct(1, 0x100, cat([]byte{1, 2, 3, 4}, make([]byte, 16), []byte{6, 6, 5}),
		"Dell Inc.", "PowerEdge R640", "Not Specified", "ABC1234 ", "PowerEdge", "SKU=0716;ModelName=PowerEdge R640")
	ram := smbiosStruct(16, 0x1000, []byte{3, 3, 6, 0, 0, 0, 0, 0xfe, 0xff, 4, 0})
	flash := smbiosStruct(16, 0x1001, []byte{3, 9, 3, 0, 0, 0, 0, 0xfe, 0xff, 1, 0})
	return cat(bios, sys, ram, flash,
		memDevice(0x1100, 0x1000, 16384, 0),
		memDevice(0x1101, 0x1000, 0x8000|512, 0),
		memDevice(0x1102, 0x1000, 0x7fff, 65536),
		memDevice(0x1103, 0x1000, 0, 0),
		memDevice(0x1104, 0x1000, 0xffff, 0),
		memDevice(0x1105, 0x1001, 16, 0),
		smbiosStruct(127, 0xfeff, nil))
}

func sampleEntryPoint3(tableLen int) []byte {
	ep := make([]byte, 0x18)
	copy(ep, "_SM3_")
	ep[6], ep[7], ep[8] = 0x18, 3, 2
	binary.LittleEndian.PutUint32(ep[0x0c:], uint32(tableLen))
	return ep
}

func TestSMBIOSSystemVendorAndMemory(t *testing.T) {
	table := sampleSMBIOS()
	root := tree(t, map[string]string{
		smbiosTablePath:      string(table),
		smbiosEntryPointPath: string(sampleEntryPoint3(len(table))),
	})
	inv, err := Collect(context.Background(), Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	sv := inv.SystemVendor
	if sv.Manufacturer != "Dell Inc." || sv.ProductName != "PowerEdge R640 (SKU=0716;ModelName=PowerEdge R640)" ||
		sv.SerialNumber != "ABC1234" || sv.Firmware.Vendor != "Dell Inc." || sv.Firmware.Version != "2.19.1" ||
		sv.Firmware.BuildDate != "06/11/2023" {
		t.Errorf("system_vendor = %+v", sv)
	}
	// 16384 MiB + 512 KiB + 65536 MiB; the flash device does not count.
	if inv.Memory.PhysicalMB == nil || *inv.Memory.PhysicalMB != 16384+65536 {
		t.Errorf("physical_mb = %v", *inv.Memory.PhysicalMB)
	}
}

func TestSMBIOSFallbacks(t *testing.T) {
	// A truncated table: the structures before the damage still count,
	// one warning is logged; without a table the sysfs DMI copies and the
	// memory blocks are used.
	table := sampleSMBIOS()
	root := tree(t, map[string]string{
		smbiosTablePath: string(table[:len(table)-60]),
	})
	inv, _ := Collect(context.Background(), Options{Root: root})
	if inv.SystemVendor.ProductName == "" || inv.Memory.PhysicalMB == nil || *inv.Memory.PhysicalMB != 16384+65536 {
		t.Errorf("truncated table: vendor %+v physical_mb %v", inv.SystemVendor, inv.Memory.PhysicalMB)
	}

	root = tree(t, map[string]string{
		"sys/class/dmi/id/sys_vendor":                "QEMU\n",
		"sys/class/dmi/id/product_name":              "Standard PC (Q35 + ICH9, 2009)\n",
		"sys/class/dmi/id/bios_vendor":               "SeaBIOS\n",
		"sys/class/dmi/id/bios_version":              "1.16.2-debian-1.16.2-1\n",
		"sys/class/dmi/id/bios_date":                 "04/01/2014\n",
		"sys/devices/system/memory/block_size_bytes": "8000000\n",
		"sys/devices/system/memory/memory0/state":    "online\n",
		"sys/devices/system/memory/memory1/state":    "online\n",
		"sys/devices/system/memory/memory2/state":    "offline\n",
		"proc/meminfo":                               "MemTotal:        2013160 kB\nMemFree:  1 kB\n",
	})
	inv, _ = Collect(context.Background(), Options{Root: root})
	sv := inv.SystemVendor
	if sv.Manufacturer != "QEMU" || sv.ProductName != "Standard PC (Q35 + ICH9, 2009)" || sv.SerialNumber != "" ||
		sv.Firmware.Version != "1.16.2-debian-1.16.2-1" {
		t.Errorf("system_vendor = %+v", sv)
	}
	if inv.Memory.PhysicalMB == nil || *inv.Memory.PhysicalMB != 256 || inv.Memory.Total == nil || *inv.Memory.Total != 2013160*1024 {
		t.Errorf("memory = %v %v", inv.Memory.PhysicalMB, inv.Memory.Total)
	}

	// Nothing at all: nulls, not zeros.
	inv, _ = Collect(context.Background(), Options{Root: t.TempDir()})
	if inv.Memory.PhysicalMB != nil || inv.Memory.Total != nil {
		t.Errorf("empty root: memory = %+v", inv.Memory)
	}
}

func TestParseSMBIOSEntryPoint(t *testing.T) {
	ep, err := parseSMBIOSEntryPoint(sampleEntryPoint3(1234))
	if err != nil || ep.Major != 3 || ep.Minor != 2 || ep.TableLength != 1234 {
		t.Errorf("SM3: %+v %v", ep, err)
	}
	ep2 := make([]byte, 0x1f)
	copy(ep2, "_SM_")
	ep2[6], ep2[7] = 2, 8
	copy(ep2[0x10:], "_DMI_")
	binary.LittleEndian.PutUint16(ep2[0x16:], 777)
	ep, err = parseSMBIOSEntryPoint(ep2)
	if err != nil || ep.Major != 2 || ep.Minor != 8 || ep.TableLength != 777 {
		t.Errorf("SM2: %+v %v", ep, err)
	}
	for _, bad := range [][]byte{nil, []byte("_SM3_"), []byte("garbage garbage garbage garbage")} {
		if _, err := parseSMBIOSEntryPoint(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzSMBIOSTable(f *testing.F) {
	f.Add(sampleSMBIOS())
	f.Add(smbiosStruct(1, 1, []byte{1, 2, 0, 3}, "a", "b", "c"))
	f.Fuzz(func(t *testing.T, b []byte) {
		structs, _ := parseSMBIOSTable(b)
		si := &smbiosInfo{Structures: structs}
		si.memoryDeviceBytes()
		for _, s := range structs {
			for off := range len(s.Formatted) + 2 {
				s.str(off)
			}
		}
	})
}

func FuzzSMBIOSEntryPoint(f *testing.F) {
	f.Add(sampleEntryPoint3(100))
	f.Add([]byte("_SM_\x00\x1f\x02\x08\x00\x00\x00\x00\x00\x00\x00\x00_DMI_\x00\x10\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ep, err := parseSMBIOSEntryPoint(b)
		if err == nil && ep.TableLength < 0 {
			t.Fatal("negative length")
		}
	})
}
