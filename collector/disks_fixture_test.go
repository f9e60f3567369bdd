package collector

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/ironic-go/ironic-agent/collector/internal/udev"
	"github.com/ironic-go/ironic-agent/collector/internal/vpdtest"
	"github.com/ironic-go/ironic-agent/inventory"
)

var updateDiskFixtures = flag.Bool("update-disks", false, "rewrite collector/testdata/disks/* from the tree descriptions in disks_fixture_test.go")

// Hand-made machine trees for the disk collector, built from the layouts
// the lab recorded (QEMU q35 under Linux 6.1) and from the kernel's SAS, FC,
// md and device-mapper layouts. Each tree carries udev data and by-path
// links as bookworm's udev writes them, so the same tree tests both routes:
// with udev data, and (Options.IgnoreUdev) from sysfs alone.
//
// The trees are committed under testdata/disks/<name>/ so `ironic-agent
// inventory --root collector/testdata/disks/<name>` works on them;
// TestDiskFixtureTreesUpToDate keeps them identical to these descriptions
// (regenerate with go test ./collector -run TestDiskFixtureTreesUpToDate -update-disks).
var diskFixtures = []struct {
	name  string
	build func() *fsTree
	want  []inventory.Disk
}{
	{"qemu", qemuTree, qemuWant()},
	{"server", serverTree, serverWant()},
}

// qemuTree is the lab VM (BIOS run): virtio-blk, two scsi-hd on
// virtio-scsi, NVMe with native multipath, two SATA disks on AHCI, plus the
// devices IPA skips (empty loop, loop with a file, zram, CD-ROM, floppy).
func qemuTree() *fsTree {
	tr := newTree()
	pci := "sys/devices/pci0000:00"
	tr.dir(pci)

	// virtio-blk at 00:03.0
	vblkPCI := tr.device(pci+"/0000:00:03.0", "sys/bus/pci")
	virtio1 := tr.device(vblkPCI+"/virtio1", "sys/bus/virtio")
	tr.attr(virtio1+"/vendor", "0x1af4")
	tr.attr(virtio1+"/device", "0x0002")
	vda := tr.block(virtio1+"/block/vda", virtio1, blockSpec{devno: "254:0", bytes: 64 * mib, rotational: 1})
	tr.attr(vda+"/serial", "LAB-VBLK-0001")
	tr.udev("254:0", "vda",
		"S:disk/by-path/virtio-pci-0000:00:03.0",
		"S:disk/by-id/virtio-LAB-VBLK-0001",
		"S:disk/by-path/pci-0000:00:03.0",
		"W:2", "I:5120331",
		"E:ID_SERIAL=LAB-VBLK-0001",
		"E:ID_PATH=pci-0000:00:03.0",
		"E:ID_PATH_TAG=pci-0000_00_03_0",
		"G:systemd", "Q:systemd", "V:1")

	// virtio-scsi at 00:04.0: host0, disks at 0:0:3:0 and 0:0:4:2
	vscsiPCI := tr.device(pci+"/0000:00:04.0", "sys/bus/pci")
	virtio2 := tr.device(vscsiPCI+"/virtio2", "sys/bus/virtio")
	tr.attr(virtio2+"/vendor", "0x1af4")
	host0 := tr.scsiHost(virtio2, 0, "virtio_scsi")
	sda := tr.scsiDevice(host0, scsiSpec{hctl: "0:0:3:0", vendor: "LABVEND", model: "LAB-SCSI-HDD", rev: "2.5+",
		vpd80: vpdtest.Page(0x80, []byte("LAB-SCSI-0001")),
		vpd83: vpd83(asciiDesig(0x00, "LAB-SCSI-0001"), naaDesig("5000c500a1b2c3d4")),
		wwid:  "naa.5000c500a1b2c3d4"})
	tr.block(sda+"/block/sda", sda, blockSpec{devno: "8:0", bytes: 128 * mib, rotational: 1})
	tr.udev("8:0", "sda",
		"S:disk/by-id/scsi-35000c500a1b2c3d4",
		"S:disk/by-path/pci-0000:00:04.0-scsi-0:0:3:0",
		"S:disk/by-id/wwn-0x5000c500a1b2c3d4",
		"E:ID_SCSI=1", "E:ID_VENDOR=LABVEND", `E:ID_VENDOR_ENC=LABVEND\x20`,
		"E:ID_MODEL=LAB-SCSI-HDD", `E:ID_MODEL_ENC=LAB-SCSI-HDD\x20\x20\x20\x20`,
		"E:ID_REVISION=2.5+", "E:ID_TYPE=disk",
		"E:ID_SERIAL=35000c500a1b2c3d4", "E:ID_SERIAL_SHORT=5000c500a1b2c3d4",
		"E:ID_WWN=0x5000c500a1b2c3d4", "E:ID_WWN_WITH_EXTENSION=0x5000c500a1b2c3d4",
		"E:ID_SCSI_SERIAL=LAB-SCSI-0001", "E:ID_BUS=scsi",
		"E:ID_PATH=pci-0000:00:04.0-scsi-0:0:3:0", "E:ID_PATH_TAG=pci-0000_00_04_0-scsi-0_0_3_0")
	sdb := tr.scsiDevice(host0, scsiSpec{hctl: "0:0:4:2", vendor: "LABVEND", model: "LAB-SCSI-SSD", rev: "2.5+",
		vpd80: vpdtest.Page(0x80, []byte("LAB-SCSI-0002")),
		vpd83: vpd83(asciiDesig(0x00, "LAB-SCSI-0002"), naaDesig("5002538e00000a01")),
		wwid:  "naa.5002538e00000a01"})
	tr.block(sdb+"/block/sdb", sdb, blockSpec{devno: "8:16", bytes: 96 * mib, rotational: 0})
	tr.udev("8:16", "sdb",
		"S:disk/by-path/pci-0000:00:04.0-scsi-0:0:4:2",
		"E:ID_SCSI=1", "E:ID_VENDOR=LABVEND",
		"E:ID_MODEL=LAB-SCSI-SSD", `E:ID_MODEL_ENC=LAB-SCSI-SSD\x20\x20\x20\x20`,
		"E:ID_SERIAL=35002538e00000a01", "E:ID_SERIAL_SHORT=5002538e00000a01",
		"E:ID_WWN=0x5002538e00000a01", "E:ID_WWN_WITH_EXTENSION=0x5002538e00000a01",
		"E:ID_SCSI_SERIAL=LAB-SCSI-0002", "E:ID_BUS=scsi",
		"E:ID_PATH=pci-0000:00:04.0-scsi-0:0:4:2")

	// NVMe at 00:05.0 with native multipath: the disk hangs off the
	// virtual nvme-subsystem, the controller off PCI; the per-path node
	// nvme0c0n1 is hidden.
	nvmePCI := tr.device(pci+"/0000:00:05.0", "sys/bus/pci")
	nvme0 := tr.device(nvmePCI+"/nvme/nvme0", "sys/class/nvme")
	tr.attr(nvme0+"/serial", "LAB-NVME-0001")
	tr.attr(nvme0+"/model", "QEMU NVMe Ctrl")
	tr.attr(nvme0+"/firmware_rev", "7.2.22")
	tr.link("sys/class/nvme/nvme0", nvme0)
	subsys := tr.device("sys/devices/virtual/nvme-subsystem/nvme-subsys0", "sys/class/nvme-subsystem")
	tr.attr(subsys+"/serial", "LAB-NVME-0001")
	tr.attr(subsys+"/model", "QEMU NVMe Ctrl")
	tr.attr(subsys+"/firmware_rev", "7.2.22")
	nvmeWWID := "nvme.1b36-4c41422d4e564d452d30303031-51454d55204e564d65204374726c-00000001"
	ns := tr.block(subsys+"/nvme0n1", subsys, blockSpec{devno: "259:0", bytes: 160 * mib, rotational: 0})
	tr.attr(ns+"/wwid", nvmeWWID)
	tr.attr(ns+"/nsid", 1)
	hidden := tr.block(nvme0+"/nvme0c0n1", nvme0, blockSpec{devno: "259:1", bytes: 160 * mib})
	tr.attr(hidden+"/hidden", 1)
	tr.udev("259:0", "nvme0n1",
		"S:disk/by-id/nvme-"+nvmeWWID,
		"S:disk/by-path/pci-0000:00:05.0-nvme-1",
		"E:ID_SERIAL_SHORT=LAB-NVME-0001", "E:ID_WWN="+nvmeWWID,
		"E:ID_MODEL=QEMU NVMe Ctrl", "E:ID_REVISION=7.2.22", "E:ID_NSID=1",
		"E:ID_SERIAL=QEMU_NVMe_Ctrl_LAB-NVME-0001_1",
		"E:ID_PATH=pci-0000:00:05.0-nvme-1", "E:ID_PATH_TAG=pci-0000_00_05_0-nvme-1")

	// AHCI at 00:1f.2: ports 1-6 are ata1..ata6 / host1..host6 (virtio_scsi
	// took host0); the disks sit on ports 3 and 4.
	ahci := tr.device(pci+"/0000:00:1f.2", "sys/bus/pci")
	sata := []struct {
		port               int
		dev, model, serial string
		wwn                uint64
		bytes              int64
		rotational         int
		devno              string
	}{
		{3, "sdc", "LAB SATA HDD", "LAB-SATA-0001", 0x5000cca000000b01, 192 * mib, 1, "8:32"},
		{4, "sdd", "LAB SATA SSD", "LAB-SATA-0002", 0x5001b44000000b02, 224 * mib, 0, "8:48"},
	}
	for i := 1; i <= 6; i++ {
		ata := tr.device(ahci+"/ata"+itoa(i), "")
		port := tr.device(ata+"/ata_port/ata"+itoa(i), "sys/class/ata_port")
		tr.attr(port+"/port_no", i)
		tr.link("sys/class/ata_port/ata"+itoa(i), port)
		tr.scsiHost(ata, i, "ahci")
	}
	for _, s := range sata {
		ata := ahci + "/ata" + itoa(s.port)
		host := ata + "/host" + itoa(s.port)
		wwn := fmt.Sprintf("%016x", s.wwn)
		t10 := "ATA     " + vpdtest.Pad(s.model, 40) + vpdtest.Pad(s.serial, 20)
		d := tr.scsiDevice(host, scsiSpec{hctl: itoa(s.port) + ":0:0:0", vendor: "ATA", model: s.model, rev: "2.5+",
			vpd80: vpdtest.Page(0x80, []byte(vpdtest.Pad(s.serial, 20))),
			vpd83: vpd83(asciiDesig(0x01, t10), naaDesig(wwn)),
			vpd89: vpdtest.IdentifyPage(s.model, s.serial, s.wwn),
			wwid:  "naa." + wwn})
		disk := tr.block(d+"/block/"+s.dev, d, blockSpec{devno: s.devno, bytes: s.bytes, rotational: s.rotational})
		// One partition each: partitions have no queue/ of their own.
		part := disk + "/" + s.dev + "1"
		tr.device(part, "sys/class/block")
		partDevno := s.devno[:len(s.devno)-1] + itoa(int(s.devno[len(s.devno)-1]-'0')+1)
		tr.attr(part+"/dev", partDevno)
		tr.link("sys/dev/block/"+partDevno, part)
		tr.attr(part+"/partition", 1)
		tr.attr(part+"/start", 2048)
		tr.attr(part+"/size", (s.bytes-2*mib)/512)
		tr.link("sys/class/block/"+s.dev+"1", part)
		cleanModel := udev.ReplaceWhitespace(s.model)
		tr.udev(s.devno, s.dev,
			"S:disk/by-path/pci-0000:00:1f.2-ata-"+itoa(s.port)+".0",
			"S:disk/by-id/ata-"+cleanModel+"_"+s.serial,
			"S:disk/by-path/pci-0000:00:1f.2-ata-"+itoa(s.port),
			"S:disk/by-id/wwn-0x"+wwn,
			"E:ID_ATA=1", "E:ID_TYPE=disk", "E:ID_BUS=ata",
			"E:ID_MODEL="+cleanModel, "E:ID_MODEL_ENC="+udev.Encode(vpdtest.Pad(s.model, 40)),
			"E:ID_REVISION=2.5+",
			"E:ID_SERIAL="+cleanModel+"_"+s.serial, "E:ID_SERIAL_SHORT="+s.serial,
			"E:ID_WWN=0x"+wwn, "E:ID_WWN_WITH_EXTENSION=0x"+wwn,
			"E:ID_PATH=pci-0000:00:1f.2-ata-"+itoa(s.port)+".0",
			"E:ID_PATH_ATA_COMPAT=pci-0000:00:1f.2-ata-"+itoa(s.port))
	}

	// Devices IPA skips.
	virt := "sys/devices/virtual/block"
	tr.block(virt+"/loop0", "", blockSpec{devno: "7:0", bytes: 0})
	tr.block(virt+"/loop1", "", blockSpec{devno: "7:1", bytes: 10 * mib})
	tr.block(virt+"/zram0", "", blockSpec{devno: "252:0", bytes: 256 * mib})
	tr.block(virt+"/ram0", "", blockSpec{devno: "1:0", bytes: 4 * mib})
	cd := tr.scsiDevice(ahci+"/ata1/host1", scsiSpec{hctl: "1:0:0:0", typ: 5, vendor: "QEMU", model: "QEMU DVD-ROM", rev: "2.5+"})
	tr.block(cd+"/block/sr0", cd, blockSpec{devno: "11:0", bytes: 1024 * mib, rotational: 1})
	fdc := tr.device("sys/devices/platform/floppy.0", "sys/bus/platform")
	tr.block(fdc+"/block/fd0", fdc, blockSpec{devno: "2:0", bytes: 1474560, rotational: 1})
	return tr
}

func itoa(i int) string { return strconv.Itoa(i) }

func sp(s string) *string { return &s }
func ip(i int) *int       { return &i }

func qemuWant() []inventory.Disk {
	sata := func(name, model, serial, wwn, hctl, port string, size int64, rota bool) inventory.Disk {
		return inventory.Disk{Name: name, Model: sp(model), Size: size, Rotational: rota,
			WWN: sp("0x" + wwn), Serial: sp(serial), Vendor: sp("ATA"), WWNWithExtension: sp("0x" + wwn),
			HCTL: sp(hctl), ByPath: sp("/dev/disk/by-path/pci-0000:00:1f.2-ata-" + port + ".0"),
			LogicalSectors: ip(512), PhysicalSectors: ip(512), Tran: sp("sata")}
	}
	return []inventory.Disk{
		{Name: "/dev/sda", Model: sp("LAB-SCSI-HDD"), Size: 128 * mib, Rotational: true,
			WWN: sp("0x5000c500a1b2c3d4"), Serial: sp("LAB-SCSI-0001"), Vendor: sp("LABVEND"),
			WWNWithExtension: sp("0x5000c500a1b2c3d4"), HCTL: sp("0:0:3:0"),
			ByPath:         sp("/dev/disk/by-path/pci-0000:00:04.0-scsi-0:0:3:0"),
			LogicalSectors: ip(512), PhysicalSectors: ip(512)},
		{Name: "/dev/sdb", Model: sp("LAB-SCSI-SSD"), Size: 96 * mib, Rotational: false,
			WWN: sp("0x5002538e00000a01"), Serial: sp("LAB-SCSI-0002"), Vendor: sp("LABVEND"),
			WWNWithExtension: sp("0x5002538e00000a01"), HCTL: sp("0:0:4:2"),
			ByPath:         sp("/dev/disk/by-path/pci-0000:00:04.0-scsi-0:0:4:2"),
			LogicalSectors: ip(512), PhysicalSectors: ip(512)},
		sata("/dev/sdc", "LAB SATA HDD", "LAB-SATA-0001", "5000cca000000b01", "3:0:0:0", "3", 192*mib, true),
		sata("/dev/sdd", "LAB SATA SSD", "LAB-SATA-0002", "5001b44000000b02", "4:0:0:0", "4", 224*mib, false),
		{Name: "/dev/vda", Size: 64 * mib, Rotational: true, Serial: sp("LAB-VBLK-0001"), Vendor: sp("0x1af4"),
			ByPath: sp("/dev/disk/by-path/pci-0000:00:03.0"), LogicalSectors: ip(512), PhysicalSectors: ip(512)},
		{Name: "/dev/nvme0n1", Model: sp("QEMU NVMe Ctrl"), Size: 160 * mib,
			WWN:    sp("nvme.1b36-4c41422d4e564d452d30303031-51454d55204e564d65204374726c-00000001"),
			Serial: sp("LAB-NVME-0001"), ByPath: sp("/dev/disk/by-path/pci-0000:00:05.0-nvme-1"),
			LogicalSectors: ip(512), PhysicalSectors: ip(512), Tran: sp("nvme")},
	}
}

// serverTree is a server shape: a SAS HBA with one disk on a direct phy
// (NAA IEEE Registered Extended WWN, so a vendor extension) and one behind
// an expander, an md RAID1 over both, an FC HBA with two paths to one LUN
// held by a dm-multipath map, an LVM volume on the RAID, a USB stick and a
// CD-ROM.
func serverTree() *fsTree {
	tr := newTree()
	pci := "sys/devices/pci0000:00"
	tr.dir(pci)
	bridge := tr.device(pci+"/0000:00:03.0", "sys/bus/pci")
	hba := tr.device(bridge+"/0000:02:00.0", "sys/bus/pci")
	host0 := tr.scsiHost(hba, 0, "mpt3sas")
	tr.device(host0+"/sas_host/host0", "sys/class/sas_host")
	tr.link("sys/class/sas_host/host0", host0+"/sas_host/host0")

	sasPort := func(p string, phys int) {
		tr.device(p, "")
		cls := tr.device(p+"/sas_port/"+filepath.Base(p), "sys/class/sas_port")
		tr.attr(cls+"/num_phys", phys)
	}
	sasDev := func(p, addr string, phy int) {
		tr.device(p, "")
		cls := tr.device(p+"/sas_device/"+filepath.Base(p), "sys/class/sas_device")
		tr.attr(cls+"/sas_address", addr)
		tr.attr(cls+"/phy_identifier", phy)
	}

	// sda: direct-attached on phy 0.
	port0 := host0 + "/port-0:0"
	sasPort(port0, 1)
	end0 := port0 + "/end_device-0:0"
	sasDev(end0, "0x5000c50012345601", 0)
	sda := tr.scsiDevice(end0, scsiSpec{hctl: "0:0:0:0", vendor: "SEAGATE", model: "ST1200MM0088", rev: "N004",
		vpd80: vpdtest.Page(0x80, []byte("SAS-SERIAL-0001")),
		vpd83: vpd83(
			[]byte{0x61, 0x93, 0x00, 0x08, 0x50, 0x00, 0xc5, 0x00, 0x12, 0x34, 0x56, 0x02}, // target port NAA (SAS)
			naaDesig("600a0b800012345600000000abcdef01"),
			asciiDesig(0x01, "SEAGATE ST1200MM0088    SAS-SERIAL-0001")),
		wwid: "naa.600a0b800012345600000000abcdef01"})
	sdaBlk := tr.block(sda+"/block/sda", sda, blockSpec{devno: "8:0", bytes: 1200 * 1000 * mib, rotational: 1, logical: 512, physical: 4096})
	tr.udev("8:0", "sda",
		"S:disk/by-path/pci-0000:02:00.0-sas-phy0-lun-0",
		"S:disk/by-id/wwn-0x600a0b800012345600000000abcdef01",
		"E:ID_SCSI=1", "E:ID_VENDOR=SEAGATE", "E:ID_MODEL=ST1200MM0088", `E:ID_MODEL_ENC=ST1200MM0088\x20\x20\x20\x20`,
		"E:ID_SERIAL=3600a0b800012345600000000abcdef01", "E:ID_SERIAL_SHORT=600a0b800012345600000000abcdef01",
		"E:ID_WWN=0x600a0b8000123456", "E:ID_WWN_VENDOR_EXTENSION=0x00000000abcdef01",
		"E:ID_WWN_WITH_EXTENSION=0x600a0b800012345600000000abcdef01",
		"E:ID_SCSI_SERIAL=SAS-SERIAL-0001", "E:ID_BUS=scsi",
		"E:ID_PATH=pci-0000:02:00.0-sas-phy0-lun-0")

	// sdb: behind an expander, on the expander's phy 4.
	port1 := host0 + "/port-0:1"
	sasPort(port1, 4)
	exp := port1 + "/expander-0:1"
	sasDev(exp, "0x500605b000000001", 0)
	port10 := exp + "/port-0:1:0"
	sasPort(port10, 1)
	end1 := port10 + "/end_device-0:1:0"
	sasDev(end1, "0x5000c50012345701", 4)
	sdb := tr.scsiDevice(end1, scsiSpec{hctl: "0:0:1:0", vendor: "SEAGATE", model: "ST1200MM0088", rev: "N004",
		vpd80: vpdtest.Page(0x80, []byte("SAS-SERIAL-0002")),
		vpd83: vpd83(naaDesig("5000c50012345703")),
		wwid:  "naa.5000c50012345703"})
	sdbBlk := tr.block(sdb+"/block/sdb", sdb, blockSpec{devno: "8:16", bytes: 1200 * 1000 * mib, rotational: 1, logical: 512, physical: 4096})
	tr.udev("8:16", "sdb",
		"S:disk/by-path/pci-0000:02:00.0-sas-exp0x500605b000000001-phy4-lun-0",
		"E:ID_SCSI=1", "E:ID_VENDOR=SEAGATE", "E:ID_MODEL=ST1200MM0088", `E:ID_MODEL_ENC=ST1200MM0088\x20\x20\x20\x20`,
		"E:ID_SERIAL=35000c50012345703", "E:ID_SERIAL_SHORT=5000c50012345703",
		"E:ID_WWN=0x5000c50012345703", "E:ID_WWN_WITH_EXTENSION=0x5000c50012345703",
		"E:ID_SCSI_SERIAL=SAS-SERIAL-0002", "E:ID_BUS=scsi",
		"E:ID_PATH=pci-0000:02:00.0-sas-exp0x500605b000000001-phy4-lun-0")

	// md0: RAID1 over sda and sdb; dm-1: an LVM volume on it.
	md0 := tr.block("sys/devices/virtual/block/md0", "", blockSpec{devno: "9:0", bytes: 1200*1000*mib - 128*mib, rotational: 1, logical: 512, physical: 4096})
	tr.attr(md0+"/md/level", "raid1")
	for _, s := range []string{sdaBlk, sdbBlk} {
		tr.link(md0+"/slaves/"+filepath.Base(s), s)
		tr.link(s+"/holders/md0", md0)
	}
	tr.udev("9:0", "md0", "E:MD_LEVEL=raid1", "E:MD_DEVICES=2", "E:MD_UUID=0c2b44d2:0d8d9a49:6b5e4f1a:9a6e2c11", "E:SYSTEMD_WANTS=mdmonitor.service")
	lv := tr.block("sys/devices/virtual/block/dm-1", "", blockSpec{devno: "253:1", bytes: 100 * 1000 * mib, rotational: 1})
	tr.attr(lv+"/dm/uuid", "LVM-k3Zr0cYq0mJ6Yb6V9N0mP6a1yX2n3bq1Wm0dQ7m8c9n4y5p0r1s2t3u4v5w6x7y8")
	tr.attr(lv+"/dm/name", "vg0-root")
	tr.link(lv+"/slaves/md0", md0)
	tr.link(md0+"/holders/dm-1", lv)

	// FC HBA with two paths (1:0:0:0 and 1:0:1:0) to one LUN, and the
	// multipath map dm-0 over them.
	fcHBA := tr.device(pci+"/0000:00:1c.0/0000:03:00.0", "sys/bus/pci")
	tr.device(pci+"/0000:00:1c.0", "sys/bus/pci")
	host1 := tr.scsiHost(fcHBA, 1, "qla2xxx")
	tr.device(host1+"/fc_host/host1", "sys/class/fc_host")
	tr.attr(host1+"/fc_host/host1/symbolic_name", "QLE2742 FW:v9.06.02 DVR:v10.02.07.900-k")
	tr.link("sys/class/fc_host/host1", host1+"/fc_host/host1")
	lunWWN := "600a0b800012345600000000abcde000"
	var paths []string
	for i, rport := range []string{"rport-1:0-0", "rport-1:0-1"} {
		rp := tr.device(host1+"/"+rport, "")
		hctl := "1:0:" + itoa(i) + ":0"
		d := tr.scsiDevice(rp, scsiSpec{hctl: hctl, vendor: "NETAPP", model: "INF-01-00", rev: "0880",
			vpd80: vpdtest.Page(0x80, []byte("SV12345678")),
			vpd83: vpd83(naaDesig(lunWWN)),
			wwid:  "naa." + lunWWN})
		tgt := filepath.Dir(d)
		cls := tr.device(tgt+"/fc_transport/"+filepath.Base(tgt), "sys/class/fc_transport")
		// Two remote ports (the array's two controllers), each with its
		// own WWPN.
		tr.attr(cls+"/port_name", []string{"0x20140080e5123456", "0x20150080e5123456"}[i])
		name := []string{"sdc", "sdd"}[i]
		paths = append(paths, tr.block(d+"/block/"+name, d, blockSpec{devno: "8:" + itoa(32+16*i), bytes: 500 * 1000 * mib}))
	}
	mp := tr.block("sys/devices/virtual/block/dm-0", "", blockSpec{devno: "253:0", bytes: 500 * 1000 * mib})
	tr.attr(mp+"/dm/uuid", "mpath-3"+lunWWN)
	tr.attr(mp+"/dm/name", "mpatha")
	for _, p := range paths {
		tr.link(mp+"/slaves/"+filepath.Base(p), p)
		tr.link(p+"/holders/dm-0", mp)
	}
	tr.udev("253:0", "dm-0",
		"S:disk/by-id/dm-name-mpatha", "S:disk/by-id/dm-uuid-mpath-3"+lunWWN,
		"S:disk/by-id/scsi-3"+lunWWN, "S:disk/by-id/wwn-0x"+lunWWN,
		"E:DM_UDEV_RULES_VSN=2", "E:DM_NAME=mpatha", "E:DM_UUID=mpath-3"+lunWWN, "E:DM_SUSPENDED=0",
		"E:MPATH_SBIN_PATH=/sbin", "E:DM_TYPE=scsi", "E:DM_WWN=0x"+lunWWN, "E:DM_SERIAL=3"+lunWWN)

	// USB stick on xHCI 00:14.0, port 1: usb_id names it (serial from the
	// USB descriptor, no WWN); no udev record, so both routes derive it.
	xhci := tr.device(pci+"/0000:00:14.0", "sys/bus/pci")
	usb2 := tr.device(xhci+"/usb2", "sys/bus/usb")
	usbDev := tr.device(usb2+"/2-1", "sys/bus/usb")
	tr.attr(usbDev+"/serial", "4C530001231120115142")
	usbIf := tr.device(usbDev+"/2-1:1.0", "sys/bus/usb")
	host6 := tr.scsiHost(usbIf, 6, "usb-storage")
	stick := tr.scsiDevice(host6, scsiSpec{hctl: "6:0:0:0", vendor: "SanDisk", model: "Cruzer Blade", rev: "1.00",
		vpd80: vpdtest.Page(0x80, []byte("4C530001231120115142")),
		vpd83: vpd83(asciiDesig(0x01, "SanDisk Cruzer Blade    4C530001231120115142"))})
	sde := tr.block(stick+"/block/sde", stick, blockSpec{devno: "8:64", bytes: 16 * 1000 * mib, rotational: 1})
	tr.attr(sde+"/removable", 1)
	tr.rawLink("dev/disk/by-path/pci-0000:00:14.0-usb-0:1:1.0-scsi-0:0:0:0", "../../sde")

	cd := tr.scsiDevice(host0, scsiSpec{hctl: "0:0:9:0", typ: 5, vendor: "HL-DT-ST", model: "DVDRAM GUD0N", rev: "1.00"})
	tr.block(cd+"/block/sr0", cd, blockSpec{devno: "11:0", bytes: 1024 * mib, rotational: 1})
	return tr
}

func serverWant() []inventory.Disk {
	return []inventory.Disk{
		{Name: "/dev/sda", Model: sp("ST1200MM0088"), Size: 1200 * 1000 * mib, Rotational: true,
			WWN: sp("0x600a0b800012345600000000abcdef01"), Serial: sp("SAS-SERIAL-0001"), Vendor: sp("SEAGATE"),
			WWNWithExtension: sp("0x600a0b800012345600000000abcdef01"), WWNVendorExtension: sp("0x00000000abcdef01"),
			HCTL: sp("0:0:0:0"), ByPath: sp("/dev/disk/by-path/pci-0000:02:00.0-sas-phy0-lun-0"),
			LogicalSectors: ip(512), PhysicalSectors: ip(4096), Tran: sp("sas")},
		{Name: "/dev/sdb", Model: sp("ST1200MM0088"), Size: 1200 * 1000 * mib, Rotational: true,
			WWN: sp("0x5000c50012345703"), Serial: sp("SAS-SERIAL-0002"), Vendor: sp("SEAGATE"),
			WWNWithExtension: sp("0x5000c50012345703"),
			HCTL:             sp("0:0:1:0"), ByPath: sp("/dev/disk/by-path/pci-0000:02:00.0-sas-exp0x500605b000000001-phy4-lun-0"),
			LogicalSectors: ip(512), PhysicalSectors: ip(4096), Tran: sp("sas")},
		{Name: "/dev/sde", Model: sp("Cruzer Blade"), Size: 16 * 1000 * mib, Rotational: true,
			Serial: sp("4C530001231120115142"), Vendor: sp("SanDisk"), HCTL: sp("6:0:0:0"),
			ByPath:         sp("/dev/disk/by-path/pci-0000:00:14.0-usb-0:1:1.0-scsi-0:0:0:0"),
			LogicalSectors: ip(512), PhysicalSectors: ip(512), Tran: sp("usb")},
		{Name: "/dev/md0", Size: 1200*1000*mib - 128*mib, Rotational: true, LogicalSectors: ip(512), PhysicalSectors: ip(4096)},
		{Name: "/dev/dm-0", Size: 500 * 1000 * mib, Serial: sp("3600a0b800012345600000000abcde000"),
			WWN: sp("0x600a0b800012345600000000abcde000"), LogicalSectors: ip(512), PhysicalSectors: ip(512)},
	}
}

func fixtureRoot(name string) string { return filepath.Join("testdata", "disks", name) }

// TestDisksFixtures checks every hand-made tree by both routes: udev data
// and by-path links, and sysfs alone.
func TestDisksFixtures(t *testing.T) {
	for _, fx := range diskFixtures {
		for _, ignoreUdev := range []bool{false, true} {
			name := fx.name + map[bool]string{false: "/udev", true: "/sysfs-only"}[ignoreUdev]
			t.Run(name, func(t *testing.T) {
				logger, records := newLogRecorder(t)
				got, err := Disks(context.Background(), Options{Root: fixtureRoot(fx.name), Logger: logger, IgnoreUdev: ignoreUdev})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, fx.want) {
					g, _ := json.MarshalIndent(got, "", " ")
					w, _ := json.MarshalIndent(fx.want, "", " ")
					t.Errorf("disks differ\ngot:  %s\nwant: %s", g, w)
				}
				if n := len(records()); n != 0 {
					t.Errorf("%d warnings on a well-formed tree", n)
				}
			})
		}
	}
}

// TestDiskFixtureTreesUpToDate keeps the committed trees identical to the
// descriptions above (-update-disks rewrites them).
func TestDiskFixtureTreesUpToDate(t *testing.T) {
	for _, fx := range diskFixtures {
		dir := fixtureRoot(fx.name)
		if *updateDiskFixtures {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if err := fx.build().write(dir); err != nil {
				t.Fatal(err)
			}
			continue
		}
		tmp := t.TempDir()
		if err := fx.build().write(tmp); err != nil {
			t.Fatal(err)
		}
		want, got := snapshotTree(t, tmp), snapshotTree(t, dir)
		for p, w := range want {
			if g, ok := got[p]; !ok || !bytes.Equal(g, w) {
				t.Errorf("%s/%s differs from its description; run go test ./collector -run TestDiskFixtureTreesUpToDate -update-disks", dir, p)
			}
		}
		for p := range got {
			if _, ok := want[p]; !ok {
				t.Errorf("%s/%s is not in the description", dir, p)
			}
		}
	}
}

// snapshotTree maps every file and link below dir to its content (links
// as "-> target").
func snapshotTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			tgt, err := os.Readlink(p)
			if err != nil {
				return err
			}
			m[rel] = []byte("-> " + tgt)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[rel] = b
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBlockDevicesFixtures: named devices bypass the listing rules and get
// the same record; partitions inherit their disk's identity as udev
// imports it, with the "-part<N>" by-path link.
func TestBlockDevicesFixtures(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		ds, err := BlockDevices(context.Background(), Options{Root: fixtureRoot("qemu"), IgnoreUdev: ignore, Logger: testLogger(t)},
			[]string{"/dev/sdc1", "/dev/loop1", "sr0", "/dev/nvme0n1"})
		if err != nil {
			t.Fatal(err)
		}
		want := []inventory.Disk{
			{Name: "/dev/sdc1", Size: 190 * mib, Rotational: true, WWN: sp("0x5000cca000000b01"), Serial: sp("LAB-SATA-0001"),
				WWNWithExtension: sp("0x5000cca000000b01"),
				ByPath:           sp("/dev/disk/by-path/pci-0000:00:1f.2-ata-3.0-part1"), LogicalSectors: ip(512), PhysicalSectors: ip(512)},
			{Name: "/dev/loop1", Size: 10 * mib, LogicalSectors: ip(512), PhysicalSectors: ip(512)},
			{Name: "/dev/sr0", Model: sp("QEMU DVD-ROM"), Size: 1024 * mib, Rotational: true, Vendor: sp("QEMU"), HCTL: sp("1:0:0:0"),
				ByPath: sp("/dev/disk/by-path/pci-0000:00:1f.2-ata-1.0"), LogicalSectors: ip(512), PhysicalSectors: ip(512), Tran: sp("sata")},
			qemuWant()[5],
		}
		if ignore {
			// No udev record for the CD-ROM: the udev route with a
			// by-path directory present finds no link for it.
		} else {
			want[0].ByPath = nil
			want[2].ByPath = nil
		}
		if !reflect.DeepEqual(ds, want) {
			g, _ := json.MarshalIndent(ds, "", " ")
			w, _ := json.MarshalIndent(want, "", " ")
			t.Errorf("IgnoreUdev=%v:\ngot:  %s\nwant: %s", ignore, g, w)
		}
	}
	// A persistent name resolves to the kernel name.
	ds, err := BlockDevices(context.Background(), Options{Root: fixtureRoot("qemu")}, []string{"/dev/disk/by-path/pci-0000:00:04.0-scsi-0:0:4:2"})
	if err != nil || len(ds) != 1 || ds[0].Name != "/dev/sdb" {
		t.Errorf("by-path name: %v, %v", ds, err)
	}
	if _, err := BlockDevices(context.Background(), Options{Root: fixtureRoot("qemu")}, []string{"/dev/disk/by-path/nonexistent"}); err == nil {
		t.Error("dangling by-path name accepted")
	}
	// A path of the multipath map, by name: Fibre Channel by_path and tran.
	ds, err = BlockDevices(context.Background(), Options{Root: fixtureRoot("server"), IgnoreUdev: true}, []string{"/dev/sdc"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strOrNull(ds[0].ByPath); got != `"/dev/disk/by-path/pci-0000:03:00.0-fc-0x20140080e5123456-lun-0"` {
		t.Errorf("FC by_path %s", got)
	}
	if got := strOrNull(ds[0].Tran); got != `"fc"` {
		t.Errorf("FC tran %s", got)
	}
	if got := strOrNull(ds[0].WWN); got != `"0x600a0b800012345600000000abcde000"` {
		t.Errorf("FC path wwn %s", got)
	}
}

// TestDisksRoutesAgreeOnFixtures: on every recorded machine tree that
// carries udev data, the udev route and the sysfs-only route give the same
// disks. It fails when no fixture has a udev record for a listed disk or
// /dev/disk/by-path links, so it cannot pass by comparing nothing.
func TestDisksRoutesAgreeOnFixtures(t *testing.T) {
	roots, err := filepath.Glob(filepath.Join("..", "fixtures", "*", "root"))
	if err != nil || len(roots) == 0 {
		t.Fatalf("no fixture trees in ../fixtures (%v)", err)
	}
	withRecords, withByPath, disksWithRecord := 0, 0, 0
	for _, root := range roots {
		a, err := Disks(context.Background(), Options{Root: root, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		b, err := Disks(context.Background(), Options{Root: root, IgnoreUdev: true, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, d := range b {
			devno, err := os.ReadFile(filepath.Join(root, "sys", "block", filepath.Base(d.Name), "dev"))
			if err != nil {
				if devno, err = os.ReadFile(filepath.Join(root, "sys", "class", "block", filepath.Base(d.Name), "dev")); err != nil {
					continue
				}
			}
			if _, err := os.Stat(filepath.Join(root, "run", "udev", "data", "b"+string(bytes.TrimSpace(devno)))); err == nil {
				n++
			}
		}
		if n == 0 {
			continue
		}
		withRecords++
		disksWithRecord += n
		if fi, err := os.Stat(filepath.Join(root, "dev", "disk", "by-path")); err == nil && fi.IsDir() {
			withByPath++
		}
		if !reflect.DeepEqual(a, b) {
			ja, _ := json.MarshalIndent(a, "", " ")
			jb, _ := json.MarshalIndent(b, "", " ")
			t.Errorf("%s: udev route and sysfs route differ\nudev:  %s\nsysfs: %s", root, ja, jb)
		}
		t.Logf("%s: %d of %d listed disks have a udev record; both routes agree", root, n, len(b))
	}
	if withRecords == 0 || withByPath == 0 {
		t.Fatalf("compared nothing: %d fixtures have udev records for listed disks, %d of them /dev/disk/by-path links; "+
			"the udev route is untested", withRecords, withByPath)
	}
	t.Logf("%d fixtures (%d disks) with udev data compared", withRecords, disksWithRecord)
}
