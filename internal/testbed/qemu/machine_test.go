package qemu

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestArgs(t *testing.T) {
	m := DefaultMachine("uefi")
	m.Dir = "/work/vm"
	m.Kernel, m.Initrd = "/k", "/i"
	m.Append = "ipa-api-url=http://10.0.2.100:6385"
	m.GuestFwd = map[string]string{"10.0.2.100:6385": "127.0.0.1:9510", "10.0.2.100:5050": "127.0.0.1:9511"}
	m.HostFwd = map[int]int{9520: 9999}
	m.SMBIOS.SystemProduct = "Server, Model 1"
	m.NICs[1].Backend = NICTap
	a, err := m.Args(func(target string) string { return "/bin/relay " + target }, 3)
	if err != nil {
		t.Fatal(err)
	}
	cl := strings.Join(a, " ")
	for _, want := range []string{
		"-machine q35 -accel tcg,thread=single",
		"-cpu qemu64,model-id=Lab Virtual CPU 9000 @ 2.00GHz",
		"type=1,manufacturer=Lab Systems,product=Server,, Model 1,version=rev-A,serial=SYS-SERIAL-0001",
		"uefi=on",
		"virtio-blk-pci,addr=0x03,drive=d-vblk,serial=LAB-VBLK-0001",
		"virtio-scsi-pci,id=scsi0,addr=0x04",
		"scsi-hd,bus=scsi0.0,channel=0,scsi-id=4,lun=2,drive=d-scsi1,serial=LAB-SCSI-0002,wwn=0x5002538e00000a01",
		"nvme,id=nvme-nvme,addr=0x05,serial=LAB-NVME-0001",
		"ide-hd,bus=ide.3,drive=d-sata1,model=LAB SATA SSD,serial=LAB-SATA-0002,wwn=0x5001b44000000b02,rotation_rate=1",
		"file=/work/vm/scsi0.img,if=none,id=d-scsi0,format=raw,cache=unsafe",
		"virtio-rng-pci,addr=0x06",
		"guestfwd=tcp:10.0.2.100:5050-cmd:/bin/relay 127.0.0.1:9511,guestfwd=tcp:10.0.2.100:6385-cmd:/bin/relay 127.0.0.1:9510,hostfwd=tcp:127.0.0.1:9520-:9999",
		"virtio-net-pci,addr=0x07,netdev=n0,mac=52:54:00:12:34:01,romfile=",
		"tap,id=n1,fd=3 -device e1000,addr=0x08,netdev=n1,mac=52:54:00:12:34:02,romfile=",
		"if=pflash,format=raw,unit=0,readonly=on,file=" + OVMFCode,
		"console=ttyS0,115200 panic=-1 loglevel=4 cryptomgr.notests no_timer_check ipa-api-url=http://10.0.2.100:6385",
	} {
		if !strings.Contains(cl, want) {
			t.Errorf("command line lacks %q:\n%s", want, cl)
		}
	}
	m.NICs[1].Backend = NICTap
	if _, err := m.Args(RelayCommand, -1); err == nil {
		t.Error("fd NIC without a tap accepted")
	}
	m.Firmware = "coreboot"
	if _, err := m.Args(RelayCommand, 3); err == nil {
		t.Error("unknown firmware accepted")
	}
}

// TestArgsNetBoot: a PXE NIC keeps QEMU's iPXE ROM and, on a network
// boot, comes first in the boot order; the machine gets no kernel.
func TestArgsNetBoot(t *testing.T) {
	m := DefaultMachine("bios")
	m.Dir = "/work/vm"
	m.NICs[0].Backend, m.NICs[0].PXE = "fd", true
	for _, tc := range []struct {
		netBoot bool
		want    string
	}{
		{false, "virtio-net-pci,addr=0x07,netdev=n0,mac=52:54:00:12:34:01 "},
		{true, "virtio-net-pci,addr=0x07,netdev=n0,mac=52:54:00:12:34:01,bootindex=0 "},
	} {
		m.NetBoot = tc.netBoot
		a, err := m.Args(RelayCommand, 3)
		if err != nil {
			t.Fatal(err)
		}
		cl := strings.Join(a, " ") + " "
		if !strings.Contains(cl, tc.want) || !strings.Contains(cl, "e1000,addr=0x08,netdev=n1,mac=52:54:00:12:34:02,romfile=") || strings.Contains(cl, "-kernel") {
			t.Errorf("NetBoot %v: want %q, the other NIC without a ROM and no kernel:\n%s", tc.netBoot, tc.want, cl)
		}
	}
}

// TestArgsHTTPBoot: an HTTP network boot switches the UEFI firmware's
// PXE clients off; outside a UEFI network boot it is refused.
func TestArgsHTTPBoot(t *testing.T) {
	m := DefaultMachine("uefi")
	m.Dir = "/work/vm"
	m.NICs[0].Backend, m.NICs[0].PXE = "fd", true
	m.NetBoot, m.HTTPBoot = true, true
	a, err := m.Args(RelayCommand, 3)
	if err != nil {
		t.Fatal(err)
	}
	cl := strings.Join(a, " ") + " "
	for _, want := range []string{"-fw_cfg name=opt/org.tianocore/IPv4PXESupport,string=n ", "-fw_cfg name=opt/org.tianocore/IPv6PXESupport,string=n ", ",bootindex=0 "} {
		if !strings.Contains(cl, want) {
			t.Errorf("HTTPBoot: want %q:\n%s", want, cl)
		}
	}
	m.HTTPBoot = false
	if a, _ := m.Args(RelayCommand, 3); strings.Contains(strings.Join(a, " "), "PXESupport") {
		t.Errorf("a PXE boot switches PXE off: %s", strings.Join(a, " "))
	}
	for _, tc := range []struct {
		fw      Firmware
		netBoot bool
	}{{BIOS, true}, {UEFI, false}} {
		m := DefaultMachine(tc.fw)
		m.Dir = "/work/vm"
		m.NetBoot, m.HTTPBoot = tc.netBoot, true
		if _, err := m.Args(RelayCommand, 3); err == nil {
			t.Errorf("HTTPBoot under %s with NetBoot %v accepted", tc.fw, tc.netBoot)
		}
	}
}

func TestCreateDisks(t *testing.T) {
	m := DefaultMachine("bios")
	m.Dir = t.TempDir()
	if err := m.CreateDisks(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(m.DiskPath("nvme"))
	if err != nil || st.Size() != 160<<20 {
		t.Fatalf("nvme.img: %v %v", st, err)
	}
}

func TestExtractTarGz(t *testing.T) {
	mk := func(entries ...tar.Header) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		tw := tar.NewWriter(zw)
		for _, h := range entries {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeReg {
				h.Size = int64(len(h.Name))
			}
			if err := tw.WriteHeader(&h); err != nil {
				t.Fatal(err)
			}
			if h.Typeflag == tar.TypeReg {
				tw.Write([]byte(h.Name))
			}
		}
		tw.Close()
		zw.Close()
		return b.Bytes()
	}
	dir := t.TempDir()
	err := ExtractTarGz(bytes.NewReader(mk(
		tar.Header{Name: "root/sys", Typeflag: tar.TypeDir},
		tar.Header{Name: "root/sys/block/vda/size", Typeflag: tar.TypeReg},
		tar.Header{Name: "root/sys/class/block/vda", Typeflag: tar.TypeSymlink, Linkname: "../../block/vda"},
	)), dir)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "root/sys/block/vda/size")); err != nil || string(b) != "root/sys/block/vda/size" {
		t.Errorf("file: %q %v", b, err)
	}
	if l, err := os.Readlink(filepath.Join(dir, "root/sys/class/block/vda")); err != nil || l != "../../block/vda" {
		t.Errorf("link: %q %v", l, err)
	}
	for _, bad := range [][]byte{
		mk(tar.Header{Name: "../escape", Typeflag: tar.TypeReg}),
		mk(tar.Header{Name: "/abs", Typeflag: tar.TypeReg}),
		mk(tar.Header{Name: "dev/sda", Typeflag: tar.TypeBlock}),
		[]byte("not gzip"),
	} {
		if err := ExtractTarGz(bytes.NewReader(bad), t.TempDir()); err == nil {
			t.Errorf("accepted a bad archive")
		}
	}
}

// A scsi-hd with two paths: one image, two drives without locking, two
// SCSI devices at consecutive targets with the same serial and WWN and
// shared write access.
func TestArgsMultipath(t *testing.T) {
	m := DefaultMachine("bios")
	m.Dir = "/work/vm"
	m.NICs = nil
	m.Disks = []Disk{{ID: "lun", Kind: DiskSCSI, SizeMB: 64, Serial: "LAB-MP-0001", WWN: "0x5000c500a1b2c3e5",
		Vendor: "LABVEND", Model: "LAB-MPATH", SCSITarget: 1, Paths: 2, RotationRate: 1}}
	a, err := m.Args(RelayCommand, -1)
	if err != nil {
		t.Fatal(err)
	}
	cl := strings.Join(a, " ")
	for i, target := range []string{"1", "2"} {
		id := "d-lun-" + strconv.Itoa(i)
		for _, want := range []string{
			"-drive file=/work/vm/lun.img,if=none,id=" + id + ",format=raw,cache=unsafe,file.locking=off",
			"-device scsi-hd,bus=scsi0.0,channel=0,scsi-id=" + target + ",lun=0,drive=" + id +
				",serial=LAB-MP-0001,wwn=0x5000c500a1b2c3e5,vendor=LABVEND,product=LAB-MPATH,rotation_rate=1,share-rw=on",
		} {
			if !strings.Contains(cl, want) {
				t.Errorf("command line lacks %q:\n%s", want, cl)
			}
		}
	}
	if strings.Count(cl, "lun.img") != 2 {
		t.Errorf("the image is not opened exactly twice:\n%s", cl)
	}
}

// TestArgsUSBStick: the stick is a read-only removable usb-storage on an
// xHCI controller in the slot after the NICs, which keep theirs.
func TestArgsUSBStick(t *testing.T) {
	m := DefaultMachine("bios")
	m.Dir = "/work/vm"
	m.NICs[0].Backend = NICTap
	m.USBStick = "/work/vm/bmc/image.img"
	a, err := m.Args(RelayCommand, 3)
	if err != nil {
		t.Fatal(err)
	}
	cl := strings.Join(a, " ") + " "
	for _, want := range []string{"virtio-net-pci,addr=0x07,", "e1000,addr=0x08,", "-device qemu-xhci,id=xhci,addr=0x09 ",
		"-drive file=/work/vm/bmc/image.img,if=none,id=usbstick,format=raw,readonly=on -device usb-storage,bus=xhci.0,drive=usbstick,removable=on "} {
		if !strings.Contains(cl, want) {
			t.Errorf("lacks %q:\n%s", want, cl)
		}
	}
}

// TestArgsServer: each controller of the server-shaped machine comes once,
// on its own slot, before its first device; USB devices take a port on the
// bus instead of a slot; the BMC sits on SMBus.
func TestArgsServer(t *testing.T) {
	m := ServerMachine(BIOS)
	m.Dir = "/work/vm"
	m.ISO, m.ISOOnUSB = "/work/agent.iso", true
	a, err := m.Args(RelayCommand, -1)
	if err != nil {
		t.Fatal(err)
	}
	cl := strings.Join(a, " ")
	for _, want := range []string{
		"qemu-xhci,id=xhci,addr=0x03 -drive file=/work/agent.iso,if=none,id=cd,media=cdrom,readonly=on -device usb-storage,id=usbcd,bus=xhci.0,drive=cd,bootindex=0",
		"megasas-gen2,id=megasas0,addr=0x04",
		"scsi-hd,bus=megasas0.0,channel=0,scsi-id=0,lun=0,drive=d-megaraid,serial=LAB-MR-0001,wwn=0x5000c500b1000001,vendor=LABRAID,product=LAB-MR-VD0,rotation_rate=7200",
		"mptsas1068,id=mptsas0,addr=0x05",
		"scsi-hd,bus=mptsas0.0,channel=0,scsi-id=1,",
		"pvscsi,id=pvscsi0,addr=0x06",
		"usb-bot,id=bot-usbx,bus=xhci.0,serial=LAB-USBX-0001 -device scsi-hd,bus=bot-usbx.0,channel=0,scsi-id=0,lun=0,drive=d-usbx,serial=LAB-USBX-0001,vendor=LabUSB,product=Stick 3.0,",
		"ich9-usb-ehci1,id=ehci,addr=0x07",
		"usb-bot,id=bot-usbe,bus=ehci.0,",
		"piix3-ide,id=piix,addr=0x08",
		"ide-hd,bus=piix.0,unit=0,drive=d-piix,model=LAB IDE HDD,serial=LAB-IDE-0001,wwn=0x5000cca0c0000001,rotation_rate=5400",
		"nvme,id=nvme-nvme,addr=0x09,",
		"virtio-rng-pci,addr=0x0a",
		"virtio-net-pci,addr=0x0b,netdev=n0,mac=52:54:00:5e:00:01,romfile=",
		"e1000e,addr=0x0c,netdev=n1,",
		"vmxnet3,addr=0x0d,netdev=n2,",
		"usb-net,bus=xhci.0,netdev=n3,mac=52:54:00:5e:00:04",
		"usb-kbd,id=kbd0,bus=xhci.0",
		"ipmi-bmc-sim,id=bmc0,mfg_id=674,product_id=256 -device smbus-ipmi,bmc=bmc0,address=0x10",
	} {
		if !strings.Contains(cl, want) {
			t.Errorf("command line lacks %q:\n%s", want, cl)
		}
	}
	for _, once := range []string{"qemu-xhci", "ich9-usb-ehci1", "megasas-gen2,", "isa-ipmi-kcs"} {
		if n := strings.Count(cl, once); n != map[string]int{"isa-ipmi-kcs": 0}[once]+map[bool]int{true: 1}[once != "isa-ipmi-kcs"] {
			t.Errorf("%s %d times:\n%s", once, n, cl)
		}
	}
	if strings.Contains(cl, "wwn=,") || strings.Contains(cl, "wwn= ") {
		t.Errorf("an empty wwn= on the command line:\n%s", cl)
	}
	m.NICs[3].PXE = true
	if _, err := m.Args(RelayCommand, -1); err == nil {
		t.Error("a PXE usb-net accepted")
	}
}

// TestArgsArm64: the arm64 machine is QEMU's virt with the Cortex-A57,
// AAVMF's code and its own NVRAM, the PL011 console on the kernel's
// command line, SATA on a PCI AHCI; what virt has no bus for is refused.
func TestArgsArm64(t *testing.T) {
	m := Arm64Machine()
	m.Dir = "/work/vm"
	m.Kernel, m.Initrd = "/k", "/i"
	if m.Binary() != "qemu-system-aarch64" {
		t.Errorf("binary %s", m.Binary())
	}
	a, err := m.Args(RelayCommand, -1)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(a, " ")
	for _, want := range []string{"-machine virt ", "-cpu cortex-a57 ", "file=" + AAVMFCode, "file=/work/vm/ovmf_vars.fd",
		"-append " + KernelArgsArm64 + " ", "virtio-blk-pci,", "virtio-scsi-pci,", "nvme,", "type=1,manufacturer=Lab Systems"} {
		if !strings.Contains(line, want) {
			t.Errorf("args lack %q:\n%s", want, line)
		}
	}
	if !strings.Contains(line, "ich9-ahci,id=ahci,") || !strings.Contains(line, "ide-hd,bus=ahci.2,") {
		t.Errorf("SATA disks not on the PCI AHCI controller:\n%s", line)
	}
	if strings.Contains(line, "bus=ide.") || strings.Contains(line, "console=ttyS0") {
		t.Errorf("x86 parts in the arm64 machine:\n%s", line)
	}
	for what, bad := range map[string]func(*Machine){
		"boots AAVMF":         func(m *Machine) { m.Firmware = BIOS },
		"no ISA or SMBus":     func(m *Machine) { m.BMC = &BMC{SSIF: true} },
		"no legacy IDE":       func(m *Machine) { m.Disks = append(m.Disks, Disk{ID: "s", Kind: DiskPIIX}) },
		`architecture "mips"`: func(m *Machine) { m.Arch = "mips" },
	} {
		b := Arm64Machine()
		bad(&b)
		if _, err := b.Args(RelayCommand, -1); err == nil || !strings.Contains(err.Error(), what) {
			t.Errorf("%s: %v", what, err)
		}
	}
}

// TestAddPlacedNICs: each placed NIC's devices come in order, the last
// one the NIC on a slirp of its own.
func TestAddPlacedNICs(t *testing.T) {
	var m Machine
	m.AddPlacedNICs([]PlacedNIC{
		{MAC: "52:54:00:aa:00:01", Devices: []string{"e1000e,addr=0x10,acpi-index=1"}},
		{MAC: "52:54:00:aa:00:02", Devices: []string{"pcie-root-port,id=rp1,bus=pcie.0,addr=0x11,chassis=1,slot=5", "vmxnet3,bus=rp1"}},
	}, 30)
	want := []string{
		"-device", "e1000e,addr=0x10,acpi-index=1,netdev=placed30,mac=52:54:00:aa:00:01,romfile=",
		"-netdev", "user,id=placed30,restrict=on,ipv6=off,net=10.0.30.0/24",
		"-device", "pcie-root-port,id=rp1,bus=pcie.0,addr=0x11,chassis=1,slot=5",
		"-device", "vmxnet3,bus=rp1,netdev=placed31,mac=52:54:00:aa:00:02,romfile=",
		"-netdev", "user,id=placed31,restrict=on,ipv6=off,net=10.0.31.0/24",
	}
	if !slices.Equal(m.ExtraArgs, want) {
		t.Errorf("ExtraArgs:\n%q\nwant\n%q", m.ExtraArgs, want)
	}
}
