package ramdisk_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ramdiskpkg "github.com/ironic-go/ironic-agent/internal/ramdisk"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit/netup"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit/vmedia"
	"github.com/ironic-go/ironic-agent/internal/shacrypt"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed/netnstest"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
	"github.com/ironic-go/ironic-agent/rescue"
)

// TestUSBVirtualMediaInVM boots the ramdisk as a server's BMC presents
// virtual media: the ISO as a USB CD-ROM on the xHCI bus (a scsi-cd
// behind usb-storage, which the firmware boots and Linux's xhci_pci,
// usb_storage and sr_mod find), and the config drive (an ISO 9660
// config-2 with network_data.json) as a USB stick on the same bus. No
// DHCP server anywhere: the init takes the static address from the stick,
// and the agent looks up and heartbeats from it to an Ironic stand-in on
// the other side of the link. The BMC's virtual USB stick carries
// parameters.txt (label ir-vfd-dev) with ipa-debug=1 and the debug login's
// sshkey="..." and rootpwd=: the agent debugs, and the debug login the
// kernel line's own rootpwd= started is replaced by one with the stick's
// values: root logs in over SSH with the stick's key and on the console
// with its password, and the kernel line's password is refused.
func TestUSBVirtualMediaInVM(t *testing.T) {
	qemu.SkipUnlessRoot(t)
	if testing.Short() {
		t.Skip("SKIPPED: -short: boots a virtual machine")
	}
	netnstest.RequireRoot(t, "qemu-system-x86_64", "xorriso", "grub-mkrescue", "mformat", "mkfs.vfat", "mcopy")
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Minute)
	defer cancel()
	rd, err := qemu.BuildRamdisk(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := netnstest.ID(t)
	ns, err := netbed.NewNetns(ctx, "rdvu-"+id, "vmvu"+id, "02:11:22:33:44:c1", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Close)
	netnstest.Run(t, "ip", "-n", ns.Name, "addr", "add", "10.88.0.1/24", "dev", ns.Tap)
	ironic := startIronicStandIn(t, ns.Name, "10.88.0.1")

	const mac, static = "52:54:00:12:34:91", "10.88.0.20"
	doc := `{"links": [{"id": "prov", "type": "phy", "ethernet_mac_address": "` + mac + `"}],
	 "networks": [{"id": "v4", "type": "ipv4", "link": "prov", "ip_address": "` + static + `", "netmask": "255.255.255.0"}],
	 "services": []}`
	m := qemu.DefaultMachine(qemu.BIOS)
	m.Name = "ironic-agent-usb-vmedia"
	m.Dir = filepath.Join(t.TempDir(), "vm")
	m.MemoryMB = 768
	if err := os.MkdirAll(m.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m.Disks = []qemu.Disk{{ID: "config", Kind: qemu.DiskUSB, SizeMB: 1, Serial: "VMEDIA-CONFIG-1", Vendor: "LabBMC", Model: "Virtual Floppy"}}
	writeConfigDrive(t, m.DiskPath("config"), doc, true)
	// The BMC's virtual USB stick with parameters.txt, as Ironic's
	// config_via_removable writes it, with the debug login's parameters
	// an operator adds: the kernel line has another rootpwd=, which they
	// replace.
	creds := newDebugCredentials(t)
	m.USBStick = filepath.Join(m.Dir, "params.img")
	writeParametersStick(t, m.USBStick, "ipa-debug=1\n"+creds.params()+"\n")
	m.NICs = []qemu.NIC{{Model: "virtio-net-pci", MAC: mac, Backend: qemu.NICTap, File: ns.File}}
	m.ISO, m.ISOOnUSB = filepath.Join(m.Dir, ramdiskpkg.ISOName), true
	if err := ramdiskpkg.ISO(ctx, rd.Kernel, rd.Initrd,
		"ipa-api-url=http://10.88.0.1:6385 ipa-inspection-callback-url=http://10.88.0.1:5050/v1/continue ipa-disk-wait-attempts=0 ironic_agent.exit=poweroff "+
			rescue.ParamRootPassword+"="+kernelPassword(t),
		m.ISO); err != nil {
		t.Fatal(err)
	}
	vm, fail := startVM(ctx, t, m)
	if _, err := ironic.wait(ctx, "heartbeat", 15*time.Minute); err != nil {
		fail("no heartbeat: %v; the stand-in saw %v", err, ironic.paths())
	}
	first := vm.Elapsed()
	if c := ironic.clients(); !slices.Equal(c, []string{static}) {
		t.Errorf("Ironic was called from %v, want the static address %s only", c, static)
	}
	var found, applied, dhcp string
	for _, l := range vm.Lines() {
		switch {
		case strings.Contains(l.Text, logtext.Msg(netup.EventNetworkDataApplied)):
			applied = l.Text
		case strings.Contains(l.Text, logtext.Msg(netup.EventDHCPStart)):
			dhcp = l.Text
		case strings.Contains(l.Text, logtext.Msg(netup.EventNetworkData)+" "):
			found = l.Text
		}
	}
	for _, l := range []string{found, applied} {
		t.Logf("%s", strings.TrimSpace(l))
	}
	// The stick is a SCSI disk (sd), the boot CD-ROM sr0.
	if !strings.Contains(found, "device=/dev/sd") || applied == "" || dhcp != "" {
		t.Errorf("want the network data found on the USB stick, applied, and no DHCP:\nfound: %q\napplied: %q\nDHCP: %q", found, applied, dhcp)
	}
	t.Logf("VM: first heartbeat %v after QEMU start", first.Round(time.Second))

	// The debug login came from the stick: SSH with its key from the
	// provisioning network, the console with its password.
	var started []string
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, logtext.Msg(rdinit.EventDebugLoginStarted)) {
			started = append(started, l.Text)
		}
	}
	if len(started) != 2 || strings.Contains(started[0], vmedia.ParametersFile) || !strings.Contains(started[1], vmedia.ParametersFile) {
		fail("want the debug login started from the kernel line, then from %s: %q", vmedia.ParametersFile, started)
	}
	t.Logf("%s", started[1])
	if _, ok := vm.Find(logtext.Msg(rdinit.EventDebugLoginReplaced)); !ok {
		t.Errorf("the kernel line's debug login was not replaced by the stick's")
	}
	if l, ok := vm.Find("option=debug "); !ok || !strings.Contains(l.Text, "ipa-debug") {
		t.Errorf("the agent did not take ipa-debug=1 from the stick: %q", l.Text)
	}
	dial := func(ctx context.Context) (conn net.Conn, err error) {
		err = netnstest.Do(ns.Name, func() error {
			var d net.Dialer
			conn, err = d.DialContext(ctx, "tcp", net.JoinHostPort(static, "22"))
			return err
		})
		return conn, err
	}
	if out, _, err := sshRunDial(ctx, dial, creds.signer, "id -u"); err != nil || strings.TrimSpace(out) != "0" {
		fail("SSH with the stick's key: %q %v", out, err)
	}
	for _, l := range []qemu.ConsoleLogin{
		{Banner: debugBanner, User: "root", Password: kernelLinePassword, Want: "Login incorrect"},
		{Banner: debugBanner, User: "root", Password: debugPassword, Want: "SERIAL-42 as root"},
	} {
		if err := vm.Login(ctx, l); err != nil {
			fail("console login with %q: %v", l.Password, err)
		}
	}
	vm.Kill()
}

// kernelLinePassword is the kernel line's rootpwd=, which the stick's
// replaces.
const kernelLinePassword = "kernel line"

// kernelPassword is rootpwd='s value for kernelLinePassword (base64, no
// blanks or "$" for the boot loader's line).
func kernelPassword(t *testing.T) string {
	t.Helper()
	h, err := shacrypt.New(shacrypt.SHA512, []byte(kernelLinePassword), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString([]byte(h.String()))
}

// writeParametersStick writes a vfat image labelled ir-vfd-dev holding
// parameters.txt, as Ironic's images.create_vfat_image makes it.
func writeParametersStick(t *testing.T, path, params string) {
	t.Helper()
	txt := filepath.Join(t.TempDir(), vmedia.ParametersFile)
	if err := os.WriteFile(txt, []byte(params), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1440 << 10); err != nil {
		t.Fatal(err)
	}
	f.Close()
	netnstest.Run(t, "mkfs.vfat", "-n", vmedia.ParametersLabel, path)
	netnstest.Run(t, "mcopy", "-i", path, txt, "::"+vmedia.ParametersFile)
}
