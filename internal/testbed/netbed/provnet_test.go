package netbed

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestDnsmasqArgs: the chainloading of Ironic's install guide, on the
// bridge only, with the range's netmask.
func TestDnsmasqArgs(t *testing.T) {
	p := &ProvNet{Name: "pxe-test", Bridge: "br0", Host: netip.MustParsePrefix("10.99.0.1/24"), dir: "/work/net"}
	a := p.dnsmasqArgs(DHCP{First: netip.MustParseAddr("10.99.0.100"), Last: netip.MustParseAddr("10.99.0.199"),
		TFTPRoot: "/work/tftp", BIOSLoader: "undionly.kpxe", UEFILoader: "snponly.efi", IPXEScript: "http://10.99.0.1:8088/boot.ipxe",
		PXE: []string{"52:54:00:6d:22:01"}, GRUBLoader: "bootx64.efi", GRUBLoaderArm64: "grubaa64.efi", Ignore: []string{"52:54:00:6d:32:01"},
		HTTPBoot: []string{"52:54:00:6d:3c:01"}, HTTPLoaderArm64: "http://10.99.0.1:8088/grubaa64.efi"})
	for _, want := range []string{
		"--interface=br0",
		"--dhcp-range=10.99.0.100,10.99.0.199,255.255.255.0,10m",
		"--tftp-root=/work/tftp",
		"--dhcp-userclass=set:ipxe,iPXE",
		"--dhcp-boot=tag:ipxe,tag:!pxe,http://10.99.0.1:8088/boot.ipxe",
		"--dhcp-boot=tag:efi,tag:!ipxe,tag:!pxe,tag:!httpboot,snponly.efi",
		"--dhcp-boot=tag:!efi,tag:!ipxe,tag:!pxe,tag:!httpboot,undionly.kpxe",
		"--dhcp-boot=tag:pxe,tag:!efi,tag:!efiaa64,pxelinux.0",
		"--dhcp-boot=tag:pxe,tag:efi,bootx64.efi",
		"--dhcp-match=set:efiaa64,option:client-arch,11",
		"--dhcp-boot=tag:pxe,tag:efiaa64,grubaa64.efi",
		"--dhcp-host=52:54:00:6d:22:01,set:pxe",
		"--dhcp-host=52:54:00:6d:32:01,ignore",
		"--dhcp-host=52:54:00:6d:3c:01,set:httpboot",
		"--dhcp-vendorclass=set:httpclient,HTTPClient",
		"--dhcp-match=set:httpaa64,option:client-arch,19",
		"--dhcp-boot=tag:httpboot,tag:httpclient,tag:httpaa64,http://10.99.0.1:8088/grubaa64.efi",
		"--dhcp-option-force=tag:httpboot,tag:httpclient,60,HTTPClient",
	} {
		if !slices.Contains(a, want) {
			t.Errorf("dnsmasq arguments lack %q: %s", want, strings.Join(a, " "))
		}
	}
	if err := p.StartDHCP(DHCP{First: netip.MustParseAddr("10.98.0.100"), Last: netip.MustParseAddr("10.99.0.199")}); err == nil {
		t.Error("a range outside the network was accepted")
	}
}
