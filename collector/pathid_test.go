package collector

import (
	"testing"

	"github.com/ironic-go/ironic-agent/collector/internal/udev"
)

// TestPathID builds one small tree per transport and checks the ID_PATH
// systemd 252's path_id gives for it.
func TestPathID(t *testing.T) {
	pci := "sys/devices/pci0000:00"
	for _, c := range []struct {
		name   string
		build  func(tr *fsTree) string // returns the block device dir
		want   string
		compat string
	}{{
		name: "nvme without native multipath, behind a PCI bridge",
		build: func(tr *fsTree) string {
			tr.device(pci+"/0000:00:1c.4", "sys/bus/pci")
			ctrl := tr.device(pci+"/0000:00:1c.4/0000:3c:00.0", "sys/bus/pci") + "/nvme/nvme1"
			tr.device(ctrl, "sys/class/nvme")
			ns := tr.block(ctrl+"/nvme1n2", ctrl, blockSpec{devno: "259:3", bytes: mib})
			tr.attr(ns+"/nsid", 2)
			return ns
		},
		want: "pci-0000:3c:00.0-nvme-2",
	}, {
		name: "ATA behind a port multiplier (bus 2)",
		build: func(tr *fsTree) string {
			ahci := tr.device(pci+"/0000:00:17.0", "sys/bus/pci")
			ata := tr.device(ahci+"/ata5", "")
			port := tr.device(ata+"/ata_port/ata5", "sys/class/ata_port")
			tr.attr(port+"/port_no", 1)
			host := tr.scsiHost(ata, 4, "ahci")
			d := tr.scsiDevice(host, scsiSpec{hctl: "4:2:0:0", vendor: "ATA", model: "X"})
			return tr.block(d+"/block/sdf", d, blockSpec{devno: "8:80", bytes: mib})
		},
		want:   "pci-0000:00:17.0-ata-1.2.0",
		compat: "pci-0000:00:17.0-ata-1",
	}, {
		name: "second SCSI host of one HBA, LUN above 255",
		build: func(tr *fsTree) string {
			hba := tr.device(pci+"/0000:00:10.0", "sys/bus/pci")
			tr.scsiHost(hba, 7, "megaraid_sas")
			host := tr.scsiHost(hba, 8, "megaraid_sas")
			d := tr.scsiDevice(host, scsiSpec{hctl: "8:0:1:16384", model: "X"})
			return tr.block(d+"/block/sdg", d, blockSpec{devno: "8:96", bytes: mib})
		},
		want: "pci-0000:00:10.0-scsi-1:0:1:16384",
	}, {
		name: "iSCSI session",
		build: func(tr *fsTree) string {
			host := tr.scsiHost("sys/devices/platform/host9", 9, "iscsi_tcp")
			sess := tr.device(host+"/session3", "sys/bus/iscsi_flashnode")
			cls := tr.device(sess+"/iscsi_session/session3", "sys/class/iscsi_session")
			tr.attr(cls+"/targetname", "iqn.2003-01.org.example:disk1")
			conn := tr.device(sess+"/connection3:0/iscsi_connection/connection3:0", "sys/class/iscsi_connection")
			tr.attr(conn+"/persistent_address", "192.0.2.5")
			tr.attr(conn+"/persistent_port", 3260)
			d := tr.scsiDevice(sess, scsiSpec{hctl: "9:0:0:1", model: "X"})
			return tr.block(d+"/block/sdh", d, blockSpec{devno: "8:112", bytes: mib})
		},
		want: "ip-192.0.2.5:3260-iscsi-iqn.2003-01.org.example:disk1-lun-1",
	}, {
		name: "virtual device (md) has none",
		build: func(tr *fsTree) string {
			return tr.block("sys/devices/virtual/block/md1", "", blockSpec{devno: "9:1", bytes: mib})
		},
	}, {
		name: "unknown bus has none",
		build: func(tr *fsTree) string {
			return tr.block("sys/devices/vbd-51712/block/xvdz", "", blockSpec{devno: "202:0", bytes: mib})
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			tr := newTree()
			dev := c.build(tr)
			root := t.TempDir()
			if err := tr.write(root); err != nil {
				t.Fatal(err)
			}
			r := newSysReader(root, testLogger(t))
			got, ok := udev.PathID(udevSys{r}, dev)
			if c.want == "" {
				if ok {
					t.Errorf("got ID_PATH %q, want none", got.Path)
				}
				return
			}
			if !ok || got.Path != c.want || got.Compat != c.compat {
				t.Errorf("got %+v (ok %v), want %q compat %q", got, ok, c.want, c.compat)
			}
		})
	}
}
