package vm

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/ironic-go/ironic-agent/agent"
	"github.com/ironic-go/ironic-agent/internal/cachedir"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit"
	"github.com/ironic-go/ironic-agent/internal/ramdisk/rdinit/netup"
	"github.com/ironic-go/ironic-agent/internal/testbed/bmcsim"
	"github.com/ironic-go/ironic-agent/internal/testbed/ironic"
	"github.com/ironic-go/ironic-agent/internal/testbed/logtext"
	"github.com/ironic-go/ironic-agent/internal/testbed/netbed"
	"github.com/ironic-go/ironic-agent/internal/testbed/qemu"
)

// The provisioning network of the network-boot tests: everything lives in
// a network namespace of its own, so its ports are not the host's.
var (
	pxeNet       = netip.MustParsePrefix("10.99.0.1/24")
	pxeHTTP      = "10.99.0.1:8088" // Ironic's HTTP root and the test's images
	pxeDHCPFirst = netip.MustParseAddr("10.99.0.100")
	pxeDHCPLast  = netip.MustParseAddr("10.99.0.199")
)

// pxeKernelParams is [pxe]kernel_append_params: Ironic's default (nofb
// nomodeset vga=normal) plus the test machines' own (qemu.KernelArgs: a
// serial console, a guest panic as a power-off the BMC sees, no crypto
// self-tests, no IO-APIC timer check under TCG).
const pxeKernelParams = "nofb nomodeset vga=normal " + qemu.KernelArgs

// pxeInspectionParams is [inspector]extra_kernel_params: one more
// collector, so the test sees the parameter reach the agent.
const pxeInspectionParams = "ipa-inspection-collectors=default,logs,pci-devices"

// pxeBed is the provisioning network with Ironic and ironic-inspector
// inside it, shared by the network-boot tests of the package.
type pxeBed struct {
	net      *netbed.ProvNet
	svc      *ironic.Services
	s        *suite // the clients, in the shape the helpers take
	mu       sync.Mutex
	images   map[string]string // /images/NAME -> host file
	dirs     map[string]string // /PREFIX/... -> host directory
	requests []string          // "GET /path" served, in order
	configs  []string          // the iPXE configs served (pxelinux.cfg/MAC), in order
	// staged is the SHA-256 of the last copy of each ramdisk file
	// (/NODE/deploy_kernel...) served from Ironic's HTTP root: what
	// Ironic fetched and staged, as the machine got it.
	staged map[string]string
}

func (b *pxeBed) Close() {
	if b.svc != nil {
		_ = b.svc.Close()
	}
	b.net.Close()
}

// serveImage makes the host file path available at
// http://pxeHTTP/images/name.
func (b *pxeBed) serveImage(name, path string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.images[name] = path
	return imageURL(name)
}

// imageURL is where serveImage serves name, known before the bed starts.
func imageURL(name string) string { return "http://" + pxeHTTP + "/images/" + name }

// serveDir makes the host directory dir available below
// http://pxeHTTP/prefix/ and returns that URL (with its trailing slash).
func (b *pxeBed) serveDir(prefix, dir string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dirs[prefix] = dir
	return "http://" + pxeHTTP + "/" + prefix + "/"
}

// stagedDigest is the SHA-256 of the last copy of urlPath served from
// Ironic's HTTP root, "" if none was.
func (b *pxeBed) stagedDigest(urlPath string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.staged[urlPath]
}

// served lists the requests whose path, cleaned (GRUB asks for
// //NODE/deploy_kernel over HTTP), starts with prefix.
func (b *pxeBed) served(prefix string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, r := range b.requests {
		if _, p, _ := strings.Cut(r, " "); strings.HasPrefix(path.Clean(p), prefix) {
			out = append(out, r)
		}
	}
	return out
}

func (b *pxeBed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.requests = append(b.requests, r.Method+" "+r.URL.Path)
	img, isImage := strings.CutPrefix(r.URL.Path, "/images/")
	file := b.images[img]
	var dirPrefix, dir string
	for p, d := range b.dirs {
		if strings.HasPrefix(r.URL.Path, "/"+p+"/") {
			dirPrefix, dir = p, d
		}
	}
	b.mu.Unlock()
	if dir != "" {
		// A directory as a web server serves it: Content-Length and
		// Last-Modified, which Ironic's image cache reads on HEAD.
		http.StripPrefix("/"+dirPrefix, http.FileServer(http.Dir(dir))).ServeHTTP(w, r)
		return
	}
	if slices.Contains([]string{"deploy_kernel", "deploy_ramdisk", "rescue_kernel", "rescue_ramdisk"}, path.Base(r.URL.Path)) && r.Method == http.MethodGet {
		if d, err := cachedir.FileSHA256(filepath.Join(b.svc.HTTPRoot(), filepath.FromSlash(path.Clean(r.URL.Path)))); err == nil {
			b.mu.Lock()
			b.staged[r.URL.Path] = d
			b.mu.Unlock()
		}
	}
	if strings.HasPrefix(r.URL.Path, "/pxelinux.cfg/") {
		// What Ironic's template wrote, as iPXE got it.
		if c, err := os.ReadFile(filepath.Join(b.svc.HTTPRoot(), filepath.FromSlash(path.Clean(r.URL.Path)))); err == nil {
			b.mu.Lock()
			b.configs = append(b.configs, string(c))
			b.mu.Unlock()
		}
	}
	if isImage {
		if file == "" {
			http.NotFound(w, r)
			return
		}
		http.ServeFile(w, r, file)
		return
	}
	http.FileServer(http.Dir(b.svc.HTTPRoot())).ServeHTTP(w, r)
}

// provisioningNetwork makes the bed once per test binary: the namespace
// and bridge, dnsmasq, the HTTP server, Ironic (ipmi + ipxe) and
// ironic-inspector listening on the bridge's address.
func provisioningNetwork(t *testing.T) *pxeBed {
	t.Helper()
	s := theSuite
	s.pxeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		start := time.Now()
		s.pxe, s.pxeErr = startPXEBed(ctx, filepath.Join(s.dir, "provisioning"), "pxe", false)
		if s.pxeErr == nil {
			reportSuiteSeconds(t, time.Since(start), "pxe_bed_up_s")
		}
	})
	if s.pxeErr != nil {
		t.Fatalf("provisioning network: %v", s.pxeErr)
	}
	mark := s.pxe.svc.Mark()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service logs written during the test:\n%s", mark.Since(64<<10))
			t.Logf("dnsmasq log (end):\n%s", tail(s.pxe.net.DHCPLog(), 40))
			t.Logf("HTTP requests: %s", strings.Join(s.pxe.served("/"), ", "))
		}
	})
	return s.pxe
}

// startPXEBed starts a provisioning network in namespace name-PID, its
// Ironic serving its API over HTTPS with a CA of its own when tls is set,
// its configuration changed by each of conf.
func startPXEBed(ctx context.Context, dir, name string, tls bool, conf ...func(*ironic.Config)) (*pxeBed, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// The series' own Ironic: the host's packages (2023.1), or a root
	// filesystem whose ipxe, pxelinux, syslinux-common and
	// grub-efi-amd64-bin give Ironic the same loaders at the same paths.
	series, err := ironic.SeriesFromEnv()
	if err != nil {
		return nil, err
	}
	pn, err := netbed.NewProvNet(ctx, fmt.Sprintf("%s-%d", name, os.Getpid()), pxeNet, filepath.Join(dir, "net"))
	if err != nil {
		return nil, err
	}
	b := &pxeBed{net: pn, images: map[string]string{}, dirs: map[string]string{}, staged: map[string]string{}}
	host := pxeNet.Addr().String()
	cfg := ironic.Config{Series: series, Dir: filepath.Join(dir, "services"), Netns: pn.Name, Host: host, Dial: pn.Dial, IPMI: true, Redfish: true, TLS: tls,
		NetBoot: &ironic.NetBoot{
			HTTPURL:      "http://" + pxeHTTP,
			KernelParams: pxeKernelParams,
			// The chainloaders dnsmasq hands to firmware that is not
			// iPXE yet: Ironic copies them into its TFTP root (and its
			// HTTP root), dnsmasq serves the TFTP root.
			Loaders: map[string]string{"undionly.kpxe": "/usr/lib/ipxe/undionly.kpxe", "snponly.efi": "/usr/lib/ipxe/snponly.efi",
				"pxelinux.0": "/usr/lib/PXELINUX/pxelinux.0", "ldlinux.c32": "/usr/lib/syslinux/modules/bios/ldlinux.c32",
				"bootx64.efi": grubNetLoader},
			InspectionParams: pxeInspectionParams,
		}}
	for _, f := range conf {
		f(&cfg)
	}
	st, err := ironic.StartStack(ctx, cfg)
	if err != nil {
		b.Close()
		return nil, err
	}
	b.svc = st.Services
	b.s = &suite{series: series, ironic: st.Ironic, inspector: st.Inspector}
	err = pn.Serve(pxeHTTP, b)
	if err == nil {
		err = pn.StartDHCP(netbed.DHCP{First: pxeDHCPFirst, Last: pxeDHCPLast, TFTPRoot: b.svc.TFTPRoot(),
			BIOSLoader: "undionly.kpxe", UEFILoader: "snponly.efi", IPXEScript: "http://" + pxeHTTP + "/boot.ipxe",
			PXE:        []string{pxeMAC(pxeLinuxNode, 0), pxeMAC(pxeGRUBNode, 0), pxeMAC(pxeGRUBSecureBootNode, 0), redfishMAC(redfishArm64PXENode)},
			GRUBLoader: "bootx64.efi", GRUBLoaderArm64: grubArm64Loader,
			// Ironic's boot file URL for the http boot interface:
			// [deploy]http_url and the aarch64 boot file (arm64NetBootNetwork).
			HTTPBoot: []string{redfishMAC(redfishArm64HTTPNode)}, HTTPLoaderArm64: "http://" + pxeHTTP + "/" + grubArm64Loader,
			Ignore: []string{redfishMAC(redfishDHCPLess), redfishMAC(redfishUSBCDNode)}})
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// closeAtEnd closes b, a bed of t's own, when t ends, logging first, if t
// failed, what its services, dnsmasq and its HTTP server saw during t.
func (b *pxeBed) closeAtEnd(t *testing.T) {
	mark := b.svc.Mark()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service logs written during the test:\n%s", mark.Since(64<<10))
			t.Logf("dnsmasq log (end):\n%s", tail(b.net.DHCPLog(), 40))
			t.Logf("HTTP requests: %s", strings.Join(b.served("/"), ", "))
		}
		b.Close()
	})
}

// inspectionCallback is the ipa-inspection-callback-url Ironic writes for
// an inspection it boots: ironic-inspector's /v1/continue, or Ironic's own
// /v1/continue_inspection where the series has no ironic-inspector.
func (b *pxeBed) inspectionCallback() string {
	if b.s.agentInspection() {
		return "http://" + pxeNet.Addr().String() + ":6385/v1/continue_inspection"
	}
	return "http://" + pxeNet.Addr().String() + ":5050/v1/continue"
}

// lastKernelLine is the parameters of the deploy ramdisk's kernel line in
// the last iPXE config served (":deploy", "kernel URL PARAMS... || goto
// retry"), "" if none.
func (b *pxeBed) lastKernelLine() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.configs) == 0 {
		return ""
	}
	_, deploy, _ := strings.Cut(b.configs[len(b.configs)-1], "\n:deploy\n")
	for l := range strings.Lines(deploy) {
		if f := strings.Fields(l); len(f) > 2 && f[0] == "kernel" {
			line, _, _ := strings.Cut(strings.Join(f[2:], " "), " || ")
			return line
		}
	}
	return ""
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestVMPXELinuxBIOS is an inspection booted by Ironic's pxe boot
// interface under SeaBIOS: dnsmasq hands this machine pxelinux.0 (Debian's
// pxelinux; ldlinux.c32 from syslinux-common, both copied into tftp_root by
// Ironic), which reads the node's pxelinux.cfg/01-MAC that Ironic wrote and
// loads the ramdisk from tftp_root, all over TFTP; "ipappend 2" gives
// BOOTIF in PXELINUX's 01-aa-bb-cc-dd-ee-ff form.
func TestVMPXELinuxBIOS(t *testing.T) {
	slowScenario(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	p := newPXENode(t, ctx, "bios", pxeLinuxNode, "pxe")
	vm := p.l.Inspect(10*time.Minute).report(t, "inspection")
	p.l.WaitOff("inspection")
	data := p.s.inspectionData(t, ctx, p.node.UUID, time.Minute)
	hyp := "01-" + strings.ReplaceAll(p.macs[0], ":", "-")
	if got := data["boot_interface"]; got != hyp {
		t.Errorf("inspection boot_interface = %v, want PXELINUX's BOOTIF %s", got, hyp)
	}
	if slices.Contains(vm.Cmdline, "-kernel") {
		t.Errorf("a network boot was handed a kernel: %s", qemu.ShellQuote(vm.Cmdline))
	}
	log := p.bed.net.DHCPLog()
	for _, f := range []string{"pxelinux.0", "ldlinux.c32", "pxelinux.cfg/" + hyp, p.node.UUID + "/deploy_kernel", p.node.UUID + "/deploy_ramdisk"} {
		if !strings.Contains(log, "/tftpboot/"+f+" to ") {
			t.Errorf("dnsmasq did not send %s over TFTP", f)
		}
	}
	inv, _ := data["inventory"].(map[string]any)
	checkInventory(t, inv, p.m)
	checkBootIF(t, vm)
	checkParsed(t, vm, "inspection_callback_url", "inspection_collectors")
}

// pxeNode is one machine on the provisioning network behind its BMC,
// enrolled in the bed's Ironic as an ipmi node and manageable.
type pxeNode struct {
	t    *testing.T
	ctx  context.Context
	bed  *pxeBed
	s    *suite
	m    qemu.Machine
	bmc  *bmcsim.IPMISim
	node *nodes.Node
	macs [2]string
	disk string // the host file of the machine's only disk
	// loader is the boot file dnsmasq hands the firmware of a GRUB
	// network boot ("": bootx64.efi), kernelParams the operator's kernel
	// parameters Ironic writes ("": pxeKernelParams).
	loader, kernelParams string
	// httpBoot: the firmware boots GRUB over UEFI HTTP (Ironic's http
	// boot interface), and GRUB fetches the rest from the same HTTP
	// server; nothing goes over TFTP.
	httpBoot bool
	// l drives the node: IPMI power, network boots.
	l *lifecycle
}

// newPXENode skips unless the network-boot tests can run, and makes
// machine n (its MACs, BMC address and tap) under firmware fw, enrolled
// with bootInterface (ipxe or pxe) on the shared provisioning network.
func newPXENode(t *testing.T, ctx context.Context, fw string, n int, bootInterface string) *pxeNode {
	t.Helper()
	return newPXENodeCase(t, ctx, fw, n, bootInterface, false)
}

// newPXENodeCase is newPXENode; with secureBoot, the machine enforces
// Secure Boot (OVMF with Microsoft's keys) and is on a provisioning
// network of its own whose Ironic hands out Debian's signed chain
// (secureBootPXENetwork).
func newPXENodeCase(t *testing.T, ctx context.Context, fw string, n int, bootInterface string, secureBoot bool) *pxeNode {
	t.Helper()
	rd := ramdisk(t)
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root: a provisioning network in a namespace, Ironic, dnsmasq and ipmi_sim in it")
	}
	for _, p := range []string{"ipmi_sim", "ipmitool", "dnsmasq"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: needs %s (Debian packages openipmi, ipmitool, dnsmasq-base; in test.sh)", p)
		}
	}
	for f, pkg := range pxeLoaders {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("SKIPPED: needs %s (Debian package %s; in test.sh)", f, pkg)
		}
	}
	series, err := ironic.SeriesFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if !series.HasNetBootLoaders() {
		t.Skipf("SKIPPED: the root filesystem of %s lacks the boot loaders the provisioning network hands out (syslinux-common, grub-efi-amd64-bin)", series)
	}
	if !series.Host() {
		// Beside the default series' run, another series' costs more
		// minutes than ./test.sh has (docs/testing.md: Environment switches).
		slowScenario(t)
	}
	var bed *pxeBed
	if secureBoot {
		bed = secureBootPXENetwork(t)
	} else {
		bed = provisioningNetwork(t)
	}
	p := &pxeNode{t: t, ctx: ctx, bed: bed, s: bed.s, macs: [2]string{pxeMAC(n, 0), pxeMAC(n, 1)}}
	m := qemu.DefaultMachine(qemu.Firmware(fw))
	m.Name = "ironic-agent-pxe-" + fw
	m.Dir = vmDir(t)
	m.SecureBoot = secureBoot
	// The first NIC is on the provisioning network and boots; the second
	// is an isolated slirp NIC whose DHCP answers too: BOOTIF must pick
	// the first.
	m.NICs = []qemu.NIC{{Model: "virtio-net-pci", MAC: p.macs[0], Backend: qemu.NICTap, PXE: true},
		{Model: "e1000", MAC: p.macs[1], Backend: qemu.NICIsolated}}
	// One disk: SeaBIOS boots only the first hard disk it finds, whose
	// order is not the PCI slots'. 5 GiB (sparse): a root disk the agent
	// accepts.
	//
	// Under OVMF the disk is also first in QEMU's boot order: OVMF takes
	// a network boot's order from QEMU into its NVRAM for good (the NIC's
	// PXE entries first), where a server's firmware honours the BMC's
	// boot device instead; without it a disk boot after a network boot
	// that wrote no boot entry (rescue) tries PXE first and times out.
	m.Disks = []qemu.Disk{{ID: "vblk", Kind: qemu.DiskVirtioBlk, SizeMB: 5 << 10, Serial: pxeTarget, BootFirst: fw == "uefi"}}
	bmcAddr := netip.AddrFrom4([4]byte{10, 99, 0, byte(11 + n)})
	// LAN port 623, the VM port: the namespace's, not the host's.
	m.BMC = &qemu.BMC{Kind: qemu.BMCOpenIPMI, MfgID: 0xc0de, ProductID: 0x0b0d,
		LANAddress: bmcAddr.String(), LANPort: 623, LANMAC: fmt.Sprintf("02:00:00:99:00:%02x", 11+n),
		User: "ironic", Password: "ipmi-s3cret", VMPort: 9002 + n}
	if err := m.CreateDisks(); err != nil {
		t.Fatal(err)
	}
	p.m, p.disk = m, m.DiskPath("vblk")
	if err := bed.net.AddAddress(ctx, bmcAddr); err != nil {
		t.Fatal(err)
	}
	tap, err := bed.net.AddTap(ctx, fmt.Sprintf("pxetap%d", n))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tap.Close() })
	// ConsoleInput: a rescued machine's console login.
	p.bmc = startBMC(t, ctx, m, qemu.Options{Tap: tap, Netns: bed.net.Name, ConsoleInput: true})

	// The deploy ramdisk Ironic stages for the firmware: the bzImage and
	// the compressed initramfs.
	driverInfo := map[string]any{
		"ipmi_address":      bmcAddr.String(),
		"ipmi_port":         m.BMC.LANPort,
		"ipmi_username":     m.BMC.User,
		"ipmi_password":     m.BMC.Password,
		"ipmi_cipher_suite": 3, // ipmi_sim has no SHA-256 suite (see TestVMIPMIBIOS)
		"deploy_kernel":     bed.serveImage("deploy.kernel", rd.Kernel),
		"deploy_ramdisk":    bed.serveImage("deploy.initramfs", rd.Initrd),
	}
	p.node = ironic.Enroll(t, ctx, p.s.ironic, ironic.NodeSpec{Name: fmt.Sprintf("vm-pxe-%s-%d", fw, n), InspectInterface: p.s.inspectInterface(),
		IPMI: driverInfo, BootInterface: bootInterface, Properties: map[string]any{"capabilities": "boot_mode:" + fw, "vendor": nil}}, p.macs[:]...)
	p.l = &lifecycle{t: t, ctx: ctx, ironic: p.s.ironic, node: p.node.UUID, power: ipmiPower, boot: netBoot, bmc: p.bmc}
	return p
}

// pxeMAC is the MAC of NIC i of pxeNode n.
func pxeMAC(n, i int) string { return fmt.Sprintf("52:54:00:6d:%02x:%02x", 0x20+n, 1+i) }

// pxeLinuxNode is the pxeNode that Ironic's pxe boot interface boots:
// dnsmasq hands it PXELINUX.
const pxeLinuxNode = 2

// pxeTarget is the serial of a pxeNode's disk.
const pxeTarget = "LAB-VBLK-0001"

// pxeLoaders are the boot loaders the bed hands out (file: package).
var pxeLoaders = map[string]string{"/usr/lib/ipxe/undionly.kpxe": "ipxe", "/usr/lib/ipxe/snponly.efi": "ipxe",
	"/usr/lib/ipxe/qemu/efi-virtio.rom": "ipxe-qemu", "/usr/lib/PXELINUX/pxelinux.0": "pxelinux",
	"/usr/lib/syslinux/modules/bios/ldlinux.c32": "syslinux-common", grubNetLoader: "grub-efi-amd64-bin"}

// setDeployImage makes the whole-disk image whose boot prints a marker
// (SeaBIOS: an MBR image's boot sector prints diskBootMarker; OVMF: its
// ESP's GRUB prints uefiLoaderSays), serves it from the provisioning
// network as name and sets it, with the root-device hint on the machine's
// disk, as node's image. It returns the image.
func setDeployImage(t *testing.T, ctx context.Context, s *suite, bed *pxeBed, node, fw, dir, name string) []byte {
	t.Helper()
	var img []byte
	if fw == "bios" {
		img = mbrImage()
		copy(img[:440], markerBootSector(t)[:440])
	} else {
		img = uefiImage(t)
	}
	imgPath := filepath.Join(dir, name)
	if err := os.WriteFile(imgPath, img, 0o644); err != nil {
		t.Fatal(err)
	}
	ops := append(imageInfo(bed.serveImage(name, imgPath), img),
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/properties/root_device", Value: map[string]any{"serial": pxeTarget}})
	if err := nodes.Update(ctx, s.ironic.Service, node, ops).Err; err != nil {
		t.Fatal(err)
	}
	return img
}

// checkDeployedDisk checks that disk holds img and that vm, the boot after
// the deploy, booted it (its marker on the console).
func checkDeployedDisk(t *testing.T, ctx context.Context, vm *qemu.VM, disk string, img []byte, fw string) {
	t.Helper()
	// Under UEFI the agent moves the GPT backup header to the end of the
	// disk, rewriting the protective MBR entry and the primary header (see
	// TestVMDeployUEFI): compare from LBA 2.
	from := 0
	if fw == "uefi" {
		from = 1024
	}
	if got := readAt(t, disk, int64(from), len(img)-from); !bytes.Equal(got, img[from:]) {
		t.Errorf("the disk %s does not hold the image", pxeTarget)
	}
	marker := diskBootMarker
	if fw == "uefi" {
		marker = uefiLoaderSays
	}
	lctx, lcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer lcancel()
	if l, err := vm.WaitFor(lctx, marker); err != nil {
		t.Errorf("the boot after the deploy: %v", err)
	} else {
		t.Logf("the disk booted after the deploy: %q", l.Text)
		reportSeconds(t, l.At, "disk_boot_s")
	}
}

// startBMC starts m's ipmi_sim, stopped when the test ends; a failed test
// shows the BMC's events and the end of the last boot's console.
func startBMC(t *testing.T, ctx context.Context, m qemu.Machine, opts qemu.Options) *bmcsim.IPMISim {
	t.Helper()
	bmc, err := bmcsim.StartIPMISim(ctx, m, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("BMC events: %s", strings.Join(bmc.Events(), "; "))
			if vm := bmc.VM(); vm != nil {
				t.Logf("serial console of the last boot (end; all of it in %s):\n%s", vm.LogPath, consoleTail(vm, 100))
			}
		}
		bmc.Close()
	})
	return bmc
}

// checkNetBoot checks that vm booted from the network through Ironic's
// files: boot.ipxe and the node's iPXE config fetched over HTTP (UEFI:
// snponly.efi over TFTP first), no kernel handed to QEMU, and the
// ramdisk's kernel line is what Ironic's template writes. It returns that
// line's parameters.
func checkNetBoot(t *testing.T, vm *qemu.VM, bed *pxeBed, nodeUUID, mac, fw string) string {
	t.Helper()
	if vm == nil {
		t.Fatal("no VM for a network boot")
	}
	if slices.Contains(vm.Cmdline, "-kernel") {
		t.Errorf("a network boot was handed a kernel: %s", qemu.ShellQuote(vm.Cmdline))
	}
	hyp := strings.ReplaceAll(mac, ":", "-")
	for _, p := range []string{"/boot.ipxe", "/pxelinux.cfg/" + hyp, "/" + nodeUUID + "/deploy_kernel", "/" + nodeUUID + "/deploy_ramdisk"} {
		if len(bed.served(p)) == 0 {
			t.Errorf("the network boot did not fetch http://%s%s", pxeHTTP, p)
		}
	}
	if fw == "uefi" && !strings.Contains(bed.net.DHCPLog(), "snponly.efi to ") {
		t.Errorf("dnsmasq did not send snponly.efi over TFTP")
	}
	cmdline := bed.lastKernelLine()
	// Ironic's ipxe_config.template: its fixed words, the operator's
	// kernel_append_params, ipa-debug (debug is on), BOOTIF from iPXE's
	// ${mac}, the initrd's name.
	for _, w := range append(strings.Fields(pxeKernelParams), "selinux=0", "troubleshoot=0", "text", "ipa-debug=1", "BOOTIF=${mac}", "initrd=deploy_ramdisk") {
		if !slices.Contains(strings.Fields(cmdline), w) {
			t.Errorf("kernel line of Ironic's iPXE config lacks %q: %s", w, cmdline)
		}
	}
	return cmdline
}

// checkParam checks the value of kernel parameter name on cmdline.
func checkParam(t *testing.T, cmdline, name, want string) {
	t.Helper()
	for f := range strings.FieldsSeq(cmdline) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			if v != want {
				t.Errorf("%s=%s, want %s", name, v, want)
			}
			return
		}
	}
	t.Errorf("kernel command line has no %s: %s", name, cmdline)
}

// checkParsed checks that the agent took each named option from the
// kernel command line (its debug log names where each value came from).
func checkParsed(t *testing.T, vm *qemu.VM, options ...string) {
	t.Helper()
	for _, o := range options {
		l, ok := vm.Find("option=" + o + " ")
		if !ok || !strings.Contains(l.Text, "kernel command line") {
			t.Errorf("the agent did not take %s from the kernel command line: %q", o, l.Text)
		}
	}
}

// checkRequestID checks that the agent sent Ironic's global request id
// (ipa-global-request-id) with its calls: Ironic logs it with them.
func checkRequestID(t *testing.T, bed *pxeBed, cmdline string) {
	t.Helper()
	var id string
	for f := range strings.FieldsSeq(cmdline) {
		if v, ok := strings.CutPrefix(f, "ipa-global-request-id="); ok {
			id = v
		}
	}
	if id == "" {
		t.Errorf("Ironic passed no ipa-global-request-id: %s", cmdline)
		return
	}
	found := false
	for _, f := range bed.svc.LogFiles() {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for l := range strings.Lines(string(b)) {
			if strings.Contains(l, id) && strings.Contains(strings.ToLower(l), "heartbeat") {
				found = true
				break
			}
		}
	}
	if !found {
		t.Errorf("Ironic logged no heartbeat with the global request id %s", id)
	}
}

// checkBootIF checks that the init went on with the BOOTIF NIC's lease:
// the lease logged last before "network ready" is the provisioning
// network's, whichever NIC answered first.
func checkBootIF(t *testing.T, vm *qemu.VM) {
	t.Helper()
	lease := ""
	for _, l := range vm.Lines() {
		if strings.Contains(l.Text, logtext.Msg(netup.EventDHCPLease)) {
			lease = l.Text
		}
		if strings.Contains(l.Text, logtext.Msg(rdinit.EventNetworkReady)) {
			break
		}
	}
	if !strings.Contains(lease, "address=10.99.0.") {
		t.Errorf("the init went on without the BOOTIF NIC's lease; last lease before network ready: %q", lease)
	}
}

// checkAgentAddress checks that the agent calls back (over auto-TLS) on
// the address of the BOOTIF NIC (the provisioning network's), not the
// other NIC's.
func checkAgentAddress(t *testing.T, vm *qemu.VM) {
	t.Helper()
	l, ok := vm.Find(logtext.Msg(agent.EventAPIListening))
	if !ok || !strings.Contains(l.Text, "callback_url=https://10.99.0.") {
		t.Errorf("the agent's callback URL is not on the provisioning network: %q", l.Text)
	}
}
