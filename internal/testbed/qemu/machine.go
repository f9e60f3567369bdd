// Package qemu boots the agent ramdisk in a QEMU q35 virtual machine with
// known virtual hardware (disks with serials and WWNs, NVMe, SATA,
// virtio-blk, SMBIOS identities, NICs with fixed MACs), under SeaBIOS or
// OVMF, with software emulation (TCG) since nested KVM is not usable on the
// machines this runs on. Guest-to-host connections go through slirp
// guestfwd rules to a relay (Relay), host-to-guest ones through hostfwd.
// A NIC may be a tap device living in a network namespace the test created,
// so an lldpd there can talk LLDP to the guest.
package qemu

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// KernelArgs start the kernel command line of every boot of a test
// machine, whoever passes it (QEMU's -kernel, Ironic's network boot and
// ISOs, a deployed image's GRUB): the serial console; panic=-1, so a guest
// panic ends the VM (QEMU runs with -no-reboot) where a test sees it;
// cryptomgr.notests, as the kernel's self-tests of its crypto algorithms
// (crypto_algapi_init, the KDF, every CRC module the init loads) cost
// about 0.6 s of emulated time a boot and check the kernel's code, not the
// machine or the agent; and no_timer_check, as under TCG on a busy host
// the kernel's check of the IO-APIC timer can miss its ticks and panic
// ("IO-APIC + timer doesn't work"), which no real server does.
const KernelArgs = "console=ttyS0,115200 panic=-1 loglevel=4 cryptomgr.notests no_timer_check"

// KernelArgsArm64 are KernelArgs for an arm64 machine (Machine.Arch):
// the virt machine's serial port is a PL011, ttyAMA0, and there is no
// IO-APIC timer to check.
const KernelArgsArm64 = "console=ttyAMA0,115200 panic=-1 loglevel=4 cryptomgr.notests"

// Arm64 is Machine.Arch of an arm64 machine.
const Arm64 = "arm64"

// DiskKind is how a disk is attached: QEMU's device name, or for a disk
// behind an emulated server controller, that controller's. The controllers
// are QEMU's emulations of real hardware, so the guest runs the Linux
// driver a server with that card runs; each is created once per machine,
// before its first disk.
type DiskKind string

// The disk kinds.
const (
	DiskVirtioBlk DiskKind = "virtio-blk" // virtio-blk-pci
	DiskSCSI      DiskKind = "scsi-hd"    // on virtio-scsi
	DiskNVMe      DiskKind = "nvme"       // an NVMe controller with one namespace
	DiskSATA      DiskKind = "ide-hd"     // on the q35 AHCI
	// A scsi-hd behind an LSI MegaRAID SAS 2108 (Dell PERC H700 class),
	// Linux's megaraid_sas.
	DiskMegaRAID DiskKind = "megasas-gen2"
	// A scsi-hd behind an LSI SAS 1068 HBA, Linux's mptsas.
	DiskMPTSAS DiskKind = "mptsas1068"
	// A scsi-hd behind VMware's paravirtual SCSI, Linux's vmw_pvscsi.
	DiskPVSCSI DiskKind = "pvscsi"
	// A USB stick on the xHCI controller (qemu-xhci, Linux's xhci_pci):
	// a scsi-hd behind a USB bulk-only device (usb-bot), usb_storage's.
	DiskUSB DiskKind = "usb-xhci"
	// The same stick on an ICH9 EHCI controller (Linux's ehci_pci).
	DiskUSBEHCI DiskKind = "usb-ehci"
	// An ide-hd on a PIIX3 IDE controller (Linux's ata_piix), as an old
	// server's or a hypervisor's legacy IDE.
	DiskPIIX DiskKind = "piix3-ide"
)

// Disk is one virtual disk, backed by a sparse raw file the harness creates.
type Disk struct {
	ID     string // drive id and file name (ID.img)
	Kind   DiskKind
	SizeMB int
	Serial string // also the USB serial number of a USB stick
	WWN    string // 0x-prefixed 64-bit NAA (scsi-hd, ide-hd; any controller)
	Vendor string // scsi-hd
	Model  string // scsi-hd product, ide-hd model
	// SCSITarget and SCSILun place a scsi-hd (hctl 0:0:target:lun).
	SCSITarget, SCSILun int
	// AHCIPort places an ide-hd on the q35 AHCI (bus ide.N).
	AHCIPort int
	// IDEPort places a DiskPIIX disk: channel IDEPort/2 (0 primary, 1
	// secondary), unit IDEPort%2 (master, slave).
	IDEPort int
	// RotationRate: 1 = SSD, >1 = spinning (scsi-hd, ide-hd).
	RotationRate int
	// Paths > 1 presents a scsi-hd through that many SCSI devices (targets
	// SCSITarget, SCSITarget+1, ...), all on the one image with the same
	// serial and WWN, as a LUN reached over several paths: shared write
	// access and no image locking, so QEMU opens the file once per path.
	Paths int
	// BootFirst puts the disk first in the firmware's boot order, as a
	// server's BIOS setup names its boot disk: SeaBIOS tries only the
	// first hard disk. (QEMU's -kernel still boots before it. OVMF would
	// also put it before the boot entries in its NVRAM.)
	BootFirst bool
}

// NICBackend is what a NIC's other end is.
type NICBackend string

// The NIC backends.
const (
	// NICUser is slirp (restrict=on, with the machine's forwards).
	NICUser NICBackend = "user"
	// NICIsolated is a slirp with nothing reachable.
	NICIsolated NICBackend = "isolated"
	// NICTap is the tap file the harness passes in (NIC.File or
	// Options.Tap).
	NICTap NICBackend = "fd"
	// NICStream is that file as a stream socket (a switch the test plays
	// itself).
	NICStream NICBackend = "stream"
)

// NICUSB is the model of a USB network adapter on the xHCI bus (QEMU's
// usb-net, which Linux binds with cdc_ether over usbnet), as a BMC's
// host interface shows up in the server's OS.
const NICUSB = "usb-net"

// NIC is one network card.
type NIC struct {
	// Model is QEMU's device: virtio-net-pci, e1000, e1000e, vmxnet3 (PCI,
	// on a slot of their own), or NICUSB (on the xHCI bus).
	Model   string
	MAC     string
	Backend NICBackend
	// File is this NIC's own tap ("fd") or stream socket ("stream"),
	// for a machine with more than one such NIC; nil: Options.Tap.
	File *os.File
	// PXE makes the card one the firmware can boot from (SeaBIOS:
	// through QEMU's iPXE option ROM, Debian's ipxe-qemu; OVMF: through
	// its own driver and PXE client); see Machine.NetBoot.
	PXE bool
}

// SMBIOS holds the identities QEMU puts into the firmware tables.
type SMBIOS struct {
	BIOSVendor, BIOSVersion, BIOSDate, BIOSRelease                         string
	SystemManufacturer, SystemProduct, SystemVersion, SystemSerial, UUID   string
	SKU, Family                                                            string
	BoardManufacturer, BoardProduct, BoardVersion, BoardSerial, BoardAsset string
	ChassisManufacturer, ChassisVersion, ChassisSerial, ChassisAsset, OEM  string
}

// Firmware is the machine's firmware.
type Firmware string

// The firmwares.
const (
	BIOS Firmware = "bios" // SeaBIOS
	UEFI Firmware = "uefi" // OVMF
)

// Machine is a whole virtual machine.
type Machine struct {
	Name string
	// Arch is "" (amd64: qemu-system-x86_64's q35) or Arm64
	// (qemu-system-aarch64's virt machine with AAVMF, UEFI only; no
	// ISA or legacy IDE bus, no SMBus: no BMC; SATA disks on a PCI AHCI
	// controller).
	Arch     string
	Firmware Firmware
	CPUs     int
	MemoryMB int
	// CPUModel is the model-id of the qemu64 CPU (/proc/cpuinfo "model
	// name"); on Arm64, QEMU's CPU type (cortex-a57, max), whose MIDR
	// names the core.
	CPUModel string
	SMBIOS   SMBIOS
	Disks    []Disk
	NICs     []NIC
	Kernel   string // none and no ISO: the firmware boots from the disks
	Initrd   string
	ISO      string // boot this CD image instead of Kernel/Initrd
	// USBStick, when set, is a raw image attached read-only as a
	// removable USB mass-storage device on the xHCI bus: a BMC's virtual
	// USB stick.
	USBStick string
	// ISOOnUSB attaches ISO as a USB CD-ROM on the xHCI bus (a scsi-cd
	// behind usb-storage), as a BMC's virtual media appears, instead of
	// an ide-cd on the q35 AHCI.
	ISOOnUSB bool
	// USBKeyboard adds a USB keyboard on the xHCI bus (Linux's usbhid),
	// which VM.Monitor's sendkey types on, as on a server's console.
	USBKeyboard bool
	Append      string // kernel command line (after the console settings)
	// Monitor is the path of a Unix socket for QEMU's human monitor
	// (VM.Monitor: set_link to pull a NIC's cable); "" for none.
	Monitor string
	// NetBoot puts the NICs with PXE first in the firmware's boot order
	// (with no Kernel and no ISO): the machine boots from the network.
	NetBoot bool
	// HTTPBoot, with NetBoot under UEFI, switches the firmware's PXE
	// clients off (QEMU's fw_cfg opt/org.tianocore/IPv4PXESupport and
	// IPv6PXESupport "n", which OVMF and AAVMF read), so the NICs' first
	// boot option is UEFI HTTP boot, as a BMC's UefiHttp override boots
	// it. Without it AAVMF tries PXE over IPv4, then IPv6, before HTTP:
	// a minute each when no boot file is offered.
	HTTPBoot bool
	// TFTPRoot, when set, is served by the NICUser NICs' own DHCP and
	// TFTP server (QEMU's slirp), whose DHCP names TFTPBootFile (relative
	// to TFTPRoot) as the boot file: a network boot with no provisioning
	// network.
	TFTPRoot, TFTPBootFile string
	// GuestFwd maps a guest address (10.0.2.100:80) to a host TCP address
	// (127.0.0.1:8080), reached through RelayCommand.
	GuestFwd map[string]string
	// HostFwd maps a host port on 127.0.0.1 to a guest TCP port.
	HostFwd map[int]int
	// Dir holds the disk files, the OVMF variables and the logs.
	Dir string
	// ExtraArgs are QEMU arguments added as they are, for devices the
	// fields above do not model (PCIe root ports, bridges, NICs with an
	// ACPI index or several functions); their PCI addresses must stay
	// clear of the slots the harness hands out from 0x03 on.
	ExtraArgs []string
	// SecureBoot runs OVMF with Secure Boot enforced (Firmware UEFI):
	// OVMFSecureBootCode, with new variables from OVMFSecureBootVars
	// (Microsoft's keys enrolled), on a q35 with SMM, which that firmware
	// needs to keep its variables from the OS.
	SecureBoot bool
	// SecureBootDisabled, with SecureBoot, is that firmware with Secure
	// Boot switched off in its setting (OVMF's SecureBootEnable variable,
	// what its setup menu and a BMC's Redfish SecureBootEnable change):
	// the same firmware, keys and NVRAM, but it verifies no image and
	// reports SecureBoot=0. Start writes the setting into the machine's
	// variables (SetSecureBootEnable) before each boot.
	SecureBootDisabled bool
	// BMC, when set, adds QEMU's simulated BMC behind an ISA KCS
	// interface, which the guest's ipmi_si finds through ACPI and exposes as
	// /dev/ipmi0, or behind SMBus (BMC.SSIF).
	BMC *BMC
}

// BMCKind says which program simulates a BMC.
type BMCKind string

// The BMC kinds.
const (
	// BMCQEMU is QEMU's ipmi-bmc-sim: it answers Get Device ID with the
	// BMC's manufacturer and product (QEMU 7.2 reports device ID 0x20
	// whatever it is told) and refuses the commands it does not implement
	// (Get Channel Info, the LAN configuration) with completion code 0xc1.
	BMCQEMU BMCKind = ""
	// BMCOpenIPMI is OpenIPMI's ipmi_sim, started by
	// bmcsim.StartIPMISim, which holds the machine's power and answers
	// Ironic on its LAN channel.
	BMCOpenIPMI BMCKind = "openipmi"
)

// BMC is the machine's IPMI BMC behind an ISA KCS interface.
type BMC struct {
	Kind BMCKind
	// SSIF puts the BMC on the q35 ICH9 SMBus (QEMU's smbus-ipmi at
	// address 0x10, described in ACPI) instead of KCS: the guest reaches
	// it through i2c_i801 and ipmi_ssif, as on servers with an SSIF BMC.
	SSIF      bool
	MfgID     uint32 // IANA enterprise number
	ProductID uint16
	// LANAddress and LANPort are the UDP address of the LAN channel, the
	// address the BMC also reports as its own (LAN parameter 3); LANMAC is
	// its MAC (parameter 5). BMCOpenIPMI only.
	LANAddress string
	LANPort    int
	LANMAC     string
	// User and Password are the administrator's (user 2).
	User, Password string
	// VMPort is the TCP port on 127.0.0.1 where ipmi_sim waits for QEMU's
	// ipmi-bmc-extern.
	VMPort int
}

// LANAddr is the address and UDP port of the BMC's LAN channel.
func (b *BMC) LANAddr() string {
	return net.JoinHostPort(b.LANAddress, strconv.Itoa(b.LANPort))
}

// SubnetMask is the mask the BMC reports for LANAddress: /8 on loopback,
// /24 on any other IPv4 address.
func (b *BMC) SubnetMask() string {
	a, err := netip.ParseAddr(b.LANAddress)
	if err != nil || !a.Is4() {
		return "0.0.0.0"
	}
	if a.IsLoopback() {
		return "255.0.0.0"
	}
	return "255.255.255.0"
}

// DefaultMachine is the machine of the fixtures and the end-to-end tests:
// values chosen so every field the inventory reports can be told apart.
func DefaultMachine(firmware Firmware) Machine {
	return Machine{
		Name:     "ironic-agent-vm",
		Firmware: firmware,
		CPUs:     2,
		MemoryMB: 1024,
		CPUModel: "Lab Virtual CPU 9000 @ 2.00GHz",
		SMBIOS: SMBIOS{
			BIOSVendor: "LabBIOS Inc.", BIOSVersion: "LAB.1.2.3", BIOSDate: "01/02/2024", BIOSRelease: "1.2",
			SystemManufacturer: "Lab Systems", SystemProduct: "LabServer 9000", SystemVersion: "rev-A",
			SystemSerial: "SYS-SERIAL-0001", UUID: "4c616273-0000-4000-8000-000000000001",
			SKU: "LAB-SKU-1", Family: "LabFamily",
			BoardManufacturer: "Lab Boards", BoardProduct: "LabBoard X1", BoardVersion: "1.0",
			BoardSerial: "BOARD-SERIAL-0001", BoardAsset: "BOARD-ASSET-1",
			ChassisManufacturer: "Lab Chassis Co", ChassisVersion: "C1", ChassisSerial: "CHASSIS-SERIAL-0001",
			ChassisAsset: "CHASSIS-ASSET-1", OEM: "lab-oem-string-1",
		},
		Disks: []Disk{
			{ID: "vblk", Kind: DiskVirtioBlk, SizeMB: 64, Serial: "LAB-VBLK-0001"},
			{ID: "scsi0", Kind: DiskSCSI, SizeMB: 128, Serial: "LAB-SCSI-0001", WWN: "0x5000c500a1b2c3d4",
				Vendor: "LABVEND", Model: "LAB-SCSI-HDD", SCSITarget: 3, SCSILun: 0, RotationRate: 7200},
			{ID: "scsi1", Kind: DiskSCSI, SizeMB: 96, Serial: "LAB-SCSI-0002", WWN: "0x5002538e00000a01",
				Vendor: "LABVEND", Model: "LAB-SCSI-SSD", SCSITarget: 4, SCSILun: 2, RotationRate: 1},
			{ID: "nvme", Kind: DiskNVMe, SizeMB: 160, Serial: "LAB-NVME-0001"},
			{ID: "sata0", Kind: DiskSATA, SizeMB: 192, Serial: "LAB-SATA-0001", WWN: "0x5000cca000000b01",
				Model: "LAB SATA HDD", AHCIPort: 2, RotationRate: 5400},
			{ID: "sata1", Kind: DiskSATA, SizeMB: 224, Serial: "LAB-SATA-0002", WWN: "0x5001b44000000b02",
				Model: "LAB SATA SSD", AHCIPort: 3, RotationRate: 1},
		},
		NICs: []NIC{
			{Model: "virtio-net-pci", MAC: "52:54:00:12:34:01", Backend: NICUser},
			{Model: "e1000", MAC: "52:54:00:12:34:02", Backend: NICIsolated},
		},
	}
}

// AgentMachine is DefaultMachine as e2e/vm boots it for an agent under
// Ironic: its NICs take macs (the node's ports), and scsi1 grows to 5 GiB
// because at start the agent waits (IPA: up to 10 x 3 s) for a disk of at
// least 4 GiB, the smallest root disk it accepts without hints. A server
// has one; the file is sparse, it costs nothing.
func AgentMachine(firmware Firmware, macs [2]string) Machine {
	m := DefaultMachine(firmware)
	m.NICs[0].MAC, m.NICs[1].MAC = macs[0], macs[1]
	for i := range m.Disks {
		if m.Disks[i].ID == "scsi1" {
			m.Disks[i].SizeMB = 5 << 10
		}
	}
	return m
}

// SideBySideMachine is the machine e2e/vm's TestVMIPASideBySide boots IPA
// 13 and our agent on, and fixtures/qemu-ipa13-bios and -uefi record: AgentMachine
// with MACs 52:54:00:1b:NN:01 and :02 (NN 00 under SeaBIOS, 01 under OVMF)
// and 2 GiB, since IPA's ramdisk unpacks a whole Debian root filesystem
// into RAM and both agents get the same machine.
func SideBySideMachine(firmware Firmware) Machine {
	n := 0
	if firmware == UEFI {
		n = 1
	}
	m := AgentMachine(firmware, [2]string{fmt.Sprintf("52:54:00:1b:%02x:01", n), fmt.Sprintf("52:54:00:1b:%02x:02", n)})
	m.MemoryMB = 2048
	return m
}

// ServerMachine is DefaultMachine shaped like a server: its disks behind
// QEMU's emulations of real controllers (LSI MegaRAID SAS 2108, LSI SAS
// 1068, VMware PVSCSI, USB sticks on xHCI and EHCI, IDE on PIIX3, and
// NVMe), NICs of real models (Intel 82574 e1000e, VMware vmxnet3, virtio,
// and a BMC's USB network adapter), a USB keyboard and a BMC on SSIF. The
// first NIC is the virtio one on slirp, for guestfwd. Every disk has a
// serial, vendor and model; the SCSI and IDE ones a WWN.
func ServerMachine(firmware Firmware) Machine {
	m := DefaultMachine(firmware)
	m.Name = "ironic-agent-server"
	m.MemoryMB = 1536
	m.Disks = []Disk{
		{ID: "megaraid", Kind: DiskMegaRAID, SizeMB: 96, Serial: "LAB-MR-0001", WWN: "0x5000c500b1000001",
			Vendor: "LABRAID", Model: "LAB-MR-VD0", SCSITarget: 0, RotationRate: 7200},
		{ID: "mptsas", Kind: DiskMPTSAS, SizeMB: 80, Serial: "LAB-SAS-0001", WWN: "0x5000c500b2000001",
			Vendor: "LABSAS", Model: "LAB-SAS-HDD", SCSITarget: 1, RotationRate: 10000},
		{ID: "pvscsi", Kind: DiskPVSCSI, SizeMB: 72, Serial: "LAB-PV-0001", WWN: "0x6000c29000000001",
			Vendor: "VMware", Model: "Virtual disk", SCSITarget: 2, RotationRate: 1},
		{ID: "usbx", Kind: DiskUSB, SizeMB: 40, Serial: "LAB-USBX-0001", Vendor: "LabUSB", Model: "Stick 3.0"},
		{ID: "usbe", Kind: DiskUSBEHCI, SizeMB: 48, Serial: "LAB-USBE-0001", Vendor: "LabUSB", Model: "Stick 2.0"},
		{ID: "piix", Kind: DiskPIIX, SizeMB: 56, Serial: "LAB-IDE-0001", WWN: "0x5000cca0c0000001",
			Model: "LAB IDE HDD", IDEPort: 0, RotationRate: 5400},
		{ID: "nvme", Kind: DiskNVMe, SizeMB: 64, Serial: "LAB-NVME-0101"},
	}
	m.NICs = []NIC{
		{Model: "virtio-net-pci", MAC: "52:54:00:5e:00:01", Backend: NICUser},
		{Model: "e1000e", MAC: "52:54:00:5e:00:02", Backend: NICIsolated},
		{Model: "vmxnet3", MAC: "52:54:00:5e:00:03", Backend: NICIsolated},
		{Model: NICUSB, MAC: "52:54:00:5e:00:04", Backend: NICIsolated},
	}
	m.USBKeyboard = true
	m.BMC = &BMC{SSIF: true, MfgID: 674, ProductID: 0x0100}
	return m
}

// PlacedNIC is a NIC where the fields of NIC cannot put it: QEMU's
// devices down to it (PCIe root ports, bridges), the last of them the NIC
// with its options (an ACPI index, a function of a multi-function card).
type PlacedNIC struct {
	MAC     string
	Devices []string
}

// AddPlacedNICs adds nics to m.ExtraArgs, each on a slirp of its own with
// nothing reachable, 10.0.<firstNet+i>.0/24. Their PCI addresses must stay
// clear of the slots the harness hands out from 0x03 on.
func (m *Machine) AddPlacedNICs(nics []PlacedNIC, firstNet int) {
	for i, p := range nics {
		id := fmt.Sprintf("placed%d", firstNet+i)
		last := len(p.Devices) - 1
		for j, d := range p.Devices {
			if j == last {
				d += fmt.Sprintf(",netdev=%s,mac=%s,romfile=", id, p.MAC)
			}
			m.ExtraArgs = append(m.ExtraArgs, "-device", d)
		}
		m.ExtraArgs = append(m.ExtraArgs, "-netdev", fmt.Sprintf("user,id=%s,restrict=on,ipv6=off,net=10.0.%d.0/24", id, firstNet+i))
	}
}

// OVMF firmware files of Debian's ovmf package.
const (
	OVMFCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	OVMFVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
	// Secure Boot: the firmware built with it (and SMM), and variables
	// with Microsoft's keys enrolled (PK and KEK of Microsoft's, db with
	// the Windows and the UEFI CAs), as a server shipped with Secure Boot
	// on has them.
	OVMFSecureBootCode = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
	OVMFSecureBootVars = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"
)

// AAVMF firmware files of Debian's qemu-efi-aarch64 package: OVMF for
// arm64, each a 64 MiB flash image.
const (
	AAVMFCode = "/usr/share/AAVMF/AAVMF_CODE.fd"
	AAVMFVars = "/usr/share/AAVMF/AAVMF_VARS.fd"
)

// Arm64Machine is DefaultMachine as an arm64 server: QEMU's virt machine
// under AAVMF with a Cortex-A57 (lscpu's name for its MIDR, 0x411fd070),
// the same SMBIOS identities, disks and NICs; the SATA disks are on an
// AHCI controller of their own on the PCI bus, since virt has none built
// in.
func Arm64Machine() Machine {
	m := DefaultMachine(UEFI)
	m.Name = "ironic-agent-arm64"
	m.Arch = Arm64
	m.CPUModel = "cortex-a57"
	return m
}

// Binary is the QEMU program of the machine's architecture.
func (m *Machine) Binary() string {
	if m.Arch == Arm64 {
		return "qemu-system-aarch64"
	}
	return "qemu-system-x86_64"
}

// firmwareFiles are the UEFI code and the NVRAM template of the
// machine's architecture, with Secure Boot enforced when m.SecureBoot.
func (m *Machine) firmwareFiles() (code, vars string) {
	if m.Arch == Arm64 {
		return AAVMFCode, AAVMFVars
	}
	if m.SecureBoot {
		return OVMFSecureBootCode, OVMFSecureBootVars
	}
	return OVMFCode, OVMFVars
}

// VarsPath is the machine's own UEFI NVRAM, copied from the firmware's
// template on its first boot.
func (m *Machine) VarsPath() string { return filepath.Join(m.Dir, "ovmf_vars.fd") }

// kernelArgs are KernelArgs of the machine's architecture.
func (m *Machine) kernelArgs() string {
	if m.Arch == Arm64 {
		return KernelArgsArm64
	}
	return KernelArgs
}

// checkArch refuses what the machine's architecture has no bus for.
func (m *Machine) checkArch() error {
	switch m.Arch {
	case "":
		return nil
	case Arm64:
	default:
		return fmt.Errorf("qemu: machine architecture %q: want \"\" (amd64) or %s", m.Arch, Arm64)
	}
	if m.Firmware != UEFI {
		return fmt.Errorf("qemu: an %s machine boots AAVMF (firmware %s), not %s", m.Arch, UEFI, m.Firmware)
	}
	if m.BMC != nil {
		return fmt.Errorf("qemu: an %s machine has no ISA or SMBus for a BMC", m.Arch)
	}
	if m.SecureBoot {
		return fmt.Errorf("qemu: an %s machine has no Secure Boot firmware here (AAVMF with enrolled keys)", m.Arch)
	}
	for _, d := range m.Disks {
		if d.Kind == DiskPIIX {
			return fmt.Errorf("qemu: disk %s: the %s virt machine has no legacy IDE controller for a %s", d.ID, m.Arch, d.Kind)
		}
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// qemuEscape doubles commas: QEMU's option syntax uses them as separators.
func qemuEscape(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// DiskPath is the host file backing disk id.
func (m *Machine) DiskPath(id string) string { return filepath.Join(m.Dir, id+".img") }

// CreateDisks makes the sparse backing files (zero-filled) that do not
// exist yet.
func (m *Machine) CreateDisks() error {
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		return fmt.Errorf("qemu: %w", err)
	}
	for _, d := range m.Disks {
		p := m.DiskPath(d.ID)
		if _, err := os.Stat(p); err == nil {
			continue
		}
		f, err := os.Create(p)
		if err != nil {
			return fmt.Errorf("qemu: %w", err)
		}
		err = f.Truncate(int64(d.SizeMB) << 20)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("qemu: %w", err)
		}
	}
	return nil
}

// shutdownTraceEvent is QEMU's trace event of a shutdown request, which
// its log trace backend (Debian's build) prints as shutdownTrace and the
// request's ShutdownCause number.
const (
	shutdownTraceEvent = "qemu_system_shutdown_request"
	shutdownTrace      = shutdownTraceEvent + " reason="
)

// Args is the QEMU command line (without the program name). relay is the
// guestfwd helper command, tapFD the file descriptor number of the tap for
// a NICTap NIC.
func (m *Machine) Args(relay func(target string) string, tapFD int) ([]string, error) {
	if m.Firmware != BIOS && m.Firmware != UEFI {
		return nil, fmt.Errorf("qemu: firmware %q: want %s or %s", m.Firmware, BIOS, UEFI)
	}
	// thread=single: one host thread runs every vCPU. With a thread per
	// vCPU (QEMU's default), a kernel's live patching of its own code
	// (text_poke_bp's int3, static keys) can race another vCPU on a busy
	// host: trixie's 6.12 kernel died early in boot with "Oops: int3" in
	// sched_clock_cpu. The host's cores are shared by the suite anyway.
	if err := m.checkArch(); err != nil {
		return nil, err
	}
	machine, cpu := "q35", "qemu64,model-id="+qemuEscape(m.CPUModel)
	if m.Arch == Arm64 {
		machine, cpu = "virt", m.CPUModel
	}
	if m.SecureBoot {
		if m.Firmware != UEFI {
			return nil, fmt.Errorf("qemu: Secure Boot needs firmware %s, not %s", UEFI, m.Firmware)
		}
		machine += ",smm=on"
	}
	a := []string{
		"-name", m.Name, "-machine", machine, "-accel", "tcg,thread=single",
		"-cpu", cpu,
		"-smp", strconv.Itoa(m.CPUs), "-m", strconv.Itoa(m.MemoryMB) + "M",
		"-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
		"-serial", "stdio", "-monitor", monitor(m.Monitor),
		// A line on the console (QEMU's stderr) for every shutdown
		// request, the guest's power-off among them; a guest's reset,
		// an exit under -no-reboot too, makes none (VM.GuestReset).
		"-trace", shutdownTraceEvent,
	}
	a = append(a, m.smbiosArgs()...)
	// Fixed PCI slots keep the by-path names the same on every run: each
	// device or controller takes the next slot in the order of the
	// machine's fields, so the same Machine always gets the same slots.
	slots := &pciSlots{next: 3}
	ctrl := &controllers{slots: slots, made: map[string]bool{}}
	a = append(a, m.bootArgs(ctrl)...)
	disks, err := m.diskArgs(slots, ctrl)
	if err != nil {
		return nil, err
	}
	a = append(a, disks...)
	// An entropy source: qemu64 has no RDRAND, and without one the guest's
	// crypto/rand (DHCP transaction IDs, TLS keys) blocks for minutes.
	a = append(a, "-device", "virtio-rng-pci,addr="+slots.take())
	nics, err := m.nicArgs(slots, ctrl, relay, tapFD)
	if err != nil {
		return nil, err
	}
	a = append(a, nics...)
	if m.USBKeyboard {
		a = append(a, ctrl.need(xhci)...)
		a = append(a, "-device", "usb-kbd,id=kbd0,bus="+xhci.id+".0")
	}
	if m.USBStick != "" {
		// After the NICs: the other devices keep their PCI slots.
		a = append(a, ctrl.need(xhci)...)
		a = append(a, "-drive", "file="+qemuEscape(m.USBStick)+",if=none,id=usbstick,format=raw,readonly=on",
			"-device", "usb-storage,bus="+xhci.id+".0,drive=usbstick,removable=on")
	}
	bmc, err := m.bmcArgs()
	if err != nil {
		return nil, err
	}
	a = append(a, bmc...)
	if m.HTTPBoot {
		if !m.NetBoot || m.Firmware != UEFI {
			return nil, fmt.Errorf("qemu: HTTPBoot is a network boot under %s (NetBoot %v, firmware %s)", UEFI, m.NetBoot, m.Firmware)
		}
		a = append(a, "-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=n",
			"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n")
	}
	a = append(a, m.ExtraArgs...)
	if m.Firmware == UEFI {
		code, _ := m.firmwareFiles()
		if m.SecureBoot {
			// Only SMM code may write the variables' flash.
			a = append(a, "-global", "driver=cfi.pflash01,property=secure,value=on")
		}
		a = append(a,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+code,
			"-drive", "if=pflash,format=raw,unit=1,file="+qemuEscape(m.VarsPath()))
	}
	return a, nil
}

// pciSlots hands out the PCI slots of the root bus in order.
type pciSlots struct{ next int }

func (p *pciSlots) take() string {
	s := fmt.Sprintf("0x%02x", p.next)
	p.next++
	return s
}

// controller is a PCI host adapter several devices share.
type controller struct {
	id, device string // the bus is id.0
}

// The shared controllers.
var (
	xhci    = controller{"xhci", "qemu-xhci"}
	ehci    = controller{"ehci", "ich9-usb-ehci1"}
	megasas = controller{"megasas0", "megasas-gen2"}
	mptsas  = controller{"mptsas0", "mptsas1068"}
	pvscsi  = controller{"pvscsi0", "pvscsi"}
	piix    = controller{"piix", "piix3-ide"}
	// An AHCI controller on a PCI slot, for the SATA disks of a machine
	// without q35's built-in one (the arm64 virt machine).
	pciAHCI  = controller{"ahci", "ich9-ahci"}
	virtscsi = controller{"scsi0", "virtio-scsi-pci"}
)

// controllers makes each shared controller once, on the next free slot,
// when the first device on it asks for it.
type controllers struct {
	slots *pciSlots
	made  map[string]bool
}

// need is the -device of c the first time, nothing later.
func (cs *controllers) need(c controller) []string {
	if cs.made[c.id] {
		return nil
	}
	cs.made[c.id] = true
	return []string{"-device", fmt.Sprintf("%s,id=%s,addr=%s", c.device, c.id, cs.slots.take())}
}

// smbiosArgs are the SMBIOS tables 0 to 3 and 11 of m.SMBIOS.
func (m *Machine) smbiosArgs() []string {
	s := m.SMBIOS
	return []string{
		"-smbios", fmt.Sprintf("type=0,vendor=%s,version=%s,date=%s,release=%s,uefi=%s",
			qemuEscape(s.BIOSVendor), qemuEscape(s.BIOSVersion), qemuEscape(s.BIOSDate), s.BIOSRelease, onOff(m.Firmware == UEFI)),
		"-smbios", fmt.Sprintf("type=1,manufacturer=%s,product=%s,version=%s,serial=%s,uuid=%s,sku=%s,family=%s",
			qemuEscape(s.SystemManufacturer), qemuEscape(s.SystemProduct), qemuEscape(s.SystemVersion),
			qemuEscape(s.SystemSerial), s.UUID, qemuEscape(s.SKU), qemuEscape(s.Family)),
		"-smbios", fmt.Sprintf("type=2,manufacturer=%s,product=%s,version=%s,serial=%s,asset=%s",
			qemuEscape(s.BoardManufacturer), qemuEscape(s.BoardProduct), qemuEscape(s.BoardVersion),
			qemuEscape(s.BoardSerial), qemuEscape(s.BoardAsset)),
		"-smbios", fmt.Sprintf("type=3,manufacturer=%s,version=%s,serial=%s,asset=%s",
			qemuEscape(s.ChassisManufacturer), qemuEscape(s.ChassisVersion), qemuEscape(s.ChassisSerial), qemuEscape(s.ChassisAsset)),
		"-smbios", "type=11,value=" + qemuEscape(s.OEM),
	}
}

// bootArgs boot the CD image, or the kernel and initramfs, or nothing
// (the firmware boots from the disks or the network).
func (m *Machine) bootArgs(ctrl *controllers) []string {
	if m.ISO != "" {
		drive := []string{"-drive", "file=" + qemuEscape(m.ISO) + ",if=none,id=cd,media=cdrom,readonly=on"}
		if m.ISOOnUSB {
			// usb-storage makes a scsi-cd of a cdrom drive.
			a := append(ctrl.need(xhci), drive...)
			return append(a, "-device", "usb-storage,id=usbcd,bus="+xhci.id+".0,drive=cd,bootindex=0")
		}
		if m.Arch == Arm64 {
			// No IDE bus on virt: a CD on the virtio SCSI controller.
			a := append(ctrl.need(virtscsi), drive...)
			return append(a, "-device", "scsi-cd,bus="+virtscsi.id+".0,drive=cd,bootindex=0")
		}
		return append(drive, "-device", "ide-cd,bus=ide.0,drive=cd,bootindex=0")
	}
	if m.Kernel == "" {
		return nil
	}
	return []string{"-kernel", m.Kernel, "-initrd", m.Initrd, "-append", m.kernelArgs() + " " + m.Append}
}

// diskArgs are the drives and devices of m.Disks, with each controller
// before its first disk.
func (m *Machine) diskArgs(slots *pciSlots, ctrl *controllers) ([]string, error) {
	var a []string
	for _, d := range m.Disks {
		drive := fmt.Sprintf("file=%s,if=none,id=d-%s,format=raw,cache=unsafe", qemuEscape(m.DiskPath(d.ID)), d.ID)
		boot := ""
		if d.BootFirst {
			boot = ",bootindex=1"
		}
		switch d.Kind {
		case DiskVirtioBlk:
			a = append(a, "-drive", drive, "-device", fmt.Sprintf("virtio-blk-pci,addr=%s,drive=d-%s,serial=%s%s", slots.take(), d.ID, qemuEscape(d.Serial), boot))
		case DiskSCSI:
			a = append(a, ctrl.need(virtscsi)...)
			a = append(a, m.scsiArgs(d, drive, boot)...)
		case DiskMegaRAID, DiskMPTSAS, DiskPVSCSI:
			c := map[DiskKind]controller{DiskMegaRAID: megasas, DiskMPTSAS: mptsas, DiskPVSCSI: pvscsi}[d.Kind]
			a = append(a, ctrl.need(c)...)
			a = append(a, "-drive", drive, "-device", scsiDeviceOn(c.id+".0", d, d.SCSITarget, "d-"+d.ID, boot))
		case DiskUSB, DiskUSBEHCI:
			c := xhci
			if d.Kind == DiskUSBEHCI {
				c = ehci
			}
			// usb-bot, not usb-storage: a bulk-only device with a scsi-hd
			// of its own, so the stick has a vendor, product and serial as
			// real ones do (usb-storage's inner disk is QEMU HARDDISK).
			a = append(a, ctrl.need(c)...)
			a = append(a, "-drive", drive,
				"-device", fmt.Sprintf("usb-bot,id=bot-%s,bus=%s.0,serial=%s", d.ID, c.id, qemuEscape(d.Serial)),
				"-device", scsiDeviceOn("bot-"+d.ID+".0", d, 0, "d-"+d.ID, boot))
		case DiskPIIX:
			a = append(a, ctrl.need(piix)...)
			a = append(a, "-drive", drive, "-device", fmt.Sprintf(
				"ide-hd,bus=%s.%d,unit=%d,drive=d-%s,model=%s,serial=%s,wwn=%s,rotation_rate=%d%s",
				piix.id, d.IDEPort/2, d.IDEPort%2, d.ID, qemuEscape(d.Model), qemuEscape(d.Serial), d.WWN, d.RotationRate, boot))
		case DiskNVMe:
			a = append(a, "-drive", drive,
				"-device", fmt.Sprintf("nvme,id=nvme-%s,addr=%s,serial=%s%s", d.ID, slots.take(), qemuEscape(d.Serial), boot),
				"-device", fmt.Sprintf("nvme-ns,bus=nvme-%s,drive=d-%s,nsid=1", d.ID, d.ID))
		case DiskSATA:
			bus := "ide"
			if m.Arch == Arm64 {
				a = append(a, ctrl.need(pciAHCI)...)
				bus = pciAHCI.id
			}
			a = append(a, "-drive", drive, "-device", fmt.Sprintf(
				"ide-hd,bus=%s.%d,drive=d-%s,model=%s,serial=%s,wwn=%s,rotation_rate=%d%s",
				bus, d.AHCIPort, d.ID, qemuEscape(d.Model), qemuEscape(d.Serial), d.WWN, d.RotationRate, boot))
		default:
			return nil, fmt.Errorf("qemu: disk %s: unknown kind %q", d.ID, d.Kind)
		}
	}
	return a, nil
}

// scsiArgs are the drive and device of scsi-hd d, or of each of its paths.
func (m *Machine) scsiArgs(d Disk, drive, boot string) []string {
	if d.Paths <= 1 {
		return []string{"-drive", drive, "-device", scsiDevice(d, d.SCSITarget, "d-"+d.ID, boot)}
	}
	var a []string
	for i := range d.Paths {
		id := fmt.Sprintf("d-%s-%d", d.ID, i)
		// Only the first path is the boot disk.
		first := boot
		if i > 0 {
			first = ""
		}
		a = append(a, "-drive", m.pathDrive(d, id), "-device", m.pathDevice(d, i, id, first))
	}
	return a
}

// nicArgs are the netdevs and devices of m.NICs. NICs with their own file
// get the descriptors after Options.Tap's (tapFD), in order (VM.Start
// passes them so).
func (m *Machine) nicArgs(slots *pciSlots, ctrl *controllers, relay func(target string) string, tapFD int) ([]string, error) {
	var a []string
	ownFD := 3
	if tapFD >= 0 {
		ownFD = tapFD + 1
	}
	for i, n := range m.NICs {
		fd := tapFD
		if n.File != nil {
			fd, ownFD = ownFD, ownFD+1
		}
		nd, err := m.netdev(i, n, relay, fd)
		if err != nil {
			return nil, err
		}
		// romfile= (none): no iPXE option ROM, so the firmware does not try
		// to network-boot and prints less. A PXE card under SeaBIOS, which
		// has no network stack, keeps QEMU's default ROM (iPXE); OVMF has
		// its own virtio-net driver and PXE client, which fetch the boot
		// loader DHCP names over TFTP as a server's NIC firmware would.
		// bootindex puts the card before the disks.
		rom := ",romfile="
		if n.PXE {
			if m.Firmware == BIOS {
				rom = ""
			}
			if m.NetBoot {
				rom += fmt.Sprintf(",bootindex=%d", i)
			}
		}
		if n.Model == NICUSB {
			// A USB device: a port on the bus, no PCI slot, no option ROM.
			if n.PXE {
				return nil, fmt.Errorf("qemu: NIC %s: a %s cannot network-boot", n.MAC, NICUSB)
			}
			a = append(a, ctrl.need(xhci)...)
			a = append(a, "-netdev", nd, "-device", fmt.Sprintf("%s,bus=%s.0,netdev=n%d,mac=%s", n.Model, xhci.id, i, n.MAC))
			continue
		}
		a = append(a, "-netdev", nd, "-device", fmt.Sprintf("%s,addr=%s,netdev=n%d,mac=%s%s", n.Model, slots.take(), i, n.MAC, rom))
	}
	return a, nil
}

// netdev is the -netdev of NIC i, n, whose file (NICTap, NICStream) is
// descriptor fd.
func (m *Machine) netdev(i int, n NIC, relay func(target string) string, fd int) (string, error) {
	switch n.Backend {
	case NICUser:
		nd := fmt.Sprintf("user,id=n%d,restrict=on,ipv6=off,net=10.0.2.0/24", i)
		if m.TFTPRoot != "" {
			nd += ",tftp=" + qemuEscape(m.TFTPRoot) + ",bootfile=" + qemuEscape(m.TFTPBootFile)
		}
		for _, g := range slices.Sorted(maps.Keys(m.GuestFwd)) {
			nd += ",guestfwd=tcp:" + g + "-cmd:" + qemuEscape(relay(m.GuestFwd[g]))
		}
		for _, hp := range slices.Sorted(maps.Keys(m.HostFwd)) {
			nd += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-:%d", hp, m.HostFwd[hp])
		}
		return nd, nil
	case NICIsolated:
		return fmt.Sprintf("user,id=n%d,restrict=on,ipv6=off,net=10.0.%d.0/24", i, 3+i), nil
	case NICTap:
		if fd < 0 {
			return "", fmt.Errorf("qemu: NIC %s wants a tap but there is none", n.MAC)
		}
		return fmt.Sprintf("tap,id=n%d,fd=%d", i, fd), nil
	case NICStream:
		// The same file is a connected stream socket instead: QEMU
		// sends and takes each frame after its 4-byte length.
		if fd < 0 {
			return "", fmt.Errorf("qemu: NIC %s wants a stream socket but there is none", n.MAC)
		}
		return fmt.Sprintf("socket,id=n%d,fd=%d", i, fd), nil
	}
	return "", fmt.Errorf("qemu: NIC %s: unknown backend %q", n.MAC, n.Backend)
}

// bmcArgs are the BMC's devices. ISA, not PCI: no slot is taken, so the
// by-path names and PCI addresses stay those of the machine without a
// BMC.
func (m *Machine) bmcArgs() ([]string, error) {
	if m.BMC == nil {
		return nil, nil
	}
	var a []string
	switch m.BMC.Kind {
	case BMCQEMU:
		a = []string{"-device", fmt.Sprintf("ipmi-bmc-sim,id=bmc0,mfg_id=%d,product_id=%d", m.BMC.MfgID, m.BMC.ProductID)}
	case BMCOpenIPMI:
		// QEMU's VM protocol to ipmi_sim; reconnect: ipmi_sim may take
		// the connection after QEMU has started.
		a = []string{"-chardev", fmt.Sprintf("socket,id=ipmi0,host=127.0.0.1,port=%d,reconnect=1", m.BMC.VMPort),
			"-device", "ipmi-bmc-extern,id=bmc0,chardev=ipmi0"}
	default:
		return nil, fmt.Errorf("qemu: BMC kind %q: want \"\" (QEMU's) or %s", m.BMC.Kind, BMCOpenIPMI)
	}
	if m.BMC.SSIF {
		// On q35's ICH9 SMBus, the only I2C bus; QEMU describes it in
		// the ACPI tables under the SMBus controller.
		return append(a, "-device", "smbus-ipmi,bmc=bmc0,address=0x10"), nil
	}
	return append(a, "-device", "isa-ipmi-kcs,bmc=bmc0"), nil
}

// scsiDevice is the scsi-hd device of d on the virtio-scsi bus at SCSI
// target on the drive (its -drive id), with boot (",bootindex=1" or "").
func scsiDevice(d Disk, target int, drive, boot string) string {
	return scsiDeviceOn(virtscsi.id+".0", d, target, drive, boot)
}

// scsiDeviceOn is scsiDevice on another SCSI bus. A disk without a WWN
// gets none (QEMU's wwn=0 would be reported as one).
func scsiDeviceOn(bus string, d Disk, target int, drive, boot string) string {
	wwn := ""
	if d.WWN != "" {
		wwn = ",wwn=" + d.WWN
	}
	return fmt.Sprintf("scsi-hd,bus=%s,channel=0,scsi-id=%d,lun=%d,drive=%s,serial=%s%s,vendor=%s,product=%s,rotation_rate=%d%s",
		bus, target, d.SCSILun, drive, qemuEscape(d.Serial), wwn, qemuEscape(d.Vendor), qemuEscape(d.Model), d.RotationRate, boot)
}

// pathDrive is the -drive of one path of a multipath disk: the disk's
// file, opened once per path, without QEMU's image locking (every path
// writes the same file).
func (m *Machine) pathDrive(d Disk, id string) string {
	return fmt.Sprintf("file=%s,if=none,id=%s,format=raw,cache=unsafe,file.locking=off", qemuEscape(m.DiskPath(d.ID)), id)
}

// pathDevice is the scsi-hd of path i of a multipath disk, on the drive
// id, with the device id VM.UnplugPath names (pathDeviceID).
func (m *Machine) pathDevice(d Disk, i int, drive, boot string) string {
	return scsiDevice(d, d.SCSITarget+i, drive, boot) + ",share-rw=on,id=" + pathDeviceID(d.ID, i)
}

func pathDeviceID(disk string, i int) string { return fmt.Sprintf("p-%s-%d", disk, i) }

func monitor(path string) string {
	if path == "" {
		return "none"
	}
	return "unix:" + qemuEscape(path) + ",server=on,wait=off"
}
