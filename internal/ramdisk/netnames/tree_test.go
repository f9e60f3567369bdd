package netnames

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// tree builds a sysfs tree the way the kernel lays one out, enough for
// this package and for udevadm's sd-device: devices with uevent files and
// subsystem links, class/net links, PCI slots.
type tree struct {
	t    *testing.T
	root string
	next int // the next ifindex
}

func newTree(t *testing.T) *tree {
	t.Helper()
	tr := &tree{t: t, root: t.TempDir(), next: 2}
	for _, d := range []string{"bus/pci/devices", "bus/pci/slots", "bus/usb/devices", "bus/platform/devices", "bus/virtio/devices", "bus/xen/devices", "class/net", "devices/virtual/net"} {
		tr.mkdir(d)
	}
	return tr
}

func (tr *tree) mkdir(rel string) {
	if err := os.MkdirAll(filepath.Join(tr.root, rel), 0o755); err != nil {
		tr.t.Fatal(err)
	}
}

func (tr *tree) write(rel, content string) {
	tr.mkdir(path.Dir(rel))
	if err := os.WriteFile(filepath.Join(tr.root, rel), []byte(content), 0o644); err != nil {
		tr.t.Fatal(err)
	}
}

// link makes rel a symbolic link to target (both below the root), written
// relative as sysfs writes its links.
func (tr *tree) link(rel, target string) {
	tr.mkdir(path.Dir(rel))
	r, err := filepath.Rel(path.Dir(rel), target)
	if err != nil {
		tr.t.Fatal(err)
	}
	// A device made twice (a bridge two functions share) is made once.
	_ = os.Remove(filepath.Join(tr.root, rel))
	if err := os.Symlink(r, filepath.Join(tr.root, rel)); err != nil {
		tr.t.Fatal(err)
	}
}

// device makes a device directory in subsystem with a uevent file.
func (tr *tree) device(dev, subsystem string, uevent ...string) {
	tr.write(dev+"/uevent", strings.Join(uevent, "\n")+"\n")
	if subsystem != "" {
		tr.link(dev+"/subsystem", "bus/"+subsystem)
		tr.link("bus/"+subsystem+"/devices/"+path.Base(dev), dev)
	}
}

// pciOpts are a PCI function's attributes.
type pciOpts struct {
	bridge, multifunction bool
	acpiIndex, index, sun string
	ari                   bool
	vendor, device        string
}

// pci makes PCI function dev (devices/pci0000:00/0000:00:1c.0/...).
func (tr *tree) pci(dev string, o pciOpts) {
	class := "020000"
	if o.bridge {
		class = "060400"
	}
	vendor, device := o.vendor, o.device
	if vendor == "" {
		vendor, device = "0x8086", "0x10d3"
	}
	tr.device(dev, "pci", "DRIVER=x", "PCI_CLASS="+strings.TrimLeft(class, "0"), "PCI_SLOT_NAME="+path.Base(dev))
	tr.write(dev+"/modalias", fmt.Sprintf("pci:v0000%sd0000%ssv00001AF4sd00001100bc%ssc%si00", strings.ToUpper(vendor[2:]), strings.ToUpper(device[2:]), class[:2], class[2:4]))
	tr.write(dev+"/vendor", vendor)
	tr.write(dev+"/device", device)
	tr.write(dev+"/class", "0x"+class)
	cfg := make([]byte, 64)
	if o.multifunction {
		cfg[0x0e] = 0x80
	}
	if o.bridge {
		cfg[0x0e] |= 1
	}
	tr.write(dev+"/config", string(cfg))
	if o.acpiIndex != "" {
		tr.write(dev+"/acpi_index", o.acpiIndex+"\n")
	}
	if o.index != "" {
		tr.write(dev+"/index", o.index+"\n")
	}
	if o.sun != "" {
		fw := "devices/LNXSYSTM:00/LNXSYBUS:00/PNP0A03:00/device:" + strings.ReplaceAll(path.Base(dev), ":", "_")
		tr.write(fw+"/sun", o.sun+"\n")
		tr.link(dev+"/firmware_node", fw)
	}
	if o.ari {
		tr.write(dev+"/ari_enabled", "1\n")
	} else {
		tr.write(dev+"/ari_enabled", "0\n")
	}
}

// slot makes hotplug slot name of /sys/bus/pci/slots at address.
func (tr *tree) slot(name, address string) {
	tr.write("bus/pci/slots/"+name+"/address", address+"\n")
}

// netOpts are a network interface's attributes.
type netOpts struct {
	typ            int    // ARPHRD_* (default 1)
	mac            string // default from the ifindex
	assign         int    // addr_assign_type
	devPort        string // default "0"
	devID          string
	physPortName   string
	devtype        string
	nameAssignType int // default 1 (NET_NAME_ENUM)
	stacked        bool
}

// net makes interface name below parent device dir.
func (tr *tree) net(parent, name string, o netOpts) {
	dev := parent + "/net/" + name
	idx := tr.next
	tr.next++
	ue := []string{"INTERFACE=" + name, fmt.Sprintf("IFINDEX=%d", idx)}
	if o.devtype != "" {
		ue = append(ue, "DEVTYPE="+o.devtype)
	}
	tr.write(dev+"/uevent", strings.Join(ue, "\n")+"\n")
	tr.link(dev+"/subsystem", "class/net")
	tr.link("class/net/"+name, dev)
	if parent != "devices/virtual" {
		tr.link(dev+"/device", parent)
	}
	typ := o.typ
	if typ == 0 {
		typ = 1
	}
	mac := o.mac
	if mac == "" {
		mac = fmt.Sprintf("52:54:00:12:34:%02x", idx)
	}
	devPort := o.devPort
	if devPort == "" {
		devPort = "0"
	}
	nat := o.nameAssignType
	if nat == 0 {
		nat = NameEnum
	}
	iflink := idx
	if o.stacked {
		iflink = 1
	}
	for k, v := range map[string]string{
		"type": fmt.Sprint(typ), "address": mac, "addr_assign_type": fmt.Sprint(o.assign), "dev_port": devPort,
		"ifindex": fmt.Sprint(idx), "iflink": fmt.Sprint(iflink), "name_assign_type": fmt.Sprint(nat),
		"dev_id": "0x0",
	} {
		tr.write(dev+"/"+k, v+"\n")
	}
	if o.devID != "" {
		tr.write(dev+"/dev_id", o.devID+"\n")
	}
	if o.physPortName != "" {
		tr.write(dev+"/phys_port_name", o.physPortName+"\n")
	}
}
