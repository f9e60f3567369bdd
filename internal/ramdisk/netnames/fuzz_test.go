package netnames

import (
	"strings"
	"testing"
)

// FuzzAttributes gives Compute a PCI NIC whose attributes are arbitrary
// bytes, as a broken driver or firmware could write them: it must not
// panic, and every name it returns starts with the prefix and is one
// udev's policy could take or skip without harm.
func FuzzAttributes(f *testing.F) {
	f.Add("1", "0", "", "52:54:00:12:34:56", "0", "pci:v00008086d000010D3sv00001AF4sd00001100bc02sc00i00", "3", "0000:01:00", "0000:01:00.0", "1")
	f.Add("0x10", "0b11", "p0", "00:00:00:00:00:00", "0", "pci:sc04", "0", "0000:01", "0001:a1:1f.7", "0")
	f.Add(" 65535", "4294967296", "pf1vf-2", "zz:11", "1", "pci:", "-0", "", "0000:01:00.9", "yes")
	f.Add("", "", "pf0vf3\x01", "52:54:00:12:34", "", "", "0o7", "0000:01:00", "1:2:3.4", "")
	f.Fuzz(func(t *testing.T, acpiIndex, devPort, physPortName, address, assign, modalias, sun, slotAddr, pciName, ari string) {
		if !validPathName(pciName) {
			return
		}
		tr := newTree(t)
		dev := onBus0(tr, "0000:00:1c.0", pciOpts{bridge: true}) + "/" + pciName
		tr.pci(dev, pciOpts{})
		for name, v := range map[string]string{"acpi_index": acpiIndex, "modalias": modalias, "ari_enabled": ari} {
			tr.write(dev+"/"+name, v)
		}
		fw := "devices/LNXSYSTM:00/fuzz"
		tr.write(fw+"/sun", sun)
		tr.link(dev+"/firmware_node", fw)
		tr.slot("9", slotAddr)
		tr.net(dev, "eth0", netOpts{})
		for name, v := range map[string]string{"dev_port": devPort, "phys_port_name": physPortName, "address": address, "addr_assign_type": assign} {
			tr.write(dev+"/net/eth0/"+name, v)
		}
		for _, scheme := range []string{"v238", "v251", DefaultScheme} {
			s, err := ParseScheme(scheme)
			if err != nil {
				t.Fatal(err)
			}
			id, err := Compute(tr.root, "eth0", s)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{id.Onboard, id.Slot, id.Path, id.MAC} {
				if n != "" && !strings.HasPrefix(n, "en") {
					t.Fatalf("%s: name %q without the prefix", scheme, n)
				}
			}
			d := Decide(id, true)
			if d.Name != "" && !ValidName(d.Name) {
				t.Fatalf("%s: invalid name %q chosen", scheme, d.Name)
			}
		}
	})
}

// validPathName: a PCI function name the fuzzer gives must be one path
// component the file system takes.
func validPathName(s string) bool {
	return s != "" && s != "." && s != ".." && len(s) < 200 && !strings.ContainsAny(s, "/\x00")
}

// FuzzParsers gives the string parsers of sysfs values arbitrary text.
func FuzzParsers(f *testing.F) {
	for _, s := range []string{"0", "1", "0x1f", "0b101", "0o17", " 12", "-0", "-1", "+5", "4294967295", "4294967296",
		"2-1.4:1.6", "0000:00:1f.6", "pf0vf3", "52:54:00:12:34:56", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, err := parseUnsigned(s); err == nil && strings.HasPrefix(strings.TrimLeft(s, cSpace), "-") && v != 0 {
			t.Fatalf("parseUnsigned(%q) = %d: negative taken", s, v)
		}
		_, _ = parseUnsigned64(s)
		_, _ = parseUnsignedBase(s, 16)
		_, _, _, _, _ = pciAddress(s)
		if spec, ok := usbSpecifier(s); ok && !strings.HasPrefix(spec, "u") {
			t.Fatalf("usbSpecifier(%q) = %q", s, spec)
		}
		if vf, ok := representorVF(s); ok && vf < 0 {
			t.Fatalf("representorVF(%q) = %d", s, vf)
		}
		if hw, ok := parseHWAddr(s); ok && len(hw) == 0 {
			t.Fatalf("parseHWAddr(%q): empty address taken", s)
		}
		_ = parseBool(s)
		_, _ = ParseScheme(s)
		_ = ValidName(s)
	})
}
