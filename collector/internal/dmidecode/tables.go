package dmidecode

// Tables of dmidecode 3.6 (the version in the CentOS Stream 9 and Debian
// trixie ramdisks IPA runs in) for the four structure types IPA's
// dmi-decode collector reads. The strings are the SMBIOS specification's
// names as dmidecode spells them; the output must match byte for byte,
// because IPA sends dmidecode's text, split into keys and values.

// dmiOutOfSpec is dmidecode's text for a code outside every table.
const dmiOutOfSpec = "<OUT OF SPEC>"

// dmiLookup returns table[code-first], or dmiOutOfSpec.
func dmiLookup(table []string, first, code int) string {
	if code < first || code-first >= len(table) {
		return dmiOutOfSpec
	}
	return table[code-first]
}

// dmiProcessorFamilyName is SMBIOS 7.5.2 (type 4, offset 0x06, or 0x28
// when 0x06 is 0xFE) as dmidecode 3.6 names it; 0xBE and SMBIOS 2.0's 0x30
// are decided by the manufacturer (dmiProcessorFamily).
func dmiProcessorFamilyName(code uint16) string {
	switch code {
	case 0x001:
		return "Other"
	case 0x002:
		return "Unknown"
	case 0x003:
		return "8086"
	case 0x004:
		return "80286"
	case 0x005:
		return "80386"
	case 0x006:
		return "80486"
	case 0x007:
		return "8087"
	case 0x008:
		return "80287"
	case 0x009:
		return "80387"
	case 0x00A:
		return "80487"
	case 0x00B:
		return "Pentium"
	case 0x00C:
		return "Pentium Pro"
	case 0x00D:
		return "Pentium II"
	case 0x00E:
		return "Pentium MMX"
	case 0x00F:
		return "Celeron"
	case 0x010:
		return "Pentium II Xeon"
	case 0x011:
		return "Pentium III"
	case 0x012:
		return "M1"
	case 0x013:
		return "M2"
	case 0x014:
		return "Celeron M"
	case 0x015:
		return "Pentium 4 HT"
	case 0x016:
		return "Intel"
	case 0x018:
		return "Duron"
	case 0x019:
		return "K5"
	case 0x01A:
		return "K6"
	case 0x01B:
		return "K6-2"
	case 0x01C:
		return "K6-3"
	case 0x01D:
		return "Athlon"
	case 0x01E:
		return "AMD29000"
	case 0x01F:
		return "K6-2+"
	case 0x020:
		return "Power PC"
	case 0x021:
		return "Power PC 601"
	case 0x022:
		return "Power PC 603"
	case 0x023:
		return "Power PC 603+"
	case 0x024:
		return "Power PC 604"
	case 0x025:
		return "Power PC 620"
	case 0x026:
		return "Power PC x704"
	case 0x027:
		return "Power PC 750"
	case 0x028:
		return "Core Duo"
	case 0x029:
		return "Core Duo Mobile"
	case 0x02A:
		return "Core Solo Mobile"
	case 0x02B:
		return "Atom"
	case 0x02C:
		return "Core M"
	case 0x02D:
		return "Core m3"
	case 0x02E:
		return "Core m5"
	case 0x02F:
		return "Core m7"
	case 0x030:
		return "Alpha"
	case 0x031:
		return "Alpha 21064"
	case 0x032:
		return "Alpha 21066"
	case 0x033:
		return "Alpha 21164"
	case 0x034:
		return "Alpha 21164PC"
	case 0x035:
		return "Alpha 21164a"
	case 0x036:
		return "Alpha 21264"
	case 0x037:
		return "Alpha 21364"
	case 0x038:
		return "Turion II Ultra Dual-Core Mobile M"
	case 0x039:
		return "Turion II Dual-Core Mobile M"
	case 0x03A:
		return "Athlon II Dual-Core M"
	case 0x03B:
		return "Opteron 6100"
	case 0x03C:
		return "Opteron 4100"
	case 0x03D:
		return "Opteron 6200"
	case 0x03E:
		return "Opteron 4200"
	case 0x03F:
		return "FX"
	case 0x040:
		return "MIPS"
	case 0x041:
		return "MIPS R4000"
	case 0x042:
		return "MIPS R4200"
	case 0x043:
		return "MIPS R4400"
	case 0x044:
		return "MIPS R4600"
	case 0x045:
		return "MIPS R10000"
	case 0x046:
		return "C-Series"
	case 0x047:
		return "E-Series"
	case 0x048:
		return "A-Series"
	case 0x049:
		return "G-Series"
	case 0x04A:
		return "Z-Series"
	case 0x04B:
		return "R-Series"
	case 0x04C:
		return "Opteron 4300"
	case 0x04D:
		return "Opteron 6300"
	case 0x04E:
		return "Opteron 3300"
	case 0x04F:
		return "FirePro"
	case 0x050:
		return "SPARC"
	case 0x051:
		return "SuperSPARC"
	case 0x052:
		return "MicroSPARC II"
	case 0x053:
		return "MicroSPARC IIep"
	case 0x054:
		return "UltraSPARC"
	case 0x055:
		return "UltraSPARC II"
	case 0x056:
		return "UltraSPARC IIi"
	case 0x057:
		return "UltraSPARC III"
	case 0x058:
		return "UltraSPARC IIIi"
	case 0x060:
		return "68040"
	case 0x061:
		return "68xxx"
	case 0x062:
		return "68000"
	case 0x063:
		return "68010"
	case 0x064:
		return "68020"
	case 0x065:
		return "68030"
	case 0x066:
		return "Athlon X4"
	case 0x067:
		return "Opteron X1000"
	case 0x068:
		return "Opteron X2000"
	case 0x069:
		return "Opteron A-Series"
	case 0x06A:
		return "Opteron X3000"
	case 0x06B:
		return "Zen"
	case 0x070:
		return "Hobbit"
	case 0x078:
		return "Crusoe TM5000"
	case 0x079:
		return "Crusoe TM3000"
	case 0x07A:
		return "Efficeon TM8000"
	case 0x080:
		return "Weitek"
	case 0x082:
		return "Itanium"
	case 0x083:
		return "Athlon 64"
	case 0x084:
		return "Opteron"
	case 0x085:
		return "Sempron"
	case 0x086:
		return "Turion 64"
	case 0x087:
		return "Dual-Core Opteron"
	case 0x088:
		return "Athlon 64 X2"
	case 0x089:
		return "Turion 64 X2"
	case 0x08A:
		return "Quad-Core Opteron"
	case 0x08B:
		return "Third-Generation Opteron"
	case 0x08C:
		return "Phenom FX"
	case 0x08D:
		return "Phenom X4"
	case 0x08E:
		return "Phenom X2"
	case 0x08F:
		return "Athlon X2"
	case 0x090:
		return "PA-RISC"
	case 0x091:
		return "PA-RISC 8500"
	case 0x092:
		return "PA-RISC 8000"
	case 0x093:
		return "PA-RISC 7300LC"
	case 0x094:
		return "PA-RISC 7200"
	case 0x095:
		return "PA-RISC 7100LC"
	case 0x096:
		return "PA-RISC 7100"
	case 0x0A0:
		return "V30"
	case 0x0A1:
		return "Quad-Core Xeon 3200"
	case 0x0A2:
		return "Dual-Core Xeon 3000"
	case 0x0A3:
		return "Quad-Core Xeon 5300"
	case 0x0A4:
		return "Dual-Core Xeon 5100"
	case 0x0A5:
		return "Dual-Core Xeon 5000"
	case 0x0A6:
		return "Dual-Core Xeon LV"
	case 0x0A7:
		return "Dual-Core Xeon ULV"
	case 0x0A8:
		return "Dual-Core Xeon 7100"
	case 0x0A9:
		return "Quad-Core Xeon 5400"
	case 0x0AA:
		return "Quad-Core Xeon"
	case 0x0AB:
		return "Dual-Core Xeon 5200"
	case 0x0AC:
		return "Dual-Core Xeon 7200"
	case 0x0AD:
		return "Quad-Core Xeon 7300"
	case 0x0AE:
		return "Quad-Core Xeon 7400"
	case 0x0AF:
		return "Multi-Core Xeon 7400"
	case 0x0B0:
		return "Pentium III Xeon"
	case 0x0B1:
		return "Pentium III Speedstep"
	case 0x0B2:
		return "Pentium 4"
	case 0x0B3:
		return "Xeon"
	case 0x0B4:
		return "AS400"
	case 0x0B5:
		return "Xeon MP"
	case 0x0B6:
		return "Athlon XP"
	case 0x0B7:
		return "Athlon MP"
	case 0x0B8:
		return "Itanium 2"
	case 0x0B9:
		return "Pentium M"
	case 0x0BA:
		return "Celeron D"
	case 0x0BB:
		return "Pentium D"
	case 0x0BC:
		return "Pentium EE"
	case 0x0BD:
		return "Core Solo"
	case 0x0BF:
		return "Core 2 Duo"
	case 0x0C0:
		return "Core 2 Solo"
	case 0x0C1:
		return "Core 2 Extreme"
	case 0x0C2:
		return "Core 2 Quad"
	case 0x0C3:
		return "Core 2 Extreme Mobile"
	case 0x0C4:
		return "Core 2 Duo Mobile"
	case 0x0C5:
		return "Core 2 Solo Mobile"
	case 0x0C6:
		return "Core i7"
	case 0x0C7:
		return "Dual-Core Celeron"
	case 0x0C8:
		return "IBM390"
	case 0x0C9:
		return "G4"
	case 0x0CA:
		return "G5"
	case 0x0CB:
		return "ESA/390 G6"
	case 0x0CC:
		return "z/Architecture"
	case 0x0CD:
		return "Core i5"
	case 0x0CE:
		return "Core i3"
	case 0x0CF:
		return "Core i9"
	case 0x0D2:
		return "C7-M"
	case 0x0D3:
		return "C7-D"
	case 0x0D4:
		return "C7"
	case 0x0D5:
		return "Eden"
	case 0x0D6:
		return "Multi-Core Xeon"
	case 0x0D7:
		return "Dual-Core Xeon 3xxx"
	case 0x0D8:
		return "Quad-Core Xeon 3xxx"
	case 0x0D9:
		return "Nano"
	case 0x0DA:
		return "Dual-Core Xeon 5xxx"
	case 0x0DB:
		return "Quad-Core Xeon 5xxx"
	case 0x0DD:
		return "Dual-Core Xeon 7xxx"
	case 0x0DE:
		return "Quad-Core Xeon 7xxx"
	case 0x0DF:
		return "Multi-Core Xeon 7xxx"
	case 0x0E0:
		return "Multi-Core Xeon 3400"
	case 0x0E4:
		return "Opteron 3000"
	case 0x0E5:
		return "Sempron II"
	case 0x0E6:
		return "Embedded Opteron Quad-Core"
	case 0x0E7:
		return "Phenom Triple-Core"
	case 0x0E8:
		return "Turion Ultra Dual-Core Mobile"
	case 0x0E9:
		return "Turion Dual-Core Mobile"
	case 0x0EA:
		return "Athlon Dual-Core"
	case 0x0EB:
		return "Sempron SI"
	case 0x0EC:
		return "Phenom II"
	case 0x0ED:
		return "Athlon II"
	case 0x0EE:
		return "Six-Core Opteron"
	case 0x0EF:
		return "Sempron M"
	case 0x0FA:
		return "i860"
	case 0x0FB:
		return "i960"
	case 0x100:
		return "ARMv7"
	case 0x101:
		return "ARMv8"
	case 0x102:
		return "ARMv9"
	case 0x103:
		return "ARM"
	case 0x104:
		return "SH-3"
	case 0x105:
		return "SH-4"
	case 0x118:
		return "ARM"
	case 0x119:
		return "StrongARM"
	case 0x12C:
		return "6x86"
	case 0x12D:
		return "MediaGX"
	case 0x12E:
		return "MII"
	case 0x140:
		return "WinChip"
	case 0x15E:
		return "DSP"
	case 0x1F4:
		return "Video Processor"
	case 0x200:
		return "RV32"
	case 0x201:
		return "RV64"
	case 0x202:
		return "RV128"
	case 0x258:
		return "LoongArch"
	case 0x259:
		return "Loongson 1"
	case 0x25A:
		return "Loongson 2"
	case 0x25B:
		return "Loongson 3"
	case 0x25C:
		return "Loongson 2K"
	case 0x25D:
		return "Loongson 3A"
	case 0x25E:
		return "Loongson 3B"
	case 0x25F:
		return "Loongson 3C"
	case 0x260:
		return "Loongson 3D"
	case 0x261:
		return "Loongson 3E"
	case 0x262:
		return "Dual-Core Loongson 2K 2xxx"
	case 0x26C:
		return "Quad-Core Loongson 3A 5xxx"
	case 0x26D:
		return "Multi-Core Loongson 3A 5xxx"
	case 0x26E:
		return "Quad-Core Loongson 3B 5xxx"
	case 0x26F:
		return "Multi-Core Loongson 3B 5xxx"
	case 0x270:
		return "Multi-Core Loongson 3C 5xxx"
	case 0x271:
		return "Multi-Core Loongson 3D 5xxx"
	}
	return dmiOutOfSpec
}

// dmiBIOSCharacteristics is SMBIOS 7.1.1, bits 4 to 31 (bit 3 alone means
// "not supported").
func dmiBIOSCharacteristics() []string {
	return []string{
		"ISA is supported", // bit 4
		"MCA is supported",
		"EISA is supported",
		"PCI is supported",
		"PC Card (PCMCIA) is supported",
		"PNP is supported",
		"APM is supported",
		"BIOS is upgradeable",
		"BIOS shadowing is allowed",
		"VLB is supported",
		"ESCD support is available",
		"Boot from CD is supported",
		"Selectable boot is supported",
		"BIOS ROM is socketed",
		"Boot from PC Card (PCMCIA) is supported",
		"EDD is supported",
		"Japanese floppy for NEC 9800 1.2 MB is supported (int 13h)",
		"Japanese floppy for Toshiba 1.2 MB is supported (int 13h)",
		"5.25\"/360 kB floppy services are supported (int 13h)",
		"5.25\"/1.2 MB floppy services are supported (int 13h)",
		"3.5\"/720 kB floppy services are supported (int 13h)",
		"3.5\"/2.88 MB floppy services are supported (int 13h)",
		"Print screen service is supported (int 5h)",
		"8042 keyboard services are supported (int 9h)",
		"Serial services are supported (int 14h)",
		"Printer services are supported (int 17h)",
		"CGA/mono video services are supported (int 10h)",
		"NEC PC-98", // bit 31
	}
}

// dmiBIOSCharacteristicsX1 is SMBIOS 7.1.2.1 (byte 0x12), bits 0 to 7.
func dmiBIOSCharacteristicsX1() []string {
	return []string{
		"ACPI is supported",
		"USB legacy is supported",
		"AGP is supported",
		"I2O boot is supported",
		"LS-120 boot is supported",
		"ATAPI Zip drive boot is supported",
		"IEEE 1394 boot is supported",
		"Smart battery is supported",
	}
}

// dmiBIOSCharacteristicsX2 is SMBIOS 7.1.2.2 (byte 0x13), bits 0 to 6.
func dmiBIOSCharacteristicsX2() []string {
	return []string{
		"BIOS boot specification is supported",
		"Function key-initiated network boot is supported",
		"Targeted content distribution is supported",
		"UEFI is supported",
		"System is a virtual machine",
		"Manufacturing mode is supported",
		"Manufacturing mode is enabled",
	}
}

// dmiProcessorTypes is SMBIOS 7.5.1, from 0x01.
func dmiProcessorTypes() []string {
	return []string{"Other", "Unknown", "Central Processor", "Math Processor", "DSP Processor", "Video Processor"}
}

// dmiCPUIDFlags names the EDX bits of CPUID leaf 1 (Intel AP-485); ""
// marks the bits dmidecode does not list.
func dmiCPUIDFlags() [32]string {
	return [32]string{
		"FPU (Floating-point unit on-chip)",
		"VME (Virtual mode extension)",
		"DE (Debugging extension)",
		"PSE (Page size extension)",
		"TSC (Time stamp counter)",
		"MSR (Model specific registers)",
		"PAE (Physical address extension)",
		"MCE (Machine check exception)",
		"CX8 (CMPXCHG8 instruction supported)",
		"APIC (On-chip APIC hardware supported)",
		"", // 10
		"SEP (Fast system call)",
		"MTRR (Memory type range registers)",
		"PGE (Page global enable)",
		"MCA (Machine check architecture)",
		"CMOV (Conditional move instruction supported)",
		"PAT (Page attribute table)",
		"PSE-36 (36-bit page size extension)",
		"PSN (Processor serial number present and enabled)",
		"CLFSH (CLFLUSH instruction supported)",
		"", // 20
		"DS (Debug store)",
		"ACPI (ACPI supported)",
		"MMX (MMX technology supported)",
		"FXSR (FXSAVE and FXSTOR instructions supported)",
		"SSE (Streaming SIMD extensions)",
		"SSE2 (Streaming SIMD extensions 2)",
		"SS (Self-snoop)",
		"HTT (Multi-threading)",
		"TM (Thermal monitor supported)",
		"", // 30
		"PBE (Pending break enabled)",
	}
}

// dmiProcessorStatus is SMBIOS 7.5 offset 0x18, bits 0 to 2.
func dmiProcessorStatus(code uint8) string {
	return [8]string{"Unknown", "Enabled", "Disabled By User", "Disabled By BIOS", "Idle", dmiOutOfSpec, dmiOutOfSpec, "Other"}[code&7]
}

// dmiProcessorUpgrades is SMBIOS 7.5.5, from 0x01.
func dmiProcessorUpgrades() []string {
	return []string{
		"Other", "Unknown", "Daughter Board", "ZIF Socket", "Replaceable Piggy Back", "None", "LIF Socket",
		"Slot 1", "Slot 2", "370-pin Socket", "Slot A", "Slot M", "Socket 423", "Socket A (Socket 462)",
		"Socket 478", "Socket 754", "Socket 940", "Socket 939", "Socket mPGA604", "Socket LGA771",
		"Socket LGA775", "Socket S1", "Socket AM2", "Socket F (1207)", "Socket LGA1366", "Socket G34",
		"Socket AM3", "Socket C32", "Socket LGA1156", "Socket LGA1567", "Socket PGA988A", "Socket BGA1288",
		"Socket rPGA988B", "Socket BGA1023", "Socket BGA1224", "Socket BGA1155", "Socket LGA1356",
		"Socket LGA2011", "Socket FS1", "Socket FS2", "Socket FM1", "Socket FM2", "Socket LGA2011-3",
		"Socket LGA1356-3", "Socket LGA1150", "Socket BGA1168", "Socket BGA1234", "Socket BGA1364",
		"Socket AM4", "Socket LGA1151", "Socket BGA1356", "Socket BGA1440", "Socket BGA1515",
		"Socket LGA3647-1", "Socket SP3", "Socket SP3r2", "Socket LGA2066", "Socket BGA1392",
		"Socket BGA1510", "Socket BGA1528", "Socket LGA4189", "Socket LGA1200", "Socket LGA4677", // 0x3F
		"Socket LGA1700", "Socket BGA1744", "Socket BGA1781", "Socket BGA1211", "Socket BGA2422",
		"Socket LGA1211", "Socket LGA2422", "Socket LGA5773", "Socket BGA5773", "Socket AM5", "Socket SP5",
		"Socket SP6", "Socket BGA883", "Socket BGA1190", "Socket BGA4129", "Socket LGA4710",
		"Socket LGA7529", // 0x50
	}
}

// dmiProcessorCharacteristics is SMBIOS 7.5.9, bits 2 to 9.
func dmiProcessorCharacteristics() []string {
	return []string{
		"64-bit capable", "Multi-Core", "Hardware Thread", "Execute Protection",
		"Enhanced Virtualization", "Power/Performance Control", "128-bit Capable", "Arm64 SoC ID",
	}
}

// dmiMemoryArrayLocation is SMBIOS 7.17.1.
func dmiMemoryArrayLocation(code uint8) string {
	if code >= 0xA0 {
		return dmiLookup([]string{
			"PC-98/C20 Add-on Card", "PC-98/C24 Add-on Card", "PC-98/E Add-on Card",
			"PC-98/Local Bus Add-on Card", "CXL Add-on Card",
		}, 0xA0, int(code))
	}
	return dmiLookup([]string{
		"Other", "Unknown", "System Board Or Motherboard", "ISA Add-on Card", "EISA Add-on Card",
		"PCI Add-on Card", "MCA Add-on Card", "PCMCIA Add-on Card", "Proprietary Add-on Card", "NuBus",
	}, 1, int(code))
}

// dmiMemoryArrayUse is SMBIOS 7.17.2.
func dmiMemoryArrayUse(code uint8) string {
	return dmiLookup([]string{
		"Other", "Unknown", "System Memory", "Video Memory", "Flash Memory", "Non-volatile RAM", "Cache Memory",
	}, 1, int(code))
}

// dmiMemoryArrayECType is SMBIOS 7.17.3.
func dmiMemoryArrayECType(code uint8) string {
	return dmiLookup([]string{
		"Other", "Unknown", "None", "Parity", "Single-bit ECC", "Multi-bit ECC", "CRC",
	}, 1, int(code))
}

// dmiMemoryFormFactor is SMBIOS 7.18.1.
func dmiMemoryFormFactor(code uint8) string {
	return dmiLookup([]string{
		"Other", "Unknown", "SIMM", "SIP", "Chip", "DIP", "ZIP", "Proprietary Card", "DIMM", "TSOP",
		"Row Of Chips", "RIMM", "SODIMM", "SRIMM", "FB-DIMM", "Die",
	}, 1, int(code))
}

// dmiMemoryType is SMBIOS 7.18.2.
func dmiMemoryType(code uint8) string {
	return dmiLookup([]string{
		"Other", "Unknown", "DRAM", "EDRAM", "VRAM", "SRAM", "RAM", "ROM", "Flash", "EEPROM", "FEPROM",
		"EPROM", "CDRAM", "3DRAM", "SDRAM", "SGRAM", "RDRAM", "DDR", "DDR2", "DDR2 FB-DIMM", "Reserved",
		"Reserved", "Reserved", "DDR3", "FBD2", "DDR4", "LPDDR", "LPDDR2", "LPDDR3", "LPDDR4",
		"Logical non-volatile device", "HBM", "HBM2", "DDR5", "LPDDR5", "HBM3",
	}, 1, int(code))
}

// dmiMemoryTypeDetail is SMBIOS 7.18.3, bits 1 to 15.
func dmiMemoryTypeDetail() []string {
	return []string{
		"Other", "Unknown", "Fast-paged", "Static Column", "Pseudo-static", "RAMBus", "Synchronous",
		"CMOS", "EDO", "Window DRAM", "Cache DRAM", "Non-Volatile", "Registered (Buffered)",
		"Unbuffered (Unregistered)", "LRDIMM",
	}
}

// dmiMemoryTechnology is SMBIOS 7.18.6.
func dmiMemoryTechnology(code uint8) string {
	return dmiLookup([]string{
		"Other", "Unknown", "DRAM", "NVDIMM-N", "NVDIMM-F", "NVDIMM-P", "Intel Optane DC persistent memory",
	}, 1, int(code))
}

// dmiMemoryOperatingModes is SMBIOS 7.18.7, bits 1 to 5.
func dmiMemoryOperatingModes() []string {
	return []string{
		"Other", "Unknown", "Volatile memory", "Byte-accessible persistent memory",
		"Block-accessible persistent memory",
	}
}
