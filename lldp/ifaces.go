package lldp

import (
	"os"
	"path/filepath"
	"strings"
)

// Interfaces lists the interfaces IPA listens on: the entries of
// <root>/sys/class/net that are a VLAN by name (<parent>.<digits>), have a
// device link (a physical or virtio NIC) or a bonding directory (a bond).
// Loopback, bridges, veths, taps and the like are left out, as in IPA's
// netutils.list_interfaces. The order is the directory's, sorted.
func Interfaces(root string) ([]string, error) {
	dir := filepath.Join(root, "sys/class/net")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		name := e.Name()
		if name == "lo" {
			continue
		}
		if isVLANName(name) || exists(filepath.Join(dir, name, "device")) || exists(filepath.Join(dir, name, "bonding")) {
			out = append(out, name)
		}
	}
	return out, nil
}

// isVLANName reports IPA's VLAN naming rule: something, a dot, digits.
func isVLANName(name string) bool {
	_, vid, ok := strings.Cut(name, ".")
	if !ok || vid == "" {
		return false
	}
	for _, r := range vid {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
