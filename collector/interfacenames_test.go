package collector

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The candidates are IPA's netutils.list_interfaces: a device link, a
// bonding directory or a VLAN name (digits after the first dot); bridges,
// veths and lo are not.
func TestInterfaceNamesIPARule(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"sys/devices/pci0000:00/0000:01:00.0/net/eth0", "sys/class/net"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../../devices/pci0000:00/0000:01:00.0/net/eth0", filepath.Join(root, "sys/class/net/eth0")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../0000:01:00.0", filepath.Join(root, "sys/devices/pci0000:00/0000:01:00.0/net/eth0/device")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"bond0/bonding", "eth0.100", "br0/bridge", "lo", "veth1", "eth0.x"} {
		if err := os.MkdirAll(filepath.Join(root, "sys/class/net", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := InterfaceNames(Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"bond0", "eth0", "eth0.100"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
