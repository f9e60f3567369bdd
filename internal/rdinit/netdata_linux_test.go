package rdinit

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/ironic-go/ironic-agent/internal/netnstest"
	"github.com/ironic-go/ironic-agent/internal/networkdata"
)

// TestFindConfigDrive gives findConfigDrive a block-device directory with
// images made by Debian's mkfs.vfat and genisoimage (as Ironic and Metal3
// make config drives) standing in for the devices: the config-2 ones are
// found with their mount type, whatever the label's case; other labels,
// unreadable devices and loop devices are passed over.
func TestFindConfigDrive(t *testing.T) {
	for _, p := range []string{"mkfs.vfat", "genisoimage"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: %s is not installed (dosfstools, genisoimage)", p)
		}
	}
	dir := t.TempDir()
	vfat := func(name, label string) {
		p := filepath.Join(dir, "dev", name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Truncate(2 << 20)
		f.Close()
		netnstest.Run(t, "mkfs.vfat", "-n", label, p)
	}
	iso := func(name, label string) {
		src := filepath.Join(dir, "src-"+name, "openstack", "latest")
		os.MkdirAll(src, 0o755)
		os.WriteFile(filepath.Join(src, "network_data.json"), []byte("{}"), 0o644)
		netnstest.Run(t, "genisoimage", "-quiet", "-r", "-J", "-V", label, "-o", filepath.Join(dir, "dev", name), filepath.Dir(filepath.Dir(src)))
	}
	os.MkdirAll(filepath.Join(dir, "dev"), 0o755)
	os.MkdirAll(filepath.Join(dir, "sys"), 0o755)
	for _, tc := range []struct {
		name     string
		devs     map[string]func(string)
		wantDev  string
		wantType string
	}{
		{"vfat upper case", map[string]func(string){"vda": func(n string) { vfat(n, "ESP") }, "vdb": func(n string) { vfat(n, "CONFIG-2") }}, "vdb", "vfat"},
		{"iso", map[string]func(string){"sda": func(n string) { vfat(n, "data") }, "sr0": func(n string) { iso(n, "config-2") }}, "sr0", "iso9660"},
		{"none", map[string]func(string){"sr1": func(n string) { iso(n, "VMEDIA_BOOT_ISO") }, "sr2": nil, "loop0": func(n string) { iso(n, "config-2") }}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys, dev := filepath.Join(dir, "sys", tc.name), filepath.Join(dir, "dev")
			os.MkdirAll(sys, 0o755)
			for name, mk := range tc.devs {
				os.MkdirAll(filepath.Join(sys, name), 0o755)
				if mk != nil {
					mk(name)
				}
			}
			gotDev, gotType := findConfigDrive(sys, dev)
			want := ""
			if tc.wantDev != "" {
				want = filepath.Join(dev, tc.wantDev)
			}
			if gotDev != want || gotType != tc.wantType {
				t.Errorf("found %q (%q), want %q (%q)", gotDev, gotType, want, tc.wantType)
			}
		})
	}
}

// TestApplyNetworkDataInNetns applies a document to veths in a network
// namespace with the init's own code: the NIC found by its MAC gets its
// static IPv4 and IPv6 addresses, the gateways' default routes and the
// extra route, resolv.conf (in the test's directory) the DNS servers of
// the document and of the network; a bond (this host's kernel has no
// bonding: the error must say so, naming the link) and a NIC that is not
// there fail alone, and the error names each.
func TestApplyNetworkDataInNetns(t *testing.T) {
	netnstest.RequireRoot(t)
	id := netnstest.ID(t)
	host := netnstest.NewNetns(t, "rdndh-"+id)
	peer := netnstest.NewNetns(t, "rdndp-"+id)
	nic, other := "rnd"+id, "rne"+id
	host.Veth(nic, peer, "rnp"+id)
	host.Veth(other, peer, "rnq"+id)
	host.IP("link", "set", nic, "address", "02:00:00:91:00:02")
	host.IP("link", "set", other, "address", "02:00:00:91:00:03")
	peer.IP("addr", "add", "10.91.0.1/24", "dev", "rnp"+id)

	doc := `{"links": [
	  {"id": "prov", "type": "phy", "ethernet_mac_address": "02:00:00:91:00:02", "mtu": 1400},
	  {"id": "gone", "type": "phy", "ethernet_mac_address": "02:00:00:91:00:99"},
	  {"id": "spare", "type": "phy", "ethernet_mac_address": "02:00:00:91:00:03"},
	  {"id": "b", "type": "bond", "bond_links": ["spare"], "bond_mode": "active-backup"}],
	 "networks": [
	  {"id": "v4", "type": "ipv4", "link": "prov", "ip_address": "10.91.0.2", "netmask": "255.255.255.0", "gateway": "10.91.0.1",
	   "routes": [{"network": "10.92.0.0", "netmask": "16", "gateway": "10.91.0.254"}]},
	  {"id": "v6", "type": "ipv6", "link": "prov", "ip_address": "fd00:91::2/64",
	   "routes": [{"network": "::", "netmask": "::", "gateway": "fd00:91::1"}], "services": [{"type": "dns", "address": "fd00:91::53"}]},
	  {"id": "lost", "type": "ipv4", "link": "gone", "ip_address": "10.93.0.2/24"}],
	 "services": [{"type": "dns", "address": "10.91.0.53"}]}`
	d, err := networkdata.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var buf strings.Builder
	n := newNetwork(slog.New(slog.NewTextHandler(&buf, nil)), Config{ResolvConf: filepath.Join(dir, "resolv.conf")}, nil)
	n.isNIC = func(l netlink.Link) bool { return l.Type() == "veth" }
	var applyErr error
	var addrs []string
	var routes []string
	var mtu int
	if err := host.Do(func() error {
		applyErr = n.applyNetworkData(t.Context(), d)
		l, err := netlink.LinkByName(nic)
		if err != nil {
			return err
		}
		mtu = l.Attrs().MTU
		as, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		for _, a := range as {
			if !a.IP.IsLinkLocalUnicast() {
				addrs = append(addrs, a.IPNet.String())
			}
		}
		rs, err := netlink.RouteList(l, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Gw != nil {
				dst := "default"
				if r.Dst != nil && !r.Dst.IP.IsUnspecified() {
					dst = r.Dst.String()
				}
				routes = append(routes, dst+" via "+r.Gw.String())
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", buf.String())
	slices.Sort(addrs)
	slices.Sort(routes)
	if want := []string{"10.91.0.2/24", "fd00:91::2/64"}; !slices.Equal(addrs, want) {
		t.Errorf("addresses %v, want %v", addrs, want)
	}
	if want := []string{"10.92.0.0/16 via 10.91.0.254", "default via 10.91.0.1", "default via fd00:91::1"}; !slices.Equal(routes, want) {
		t.Errorf("routes %v, want %v", routes, want)
	}
	if mtu != 1400 {
		t.Errorf("MTU %d, want 1400", mtu)
	}
	rc, _ := os.ReadFile(filepath.Join(dir, "resolv.conf"))
	if !strings.Contains(string(rc), "nameserver 10.91.0.53\nnameserver fd00:91::53\n") {
		t.Errorf("resolv.conf:\n%s", rc)
	}
	for _, want := range []string{`link "gone": no NIC has MAC 02:00:00:91:00:99`, `network "lost": its link "gone" was not made`, `link "b": `} {
		if applyErr == nil || !strings.Contains(applyErr.Error(), want) {
			t.Errorf("error %v, want it to say %q", applyErr, want)
		}
	}
	if _, err := os.Stat("/sys/module/bonding"); err != nil && !strings.Contains(fmt.Sprint(applyErr), "the kernel has no bonding") {
		t.Errorf("error %v: want it to say the kernel has no bonding", applyErr)
	}
	// The peer reaches the static address: a listener there, in the
	// host namespace, takes a connection from the peer's.
	var ln net.Listener
	if err := host.Do(func() (err error) { ln, err = net.Listen("tcp", "10.91.0.2:0"); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := peer.Do(func() error {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}); err != nil {
		t.Errorf("the peer cannot reach the static address: %v", err)
	}
}
